"""One resource type, listed then watched, as client-go's ``tools/cache/reflector.go``
does: paged list, watch from its resourceVersion with bookmarks, relist on 410,
reconnect with backoff, a type not installed or not readable reported once and retried
slowly (docs/inventory.md, "List and watch"). Each reflector runs in its own thread and
tells its listener (webhook/inventory/live.py) what changed."""

from __future__ import annotations

import contextlib
import functools
import logging
import random
import threading
import time
from typing import Any

import kubernetes.client
from kubernetes.client.exceptions import ApiException

from webhook.inventory.objects import (
    Absent,
    Gone,
    Key,
    Listener,
    Timing,
    WatchedResource,
    api_error,
    complete,
    decode,
    fingerprint,
    object_key,
    read_event,
    read_page,
    resource_version_of,
)
from webhook.inventory.pages import list_size, pages_ahead
from webhook.inventory.stream import (
    Backoff,
    api_get,
    cut_response,
    describe_error,
    iter_lines,
)

__all__ = ["Key", "Listener", "Reflector", "Timing", "WatchedResource", "fingerprint"]

log = logging.getLogger("numagate.live")


class Reflector:
    """List and watch one resource type; keeps its objects and its resourceVersion."""

    def __init__(
        self,
        resource: WatchedResource,
        api_client: kubernetes.client.ApiClient,
        listener: Listener,
        timing: Timing,
        stopping: threading.Event,
        rng: random.Random,
    ) -> None:
        self.resource = resource
        self._client = api_client
        self._listener = listener
        self._timing = timing
        self._stopping = stopping
        self._rng = rng
        self.lock = threading.Lock()
        # Guarded by ``lock``:
        self.version: str | None = None
        # Each object's fingerprint (the listener keeps the object): what a relist changed.
        self.items: dict[Key, Any] = {}
        self.resource_version: str | None = None
        self.listed = False
        self.installed: bool | None = None
        self.connected = False
        self.error: str | None = None
        self.last_sync: float | None = None  # list, watch start, event or clean end
        self.response: Any = None  # the open urllib3 response, so stop() can cut it
        self.relists = 0
        self.reconnects = 0
        self.events = 0
        self.bookmarks = 0

    @property
    def settled(self) -> bool:
        """Listed, or known not to be installed (lock held or not: a bool read)."""
        return self.listed or self.installed is False

    def synced_until(self) -> float | None:
        """Up to when this type is known to be in sync: its last list, watch start,
        event, bookmark or clean end of a watch."""
        with self.lock:
            return self.last_sync

    def cut(self) -> None:
        with self.lock:
            response = self.response
        if response is not None:
            cut_response(response)

    def _synced_now(self) -> None:
        self.last_sync = time.monotonic()

    # ------------------------------------------------------------------ loop

    def run(self) -> None:
        t = self._timing
        backoff = Backoff(t.backoff_initial, t.backoff_max, rng=self._rng)
        need_list = True
        while not self._stopping.is_set():
            try:
                if need_list:
                    self._list()
                    need_list = False
                    backoff.reset()
                if self._watch():
                    backoff.reset()
                else:
                    # A stream that closed at once with nothing in it: do not spin.
                    self._stopping.wait(backoff.next())
            except Gone as exc:
                self._on_gone(exc)
                need_list = True
            except Absent as exc:
                self._on_absent(exc)
                need_list = True
                self._stopping.wait(t.absent_retry)
            except Exception as exc:  # a watcher thread must survive anything
                if self._stopping.is_set():
                    break
                self._on_failure(exc)
                if not self.listed:
                    need_list = True
                self._stopping.wait(backoff.next())
        with self.lock:
            self.response = None

    # ------------------------------------------------------------------ list

    def _list(self) -> None:
        versions = self.resource.versions
        if self.version in versions:
            # The version found last time first, then the others.
            versions = (self.version, *(v for v in versions if v != self.version))
        absent: list[str] = []
        for version in versions:
            try:
                self._list_version(version)
            except Absent as exc:
                absent.append(f"{self.resource.api_version(version)}: {exc}")
                continue
            return
        raise Absent("; ".join(absent))

    def _list_version(self, version: str) -> None:
        """List one version, page by page (``limit``/``continue``), each page fetched
        while the one before is parsed (webhook/inventory/pages.py) and handed to the
        listener as it arrives, so that a large list never exists whole as dicts; the
        objects the list lacks are deleted at its end (:meth:`_replace`)."""
        resource_version: str | None = None
        listed: dict[Key, Any] = {}
        fetch = functools.partial(self._fetch_page, version)
        # Closed on any exit, so that a list cut short stops its fetching thread now.
        with contextlib.closing(pages_ahead(fetch, self.resource.plural)) as pages:
            for body in pages:
                page, resource_version = read_page(body, self.resource, version, resource_version)
                del body
                self._deliver(page, listed)
                del page
        self._replace(version, listed, resource_version)

    def _fetch_page(self, version: str, token: str | None) -> Any:
        """One page of the list, decoded (in the list's fetching thread). A ``from_cache``
        type's first list (no resourceVersion yet) of at most ``cache_list_max`` objects is
        at ``resourceVersion=0``, as client-go's: whole from the watch cache, far cheaper
        for the apiserver than pages from etcd (docs/inventory.md); a relist after a 410
        is consistent and paged, as client-go's."""
        params: dict[str, Any] = {"limit": self._timing.page_size}
        if token:
            params["continue"] = token
        elif self.resource.from_cache and self.resource_version is None:
            size = list_size(self._get(version, {"limit": 1}))  # one object and the count
            if size is not None and size <= self._timing.cache_list_max:
                params["resourceVersion"] = "0"
        return self._get(version, params)

    def _get(self, version: str, params: dict[str, Any]) -> Any:
        response = self._request(version, params, self._timing.request_timeout)
        try:
            data = response.data
        finally:
            response.release_conn()
        return decode(data)

    def _deliver(self, page: dict[Key, dict[str, Any]], listed: dict[Key, Any]) -> None:
        prints = {key: fingerprint(item) for key, item in page.items()}
        with self.lock:
            held = {key: self.items[key] for key in page if key in self.items}
            # What the listener holds from now on: a list cut short (410, a lost
            # connection) leaves it here, and the next list is compared with it.
            self.items.update(prints)
        listed.update(prints)
        self._listener.on_replaced(self, held, page, held != prints)

    def _replace(self, version: str, listed: dict[Key, Any], resource_version: str | None) -> None:
        """The list is complete: ``listed`` (the fingerprints of the objects the listener
        has had page by page) is what the type holds now."""
        with self.lock:
            old = self.items
            changed = not self.listed or old != listed or self.installed is not True
            first = not self.listed
            self.version = version
            self.items = listed
            self.resource_version = resource_version
            self.installed = True
            self.connected = True
            self.error = None
            self._synced_now()
        if first:
            log.info(
                "listed %s (%s): %d objects at resourceVersion %s",
                self.resource.plural,
                self.resource.api_version(version),
                len(listed),
                resource_version,
            )
        # Delivered already: only the deletions are left (an empty call still tells the
        # listener that this type has listed).
        gone = {key: value for key, value in old.items() if key not in listed}
        self._listener.on_replaced(self, gone, {}, changed)
        # Listed (so settled) only once the listener has every object: the first build
        # waits for every type's list, not for its flag (a 10,000-node list takes the
        # listener about a second to parse; ready before that was ready without Nodes).
        # The listener is told again, so that a first build it put off sees the flag.
        self.listed = True
        self._listener.on_touch()

    # ------------------------------------------------------------------ watch

    def _watch(self) -> bool:
        """One watch request; True when it delivered something or ran its course."""
        assert self.version is not None
        t = self._timing
        # client-go's reflector picks timeoutSeconds in [min, 2*min) so that many
        # clients do not all reconnect at once (tools/cache/reflector.go).
        timeout = self._rng.randint(t.watch_timeout, 2 * t.watch_timeout)
        params: dict[str, Any] = {
            "watch": True,
            "allowWatchBookmarks": True,
            "timeoutSeconds": timeout,
        }
        if self.resource_version:
            params["resourceVersion"] = self.resource_version
        started = time.monotonic()
        response = self._request(self.version, params, timeout + t.request_timeout)
        with self.lock:
            self.response = response
            self.connected = True
            self.error = None
            self._synced_now()
        self._listener.on_touch()
        # stop() cuts the responses it finds; one registered just after it looked would
        # block for the whole watch, so check again now that it is registered.
        if self._stopping.is_set():
            cut_response(response)
        received = 0
        try:
            for line in iter_lines(response):
                if self._stopping.is_set():
                    break
                self._apply_event(line)
                received += 1
        finally:
            with self.lock:
                self.response = None
            # Close, not just release: a watch connection is never worth reusing, and
            # one cut by stop() must not go back to the pool.
            response.close()
            response.release_conn()
        if not self._stopping.is_set():
            # A clean end of stream (the server's timeout) means nothing was missed.
            with self.lock:
                self._synced_now()
            self._listener.on_touch()
        return received > 0 or time.monotonic() - started >= t.backoff_initial

    def _apply_event(self, line: bytes) -> None:
        kind, obj = read_event(line, self.resource.plural)
        resource_version = resource_version_of(obj)
        if kind == "BOOKMARK":
            with self.lock:
                if resource_version:
                    self.resource_version = resource_version
                self.bookmarks += 1
                self.events += 1
                self._synced_now()
            self._listener.on_touch()
            return
        api_version = self.resource.api_version(self.version or self.resource.versions[0])
        item = complete(obj, self.resource, api_version)
        key = object_key(item)
        with self.lock:
            if kind == "DELETED":
                self.items.pop(key, None)
            else:
                self.items[key] = fingerprint(item)
            if resource_version:
                self.resource_version = resource_version
            self.events += 1
            self._synced_now()
        self._listener.on_event(self, kind, key, item)

    # ------------------------------------------------------------------ HTTP

    def _request(self, version: str, params: dict[str, Any], read_timeout: float) -> Any:
        """The raw urllib3 response: the bodies are read as JSON so no field is lost to
        model deserialization. ``params`` by their names on the wire."""
        resource = self.resource
        if resource.field_selector:
            params = {**params, "fieldSelector": resource.field_selector}
        root = f"/apis/{resource.group}" if resource.group else "/api"
        try:
            return api_get(
                self._client,
                f"{root}/{version}/{resource.plural}",
                params,
                (self._timing.request_timeout, read_timeout),
            )
        except ApiException as exc:
            raise api_error(exc, installed=bool(self.installed)) from exc

    # ------------------------------------------------------------------ outcomes

    def _on_gone(self, exc: Exception) -> None:
        log.info("watch %s: %s; relisting", self.resource.plural, exc)
        with self.lock:
            self.relists += 1

    def _on_absent(self, exc: Exception) -> None:
        resource = self.resource
        with self.lock:
            reported = self.installed is False
            old = self.items
            had_items = bool(old)
            self.installed = False
            self.connected = True
            self.items = {}
            self.resource_version = None
            self.error = f"{resource.plural}.{resource.group or 'core'} not available: {exc}"
        if not reported:
            # Once per transition, not once per retry.
            log.warning("%s; retrying every %gs", self.error, self._timing.absent_retry)
        if had_items or not reported:
            self._listener.on_replaced(self, old, {}, True)

    def _on_failure(self, exc: Exception) -> None:
        text = describe_error(exc)
        with self.lock:
            self.connected = False
            self.error = text
            self.reconnects += 1
        log.warning("watch %s: %s; reconnecting", self.resource.plural, text[:500])
