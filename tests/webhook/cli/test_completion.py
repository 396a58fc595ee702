"""`numagate completion bash|zsh`: the script generated from the parser completes
subcommands, options and option values in a real bash."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from webhook.cli.main import main

# word lists typed so far (the last one is being completed) -> the candidates
CASES = [
    (["numagate", ""], "serve review explain lint certs pending test policies completion"),
    (["kubectl-numagate", "certs", ""], "generate inject"),
    (["numagate", "serve", "--log"], "--log-level"),
    (["numagate", "serve", "--log-level", ""], "debug info warning error"),
    (["numagate", "lint", "--config", "c.yaml", "-o", "s"], "sarif"),
    (["numagate", "certs", "inject", "--kub"], "--kubeconfig"),
    (["numagate", "--v"], "--version"),
    (["numagate", "review", "--webhook", ""], "mutate validate"),
    (["numagate", "lint", ""], ""),  # file names: bash's default completion
]


def script(capsys: pytest.CaptureFixture[str], shell: str) -> str:
    assert main(["completion", shell]) == 0
    return capsys.readouterr().out


@pytest.mark.slow
def test_bash_completes_from_the_parser(capsys, tmp_path):
    bash = shutil.which("bash")
    assert bash, "bash is needed for this test"
    path = tmp_path / "numagate.bash"
    path.write_text(script(capsys, "bash"))
    calls = "\n".join(
        'COMP_WORDS=({}); COMP_CWORD={}; _numagate; echo "[${{COMPREPLY[*]}}]"'.format(
            " ".join(f"'{w}'" for w in words), len(words) - 1
        )
        for words, _ in CASES
    )
    out = subprocess.run(
        [bash, "-c", f"source {path}\n{calls}"], capture_output=True, text=True, check=True
    )
    assert out.stderr == ""
    assert out.stdout.splitlines() == [f"[{want}]" for _, want in CASES]
    assert "complete -o default -F _numagate numagate kubectl-numagate" in path.read_text()


def test_zsh_script_loads_the_same_through_bashcompinit(capsys):
    text = script(capsys, "zsh")
    assert "autoload -U +X bashcompinit && bashcompinit" in text
    assert text.endswith(script(capsys, "bash"))
    with pytest.raises(SystemExit):
        main(["completion", "fish"])
