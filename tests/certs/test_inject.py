"""caBundle injection with the real kubernetes client against a small fake API server
(tests/certs/fake_admission_api.py)."""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any

import pytest

from certs.authority import cert_pem, create_ca, utcnow
from certs.inject import InjectError, inject_ca_bundle, read_ca_bundle
from tests.certs.fake_admission_api import (
    MUTATING,
    TOKEN,
    VALIDATING,
    FakeApiServer,
)
from webhook.cli.certs import api_client, run
from webhook.cli.main import build_parser


@pytest.fixture
def webhook_ca(tmp_path: Path) -> Path:
    path = tmp_path / "webhook-ca.crt"
    path.write_bytes(cert_pem(create_ca(now=utcnow()).cert))
    return path


def bundles(server: FakeApiServer, path: str) -> list[bytes]:
    return [
        base64.b64decode(h["clientConfig"]["caBundle"]) for h in server.objects[path]["webhooks"]
    ]


def inject_args(kubeconfig: Path, ca: Path, *, mutating: str = "numagate") -> list[str]:
    return [
        "certs", "inject", "--ca-file", str(ca), "--mutating", mutating,
        "--validating", "numagate", "--kubeconfig", str(kubeconfig),
    ]  # fmt: skip


def test_inject_patches_every_webhook_of_both_configurations(apiserver, webhook_ca, tmp_path):
    before = copy.deepcopy(apiserver.objects)
    api = api_client(str(apiserver.kubeconfig(tmp_path)))
    results = inject_ca_bundle(
        api, ca_pem=read_ca_bundle(webhook_ca), mutating="numagate", validating="numagate"
    )
    assert [(r.kind, r.webhooks, r.changed) for r in results] == [
        ("MutatingWebhookConfiguration", 1, True),
        ("ValidatingWebhookConfiguration", 2, True),
    ]
    pem = webhook_ca.read_bytes()
    assert bundles(apiserver, MUTATING) == [pem]
    assert bundles(apiserver, VALIDATING) == [pem, pem]
    patches = [r for r in apiserver.requests if r[0] == "PATCH"]
    assert patches == [
        ("PATCH", MUTATING, "application/json-patch+json"),
        ("PATCH", VALIDATING, "application/json-patch+json"),
    ]
    # Nothing but caBundle changed.
    for path in (MUTATING, VALIDATING):
        for hook in apiserver.objects[path]["webhooks"]:
            del hook["clientConfig"]["caBundle"]
        assert apiserver.objects[path] == before[path]


def test_inject_again_is_a_no_op(apiserver, webhook_ca, tmp_path, capsys):
    args = build_parser().parse_args(inject_args(apiserver.kubeconfig(tmp_path), webhook_ca))
    assert run(args) == 0
    apiserver.requests.clear()
    assert run(args) == 0
    assert [r[0] for r in apiserver.requests] == ["GET", "GET"]
    out = capsys.readouterr().out
    assert "ValidatingWebhookConfiguration numagate: 2 webhook(s) already up to date" in out


def test_a_new_ca_replaces_a_stale_bundle(apiserver, webhook_ca, tmp_path):
    args = build_parser().parse_args(inject_args(apiserver.kubeconfig(tmp_path), webhook_ca))
    assert run(args) == 0
    rotated = tmp_path / "rotated-ca.crt"
    rotated.write_bytes(cert_pem(create_ca(now=utcnow()).cert))
    args.ca_file = str(rotated)
    assert run(args) == 0
    assert bundles(apiserver, VALIDATING) == [rotated.read_bytes()] * 2


def test_missing_configuration_is_a_clear_error(apiserver, webhook_ca, tmp_path, capsys):
    argv = inject_args(apiserver.kubeconfig(tmp_path), webhook_ca, mutating="absent")
    assert run(build_parser().parse_args(argv)) == 1
    err = capsys.readouterr().err
    assert "MutatingWebhookConfiguration 'absent' not found" in err
    assert "Traceback" not in err
    assert not [r for r in apiserver.requests if r[0] == "PATCH"]


def test_access_denied_names_the_permission(apiserver, webhook_ca, tmp_path, capsys):
    argv = inject_args(apiserver.kubeconfig(tmp_path, token="wrong"), webhook_ca)
    assert run(build_parser().parse_args(argv)) == 1
    err = capsys.readouterr().err
    assert "access denied (HTTP 403)" in err
    assert "resourceNames [numagate]" in err


def test_a_concurrent_reorder_is_refused_not_misapplied(apiserver, webhook_ca, tmp_path):
    def reorder(obj: dict[str, Any]) -> None:
        obj["webhooks"].reverse()

    apiserver.before_patch = reorder
    api = api_client(str(apiserver.kubeconfig(tmp_path)))
    with pytest.raises(InjectError, match="changed while patching"):
        inject_ca_bundle(
            api, ca_pem=read_ca_bundle(webhook_ca), mutating="numagate", validating="numagate"
        )


def test_unreachable_api_server(apiserver, webhook_ca, tmp_path, capsys):
    kubeconfig = apiserver.kubeconfig(tmp_path)
    apiserver.stop()
    apiserver.stop = lambda: None  # already stopped
    argv = inject_args(kubeconfig, webhook_ca)
    assert run(build_parser().parse_args(argv)) == 1
    err = capsys.readouterr().err
    assert "cannot reach the API server" in err
    assert "Traceback" not in err


def test_in_cluster_credentials(apiserver, webhook_ca, tmp_path, monkeypatch):
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text(TOKEN)
    (sa / "ca.crt").write_bytes(apiserver.certs.ca.read_bytes())
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(apiserver.port))
    api = api_client(None, sa_dir=sa)
    results = inject_ca_bundle(
        api, ca_pem=read_ca_bundle(webhook_ca), mutating="numagate", validating="numagate"
    )
    assert all(r.changed for r in results)
    from webhook.version import user_agent

    assert apiserver.user_agents and set(apiserver.user_agents) == {user_agent()}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read"),
        (b"garbage", "not a PEM certificate bundle"),
        ("leaf", "holds no CA certificate"),
    ],
)
def test_bad_ca_file_is_reported_before_any_request(apiserver, tmp_path, capsys, content, message):
    ca = tmp_path / "bad-ca.crt"
    if content == "leaf":
        ca.write_bytes(apiserver.certs.cert.read_bytes().split(b"-----END CERTIFICATE-----")[0]
                       + b"-----END CERTIFICATE-----\n")  # fmt: skip
    elif content is not None:
        ca.write_bytes(content)
    argv = inject_args(apiserver.kubeconfig(tmp_path), ca)
    assert run(build_parser().parse_args(argv)) == 1
    assert message in capsys.readouterr().err
    assert apiserver.requests == []


def test_bad_kubeconfig_is_reported(webhook_ca, tmp_path, capsys):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("{}")
    argv = inject_args(kubeconfig, webhook_ca)
    assert run(build_parser().parse_args(argv)) == 1
    err = capsys.readouterr().err
    assert f"cannot load Kubernetes credentials: --kubeconfig {str(kubeconfig)!r}: " in err
