"""The inventory the request path reads, and the sources that feed it.

The request path only ever reads ``InventoryState.view``: one attribute holding an
immutable :class:`InventoryView`. Sources build a new view (parse, ``build_inventory``,
``Snapshot.build``) off the request path, in a thread, and swap it in with one
assignment, which is atomic under the GIL. A source that fails keeps the last good view.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from core.errors import CoreError
from core.inventory import build_inventory
from core.model import NodeTopology
from core.snapshot import Snapshot
from webhook.loader import LoadError, parse_objects, read_text
from webhook.logs import get_logger
from webhook.metrics import WebhookMetrics

log = get_logger("inventory")
DEMO_RESOURCE = "data/demo-inventory.yaml"


@dataclass(frozen=True, slots=True)
class InventoryView:
    """One immutable inventory: the nodes, the packed snapshot, the build errors."""

    nodes: tuple[NodeTopology, ...]
    snapshot: Snapshot
    errors: tuple[str, ...]
    source: str
    built_at: float  # time.monotonic() when it was built

    def has_label(self, key: str) -> bool:
        return any(key in n.labels for n in self.nodes)


def build_view(objects: Iterable[Mapping[str, Any]], *, source: str, now: float) -> InventoryView:
    """Build a view from raw Kubernetes objects (CPU work: call it off the request path)."""
    result = build_inventory(list(objects))
    nodes = tuple(result.nodes)
    return InventoryView(nodes, Snapshot.build(nodes), tuple(result.errors), source, now)


class InventoryState:
    """Holds the current view and knows how fresh it is.

    ``last_sync`` returns the monotonic time of the last successful synchronization
    (None before the first). Only live sources are ever stale: a static file is the
    truth by definition.
    """

    def __init__(
        self,
        *,
        metrics: WebhookMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.view: InventoryView | None = None
        self.clock = clock
        self.metrics = metrics
        self.live = False
        self.last_sync: Callable[[], float | None] = lambda: (
            self.view.built_at if self.view else None
        )
        self.synced: Callable[[], bool] = lambda: self.view is not None
        if metrics is not None:
            metrics.inventory_age.set_function(self.age)

    def install(self, view: InventoryView) -> None:
        """Swap in a new view (one assignment: readers see the old or the new, never a mix)."""
        self.view = view
        if self.metrics is not None:
            self.metrics.inventory_nodes.set(len(view.nodes))
            self.metrics.inventory_errors.set(len(view.errors))
        for error in view.errors[:20]:
            log.warning("inventory object skipped", extra={"error": error, "source": view.source})

    def load_objects(self, objects: Iterable[Mapping[str, Any]], *, source: str) -> InventoryView:
        view = build_view(objects, source=source, now=self.clock())
        self.install(view)
        return view

    def record_failure(self, message: str) -> None:
        if self.metrics is not None:
            self.metrics.inventory_load_failures.inc()
        log.error(
            "inventory load failed; keeping the last good inventory", extra={"error": message}
        )

    def age(self) -> float | None:
        last = self.last_sync()
        return None if last is None else max(0.0, self.clock() - last)

    def is_stale(self, threshold: float) -> bool:
        """A live inventory not synchronized for ``threshold`` seconds (never denies then)."""
        if not self.live:
            return False
        age = self.age()
        return age is None or age > threshold

    @property
    def ready(self) -> bool:
        return self.view is not None and self.synced()


def demo_objects() -> list[dict[str, Any]]:
    """The embedded demo cluster (webhook/data/demo-inventory.yaml)."""
    text = resources.files("webhook").joinpath(DEMO_RESOURCE).read_text(encoding="utf-8")
    return [o.obj for o in parse_objects(text, "demo-inventory.yaml")]


def load_demo(state: InventoryState) -> InventoryView:
    return state.load_objects(demo_objects(), source="demo")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class StaticFileSource:
    """An inventory file, re-read when its content changes; garbage keeps the last good."""

    def __init__(self, path: str | Path, state: InventoryState, *, interval: float = 5.0) -> None:
        self.path = str(path)
        self.state = state
        self.interval = interval
        self._digest: str | None = None
        self.last_error: str | None = None

    def load(self) -> InventoryView:
        """First load: errors propagate (a bad file at startup is a usage error)."""
        text = read_text(self.path)
        view = self.state.load_objects(
            (o.obj for o in parse_objects(text, self.path)), source=f"file:{self.path}"
        )
        self._digest = _digest(text)
        return view

    def check(self) -> bool | None:
        """Reload if the content changed: True reloaded, False kept last good, None unchanged."""
        try:
            text = read_text(self.path)
        except LoadError as exc:
            return self._fail(str(exc))
        digest = _digest(text)
        if digest == self._digest:
            return None
        self._digest = digest
        try:
            objects = [o.obj for o in parse_objects(text, self.path)]
            self.state.load_objects(objects, source=f"file:{self.path}")
        except (LoadError, CoreError, ValueError, TypeError) as exc:
            return self._fail(f"{self.path}: {exc}")
        self.last_error = None
        log.info("inventory reloaded", extra={"file": self.path})
        return True

    def _fail(self, message: str) -> bool:
        if message != self.last_error:
            self.state.record_failure(message)
        self.last_error = message
        return False

    async def run(self) -> None:
        """Poll forever; the read and the build run in a thread, off the event loop."""
        while True:
            await asyncio.sleep(self.interval)
            await asyncio.to_thread(self.check)
