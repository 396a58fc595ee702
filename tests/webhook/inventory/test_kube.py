"""webhook.inventory.kube: the one ApiClient builder (serve, certs, CLI) follows kubectl's
order: --kubeconfig, $KUBECONFIG (a list, merged), ~/.kube/config, then the in-cluster
account when the command allows it; every failure names the file and the problem; and
``serve --kubeconfig`` checks the file before it writes certificates or says "listening"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.cli.main import main
from webhook.inventory.kube import KubeConfigError, build_api_client


def kubeconfig(path: Path, *contexts: tuple[str, str], current: str | None = None) -> Path:
    """A kubeconfig with one cluster per (context name, server URL)."""
    config: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": {"server": url}} for n, url in contexts],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": n, "context": {"cluster": n, "user": "u"}} for n, _ in contexts],
        "current-context": current or contexts[0][0],
    }
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty HOME and no $KUBECONFIG, so the machine's own kubeconfig never leaks in."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


def host(**kwargs: Any) -> str:
    return str(build_api_client(**kwargs).configuration.host)


def test_kubectl_order(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (home / ".kube").mkdir()
    kubeconfig(home / ".kube" / "config", ("home", "https://home:6443"))
    assert host() == "https://home:6443"  # ~/.kube/config
    env = kubeconfig(tmp_path / "env.yaml", ("env", "https://env:6443"))
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'absent.yaml'}:{env}")
    assert host() == "https://env:6443"  # $KUBECONFIG before ~/.kube/config, a list
    flag = kubeconfig(tmp_path / "flag.yaml", ("a", "https://a:6443"), ("b", "https://b:6443"))
    assert host(kubeconfig=flag) == "https://a:6443"  # --kubeconfig first
    assert host(kubeconfig=flag, context="b") == "https://b:6443"  # --context
    # serve names its source explicitly: no default kubeconfig behind its back
    with pytest.raises(KubeConfigError, match=r"--kubeconfig FILE or --in-cluster$"):
        build_api_client(use_default=False)


def test_in_cluster_only_as_a_fallback_when_allowed(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("t")
    (sa / "ca.crt").write_text("not checked until a request")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    with pytest.raises(KubeConfigError, match=r"set \$KUBECONFIG, or create ~/.kube/config"):
        build_api_client(sa_dir=sa)
    assert host(sa_dir=sa, in_cluster_fallback=True) == "https://10.0.0.1:443"
    (home / ".kube").mkdir()
    kubeconfig(home / ".kube" / "config", ("home", "https://home:6443"))
    assert host(sa_dir=sa, in_cluster_fallback=True) == "https://home:6443"  # kubeconfig first
    with pytest.raises(KubeConfigError, match="--context needs a kubeconfig"):
        build_api_client(in_cluster=True, context="x", sa_dir=sa)


@pytest.mark.parametrize(
    ("content", "fragments"),
    [
        (None, ["does not exist"]),
        ("- a\n- list\n", ["not a usable kubeconfig"]),
        ("apiVersion: v1\nkind: Config\n", ["Expected key current-context"]),
        ("{{{", ["not a usable kubeconfig"]),
        ("context:nope", ["context 'nope'", "nope"]),
        ("server:", ["server"]),
        ("server:localhost", ["'localhost' is not an https:// URL"]),
    ],
)
def test_bad_kubeconfig_names_the_file_and_problem(
    home: Path, tmp_path: Path, content: str | None, fragments: list[str]
) -> None:
    path = tmp_path / "kc.yaml"
    context = None
    if content is not None and content.startswith("context:"):
        kubeconfig(path, ("real", "https://x:6443"))
        context = content.split(":")[1]
    elif content is not None and content.startswith("server:"):
        kubeconfig(path, ("c", content.split(":", 1)[1]))
    elif content is not None:
        path.write_text(content)
    with pytest.raises(KubeConfigError) as exc:
        build_api_client(kubeconfig=path, context=context)
    message = str(exc.value)
    assert f"--kubeconfig {str(path)!r}" in message
    for fragment in fragments:
        assert fragment in message


def test_serve_checks_the_kubeconfig_before_certificates_or_listening(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cert_dir = tmp_path / "certs"
    path = kubeconfig(tmp_path / "kc.yaml", ("real", "https://x:6443"))
    argv = ["serve", "--port", "0", "--cert-dir", str(cert_dir), "--kubeconfig", str(path)]
    assert main([*argv, "--context", "other"]) == 2
    out, err = capsys.readouterr()
    assert "listening" not in out and not cert_dir.exists()
    assert f"--kubeconfig {str(path)!r}, context 'other'" in err and "Traceback" not in err
    (tmp_path / "kc.yaml").write_text("- not a kubeconfig\n")
    assert main(argv) == 2
    assert "not a usable kubeconfig" in capsys.readouterr().err and not cert_dir.exists()
    assert main(["serve", "--context", "x", "--cert-dir", str(cert_dir)]) == 2
    assert "--context needs --kubeconfig" in capsys.readouterr().err
    for flag in ("--inventory-process", "--inventory-process=never", "--inventory-process-above=9"):
        assert main(["serve", flag, "--cert-dir", str(cert_dir)]) == 2
        (line,) = capsys.readouterr().err.splitlines()  # one line: what replaced it
        assert f"{flag.split('=')[0]} was removed:" in line
        assert "one inventory process per replica" in line
    assert not cert_dir.exists()
