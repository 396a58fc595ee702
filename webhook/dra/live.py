"""The live DRA inventory, event by event (the NRT inventory's rules, docs/inventory.md).

The reflectors (webhook/inventory/reflector.py, through ``LiveSource``) call
``DraUpdates`` from their threads: each object received is read there
(core.dra.inventory.parse_dra) and queued; a relist queues only what differs from what
was held (by resourceVersion), deletions included. A flush thread drains the queue every
``window`` seconds into ``IncrementalDra`` and installs its new view: the work is the
touched objects' (their nodes, pools, classes, claims), not the cluster's. Nothing is
installed before every type has listed (or is known absent)."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from core.dra.inventory import DraInventory, DraItem, IncrementalDra, ObjectKey, parse_dra
from webhook.inventory.reflector import Key, Reflector, fingerprint
from webhook.logs import get_logger

log = get_logger("dra")
# Events that arrive within this long go into one flush (the NRT path's window).
WINDOW_SECONDS = 0.05


def _parsed(kind: str, key: Key, item: Mapping[str, Any]) -> tuple[ObjectKey, DraItem | str]:
    """The object read; a kind-less watch object takes the reflector's kind."""
    found = parse_dra(item if item.get("kind") else {**item, "kind": kind})
    if found is None:  # parse_dra knows every DRA kind; a nameless object has no key
        return (kind, *key), f"{kind} {key[1]!r}: unreadable"
    return (kind, *key), found[1]


class DraUpdates:
    """The reflectors' listener and the flush thread (``start``/``stop``); ``install``
    receives each new view and the number of objects held."""

    def __init__(
        self, install: Callable[[DraInventory, int], None], *, window: float = WINDOW_SECONDS
    ) -> None:
        self.install = install
        self.window = window
        self.inventory = IncrementalDra()
        self._queue: deque[tuple[ObjectKey, DraItem | str | None]] = deque()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.synced = lambda: True  # the LiveSource's ``synced`` once started
        self.flushes = 0

    # ---------------------------------------------------------------- Listener

    def on_replaced(
        self, reflector: Reflector, old: Mapping[Key, Any], new: Mapping[Key, Any], changed: bool
    ) -> None:
        kind = reflector.resource.kind
        for key, item in new.items():
            if old.get(key) != fingerprint(item):
                self._queue.append(_parsed(kind, key, item))
        for key in old.keys() - new.keys():
            self._queue.append(((kind, *key), None))
        self._wake.set()

    def on_event(self, reflector: Reflector, kind: str, key: Key, item: dict[str, Any]) -> None:
        resource = reflector.resource.kind
        if kind == "DELETED":
            self._queue.append(((resource, *key), None))
        else:
            self._queue.append(_parsed(resource, key, item))
        self._wake.set()

    def on_touch(self) -> None:
        self._wake.set()  # a type that has just listed may complete the first build

    # ---------------------------------------------------------------- flushing

    def flush(self) -> DraInventory | None:
        """Apply what is queued and install the new view (first: once every type listed)."""
        if not self.synced() or (not self._queue and self.flushes):
            return None
        while self._queue:
            self.inventory.apply(*self._queue.popleft())
        view = self.inventory.flush()
        self.install(view, len(self.inventory))
        self.flushes += 1
        return view

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.wait()
            if self._stopping.wait(self.window):
                return
            self._wake.clear()
            try:
                self.flush()
            except Exception:  # keep the last good view; the next event tries again
                log.exception("DRA inventory update failed; keeping the last good view")

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="numagate-dra-flush", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
