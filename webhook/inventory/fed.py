"""The worker's end of the inventory process (webhook/inventory/feed.py, the process's
end and the messages): it starts the process, reads its messages in a thread, applies
them on the event loop in the order sent, and restarts the process when it exits or
its deltas name a record the worker does not hold (``Diverged``)."""

from __future__ import annotations

import asyncio
import contextlib
import pickle
import threading
import time
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

from core.feasibility.delta import SnapshotEditor
from core.feasibility.snapshot import Snapshot
from core.inventory.incremental import with_available
from core.model import NodeTopology
from webhook.inventory.feed import Batch, FeederSpec, Status, Whole, start_feeder
from webhook.inventory.state import InventoryState
from webhook.inventory.updates import install_update
from webhook.logs import get_logger
from webhook.metrics import WebhookMetrics

log = get_logger("inventory")

# A restarted inventory process waits this long, doubling per failure in a row.
RESTART_INITIAL = 1.0
RESTART_MAX = 30.0
# How long the reader waits for a process that closed its pipe to exit (its exit code).
EXIT_WAIT_SECONDS = 2.0


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
        self.editor = SnapshotEditor(snapshot, reserve=True)
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
