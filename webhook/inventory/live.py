"""Live inventory: the cluster objects numagate reads, one reflector per resource type
(webhook/inventory/reflector.py), each change told to one listener as it comes
(docs/inventory.md, "The data flow")."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import kubernetes.client

from webhook.inventory.reflector import Key, Listener, Reflector, Timing, WatchedResource
from webhook.inventory.stream import Backoff

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
DEFAULT_TIMING = Timing()
__all__ = [
    "BOUND_PODS",
    "DEFAULT_RESOURCES",
    "Backoff",
    "Collector",
    "LiveSource",
    "Timing",
    "WatchedResource",
]


class LiveSource:
    """Lists and watches the cluster's Nodes, NodeResourceTopologies and Numatopologies
    (and optionally bound Pods) and tells ``listener`` every change as it comes; keeps
    only each object's fingerprint (the listener keeps what it needs of each object)."""

    def __init__(
        self,
        api_client: kubernetes.client.ApiClient,
        listener: Listener,
        *,
        include_pods: bool = False,
        resources: Sequence[WatchedResource] | None = None,
        timing: Timing = DEFAULT_TIMING,
        rng: random.Random | None = None,
    ) -> None:
        chosen = tuple(resources) if resources is not None else DEFAULT_RESOURCES
        if include_pods and BOUND_PODS not in chosen:
            chosen = (*chosen, BOUND_PODS)
        self._stopping = threading.Event()
        rng = rng or random.Random()
        self._reflectors = [
            Reflector(r, api_client, listener, timing, self._stopping, rng) for r in chosen
        ]
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        if self._threads:
            raise RuntimeError("LiveSource.start() called twice")
        for reflector in self._reflectors:
            name = f"numagate-watch-{reflector.resource.name}"
            thread = threading.Thread(target=reflector.run, name=name, daemon=True)
            self._threads.append(thread)
            thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """End every thread; returns within ``timeout`` seconds."""
        self._stopping.set()
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
    def errors(self) -> dict[str, str]:
        """The current problem per resource type."""
        return {r.resource.name: r.error for r in self._reflectors if r.error}

    def sync(self) -> list[tuple[str, float | None]]:
        """Per resource type, the time it is known in sync up to (the sync-age gauges)."""
        return [(r.resource.name, r.synced_until()) for r in self._reflectors]


class Collector:
    """A listener that keeps every object as listed and watched, in the order of
    ``resources`` then by key: ``read_inventory``'s one-shot list (webhook/cli/cluster.py)."""

    def __init__(self, resources: Sequence[WatchedResource]) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, dict[Key, dict[str, Any]]] = {r.name: {} for r in resources}

    def on_replaced(
        self, reflector: Reflector, old: Mapping[Key, Any], new: Mapping[Key, Any], changed: bool
    ) -> None:
        with self._lock:
            held = self._held[reflector.resource.name]
            for key in old.keys() - new.keys():
                held.pop(key, None)
            held.update(new)

    def on_event(self, reflector: Reflector, kind: str, key: Key, item: dict[str, Any]) -> None:
        with self._lock:
            held = self._held[reflector.resource.name]
            if kind == "DELETED":
                held.pop(key, None)
            else:
                held[key] = item

    def on_touch(self) -> None:
        pass

    def __len__(self) -> int:
        return sum(len(held) for held in self._held.values())

    def objects(self) -> list[dict[str, Any]]:
        with self._lock:
            return [held[key] for held in self._held.values() for key in sorted(held)]
