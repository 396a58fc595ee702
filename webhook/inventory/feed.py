"""The cluster inventory kept by a process of its own (``serve --inventory-process``;
issue 14, docs/inventory.md "The inventory process").

In the worker, the watch threads parse every object under the worker's GIL, and a batch of
events applied on the event loop waits for them: at 100,000 nodes and 1,667 NRT events/s
that is what held p99 (docs/benchmarks.md, round 6). Here a helper process per worker
(the *inventory process*) does the list/watch, the parse and the merge, and sends the
worker what changed, over a pipe, as one message per batch:

- a ``Whole`` (the first build, and the first build of a restarted inventory process):
  the packed snapshot, as a file inventory arrives from its build process;
- a ``Batch``: for each node whose new record differs only in free amounts (most events
  under churn), its name and its zones' free amounts; for any other change the record (or
  None: gone). The worker rebuilds the former from the record it holds
  (``with_available``) and patches its snapshot as it would for its own events;
- every message carries the process's ``Status`` (per-resource sync times, whether every
  type listed, the oldest event it has not sent), at least once a second: staleness,
  readiness and the sync-age and lag gauges read it as they read the watch threads.

Both sides hold the same records in the same order, so a usage delta names a record the
worker has; one that does not (a lost message would be a bug) restarts the process,
whose ``Whole`` replaces the worker's snapshot. A process that exits is restarted after a
backoff; meanwhile the worker serves the last good view, which ages (and so never
denies once stale), as with a watch that is down. This module is the process's end and
the messages; the worker's end is webhook/inventory/fed.py.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import pickle
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from core.feasibility.snapshot import Snapshot
from core.inventory.incremental import IncrementalInventory
from core.model import NodeTopology
from webhook.heap import limit_malloc_arenas, release_free_heap
from webhook.inventory.file_build import die_with_parent
from webhook.inventory.state import GC_YOUNG_THRESHOLD
from webhook.inventory.updates import (
    Queued,
    apply_events,
    build_whole,
    drain_unbuilt,
    queue_object,
    reflector_sync,
    relist_difference,
)
from webhook.logs import get_logger

log = get_logger("inventory")

Event = tuple[float, str, str]  # (monotonic time received, resource, event type)
# At most this many events per Batch: the worker applies one Batch in one go on its event
# loop (~60 us per event at 100,000 nodes), so a backlog (a relist) arrives as batches
# with the worker's other work in between, as InventoryUpdates slices it.
MAX_BATCH_EVENTS = 256
HEARTBEAT_SECONDS = 1.0
# The inventory process runs at a lower CPU priority than its worker: when they compete
# for a core (a CPU limit, a busy node), reviews go first and the inventory lags a little
# (its events are ~0.2 of a core at 100,000 nodes; the worker's share is what p99 needs).
NICENESS = 10


@dataclass(frozen=True, slots=True)
class Status:
    """What the inventory process knows of its watches (monotonic times: one clock for
    every process on the machine)."""

    synced: bool  # every resource type listed, or known not installed
    last_sync: float | None  # LiveSource.last_sync
    sync: tuple[tuple[str, float | None], ...]  # per resource type
    oldest: float | None  # received time of the oldest event not sent yet


@dataclass(frozen=True, slots=True)
class Whole:
    snapshot: Snapshot
    errors: tuple[str, ...]
    events: tuple[Event, ...]
    seconds: float  # the build's duration
    status: Status


@dataclass(frozen=True, slots=True)
class Batch:
    usage: tuple[tuple[str, tuple[Mapping[str, int], ...]], ...]  # name, free per zone
    records: tuple[tuple[str, NodeTopology | None], ...]
    errors: tuple[str, ...] | None  # None: unchanged
    events: tuple[Event, ...]
    status: Status


@dataclass(frozen=True)
class FeederSpec:
    """What the inventory process needs (picklable: it is spawned)."""

    kubeconfig: str | None = None
    context: str | None = None
    in_cluster: bool = False
    include_pods: bool = False
    log_level: str = "info"
    window: float = 0.05
    live: Mapping[str, Any] = field(default_factory=dict)  # LiveSource timings (tests)


# ---------------------------------------------------------------------- inventory process


class Feed:
    """The LiveSource listener of the inventory process, and its loop: every ``window``
    it merges the queued events and sends what changed through ``send``."""

    def __init__(
        self,
        send: Callable[[bytes], None],
        *,
        window: float = 0.05,
        heartbeat: float = HEARTBEAT_SECONDS,
        max_batch: int = MAX_BATCH_EVENTS,
    ) -> None:
        self.send = send
        self.window = window
        self.heartbeat = heartbeat
        self.max_batch = max_batch
        self.inventory = IncrementalInventory()
        self.synced: Callable[[], bool] = lambda: True
        self.last_sync: Callable[[], float | None] = lambda: None
        self.sync: Callable[[], Sequence[tuple[str, float | None]]] = lambda: ()
        self.built = False
        self.on_built: Callable[[], None] = lambda: None  # after the Whole is sent
        self._queue: deque[Queued] = deque()
        self._unbuilt: list[Queued] = []  # events taken in before the first build
        self._wake = threading.Event()

    # Listener (reflector threads), as InventoryUpdates
    def on_event(self, reflector: Any, kind: str, key: Any, item: dict[str, Any]) -> None:
        self._queue.append(queue_object(self.inventory, reflector, kind, key, item))
        self._wake.set()

    def on_replaced(
        self, reflector: Any, old: Mapping[Any, Any], new: Mapping[Any, Any], changed: bool
    ) -> None:
        self._queue.extend(relist_difference(self.inventory, reflector, old, new))
        self._wake.set()

    def on_touch(self) -> None:
        self._wake.set()

    # The loop
    def run(self) -> None:
        """Until sending fails (the worker is gone)."""
        while True:
            if self._wake.wait(self.heartbeat):
                time.sleep(self.window)  # gather a window of events
            self._wake.clear()
            self.step()

    def step(self) -> None:
        """Send what is ready: the first build once every type listed, else the queued
        events in batches of at most ``max_batch`` (a status alone when none)."""
        if not self.built:
            if self.synced():
                self._send_whole()
            else:
                drain_unbuilt(self._queue, self.inventory, self._unbuilt)
                self._send(Batch((), (), None, (), self._status()))
            return
        while True:
            self._send_batch()
            if not self._queue:
                return

    def _status(self) -> Status:
        queue = self._queue  # drained only on this thread: no race with the emptiness test
        oldest = queue[0][0] if queue else None
        return Status(self.synced(), self.last_sync(), tuple(self.sync()), oldest)

    def _send(self, message: Whole | Batch) -> None:
        self.send(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))

    def _send_whole(self) -> None:
        started = time.monotonic()
        snapshot, drained = build_whole(self._queue, self.inventory, "first build", self._unbuilt)
        self._unbuilt = []
        seconds = time.monotonic() - started
        self.inventory.share_usage(False)  # from now on, events one by one
        errors = self.inventory.errors()
        self._send(Whole(snapshot, errors, _events(drained), seconds, self._status()))
        self.built = True
        self.on_built()

    def _send_batch(self) -> None:
        inventory = self.inventory
        drained = apply_events(self._queue, inventory, self.max_batch)
        changes = inventory.flush()
        usage = tuple(
            (name, tuple(z.available for z in changes.pop(name).zones))  # type: ignore[union-attr]
            for name in inventory.usage_flushed
        )
        errors = inventory.errors() if inventory.errors_changed else None
        records = tuple(changes.items())
        self._send(Batch(usage, records, errors, _events(drained), self._status()))


def _events(drained: Sequence[Queued]) -> tuple[Event, ...]:
    """What the worker's metrics need of each event: received, resource, type."""
    return tuple((d[0], d[1], d[2]) for d in drained)


def feeder_main(conn: Connection, spec: FeederSpec) -> None:
    """The inventory process: watch, merge, send, until the worker is gone (the pipe
    breaks, or the kernel's parent-death signal)."""
    from webhook.logs import setup_logging

    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C: the worker stops us
    with contextlib.suppress(OSError):
        os.nice(NICENESS)
    limit_malloc_arenas()  # before the watch threads start, as in the worker
    setup_logging(spec.log_level)
    gc.disable()  # until the first build: its millions of objects stay (as in the worker)
    try:
        _watch_and_send(conn, spec)
    except (BrokenPipeError, EOFError):
        pass  # the worker is gone
    except Exception:  # the worker restarts us; the log line says why
        log.exception("inventory process failed")
        raise SystemExit(1) from None


def _watch_and_send(conn: Connection, spec: FeederSpec) -> None:
    from webhook.inventory.kube import build_api_client
    from webhook.inventory.live import LiveSource

    client = build_api_client(
        kubeconfig=spec.kubeconfig,
        context=spec.context,
        in_cluster=spec.in_cluster,
        use_default=False,
    )
    feed = Feed(conn.send_bytes, window=spec.window)
    live = LiveSource(client, updates=feed, include_pods=spec.include_pods, **spec.live)
    feed.synced = lambda: live.synced
    feed.last_sync = lambda: live.last_sync
    feed.sync = lambda: reflector_sync(live)
    feed.on_built = _collect_from_now_on
    live.start()
    try:
        feed.run()
    finally:
        live.stop(timeout=1.0)


def _collect_from_now_on() -> None:
    """After the first build: what it made stays (frozen), the collector runs as in the
    worker, rarely (webhook/inventory/state.py), and the heap's free pages go back."""
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    gc.enable()
    release_free_heap()  # the list's pages and the pickled first build are garbage now


def start_feeder(spec: FeederSpec) -> tuple[BaseProcess, Connection]:
    """Spawn the inventory process (spawned, not forked: the worker's event loop, its
    sockets and its threads stay its own); the read end of its pipe."""
    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(
        target=feeder_main, args=(send, spec), name="numagate-inventory", daemon=True
    )
    proc.start()
    send.close()
    return proc, receive
