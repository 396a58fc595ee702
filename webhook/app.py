"""The aiohttp application: ``POST /mutate``, ``POST /validate``, ``GET /healthz``,
``/readyz``, ``/metrics`` (docs/contracts.md: HTTP endpoints).

Handlers do transport only (content type, size, ``?timeout=``); every decision is made in
:func:`webhook.review.pipeline.answer`, every error is mapped in :mod:`webhook.review.errors`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web

from webhook.logs import get_logger
from webhook.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from webhook.review.errors import reject, too_large, unsupported_media_type
from webhook.review.pipeline import Runtime, answer
from webhook.review.response import HttpAnswer
from webhook.review.wire import RequestError, WebhookName

log = get_logger("app")

# The apiserver accepts objects up to 3 MiB (MaxRequestBodyBytes in apiserver
# pkg/server/config.go) and an UPDATE review carries two of them (object and oldObject),
# plus the envelope (userInfo, options, request metadata), well under 1 MiB. 7 MiB is the
# cap controller-runtime derived the same way (pkg/webhook/admission/http.go). aiohttp's
# default of 1 MiB would reject legitimate large pods.
MAX_BODY = 7 * 1024 * 1024

_GO_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


@functools.lru_cache(maxsize=64)  # the apiserver sends the same value on every review
def parse_timeout(value: str | None) -> float | None:
    """The apiserver's ``?timeout=`` (a Go duration such as ``10s`` or ``1m30s``) in seconds.

    Malformed or non-positive values give None (the configured default applies): a bad
    query parameter must not make admission fail.
    """
    if not value:
        return None
    pos, total = 0, 0.0
    while pos < len(value):
        m = _GO_DURATION.match(value, pos)
        if m is None:
            return None
        total += float(m[1]) * _UNIT_SECONDS[m[2]]
        pos = m.end()
    return total if total > 0 else None


@dataclass
class Health:
    """Liveness and readiness. Ready means: serving TLS, an inventory loaded and synced,
    and not shutting down (readiness goes false first on SIGTERM)."""

    serving: bool = False
    shutting_down: bool = False
    in_flight: int = 0  # review requests between headers received and response built

    def not_ready_reason(self, runtime: Runtime) -> str | None:
        if self.shutting_down:
            return "shutting down"
        if not self.serving:
            return "not serving yet"
        if not runtime.inventory.ready:
            return "inventory not loaded"
        return None


RUNTIME = web.AppKey("runtime", Runtime)
HEALTH = web.AppKey("health", Health)


def _to_response(result: HttpAnswer, health: Health | None = None) -> web.Response:
    response = web.Response(
        status=result.status, body=result.body, headers={"Content-Type": result.content_type}
    )
    if health is not None and health.shutting_down:
        response.force_close()  # "Connection: close": the client stops reusing this connection
    return response


def _reject(runtime: Runtime, exc: RequestError, webhook: WebhookName) -> HttpAnswer:
    return reject(exc, webhook=webhook, log=log, metrics=runtime.metrics)


def _endpoint(
    runtime: Runtime, health: Health, webhook: WebhookName
) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The handler of ``POST /{webhook}``, bound to the runtime and the health it reads
    (no lookup in the application per request)."""

    async def review(request: web.Request) -> web.Response:
        # Counted from the moment the headers are in, body included: at shutdown the server
        # waits for this to drop to zero before closing connections (aiohttp's own shutdown
        # drops bytes that arrive after it starts, which would cut a body still in transit).
        health.in_flight += 1
        try:
            return _to_response(await _review(request, runtime, webhook), health)
        finally:
            health.in_flight -= 1

    return review


async def _review(request: web.Request, runtime: Runtime, webhook: WebhookName) -> HttpAnswer:
    start = runtime.clock()
    if request.content_type != "application/json":
        got = request.headers.get("Content-Type", "(none)")
        return _reject(runtime, unsupported_media_type(got), webhook)
    length = request.content_length
    if length is not None and length > MAX_BODY:
        return _reject(runtime, too_large(length, MAX_BODY), webhook)
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        return _reject(runtime, too_large(None, MAX_BODY), webhook)
    return await answer(
        raw,
        webhook=webhook,
        runtime=runtime,
        timeout=parse_timeout(request.query.get("timeout")),
        start=start,
    )


async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok\n")


async def readyz(request: web.Request) -> web.Response:
    reason = request.app[HEALTH].not_ready_reason(request.app[RUNTIME])
    if reason is not None:
        return web.Response(status=503, text=f"not ready: {reason}\n")
    return web.Response(text="ok\n")


async def metrics(request: web.Request) -> web.Response:
    body = request.app[RUNTIME].metrics.render()
    return web.Response(body=body, headers={"Content-Type": METRICS_CONTENT_TYPE})


def make_app(runtime: Runtime, *, health: Health | None = None) -> web.Application:
    """The application; ``health`` is shared with the server that flips readiness."""
    app = web.Application(client_max_size=MAX_BODY)
    app[RUNTIME] = runtime
    app[HEALTH] = health if health is not None else Health(serving=True)
    app.router.add_post("/mutate", _endpoint(runtime, app[HEALTH], "mutate"))
    app.router.add_post("/validate", _endpoint(runtime, app[HEALTH], "validate"))
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    return app
