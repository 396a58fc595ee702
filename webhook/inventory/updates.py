"""Watch events into the served inventory, one node at a time (issue 14; docs/inventory.md).

The reflector threads (webhook/inventory/reflector.py) parse each object they receive
(``parse_object``: the per-object half of the builder) and queue the result; a relist
queues only what differs from what was held (by resourceVersion), so it costs what
changed, like any event. The event loop drains the queue every ``window`` seconds, in
slices of about SLICE_SECONDS (a backlog goes slice by slice, with the loop's other work
in between): the touched nodes are merged again (IncrementalInventory.flush) and patched
into a new snapshot (SnapshotEditor, copy-on-write), and the new view is swapped in.
That work is proportional to the slice, not to the cluster.

Two steps are whole-inventory and run in a thread instead, the loop keeping the last good
view meanwhile: the first build once every resource type has listed, and a rebuild when
a node brings a resource the packed table lacks. While one runs, the loop leaves the
inventory alone (the thread drains the queue itself).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from core.feasibility.delta import SnapshotEditor
from core.feasibility.snapshot import Snapshot
from core.inventory.incremental import IncrementalInventory, ObjectKey, parse_object
from webhook.inventory.live import LiveSource
from webhook.inventory.reflector import Key, Reflector, fingerprint
from webhook.inventory.state import InventoryState, InventoryView
from webhook.logs import get_logger
from webhook.metrics import WebhookMetrics

log = get_logger("inventory")
SOURCE = "cluster"
# One slice of events on the loop is sized to take about this long (at least MIN_SLICE
# events): a backlog is applied in slices with the loop's other work in between. While
# the oldest queued event is older than BACKLOG_SECONDS the budget grows with its age, up
# to MAX_SLICE_SECONDS, so that a backlog is drained instead of growing (a slice has a
# fixed part that larger slices amortize: a new view, the young collection at install,
# memcpy of the integer columns); /healthz waits at most one. (A 15 ms cap instead of
# 30 ms left p99 at 100,000 nodes under 1,667 events/s where it was: 45 against 39 ms.)
SLICE_SECONDS = 0.01
MAX_SLICE_SECONDS = 0.03
BACKLOG_SECONDS = 0.25
MIN_SLICE = 32
MAX_SLICE = 20_000
# Queued: (monotonic time received, resource name, event type, key, parsed object or None).
Queued = tuple[float, str, str, ObjectKey, Any]


def queue_object(
    inventory: IncrementalInventory, reflector: Reflector, kind: str, key: Key, item: dict[str, Any]
) -> Queued:
    """A watch event, parsed (in the reflector's thread) and stamped for the queue."""
    resource = reflector.resource
    parsed = None if kind == "DELETED" else parse_object(item, inventory.units)
    return (time.monotonic(), resource.name, kind, (resource.kind, *key), parsed)


def relist_difference(
    inventory: IncrementalInventory,
    reflector: Reflector,
    old: Mapping[Key, Any],
    new: Mapping[Key, dict[str, Any]],
) -> list[Queued]:
    """What a (re)list changed against what was held (by fingerprint), deletions included."""
    resource = reflector.resource
    now = time.monotonic()
    units = inventory.units
    items: list[Queued] = []
    for key, item in new.items():
        if old.get(key) != fingerprint(item):
            items.append(
                (now, resource.name, "ADDED", (resource.kind, *key), parse_object(item, units))
            )
    for key in old.keys() - new.keys():
        items.append((now, resource.name, "DELETED", (resource.kind, *key), None))
    return items


def apply_events(
    queue: deque[Queued], inventory: IncrementalInventory, limit: int | None = None
) -> list[Queued]:
    """Take up to ``limit`` events off ``queue`` into ``inventory`` (not flushed); the
    events taken. Only the last state of each object matters (events of different objects
    commute: the result is the build of the final objects), so earlier ones are skipped."""
    drained: list[Queued] = []
    while queue and (limit is None or len(drained) < limit):
        drained.append(queue.popleft())
    last = {item[3]: item for item in drained}
    for item in last.values() if len(last) < len(drained) else drained:
        parsed = item[4]
        if parsed is None:
            inventory.delete(item[3])
        else:
            inventory.set(parsed)
    return drained


class InventoryUpdates:
    """The LiveSource listener that keeps ``state`` up to date incrementally."""

    def __init__(
        self,
        state: InventoryState,
        loop: asyncio.AbstractEventLoop,
        *,
        window: float = 0.05,
        metrics: WebhookMetrics | None = None,
        synced: Callable[[], bool] = lambda: True,
    ) -> None:
        self.state = state
        self.inventory = IncrementalInventory()
        self.editor: SnapshotEditor | None = None
        self.window = window
        self.metrics = metrics
        self.synced = synced
        self._loop = loop
        self._queue: deque[Queued] = deque()
        self._lock = threading.Lock()
        self._scheduled = False
        self._building = False
        self._slice = MIN_SLICE  # events per slice, adapted to the time a slice took
        self._errors: tuple[str, ...] = ()
        # Events taken in but not yet served, for the next whole build to report: before
        # the first build, and a batch that needs a whole build.
        self._unbuilt: list[Queued] = []
        self.applied = 0  # events applied (for tests and the debug log)
        self.batches = 0
        self.full_builds = 0

    # ------------------------------------------------------------------ reflector threads

    def on_event(self, reflector: Reflector, kind: str, key: Key, item: dict[str, Any]) -> None:
        self._put(queue_object(self.inventory, reflector, kind, key, item))

    def on_replaced(
        self,
        reflector: Reflector,
        old: Mapping[Key, Any],
        new: Mapping[Key, dict[str, Any]],
        changed: bool,
    ) -> None:
        """A (re)list: queue what differs from what was held, by fingerprint."""
        items = relist_difference(self.inventory, reflector, old, new)
        if items:
            self._put(*items)
        else:
            self._schedule()  # the first list of an empty type may make the inventory ready

    def on_touch(self) -> None:
        if self.editor is None:
            # A type has just settled: the first build may wait for nothing else now (a
            # flush that found a type not yet settled did not build).
            self._schedule()

    def _put(self, *items: Queued) -> None:
        self._queue.extend(items)
        self._schedule()

    def _schedule(self) -> None:
        with self._lock:
            if self._scheduled:
                return
            self._scheduled = True
        self._loop.call_soon_threadsafe(self._arm)

    def lag(self, now: float) -> float:
        """Age of the oldest event waiting to be applied."""
        queue = self._queue
        try:
            return max(0.0, now - queue[0][0]) if queue else 0.0
        except IndexError:  # drained meanwhile
            return 0.0

    # ------------------------------------------------------------------ event loop

    def _arm(self) -> None:
        self._loop.call_later(self.window, self._flush)

    def _flush(self) -> None:
        with self._lock:
            self._scheduled = False
        if self._building:
            return  # the thread drains the queue when it is done
        if self.editor is None:
            if self.synced():
                self._full_build("first build")
            else:
                drain_unbuilt(self._queue, self.inventory, self._unbuilt)
            return
        started, cpu = time.monotonic(), time.thread_time()
        self.state.before_batch()
        budget = self._budget(started)
        drained = self._drain(self._slice)
        changes = self.inventory.flush()
        if not self.editor.fits(changes):
            # The build reports these events with its own (update metrics, debug line).
            self._unbuilt.extend((*item[:4], None) for item in drained)
            self._full_build("a resource new to the packed table")
            return
        if changes or drained:
            self._install(self.editor.apply(changes), drained, started)
        if len(drained) >= self._slice:  # a full slice: its time says how many fit
            spent = max(time.thread_time() - cpu, 1e-6)  # CPU: not the GIL's waits
            grown = self._slice * min(2.0, max(0.5, budget / spent))
            self._slice = int(min(MAX_SLICE, max(MIN_SLICE, grown)))
        if self._queue:
            # More than one slice waiting: the next slice after whatever is ready to run
            # (reviews, /healthz), not after a window.
            with self._lock:
                if self._scheduled:
                    return
                self._scheduled = True
            self._loop.call_soon(self._flush)

    def _budget(self, now: float) -> float:
        """The time for the next slice: SLICE_SECONDS, more while a backlog ages."""
        lag = self.lag(now)
        if lag <= BACKLOG_SECONDS:
            return SLICE_SECONDS
        return min(MAX_SLICE_SECONDS, SLICE_SECONDS * lag / BACKLOG_SECONDS)

    def _drain(self, limit: int | None = None) -> list[Queued]:
        return apply_events(self._queue, self.inventory, limit)

    def _install(self, snapshot: Snapshot, drained: list[Queued], started: float) -> None:
        if self.inventory.errors_changed or self.state.view is None:
            self._errors = self.inventory.errors()
        install_update(self.state, snapshot, self._errors, drained, started, self.metrics)
        self.applied += len(drained)
        self.batches += 1

    def _full_build(self, why: str) -> None:
        self._building = True
        task = self._loop.create_task(asyncio.to_thread(self._build_in_thread, why))
        task.add_done_callback(self._built)

    def _build_in_thread(self, why: str) -> tuple[Snapshot, list[Queued], float]:
        started = time.monotonic()
        snapshot, drained = build_whole(self._queue, self.inventory, why, self._unbuilt)
        self._unbuilt = []
        return snapshot, drained, started

    def _built(self, task: asyncio.Future[tuple[Snapshot, list[Queued], float]]) -> None:
        self._building = False
        if task.cancelled():
            return  # shutting down: the loop cancelled the build's thread wait
        try:
            snapshot, drained, started = task.result()
        except Exception as exc:  # keep the last good view; try again with the next event
            log.exception("inventory build failed")
            self.state.record_failure(f"cluster inventory: {exc}")
            return
        self.inventory.share_usage(False)  # from now on, events one by one
        self.editor = SnapshotEditor(snapshot, reserve=True)
        self.full_builds += 1
        if self.metrics is not None:
            self.metrics.inventory_updates.rebuilt(time.monotonic() - started)
        self.state.before_batch()  # the reviews' garbage of the build's seconds
        self._install(snapshot, drained, started)
        if self._queue:
            self._schedule()


def drain_unbuilt(
    queue: deque[Queued], inventory: IncrementalInventory, taken: list[Queued]
) -> None:
    """Before the first build, while the lists come in: the queued objects into
    ``inventory`` (not flushed), where their maps are shared as they go in; their events
    (without the objects) onto ``taken``, for the first build to report. Left queued
    until the first build, every object's own copies were alive at once, and their freed
    blocks stayed scattered in the heap: 25 MiB of RSS at 10,000 nodes (round 9)."""
    taken.extend((*item[:4], None) for item in apply_events(queue, inventory))


def build_whole(
    queue: deque[Queued],
    inventory: IncrementalInventory,
    why: str,
    taken: Sequence[Queued] = (),
) -> tuple[Snapshot, list[Queued]]:
    """Every queued event applied and the snapshot built whole (the first build, a
    resource new to the packed table); logged with ``why``. The events returned are
    ``taken`` (by :func:`drain_unbuilt`) and the queue's."""
    started = time.monotonic()
    drained = [*taken, *apply_events(queue, inventory)]
    inventory.flush()
    records = inventory.records
    snapshot = Snapshot.build([records[k] for k in sorted(records)])
    duration = time.monotonic() - started
    log.info(
        "inventory built whole",
        extra={"reason": why, "nodes": len(records), "seconds": round(duration, 3)},
    )
    return snapshot, drained


def install_update(
    state: InventoryState,
    snapshot: Snapshot,
    errors: tuple[str, ...],
    events: Sequence[tuple[Any, ...]],
    started: float,
    metrics: WebhookMetrics | None,
) -> None:
    """Serve ``snapshot`` (a batch of ``events``, items (received, resource, type, ...),
    applied since ``started``): the new view, the update metrics, the debug line."""
    old = state.view
    view = InventoryView(snapshot.nodes, snapshot, errors, SOURCE, time.monotonic())
    if old is not None and old.snapshot.structure is snapshot.structure:
        # Only usage changed: what the request path memoized per view still holds.
        view.memo.update(old.memo)
    state.install(view, quiet=old is not None)
    done = time.monotonic()
    if metrics is not None:
        metrics.inventory_updates.record(events, done, done - started)
    if events:
        log.debug(
            "inventory updated",
            extra={
                "events": len(events),
                "nodes": len(snapshot.nodes),
                "applyMs": round((done - started) * 1000, 3),
                "lagMs": round((done - events[0][0]) * 1000, 3),
            },
        )


async def report_sync(
    sync: Callable[[], Iterable[tuple[str, float | None]]],
    lag: Callable[[float], float],
    metrics: WebhookMetrics | None,
    every: float = 1.0,
) -> None:
    """Keep the per-resource sync age (``sync``: each resource type and the monotonic time
    it is known in sync up to) and the watch lag gauges current."""
    if metrics is None:
        return
    gauges = metrics.inventory_updates
    while True:
        now = time.monotonic()
        for resource, until in sync():
            age = float("nan") if until is None else now - until
            gauges.sync_age.set(age, resource=resource)
        gauges.watch_lag.set(lag(now))
        await asyncio.sleep(every)


def reflector_sync(live: LiveSource) -> list[tuple[str, float | None]]:
    """Per resource type, the time it is known in sync up to (``report_sync``)."""
    return [(r.resource.name, r.synced_until()) for r in live.reflectors]
