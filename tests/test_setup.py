"""The foundation: the core is pure, the compiled kernel is the one loaded after
`make test`'s build, the reference is selectable at run time, and the CLI is complete."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT
from webhook.cli.main import build_parser, main

FORBIDDEN = ("aiohttp", "kubernetes", "pydantic", "logging", "webhook", "certs", "yaml")


def _py(code: str, **env: str) -> str:
    full_env = {k: v for k, v in os.environ.items() if k != "NUMAGATE_NO_EXTENSIONS"}
    full_env.update(env)
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=full_env,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def test_core_imports_no_io_or_framework_module() -> None:
    code = (
        "import sys, pkgutil, importlib, core, json\n"
        "for m in pkgutil.iter_modules(core.__path__):\n"
        "    importlib.import_module('core.' + m.name)\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    loaded = json.loads(_py(code))
    leaks = [m for m in loaded if m.split(".")[0] in FORBIDDEN]
    assert leaks == []


@pytest.mark.skipif(bool(os.environ.get("NUMAGATE_NO_EXTENSIONS")), reason="pure build requested")
def test_compiled_core_is_loaded_by_default() -> None:
    out = _py(
        "import core.feasibility.kernel as f; print(f.IMPLEMENTATION, f.KERNEL_VERSION.__class__)"
    )
    assert out.split()[0] == "cython"
    import core.feasibility.kernel

    assert core.feasibility.kernel.IMPLEMENTATION == "cython"


def test_reference_selectable_at_run_time() -> None:
    out = _py(
        "import core.feasibility.kernel as f; print(f.IMPLEMENTATION)", NUMAGATE_NO_EXTENSIONS="1"
    )
    assert out == "python"


def test_every_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    for argv in (
        ["serve", "--help"],
        ["review", "--help"],
        ["explain", "--help"],
        ["lint", "--help"],
        ["certs", "generate", "--help"],
        ["certs", "inject", "--help"],
    ):
        with pytest.raises(SystemExit) as exc:
            parser.parse_args(argv)
        assert exc.value.code == 0
        assert "usage: numagate " + argv[0] in capsys.readouterr().out


def test_unknown_command_is_usage_error() -> None:
    with pytest.raises(SystemExit) as exc:
        main(["frobnicate"])
    assert exc.value.code == 2


def test_console_scripts_installed() -> None:
    bindir = Path(sys.executable).parent
    for name in ("numagate", "kubectl-numagate"):
        out = subprocess.run([bindir / name, "--help"], capture_output=True, text=True, check=True)
        assert "usage: numagate" in out.stdout
