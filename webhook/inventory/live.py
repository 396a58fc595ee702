"""Live inventory: the cluster objects numagate reads, kept by one reflector per resource
type (webhook/inventory/reflector.py) and combined here (docs/contracts.md: Inventory input).

Nothing here is called on the request path: ``on_change`` hands the complete current
object list to the server, which builds a new immutable snapshot and swaps it in. It runs
in a separate notifier thread, debounced, and only once every installed type has
completed its first list.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import kubernetes.client

from webhook.inventory.reflector import Key, Listener, Reflector, Timing, WatchedResource
from webhook.inventory.stream import Backoff

log = logging.getLogger("numagate.live")

OnChange = Callable[[list[dict[str, Any]]], None]

NODES = WatchedResource("nodes", "Node", "", ("v1",), "nodes", optional=False)
NODE_RESOURCE_TOPOLOGIES = WatchedResource(
    "noderesourcetopologies",
    "NodeResourceTopology",
    "topology.node.k8s.io",
    ("v1alpha2", "v1alpha1"),
    "noderesourcetopologies",
    from_cache=True,
)
NUMATOPOLOGIES = WatchedResource(
    "numatopologies",
    "Numatopology",
    "nodeinfo.volcano.sh",
    ("v1alpha1",),
    "numatopologies",
    from_cache=True,
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
# Objects per list page. A page's dicts exist until it is parsed, and the heap a first list
# leaves behind keeps about that much free: 250 instead of client-go's 500 takes ~8 MiB off
# a worker's RSS at 10,000 nodes, for no measurable CPU (docs/benchmarks.md, issue 14).
PAGE_SIZE = 250
__all__ = ["BOUND_PODS", "DEFAULT_RESOURCES", "Backoff", "LiveSource", "WatchedResource"]


class LiveSource:
    """Keeps the cluster's Nodes, NodeResourceTopologies and Numatopologies (and
    optionally bound Pods) in memory and reports the full set through ``on_change``,
    or every change as it comes to ``updates`` (then only fingerprints are kept here:
    the listener keeps what it needs of each object)."""

    def __init__(
        self,
        api_client: kubernetes.client.ApiClient,
        on_change: OnChange | None = None,
        *,
        updates: Listener | None = None,
        include_pods: bool = False,
        resources: Sequence[WatchedResource] | None = None,
        watch_timeout: int = 60,
        request_timeout: float = 30.0,
        backoff_initial: float = 0.2,
        backoff_max: float = 3.0,
        absent_retry: float = 60.0,
        debounce: float = 0.2,
        page_size: int = PAGE_SIZE,
        cache_list_max: int = Timing.cache_list_max,
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
        timing = Timing(
            watch_timeout,
            request_timeout,
            backoff_initial,
            backoff_max,
            absent_retry,
            page_size,
            cache_list_max,
        )
        if (on_change is None) == (updates is None):
            raise ValueError("LiveSource: give exactly one of on_change and updates")
        self._on_change = on_change
        self._debounce = debounce
        self._stopping = threading.Event()
        rng = rng or random.Random()
        listener = updates if updates is not None else self
        self._reflectors = [
            Reflector(
                r, api_client, listener, timing, self._stopping, rng, keep_objects=updates is None
            )
            for r in chosen
        ]
        self._lock = threading.Lock()
        self._dirty = threading.Event()
        self._threads: list[threading.Thread] = []
        self._notify_error: str | None = None

    # ------------------------------------------------------------------ Listener

    def on_replaced(
        self,
        reflector: Reflector,
        old: Mapping[Key, Any],
        new: Mapping[Key, dict[str, Any]],
        changed: bool,
    ) -> None:
        if changed:
            self._dirty.set()

    def on_event(self, reflector: Reflector, kind: str, key: Key, item: dict[str, Any]) -> None:
        self._dirty.set()

    def on_touch(self) -> None:
        pass

    # ------------------------------------------------------------------ public API

    def start(self) -> None:
        if self._threads:
            raise RuntimeError("LiveSource.start() called twice")
        for reflector in self._reflectors:
            self._spawn(f"numagate-watch-{reflector.resource.name}", reflector.run)
        if self._on_change is not None:
            self._spawn("numagate-inventory-notify", self._notify_loop)

    def stop(self, timeout: float = 5.0) -> None:
        """End every thread; returns within ``timeout`` seconds."""
        self._stopping.set()
        self._dirty.set()
        for reflector in self._reflectors:
            reflector.cut()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    @property
    def synced(self) -> bool:
        """Every resource type has completed a list, or is known not to be installed."""
        return all(r.settled for r in self._reflectors)

    @property
    def last_sync(self) -> float | None:
        """``time.monotonic()`` up to which every resource type is known to be in sync:
        the oldest of the types' last list, watch start, event, bookmark or clean end of
        a watch (``watch_timeout`` keeps a quiet type's watch ending well within
        staleAfterSeconds). Per type, so that NRT events do not keep the inventory fresh
        while the Node watch is down. None before every type listed."""
        times = [r.synced_until() for r in self._reflectors if r.installed is not False]
        if any(t is None for t in times):
            return None
        return min(times, default=time.monotonic())  # type: ignore[type-var]

    @property
    def reflectors(self) -> tuple[Reflector, ...]:
        return tuple(self._reflectors)

    @property
    def connected(self) -> bool:
        """The API answered the latest request of every resource type."""
        return all(r.connected for r in self._reflectors)

    @property
    def relists(self) -> int:
        return sum(r.relists for r in self._reflectors)

    @property
    def reconnects(self) -> int:
        return sum(r.reconnects for r in self._reflectors)

    @property
    def events(self) -> int:
        return sum(r.events for r in self._reflectors)

    @property
    def bookmarks(self) -> int:
        return sum(r.bookmarks for r in self._reflectors)

    @property
    def errors(self) -> dict[str, str]:
        """The current problem per resource type (and ``on_change`` if it raised)."""
        found = {r.resource.name: r.error for r in self._reflectors if r.error}
        with self._lock:
            if self._notify_error:
                found["on_change"] = self._notify_error
        return found

    def resource_versions(self) -> dict[str, str | None]:
        return {r.resource.name: r.resource_version for r in self._reflectors}

    def status(self) -> dict[str, dict[str, Any]]:
        """Per resource type: installed, listed, connected, version served, object count,
        resourceVersion, error and last sync; for /readyz detail and metrics."""
        return {r.resource.name: r.status() for r in self._reflectors}

    def objects(self) -> list[dict[str, Any]]:
        """The complete current object list (the list ``on_change`` receives)."""
        objects: list[dict[str, Any]] = []
        for reflector in self._reflectors:
            with reflector.lock:
                items = reflector.items
                objects.extend(items[key] for key in sorted(items))
        return objects

    # ------------------------------------------------------------------ threads

    def _spawn(self, name: str, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

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
            if not self.synced:
                continue
            objects = self.objects()
            last = time.monotonic()
            self._deliver(objects)

    def _deliver(self, objects: list[dict[str, Any]]) -> None:
        assert self._on_change is not None
        try:
            self._on_change(objects)
        except Exception as exc:
            log.exception("inventory on_change callback failed")
            with self._lock:
                self._notify_error = f"{type(exc).__name__}: {exc}"
            return
        with self._lock:
            self._notify_error = None
