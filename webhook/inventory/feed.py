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
denies once stale), as with a watch that is down.
"""

from __future__ import annotations

import asyncio
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
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from core.feasibility.delta import SnapshotEditor
from core.feasibility.snapshot import Snapshot
from core.inventory.incremental import IncrementalInventory, with_available
from core.model import NodeTopology
from webhook.heap import limit_malloc_arenas, release_free_heap
from webhook.inventory.file_build import die_with_parent
from webhook.inventory.state import GC_YOUNG_THRESHOLD, InventoryState
from webhook.inventory.updates import (
    Queued,
    apply_events,
    build_whole,
    drain_unbuilt,
    install_update,
    queue_object,
    reflector_sync,
    relist_difference,
)
from webhook.logs import get_logger
from webhook.metrics import WebhookMetrics

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
# A restarted inventory process waits this long, doubling per failure in a row.
RESTART_INITIAL = 1.0
RESTART_MAX = 30.0
# How long the reader waits for a process that closed its pipe to exit (its exit code).
EXIT_WAIT_SECONDS = 2.0


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


# ---------------------------------------------------------------------- worker


class Diverged(Exception):
    """A usage delta for a node the worker does not hold as the process does."""


class FedInventory:
    """In the worker: the state kept current from an inventory process's messages."""

    def __init__(
        self,
        state: InventoryState,
        loop: asyncio.AbstractEventLoop,
        spec: FeederSpec,
        *,
        metrics: WebhookMetrics | None = None,
        start: Callable[[FeederSpec], tuple[BaseProcess, Connection]] = start_feeder,
    ) -> None:
        self.state = state
        self.spec = spec
        self.metrics = metrics
        self.editor: SnapshotEditor | None = None
        self.status: Status | None = None  # of the process whose Whole is served
        self._loop = loop
        self._start = start
        self._proc: BaseProcess | None = None
        self._conn: Connection | None = None
        self._fresh = True  # the current process has not sent its Whole yet
        self._pending: deque[Whole | Batch] = deque()
        self._busy = False
        self._stopping = False
        self._errors: tuple[str, ...] = ()
        self._restart_delay = RESTART_INITIAL
        self.full_builds = 0
        self.restarts = 0

    # Readiness and staleness, as LiveSource gives them in-process
    @property
    def synced(self) -> bool:
        return self.status is not None and self.status.synced and self.editor is not None

    @property
    def last_sync(self) -> float | None:
        return None if self.status is None else self.status.last_sync

    def sync(self) -> tuple[tuple[str, float | None], ...]:
        return () if self.status is None else self.status.sync

    def lag(self, now: float) -> float:
        """Age of the oldest event not yet visible: queued here, or in the process."""
        times = [e[0] for m in self._pending for e in m.events[:1]]
        if self.status is not None and self.status.oldest is not None:
            times.append(self.status.oldest)
        return max(0.0, now - min(times)) if times else 0.0

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    # The process
    def start(self) -> None:
        self._proc, self._conn = self._start(self.spec)
        self._fresh = True
        threading.Thread(
            target=self._read, args=(self._conn, self._proc), name="inventory-feed", daemon=True
        ).start()
        log.info("inventory process started", extra={"pid": self._proc.pid})

    def stop(self) -> None:
        self._stopping = True
        proc = self._proc
        if proc is not None:
            proc.terminate()
            proc.join(2.0)
            if proc.is_alive():
                proc.kill()
                proc.join(2.0)
        if self._conn is not None:
            self._conn.close()

    def restart(self, why: str) -> None:
        """Stop the current process and start another (its Whole replaces the view)."""
        proc = self._proc
        log.warning(
            "inventory process restarted", extra={"reason": why, "pid": proc.pid if proc else None}
        )
        self._proc = None
        if proc is not None:
            proc.kill()  # its reader sees the end of the pipe and reports nothing more
        self._pending.clear()
        self.restarts += 1
        if self.metrics is not None:
            self.metrics.inventory_updates.process_restarts.inc()
        self._loop.call_later(self._restart_delay, self._restart_now)
        self._restart_delay = min(RESTART_MAX, self._restart_delay * 2)

    def _restart_now(self) -> None:
        if not self._stopping:
            self.start()

    def _read(self, conn: Connection, proc: BaseProcess) -> None:
        """Reader thread: one message per call of ``_receive`` on the loop (waiting in
        ``recv_bytes`` releases the GIL; messages are small but the first)."""
        try:
            while True:
                message = pickle.loads(conn.recv_bytes())
                self._loop.call_soon_threadsafe(self._receive, proc, message)
        except (EOFError, OSError):
            pass
        except RuntimeError:
            return  # the loop is closed: shutting down
        # It has closed the pipe: exiting, or gone. Reaped here, off the loop, so that the
        # restart's reason has its exit code (50 ms on the loop were not always enough
        # for the interpreter's exit on a busy machine).
        proc.join(EXIT_WAIT_SECONDS)
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._lost, proc)

    def _lost(self, proc: BaseProcess) -> None:
        if self._stopping or proc is not self._proc:
            return  # stopped, or restarted on purpose
        self.restart(f"exited with code {proc.exitcode}")

    # Messages, in order, on the event loop
    def _receive(self, proc: BaseProcess, message: Whole | Batch) -> None:
        if proc is self._proc:  # not from a process stopped since
            self.accept(message)

    def accept(self, message: Whole | Batch) -> None:
        """Apply a message of the current process (in the order sent; on the event loop).
        A restarted process's Batches before its Whole carry only its status: the last
        process's stands until then."""
        if isinstance(message, Batch) and self._fresh:
            return
        self._pending.append(message)
        if not self._busy:
            self._next()

    @property
    def idle(self) -> bool:
        """Every message received is applied (none waits for a build in a thread)."""
        return not self._busy and not self._pending

    def _next(self) -> None:
        while self._pending and not self._busy:
            message = self._pending.popleft()
            try:
                if isinstance(message, Whole):
                    self._whole(message)
                else:
                    self._batch(message)
            except Diverged as exc:
                self.restart(f"delta for a node not held: {exc}")
                return

    def _whole(self, message: Whole) -> None:
        started = time.monotonic()
        snapshot = message.snapshot
        if self.editor is not None:  # generations only grow (core/feasibility/packing.py)
            snapshot = replace(snapshot, generation=self.editor.snapshot.generation + 1)
        self.editor = SnapshotEditor(snapshot, readers=self.state.readers, reserve=True)
        self._fresh = False
        self._restart_delay = RESTART_INITIAL
        self.status = message.status
        self._errors = message.errors
        self.full_builds += 1
        if self.metrics is not None:
            self.metrics.inventory_updates.rebuilt(message.seconds)
        self.state.before_batch()
        install_update(self.state, snapshot, self._errors, message.events, started, self.metrics)

    def _batch(self, message: Batch) -> None:
        self.status = message.status
        if message.errors is not None:
            self._errors = message.errors
        if not (message.usage or message.records or message.errors is not None):
            if message.events and self.metrics is not None:  # changed nothing; counted
                self.metrics.inventory_updates.record(message.events, time.monotonic(), 0.0)
            return
        started = time.monotonic()
        editor = self.editor
        assert editor is not None  # a Batch after the Whole (``_receive``)
        self.state.before_batch()
        snap = editor.snapshot
        index, nodes = snap.name_index, snap.nodes
        changes: dict[str, NodeTopology | None] = {}
        for name, free in message.usage:
            i = index.get(name)
            if i is None or len(free) != len(nodes[i].zones):
                raise Diverged(name)
            changes[name] = with_available(nodes[i], free)
        changes.update(message.records)
        if editor.fits(changes):
            snapshot = editor.apply(changes)
            install_update(
                self.state, snapshot, self._errors, message.events, started, self.metrics
            )
            return
        # A resource new to the packed table: the snapshot is built whole, in a thread;
        # later messages wait for it.
        self._busy = True
        task = self._loop.create_task(asyncio.to_thread(editor.apply, changes))
        task.add_done_callback(lambda t: self._rebuilt(t, message, started))

    def _rebuilt(self, task: asyncio.Future[Snapshot], message: Batch, started: float) -> None:
        self._busy = False
        try:
            snapshot = task.result()
        except Exception as exc:  # the last good view stays; a new process starts afresh
            log.exception("inventory build failed")
            self.state.record_failure(f"cluster inventory: {exc}")
            self.restart("the worker's build failed")
            return
        self.full_builds += 1
        if self.metrics is not None:
            self.metrics.inventory_updates.rebuilt(time.monotonic() - started)
        install_update(self.state, snapshot, self._errors, message.events, started, self.metrics)
        self._next()
