"""A second admission webhook for the end-to-end tests: records every AdmissionReview the
kube-apiserver sends it (body and URL), and answers allowed, with an optional JSONPatch.
Registered next to numagate it shows what numagate is sent (a recorder ordered before it)
and how the apiserver reinvokes numagate after another webhook changed the pod."""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from certs.authority import CertPaths, ensure_serving_certs

Patcher = Callable[[dict[str, Any]], list[dict[str, Any]] | None]


@dataclass
class Recorded:
    path: str
    review: dict[str, Any]
    body: bytes = b""  # as sent (benchmarks/record_bodies.py keeps these bytes)


@dataclass
class HookServer:
    certs: CertPaths
    patcher: Patcher | None = None
    recorded: list[Recorded] = field(default_factory=list)
    port: int = 0

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.certs.ca.read_bytes()).decode()

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"


@contextmanager
def hook_server(
    directory: Path, patcher: Patcher | None = None, delay: float = 0.0
) -> Iterator[HookServer]:
    """Serve on 127.0.0.1 (a free port) until the block ends; ``delay``: seconds to wait
    before each answer (a webhook slower than its timeoutSeconds)."""
    certs = ensure_serving_certs(directory, hosts=("127.0.0.1",))
    state = HookServer(certs, patcher)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            review = json.loads(body)
            state.recorded.append(Recorded(self.path, review, body))
            time.sleep(delay)
            request = review["request"]
            response: dict[str, Any] = {"uid": request["uid"], "allowed": True}
            ops = state.patcher(request) if state.patcher and request.get("object") else None
            if ops:
                response["patchType"] = "JSONPatch"
                response["patch"] = base64.b64encode(json.dumps(ops).encode()).decode()
            out = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                              "response": response}).encode()  # fmt: skip
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(certs.cert), str(certs.key))
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def webhook_entry(name: str, url: str, ca_bundle: str, rules: list[dict[str, Any]],
                  namespace: str, *, mutating: bool, policy: str = "Ignore") -> dict[str, Any]:  # fmt: skip
    """One webhook of a configuration, scoped to ``namespace``."""
    hook: dict[str, Any] = {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": policy,
        "timeoutSeconds": 5,
        "clientConfig": {"url": url, "caBundle": ca_bundle},
        "rules": rules,
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
    }
    if mutating:
        hook["reinvocationPolicy"] = "IfNeeded"
    return hook


def recorder_configs(rec: HookServer, name: str, rules: list[dict[str, Any]],
                     namespace: str) -> list[dict[str, Any]]:  # fmt: skip
    """A Mutating- and a ValidatingWebhookConfiguration ``name`` that send the reviews of
    ``rules`` in ``namespace`` to ``rec`` (/mutate and /validate)."""
    out = []
    for kind, path, mutating in (("MutatingWebhookConfiguration", "/mutate", True),
                                 ("ValidatingWebhookConfiguration", "/validate", False)):  # fmt: skip
        hook = webhook_entry(f"recorder{path.replace('/', '.')}.e2e.io", rec.url(path),
                             rec.ca_bundle, rules, namespace, mutating=mutating)  # fmt: skip
        out.append({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
                    "metadata": {"name": name}, "webhooks": [hook]})  # fmt: skip
    return out


POD_RULES = [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"],
              "operations": ["CREATE", "UPDATE"], "scope": "Namespaced"}]  # fmt: skip
