"""`numagate certs generate` through the real argument parser, and the Secret mode."""

from __future__ import annotations

import argparse
import base64
from pathlib import Path

import pytest
from cryptography import x509

from webhook.cli.certs import run
from webhook.cli.main import build_parser, main

SECRETS = "/api/v1/namespaces/numagate-system/secrets"


def test_generate_writes_the_files_and_names_them(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    code = main(["certs", "generate", "--service", "numagate", "--namespace", "numagate-system",
                 "--out", str(out), "--days", "30", "--ip", "10.0.0.7"])  # fmt: skip
    assert code == 0
    assert sorted(p.name for p in out.iterdir()) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    leaf = x509.load_pem_x509_certificates((out / "tls.crt").read_bytes())[0]
    san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "numagate.numagate-system.svc" in san.get_values_for_type(x509.DNSName)
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["10.0.0.7"]
    assert f"caBundle for the webhook configurations: {out / 'ca.crt'}" in capsys.readouterr().out


def test_generate_twice_keeps_the_ca(tmp_path: Path) -> None:
    argv = ["certs", "generate", "--service", "s", "--namespace", "n", "--out", str(tmp_path)]
    assert main(argv) == 0
    ca = (tmp_path / "ca.crt").read_bytes()
    leaf = (tmp_path / "tls.crt").read_bytes()
    assert main(argv) == 0
    assert (tmp_path / "ca.crt").read_bytes() == ca
    assert (tmp_path / "tls.crt").read_bytes() != leaf


def test_bad_arguments_exit_1_with_the_field(tmp_path: Path, capsys) -> None:
    argv = ["certs", "generate", "--service", "Bad_Name", "--namespace", "n",
            "--out", str(tmp_path), "--ip", "300.1.1.1"]  # fmt: skip
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("numagate certs generate: service 'Bad_Name' is not a valid name")
    assert "Traceback" not in err


def test_a_mismatched_ca_exits_1(tmp_path: Path, capsys) -> None:
    argv = ["certs", "generate", "--service", "s", "--namespace", "n", "--out"]
    assert main([*argv, str(tmp_path / "a")]) == 0
    assert main([*argv, str(tmp_path / "b")]) == 0
    (tmp_path / "a" / "ca.key").write_bytes((tmp_path / "b" / "ca.key").read_bytes())
    assert main([*argv, str(tmp_path / "a")]) == 1
    assert "does not match" in capsys.readouterr().err


def _secret_args(apiserver, tmp_path: Path, out: str | None) -> argparse.Namespace:
    args = build_parser().parse_args(
        [
            "certs",
            "generate",
            "--service",
            "numagate",
            "--namespace",
            "numagate-system",
            "--out",
            out or str(tmp_path / "unused"),
        ]
    )
    # --secret and --kubeconfig for generate are requested from webhook/cli/main.py (report).
    args.secret = "numagate-system/numagate-tls"
    args.kubeconfig = str(apiserver.kubeconfig(tmp_path))
    return args


def _secret_data(apiserver, name: str) -> dict[str, bytes]:
    obj = apiserver.objects[f"{SECRETS}/{name}"]
    return {k: base64.b64decode(v) for k, v in obj["data"].items()}


@pytest.mark.slow
def test_generate_into_secrets_reuses_the_ca_on_the_next_run(apiserver, tmp_path, capsys):
    assert run(_secret_args(apiserver, tmp_path, str(tmp_path / "run1"))) == 0
    assert "created a new CA" in capsys.readouterr().out
    tls = _secret_data(apiserver, "numagate-tls")
    ca = _secret_data(apiserver, "numagate-tls-ca")
    assert apiserver.objects[f"{SECRETS}/numagate-tls"]["type"] == "kubernetes.io/tls"
    # The webhook pods mount numagate-tls: it must not carry the CA key.
    assert sorted(tls) == ["ca.crt", "tls.crt", "tls.key"]
    assert sorted(ca) == ["ca.crt", "ca.key"]

    # A second run (another pod, empty directory) reuses the CA kept in the cluster.
    assert run(_secret_args(apiserver, tmp_path, str(tmp_path / "run2"))) == 0
    assert "reused the CA" in capsys.readouterr().out
    assert _secret_data(apiserver, "numagate-tls-ca") == ca
    assert _secret_data(apiserver, "numagate-tls")["tls.crt"] != tls["tls.crt"]
    assert (tmp_path / "run2" / "ca.crt").read_bytes() == ca["ca.crt"]


def test_generate_into_a_malformed_secret_reference(apiserver, tmp_path, capsys):
    args = _secret_args(apiserver, tmp_path, None)
    args.secret = "no-namespace"
    assert run(args) == 1
    assert "--secret 'no-namespace': expected NAMESPACE/NAME" in capsys.readouterr().err
