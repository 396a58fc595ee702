"""A small fake API server for caBundle injection and the Secret mode of `certs`.

The fake serves the admissionregistration/v1 webhook configurations and v1 Secrets over
HTTPS (our own certificates), checks the bearer token, and applies JSON patches for real
with ``jsonpatch`` (including ``test`` operations), so what the client sends is what
gets checked.
"""

from __future__ import annotations

import asyncio
import copy
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonpatch
from aiohttp import web

from certs.watcher import build_server_context

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
