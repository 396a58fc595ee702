"""Live inventory: list then watch the cluster objects numagate reads (DESIGN 4.2).

One daemon thread per resource type runs the reflector loop that client-go's
``tools/cache/reflector.go`` runs (kubernetes.io "API concepts", "Efficient detection
of changes"):

1. list (paged with ``limit``/``continue``) and remember the list's
   ``metadata.resourceVersion``;
2. watch from that version with ``allowWatchBookmarks=true`` and a server-side
   ``timeoutSeconds``, applying ADDED/MODIFIED/DELETED to an in-memory map and taking the
   ``resourceVersion`` of every event, BOOKMARK included, so a reconnect resumes where
   the last stream stopped;
3. a ``410 Gone``/``Expired`` (an ERROR event or an HTTP 410) means the version was
   compacted away: relist; a connection error means reconnect from the last version
   after an exponential backoff with jitter; a ``404`` on list means the CRD is not
   installed (a ``403``: not readable by our service account): reported once, retried
   slowly, and it never holds back the other types.

The kubernetes client is synchronous, hence threads. Nothing here is called on the
request path: ``on_change`` hands the complete current object list to the server, which
builds a new immutable snapshot and swaps it in. It runs in a separate notifier thread,
debounced, and only once every installed type has completed its first list.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import kubernetes.client
import urllib3
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

log = logging.getLogger("numagate.live")

Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects
OnChange = Callable[[list[dict[str, Any]]], None]

HTTP_FORBIDDEN = 403
HTTP_NOT_FOUND = 404
HTTP_GONE = 410


@dataclass(frozen=True)
class WatchedResource:
    """A collection to list and watch. ``versions`` are tried in order on a 404, so a
    cluster that only serves an older version of a CRD is still read."""

    name: str
    kind: str
    group: str
    versions: tuple[str, ...]
    plural: str
    optional: bool = True
    field_selector: str | None = None

    def api_version(self, version: str) -> str:
        return f"{self.group}/{version}" if self.group else version


NODES = WatchedResource("nodes", "Node", "", ("v1",), "nodes", optional=False)
NODE_RESOURCE_TOPOLOGIES = WatchedResource(
    "noderesourcetopologies",
    "NodeResourceTopology",
    "topology.node.k8s.io",
    ("v1alpha2", "v1alpha1"),
    "noderesourcetopologies",
)
NUMATOPOLOGIES = WatchedResource(
    "numatopologies", "Numatopology", "nodeinfo.volcano.sh", ("v1alpha1",), "numatopologies"
)
# Bound, non-terminal pods: what kube-scheduler's informer calls assigned pods
# (pkg/scheduler/scheduler.go: "spec.nodeName!=" plus the terminal phases excluded).
BOUND_PODS = WatchedResource(
    "pods",
    "Pod",
    "",
    ("v1",),
    "pods",
    optional=False,
    field_selector="spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed",
)
DEFAULT_RESOURCES: tuple[WatchedResource, ...] = (NODES, NODE_RESOURCE_TOPOLOGIES, NUMATOPOLOGIES)


class Backoff:
    """Exponential backoff with jitter, capped: attempt n waits a random time in
    [d/2, d] with d = min(maximum, initial * factor**n), never below ``initial``.
    The jitter spreads the reconnects of many replicas after an apiserver restart."""

    def __init__(
        self,
        initial: float,
        maximum: float,
        *,
        factor: float = 2.0,
        rng: random.Random | None = None,
    ) -> None:
        if not 0 < initial <= maximum:
            raise ValueError(
                f"backoff bounds: need 0 < initial <= maximum, got initial={initial}, "
                f"maximum={maximum}"
            )
        self.initial = initial
        self.maximum = maximum
        self.factor = factor
        self.attempt = 0
        self._rng = rng or random.Random()

    def next(self) -> float:
        ceiling = min(self.maximum, self.initial * self.factor**self.attempt)
        self.attempt += 1
        return max(self.initial, self._rng.uniform(ceiling / 2, ceiling))

    def reset(self) -> None:
        self.attempt = 0


class _Gone(Exception):
    """The resourceVersion (or continue token) was compacted away: relist."""


class _Absent(Exception):
    """The resource is not served (CRD missing) or not readable (RBAC)."""


class _WatchError(Exception):
    """An ERROR event other than 410, or a malformed stream: reconnect."""


@dataclass
class _State:
    resource: WatchedResource
    version: str | None = None
    items: dict[Key, dict[str, Any]] = field(default_factory=dict)
    resource_version: str | None = None
    listed: bool = False
    installed: bool | None = None
    connected: bool = False
    error: str | None = None
    response: Any = None  # the open urllib3 response, so stop() can cut it


def _object_key(obj: Mapping[str, Any]) -> Key:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
        raise _WatchError(f"object without metadata.name: {json.dumps(obj)[:200]}")
    return (str(meta.get("namespace") or ""), meta["name"])


def _resource_version_of(obj: Mapping[str, Any]) -> str | None:
    meta = obj.get("metadata")
    rv = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
    return rv if isinstance(rv, str) and rv else None


def _status_text(status: Mapping[str, Any]) -> str:
    return f"{status.get('code')} {status.get('reason')}: {status.get('message')}"


def _describe(exc: Exception) -> str:
    """One readable line: urllib3 wraps the useful part (connection refused, TLS
    verification failed) in MaxRetryError.reason."""
    if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None:
        return f"API unreachable: {type(exc.reason).__name__}: {exc.reason}"
    if isinstance(exc, ApiException):
        return f"API error {exc.status} {exc.reason}"
    return f"{type(exc).__name__}: {exc}"


def _cut(response: Any) -> None:
    """Shut the socket under a blocked streaming read, so its thread wakes now (the
    same workaround ``kubernetes.watch.Watch.stop`` uses)."""
    connection = getattr(response, "connection", None)
    sock = getattr(connection, "sock", None)
    if sock is None:
        return
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


class LiveSource:
    """Keeps the cluster's Nodes, NodeResourceTopologies and Numatopologies (and
    optionally bound Pods) in memory and reports the full set through ``on_change``."""

    def __init__(
        self,
        api_client: kubernetes.client.ApiClient,
        on_change: OnChange,
        *,
        include_pods: bool = False,
        resources: Sequence[WatchedResource] | None = None,
        watch_timeout: int = 300,
        request_timeout: float = 30.0,
        backoff_initial: float = 0.2,
        backoff_max: float = 30.0,
        absent_retry: float = 60.0,
        debounce: float = 0.2,
        page_size: int = 500,
        rng: random.Random | None = None,
    ) -> None:
        if watch_timeout < 1:
            raise ValueError(f"watch_timeout: {watch_timeout!r} must be at least 1 (seconds)")
        if debounce < 0:
            raise ValueError(f"debounce: {debounce!r} must be >= 0 (seconds)")
        Backoff(backoff_initial, backoff_max)  # validates the bounds now, not in a thread
        chosen = tuple(resources) if resources is not None else DEFAULT_RESOURCES
        if include_pods and BOUND_PODS not in chosen:
            chosen = (*chosen, BOUND_PODS)
        self._api = api_client
        self._core = kubernetes.client.CoreV1Api(api_client)
        self._custom = kubernetes.client.CustomObjectsApi(api_client)
        self._on_change = on_change
        self._watch_timeout = watch_timeout
        self._request_timeout = request_timeout
        self._backoff_bounds = (backoff_initial, backoff_max)
        self._absent_retry = absent_retry
        self._debounce = debounce
        self._page_size = page_size
        self._rng = rng or random.Random()
        self._states = [_State(r) for r in chosen]
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._dirty = threading.Event()
        self._threads: list[threading.Thread] = []
        self._last_sync: float | None = None
        self._relists = 0
        self._reconnects = 0
        self._events = 0
        self._bookmarks = 0
        self._notifications = 0
        self._notify_error: str | None = None

    # ------------------------------------------------------------------ public API

    def start(self) -> None:
        if self._threads:
            raise RuntimeError("LiveSource.start() called twice")
        for state in self._states:
            self._spawn(f"numagate-watch-{state.resource.name}", self._run, state)
        self._spawn("numagate-inventory-notify", self._notify_loop)

    def stop(self, timeout: float = 5.0) -> None:
        """End every thread; returns within ``timeout`` seconds."""
        self._stopping.set()
        self._dirty.set()
        with self._lock:
            responses = [s.response for s in self._states if s.response is not None]
        for response in responses:
            _cut(response)
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    @property
    def synced(self) -> bool:
        """Every resource type has completed a list, or is known not to be installed."""
        with self._lock:
            return self._synced_locked()

    @property
    def last_sync(self) -> float | None:
        """``time.monotonic()`` of the last successful list, watch start or watch event
        (bookmarks included); ``now - last_sync`` is the inventory's staleness."""
        with self._lock:
            return self._last_sync

    @property
    def connected(self) -> bool:
        """The API answered the latest request of every resource type."""
        with self._lock:
            return all(s.connected for s in self._states)

    @property
    def relists(self) -> int:
        with self._lock:
            return self._relists

    @property
    def reconnects(self) -> int:
        with self._lock:
            return self._reconnects

    @property
    def events(self) -> int:
        with self._lock:
            return self._events

    @property
    def bookmarks(self) -> int:
        with self._lock:
            return self._bookmarks

    @property
    def notifications(self) -> int:
        with self._lock:
            return self._notifications

    @property
    def errors(self) -> dict[str, str]:
        """The current problem per resource type (and ``on_change`` if it raised)."""
        with self._lock:
            found = {s.resource.name: s.error for s in self._states if s.error}
            if self._notify_error:
                found["on_change"] = self._notify_error
            return found

    def resource_versions(self) -> dict[str, str | None]:
        with self._lock:
            return {s.resource.name: s.resource_version for s in self._states}

    def status(self) -> dict[str, dict[str, Any]]:
        """Per resource type: installed, listed, connected, version served, object count,
        resourceVersion and error; for /readyz detail and metrics."""
        with self._lock:
            return {
                s.resource.name: {
                    "installed": s.installed,
                    "listed": s.listed,
                    "connected": s.connected,
                    "version": s.version,
                    "objects": len(s.items),
                    "resourceVersion": s.resource_version,
                    "error": s.error,
                }
                for s in self._states
            }

    def objects(self) -> list[dict[str, Any]]:
        """The complete current object list (the list ``on_change`` receives)."""
        with self._lock:
            return self._objects_locked()

    # ------------------------------------------------------------------ threads

    def _spawn(self, name: str, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _run(self, state: _State) -> None:
        backoff = Backoff(*self._backoff_bounds, rng=self._rng)
        need_list = True
        while not self._stopping.is_set():
            try:
                if need_list:
                    self._list(state)
                    need_list = False
                    backoff.reset()
                if self._watch(state):
                    backoff.reset()
                else:
                    # A stream that closed at once with nothing in it: do not spin.
                    self._stopping.wait(backoff.next())
            except _Gone as exc:
                self._on_gone(state, exc)
                need_list = True
            except _Absent as exc:
                self._on_absent(state, exc)
                need_list = True
                self._stopping.wait(self._absent_retry)
            except Exception as exc:  # a watcher thread must survive anything
                if self._stopping.is_set():
                    break
                self._on_failure(state, exc)
                if not state.listed:
                    need_list = True
                self._stopping.wait(backoff.next())
        with self._lock:
            state.response = None

    def _notify_loop(self) -> None:
        last = float("-inf")
        while not self._stopping.is_set():
            self._dirty.wait()
            if self._stopping.is_set():
                return
            wait = last + self._debounce - time.monotonic()
            if wait > 0 and self._stopping.wait(wait):
                return
            self._dirty.clear()
            with self._lock:
                if not self._synced_locked():
                    continue
                objects = self._objects_locked()
            last = time.monotonic()
            self._deliver(objects)

    def _deliver(self, objects: list[dict[str, Any]]) -> None:
        try:
            self._on_change(objects)
        except Exception as exc:
            log.exception("inventory on_change callback failed")
            with self._lock:
                self._notify_error = f"{type(exc).__name__}: {exc}"
            return
        with self._lock:
            self._notifications += 1
            self._notify_error = None

    # ------------------------------------------------------------------ list

    def _list(self, state: _State) -> None:
        versions = state.resource.versions
        if state.version in versions:
            # The version found last time first, then the others.
            versions = (state.version, *(v for v in versions if v != state.version))
        absent: list[str] = []
        for version in versions:
            try:
                items, resource_version = self._list_version(state.resource, version)
            except _Absent as exc:
                absent.append(f"{state.resource.api_version(version)}: {exc}")
                continue
            self._replace(state, version, items, resource_version)
            return
        raise _Absent("; ".join(absent))

    def _list_version(
        self, resource: WatchedResource, version: str
    ) -> tuple[dict[Key, dict[str, Any]], str | None]:
        items: dict[Key, dict[str, Any]] = {}
        token: str | None = None
        resource_version: str | None = None
        while True:
            params: dict[str, Any] = {"limit": self._page_size}
            if token:
                params["_continue"] = token
            response = self._request(resource, version, params, self._request_timeout)
            try:
                body = json.loads(response.data)
            finally:
                response.release_conn()
            if not isinstance(body, dict) or not isinstance(body.get("items", []), list):
                raise _WatchError(f"list of {resource.plural}: response is not a List")
            api_version = body.get("apiVersion") or resource.api_version(version)
            for raw in body.get("items") or []:
                item = self._complete(raw, resource, api_version)
                items[_object_key(item)] = item
            meta = body.get("metadata") or {}
            resource_version = meta.get("resourceVersion") or resource_version
            token = meta.get("continue")
            if not token:
                return items, resource_version

    @staticmethod
    def _complete(raw: Any, resource: WatchedResource, api_version: str) -> dict[str, Any]:
        """List items come without kind/apiVersion (the List carries them): put them
        back, since the inventory builder dispatches on them."""
        if not isinstance(raw, dict):
            raise _WatchError(f"{resource.plural}: item is not an object: {raw!r:.200}")
        item = dict(raw)
        item.setdefault("apiVersion", api_version)
        item.setdefault("kind", resource.kind)
        return item

    def _replace(
        self,
        state: _State,
        version: str,
        items: dict[Key, dict[str, Any]],
        resource_version: str | None,
    ) -> None:
        with self._lock:
            changed = not state.listed or state.items != items or state.installed is not True
            first = not state.listed
            state.version = version
            state.items = items
            state.resource_version = resource_version
            state.listed = True
            state.installed = True
            state.connected = True
            state.error = None
            self._last_sync = time.monotonic()
        if first:
            log.info(
                "listed %s (%s): %d objects at resourceVersion %s",
                state.resource.plural,
                state.resource.api_version(version),
                len(items),
                resource_version,
            )
        if changed:
            self._dirty.set()

    # ------------------------------------------------------------------ watch

    def _watch(self, state: _State) -> bool:
        """One watch request; True when it delivered something or ran its course."""
        assert state.version is not None
        # client-go's reflector picks timeoutSeconds in [min, 2*min) so that many
        # clients do not all reconnect at once (tools/cache/reflector.go).
        timeout = self._rng.randint(self._watch_timeout, 2 * self._watch_timeout)
        params: dict[str, Any] = {
            "watch": True,
            "allow_watch_bookmarks": True,
            "timeout_seconds": timeout,
        }
        if state.resource_version:
            params["resource_version"] = state.resource_version
        started = time.monotonic()
        response = self._request(
            state.resource, state.version, params, timeout + self._request_timeout
        )
        with self._lock:
            state.response = response
            state.connected = True
            state.error = None
            self._last_sync = time.monotonic()
        # stop() cuts the responses it finds; one registered just after it looked would
        # block for the whole watch, so check again now that it is registered.
        if self._stopping.is_set():
            _cut(response)
        received = 0
        try:
            for line in iter_resp_lines(response):
                if self._stopping.is_set():
                    break
                if line.strip():
                    self._apply_event(state, line)
                    received += 1
        finally:
            with self._lock:
                state.response = None
            # Close, not just release: a watch connection is never worth reusing, and
            # one cut by stop() must not go back to the pool.
            response.close()
            response.release_conn()
        if not self._stopping.is_set():
            # A clean end of stream (the server's timeout) means nothing was missed.
            with self._lock:
                self._last_sync = time.monotonic()
        return received > 0 or time.monotonic() - started >= self._backoff_bounds[0]

    def _apply_event(self, state: _State, line: str) -> None:
        try:
            event = json.loads(line)
        except ValueError as exc:
            raise _WatchError(
                f"watch {state.resource.plural}: undecodable event {line[:200]!r}"
            ) from exc
        kind = event.get("type") if isinstance(event, dict) else None
        obj = event.get("object") if isinstance(event, dict) else None
        if not isinstance(obj, dict):
            raise _WatchError(
                f"watch {state.resource.plural}: event without object: {line[:200]!r}"
            )
        if kind == "ERROR":
            if obj.get("code") == HTTP_GONE:
                raise _Gone(_status_text(obj))
            raise _WatchError(f"watch {state.resource.plural}: {_status_text(obj)}")
        resource_version = _resource_version_of(obj)
        if kind == "BOOKMARK":
            with self._lock:
                if resource_version:
                    state.resource_version = resource_version
                self._bookmarks += 1
                self._events += 1
                self._last_sync = time.monotonic()
            return
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            raise _WatchError(f"watch {state.resource.plural}: unknown event type {kind!r}")
        api_version = state.resource.api_version(state.version or state.resource.versions[0])
        item = self._complete(obj, state.resource, api_version)
        key = _object_key(item)
        with self._lock:
            if kind == "DELETED":
                state.items.pop(key, None)
            else:
                state.items[key] = item
            if resource_version:
                state.resource_version = resource_version
            self._events += 1
            self._last_sync = time.monotonic()
        self._dirty.set()

    # ------------------------------------------------------------------ HTTP

    def _request(
        self, resource: WatchedResource, version: str, params: dict[str, Any], read_timeout: float
    ) -> Any:
        """The raw urllib3 response (``_preload_content=False``): the bodies are read as
        JSON so no field is lost to model deserialization."""
        options: dict[str, Any] = {
            "_preload_content": False,
            "_request_timeout": (self._request_timeout, read_timeout),
            **params,
        }
        if resource.field_selector:
            options["field_selector"] = resource.field_selector
        try:
            if resource.group:
                return self._custom.list_cluster_custom_object(
                    resource.group, version, resource.plural, **options
                )
            if resource.plural == "nodes":
                return self._core.list_node(**options)
            if resource.plural == "pods":
                return self._core.list_pod_for_all_namespaces(**options)
        except ApiException as exc:
            if exc.status == HTTP_GONE:
                raise _Gone(f"{exc.status} {exc.reason}") from exc
            if exc.status == HTTP_NOT_FOUND:
                raise _Absent("404 Not Found (is the CRD installed?)") from exc
            if exc.status == HTTP_FORBIDDEN:
                raise _Absent(
                    "403 Forbidden (grant list and watch on this resource to numagate's "
                    "service account)"
                ) from exc
            raise
        raise ValueError(f"no client call for core resource {resource.plural!r}")

    # ------------------------------------------------------------------ outcomes

    def _on_gone(self, state: _State, exc: Exception) -> None:
        log.info("watch %s: %s; relisting", state.resource.plural, exc)
        with self._lock:
            self._relists += 1

    def _on_absent(self, state: _State, exc: Exception) -> None:
        with self._lock:
            reported = state.installed is False
            had_items = bool(state.items)
            state.installed = False
            state.connected = True
            state.items = {}
            state.resource_version = None
            state.error = (
                f"{state.resource.plural}.{state.resource.group or 'core'} not available: {exc}"
            )
        if not reported:
            # Once per transition, not once per retry.
            log.warning("%s; retrying every %gs", state.error, self._absent_retry)
        if had_items or not reported:
            self._dirty.set()

    def _on_failure(self, state: _State, exc: Exception) -> None:
        text = _describe(exc)
        with self._lock:
            state.connected = False
            state.error = text
            self._reconnects += 1
        log.warning("watch %s: %s; reconnecting", state.resource.plural, text[:500])

    # ------------------------------------------------------------------ helpers (lock held)

    def _synced_locked(self) -> bool:
        return all(s.listed or s.installed is False for s in self._states)

    def _objects_locked(self) -> list[dict[str, Any]]:
        objects: list[dict[str, Any]] = []
        for state in self._states:
            objects.extend(state.items[key] for key in sorted(state.items))
        return objects
