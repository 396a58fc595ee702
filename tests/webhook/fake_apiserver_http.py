"""The HTTP side of the test API server (tests/webhook/fake_apiserver.py): request
routing, the list semantics (resourceVersion, resourceVersionMatch, limit/continue) and
the watch streams (backlog, live events, bookmarks, timeouts, 410, slow watchers)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from tests.webhook.fake_apiserver_store import (
    Expired,
    FakeResource,
    Selector,
    Store,
    TooNew,
    decode_continue,
    encode_continue,
    matches_bytes,
    parse_field_selector,
    translate,
)

DISCONNECT_POLL = 0.1  # seconds between checks that a watching client is still there
CHUNK_EVENTS = 1000  # events joined into one write of a watch stream
TOO_NEW_WAIT = 1.0  # seconds a not-older-than list waits for the store to catch up
DROP = "DROP"  # queue marker: cut the connection (the test's down(), an uninstalled CRD)
CLOSE = "CLOSE"  # queue marker: end the stream cleanly (a slow watcher, or 410)


@dataclass
class RequestRecord:
    path: str
    query: dict[str, str]
    user_agent: str = ""

    @property
    def watch(self) -> bool:
        return self.query.get("watch") in ("true", "1")


@dataclass(eq=False)
class Watch:
    resource: FakeResource
    selector: Selector
    bookmarks: bool
    queue: asyncio.Queue[Any] = field(default_factory=asyncio.Queue)
    expired: bool = False


def status_object(code: int, reason: str, message: str, **extra: Any) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": extra.pop("metadata", {}),
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": extra.pop("details", {}),
        "code": code,
    }


def status_response(code: int, reason: str, message: str, **extra: Any) -> web.Response:
    body = orjson.dumps(status_object(code, reason, message, **extra))
    return web.Response(body=body, status=code, content_type="application/json")


def namespaced(path: str) -> tuple[str, Selector, str | None]:
    """``/api/v1/namespaces/NS/pods[/NAME]`` -> the cluster-wide collection path, a
    namespace selector and the name (None for the collection itself)."""
    parts = path.strip("/").split("/")
    for i in (2, 3):
        if len(parts) in (i + 3, i + 4) and parts[i] == "namespaces":
            collection = "/" + "/".join([*parts[:i], parts[i + 2]])
            name = parts[i + 3] if len(parts) == i + 4 else None
            return collection, [("metadata.namespace", "=", parts[i + 1])], name
    return path, [], None


class ApiHandlers:
    """Request handling over the server's state (set up by FakeApiServer.__init__)."""

    token: str | None
    default_watch_timeout: float
    bookmark_interval: float | None
    requests: list[RequestRecord]
    _store: Store
    _by_path: dict[str, FakeResource]
    _installed: set[str]
    _forbidden: set[str]
    _unavailable: bool
    _list_gates: dict[str, asyncio.Event]
    _watches: set[Watch]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(
            RequestRecord(request.path, dict(request.query), request.headers.get("User-Agent", ""))
        )
        if self._unavailable:
            return status_response(
                503, "ServiceUnavailable", "the server is currently unable to handle the request"
            )
        if (
            self.token is not None
            and request.headers.get("Authorization") != f"Bearer {self.token}"
        ):
            return status_response(401, "Unauthorized", "Unauthorized")
        path, in_namespace, name = namespaced(request.path)
        resource = self._by_path.get(path)
        if name is not None and resource is not None:
            return self._get(resource, (in_namespace[0][2], name))
        if resource is None or resource.path not in self._installed:
            return status_response(
                404, "NotFound", "the server could not find the requested resource"
            )
        if resource.path in self._forbidden:
            message = f'{resource.plural}.{resource.group} is forbidden: cannot list resource "{resource.plural}"'
            return status_response(403, "Forbidden", message)
        try:
            selector = parse_field_selector(request.query.get("fieldSelector", ""))
        except ValueError as exc:
            return status_response(400, "BadRequest", str(exc))
        selector += in_namespace
        if request.query.get("watch") in ("true", "1"):
            return await self._watch(request, resource, selector)
        gate = self._list_gates.get(resource.path)
        if gate is not None:
            await gate.wait()
        return await self._list(request, resource, selector)

    def _get(self, resource: FakeResource, key: tuple[str, str]) -> web.Response:
        entry = self._store.objects[resource.path].get(key)
        if entry is None:
            return status_response(404, "NotFound", f'{resource.plural} "{key[1]}" not found')
        return web.Response(body=entry.full, content_type="application/json")

    async def _list(
        self, request: web.Request, resource: FakeResource, selector: Selector
    ) -> web.Response:
        query = request.query
        rv_text = query.get("resourceVersion", "")
        match = query.get("resourceVersionMatch", "")
        token = query.get("continue") or None
        try:
            limit = int(query.get("limit") or 0)
            at, exact = self._list_version(rv_text, match, limit, token)
        except ValueError as exc:
            return status_response(400, "BadRequest", str(exc))
        if at is not None and not exact and at > self._store.rv:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + TOO_NEW_WAIT  # the watch cache catching up
            while at > self._store.rv and loop.time() < deadline:
                await asyncio.sleep(0.05)
        try:
            if rv_text == "0" and not exact:
                limit = 0  # served from the watch cache, which ignores limit
            page = self._store.page(
                resource, rv=at if exact else None, limit=limit, token=token, selector=selector
            )
        except Expired as exc:
            gone: dict[str, str] = {}
            if token:  # go on from the next key, inconsistently, as the real one offers
                gone["continue"] = encode_continue(-1, decode_continue(token)[1])
            return status_response(410, "Expired", str(exc), metadata=gone)
        except ValueError as exc:  # an undecodable continue token
            return status_response(400, "BadRequest", str(exc))
        except TooNew as exc:
            return _too_new(exc)
        if at is not None and not exact and page.rv < at:
            return _too_new(TooNew(f"Too large resource version: {at}, current: {page.rv}"))
        meta: dict[str, Any] = {"resourceVersion": str(page.rv)}
        if page.next_token:
            meta["continue"] = page.next_token
            meta["remainingItemCount"] = page.remaining
        head = orjson.dumps(
            {"kind": f"{resource.kind}List", "apiVersion": resource.api_version, "metadata": meta}
        )
        body = head[:-1] + b',"items":[' + b",".join(page.items) + b"]}"
        return web.Response(body=body, content_type="application/json")

    @staticmethod
    def _list_version(
        rv_text: str, match: str, limit: int, token: str | None
    ) -> tuple[int | None, bool]:
        """(version asked for or None for the latest, exact?) per "Semantics for get and
        list"; ValueError for the combinations the apiserver rejects."""
        if match and match not in ("NotOlderThan", "Exact"):
            raise ValueError(f'resourceVersionMatch: Unsupported value: "{match}"')
        if match and not rv_text:
            raise ValueError("resourceVersionMatch is forbidden unless resourceVersion is provided")
        if token and (rv_text or match):
            raise ValueError("specifying resource version is not allowed when using continue")
        if not rv_text:
            return None, False
        if match == "Exact" and rv_text == "0":
            raise ValueError('resourceVersionMatch "Exact" is forbidden for resourceVersion "0"')
        try:
            at = int(rv_text)
        except ValueError:
            raise ValueError(f"resourceVersion: Invalid value: {rv_text!r}") from None
        # Legacy: a version with a limit and no match means Exact (KEP-2523).
        return at, match == "Exact" or (not match and limit > 0 and at != 0)

    async def _watch(
        self, request: web.Request, resource: FakeResource, selector: Selector
    ) -> web.StreamResponse:
        since = request.query.get("resourceVersion", "")
        bookmarks = request.query.get("allowWatchBookmarks") in ("true", "1")
        timeout = float(request.query.get("timeoutSeconds") or self.default_watch_timeout)
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        watch = Watch(resource, selector, bookmarks)
        # Backlog and registration happen with no await in between, so no change is
        # lost or sent twice between the replay and the live queue.
        try:
            backlog = self._backlog(resource, selector, since)
        except Expired as exc:
            await self._send_expired(response, str(exc))
            return response
        self._watches.add(watch)
        try:
            for start in range(0, len(backlog), CHUNK_EVENTS):
                await response.write(b"".join(backlog[start : start + CHUNK_EVENTS]))
            await self._stream(request, response, watch, timeout)
        except (ConnectionResetError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._watches.discard(watch)
        return response

    def _backlog(self, resource: FakeResource, selector: Selector, since: str) -> list[bytes]:
        if since in ("", "0"):
            return [
                b'{"type":"ADDED","object":' + e.full + b"}\n"
                for _, e in sorted(self._store.objects[resource.path].items())
                if matches_bytes(e.full, selector)
            ]
        lines = []
        for change in self._store.changes_since(resource, int(since)):
            event_type = translate(change, selector)
            if event_type is not None:
                lines.append(change.line(event_type))
        return lines

    async def _stream(
        self, request: web.Request, response: web.StreamResponse, watch: Watch, timeout: float
    ) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        interval = self.bookmark_interval if watch.bookmarks else None
        next_bookmark = loop.time() + interval if interval else None
        while True:
            now = loop.time()
            if now >= deadline:
                return
            if request.transport is None or request.transport.is_closing():
                return  # the client went away (aiohttp does not cancel the handler)
            wake = min(deadline, next_bookmark or deadline, now + DISCONNECT_POLL)
            try:
                item = await asyncio.wait_for(watch.queue.get(), timeout=max(0.0, wake - now))
            except TimeoutError:
                if next_bookmark is not None and interval and loop.time() >= next_bookmark:
                    # The queue is empty: every change up to now has been sent.
                    await response.write(self._bookmark_line(watch.resource, self._store.rv))
                    next_bookmark = loop.time() + interval
                continue
            items = [item]
            while not watch.queue.empty() and len(items) < CHUNK_EVENTS:
                items.append(watch.queue.get_nowait())
            if not await self._write_items(response, watch, items):
                return

    async def _write_items(
        self, response: web.StreamResponse, watch: Watch, items: list[Any]
    ) -> bool:
        """Write queued items as one chunk; False when the stream must end."""
        out: list[bytes] = []
        for item in items:
            if item == DROP:
                if out:
                    await response.write(b"".join(out))
                raise ConnectionResetError("watch dropped by the test")
            if item == CLOSE:
                if out:
                    await response.write(b"".join(out))
                if watch.expired:
                    await self._send_expired(
                        response, "The resourceVersion for the provided watch is too old."
                    )
                return False
            if isinstance(item, tuple):  # ("BOOKMARK", rv at the time it was asked for)
                out.append(self._bookmark_line(watch.resource, item[1]))
                continue
            event_type = translate(item, watch.selector)
            if event_type is not None:
                out.append(item.line(event_type))
        if out:
            await response.write(b"".join(out))
        return True

    @staticmethod
    def _bookmark_line(resource: FakeResource, rv: int) -> bytes:
        obj = {
            "kind": resource.kind,
            "apiVersion": resource.api_version,
            "metadata": {"resourceVersion": str(rv)},
        }
        return orjson.dumps({"type": "BOOKMARK", "object": obj}) + b"\n"

    @staticmethod
    async def _send_expired(response: web.StreamResponse, message: str) -> None:
        status = status_object(410, "Expired", message)
        await response.write(orjson.dumps({"type": "ERROR", "object": status}) + b"\n")


def _too_new(exc: TooNew) -> web.Response:
    details = {
        "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
        "retryAfterSeconds": 1,
    }
    return status_response(504, "Timeout", str(exc), details=details)
