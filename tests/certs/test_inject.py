"""caBundle injection with the real kubernetes client against a small fake API server.

The fake serves the admissionregistration/v1 webhook configurations and v1 Secrets over
HTTPS (our own certificates), checks the bearer token, and applies JSON patches for real
with ``jsonpatch`` (including ``test`` operations), so what the client sends is what
gets checked.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from aiohttp import web

from certs.authority import cert_pem, create_ca, ensure_serving_certs, utcnow
from certs.inject import InjectError, inject_ca_bundle, read_ca_bundle
from certs.watcher import build_server_context
from webhook.cli.certs import api_client, run
from webhook.cli.main import build_parser

TOKEN = "test-token"
ADMISSION = "/apis/admissionregistration.k8s.io/v1"


def webhook_configuration(kind: str, name: str, hooks: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name, "resourceVersion": "1"},
        "webhooks": [
            {
                "name": hook,
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "clientConfig": {
                    "service": {"namespace": "numagate-system", "name": "numagate", "path": "/x"}
                },
            }
            for hook in hooks
        ],
    }


def status(code: int, reason: str, message: str) -> web.Response:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure"}
    body.update(reason=reason, message=message, code=code)
    return web.json_response(body, status=code)


class FakeApiServer:
    """Just enough of the kube-apiserver for caBundle injection and Secret storage."""

    def __init__(self, certs) -> None:
        self.certs = certs
        self.objects: dict[str, dict[str, Any]] = {}
        self.requests: list[tuple[str, str, str]] = []
        self.user_agents: list[str] = []
        self.before_patch: Callable[[dict[str, Any]], None] | None = None
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None

    def put(self, path: str, obj: dict[str, Any]) -> None:
        self.objects[path] = copy.deepcopy(obj)

    async def _handle(self, request: web.Request) -> web.Response:
        self.requests.append((request.method, request.path, request.content_type))
        self.user_agents.append(request.headers.get("User-Agent", ""))
        # The scheme is case-insensitive, as in the apiserver's bearer token authenticator
        # (the in-cluster loader sends "bearer").
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or token != TOKEN:
            return status(403, "Forbidden", "forbidden: bad token")
        path = request.path
        if request.method == "POST":
            obj = await request.json()
            path = f"{path}/{obj['metadata']['name']}"
            if path in self.objects:
                return status(409, "AlreadyExists", "already exists")
            self.objects[path] = obj
            return web.json_response(obj, status=201)
        if path not in self.objects:
            return status(404, "NotFound", f'"{path.rsplit("/", 1)[-1]}" not found')
        if request.method == "GET":
            return web.json_response(self.objects[path])
        if request.method == "PUT":
            self.objects[path] = await request.json()
            return web.json_response(self.objects[path])
        return await self._patch(request, path)

    async def _patch(self, request: web.Request, path: str) -> web.Response:
        if request.content_type != "application/json-patch+json":
            return status(415, "UnsupportedMediaType", request.content_type)
        if self.before_patch is not None:
            self.before_patch(self.objects[path])
        try:
            patched = jsonpatch.apply_patch(self.objects[path], await request.json())
        except jsonpatch.JsonPatchException as exc:
            return status(422, "Invalid", str(exc))
        self.objects[path] = patched
        return web.json_response(patched)

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        ctx = build_server_context(self.certs.cert, self.certs.key)
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=ctx)
        await site.start()
        self.port = self._runner.addresses[0][1]

    def start(self) -> None:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)

    def stop(self) -> None:
        assert self._runner is not None
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def kubeconfig(self, tmp: Path, token: str = TOKEN) -> Path:
        path = tmp / f"kubeconfig-{token}"
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "fake",
                    "cluster": {
                        "server": f"https://127.0.0.1:{self.port}",
                        "certificate-authority": str(self.certs.ca),
                    },
                }
            ],
            "users": [{"name": "u", "user": {"token": token}}],
            "contexts": [{"name": "c", "context": {"cluster": "fake", "user": "u"}}],
            "current-context": "c",
        }
        path.write_text(json.dumps(cfg))
        return path


MUTATING = f"{ADMISSION}/mutatingwebhookconfigurations/numagate"
VALIDATING = f"{ADMISSION}/validatingwebhookconfigurations/numagate"


@pytest.fixture
def apiserver(tmp_path: Path) -> Iterator[FakeApiServer]:
    server = FakeApiServer(ensure_serving_certs(tmp_path / "apiserver"))
    server.put(MUTATING, webhook_configuration("MutatingWebhookConfiguration", "numagate",
                                               ["mutate.numagate.io"]))  # fmt: skip
    server.put(VALIDATING, webhook_configuration("ValidatingWebhookConfiguration", "numagate",
                                                 ["pods.numagate.io", "workloads.numagate.io"]))  # fmt: skip
    server.start()
    try:
        yield server
    finally:
        server.stop()


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
