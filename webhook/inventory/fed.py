"""The worker's end of the inventory process (webhook/inventory/feed.py): its messages,
read in a thread and applied on the event loop in the order sent; a lost connection or a
``Diverged`` delta makes it connect again, for a new Whole (docs/inventory.md, "The
inventory process")."""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from multiprocessing.connection import Client, Connection
from typing import Any

from core.snapshot.delta import SnapshotEditor, UnknownNode
from core.snapshot.snapshot import Snapshot
from webhook.heap import release_free_heap, settle_records
from webhook.inventory.feed import Batch, Status, Whole, decode, load
from webhook.inventory.state import InventoryState, InventoryView
from webhook.logs import get_logger
from webhook.metrics import WebhookMetrics

log = get_logger("inventory")
SOURCE = "cluster"

# A connection that fails (the process is starting, or restarting) is tried again after
# this long, doubling to RECONNECT_MAX (a refused connect costs microseconds; a worker
# that waits long joins after the first build, which then builds a Whole for it again).
RECONNECT_INITIAL = 0.1
RECONNECT_MAX = 0.5


class Diverged(Exception):
    """A usage delta for a node the worker does not hold as the process does."""


# Bytes of a message read from the socket at a time while it is unpickled.
READ_CHUNK = 1 << 20


class _Payload(io.RawIOBase):
    """The next ``size`` bytes of the socket ``fd``: EOFError if it ends sooner."""

    def __init__(self, fd: int, size: int) -> None:
        self.fd, self.left = fd, size

    def readable(self) -> bool:
        return True

    def readinto(self, buf: Any) -> int:
        if not self.left:
            return 0
        data = os.read(self.fd, min(len(buf), self.left, READ_CHUNK))
        if not data:
            raise EOFError("inventory process connection ended inside a message")
        n = len(data)
        buf[:n] = data
        self.left -= n
        return n


def _exactly(fd: int, n: int) -> bytearray:
    out, payload = bytearray(n), _Payload(fd, n)
    while payload.left:
        payload.readinto(memoryview(out)[n - payload.left :])
    return out


def read_message(conn: Connection) -> Whole | Batch:
    """The next message of ``conn`` (multiprocessing's framing: a 4-byte length, or -1 and
    an 8-byte one), unpickled as its bytes arrive (feed.py ``load``): a Whole's pickle is
    never held whole beside the objects made from it, and the process's send to the next
    worker waits until this one has nearly read it, so two workers' reads do not overlap
    (docs/inventory.md, "The replica at ready")."""
    fd = conn.fileno()
    (size,) = struct.unpack("!i", _exactly(fd, 4))
    if size == -1:
        (size,) = struct.unpack("!Q", _exactly(fd, 8))
    if size <= READ_CHUNK:  # a Batch: read whole, as recv_bytes did
        return decode(_exactly(fd, size))
    payload = _Payload(fd, size)
    message = load(io.BufferedReader(payload, READ_CHUNK))
    # What the unpickler kept until its end (the records' pickled states, ~45 MiB at
    # 100,000 nodes) goes back to the system now, not after the editor and the install.
    release_free_heap()
    if payload.left:  # never from feed.py: one pickle per message
        raise OSError("inventory message longer than its pickle")
    return message


class FedInventory:
    """In the worker: the state kept current from the inventory process's messages."""

    def __init__(
        self,
        state: InventoryState,
        loop: asyncio.AbstractEventLoop,
        address: str,
        *,
        metrics: WebhookMetrics | None = None,
    ) -> None:
        self.state = state
        self.address = address
        self.metrics = metrics
        self.editor: SnapshotEditor | None = None
        self.status: Status | None = None  # of the connection whose Whole is served
        self._loop = loop
        self._conn: Connection | None = None  # the connection whose messages are applied
        self._fresh = True  # the current connection has not sent its Whole yet
        self._delivered = False  # the current connection has sent a Whole
        self._pending: deque[Whole | Batch] = deque()
        self._busy = False
        self._stopping = threading.Event()
        self._errors: tuple[str, ...] = ()
        self.full_builds = 0
        self.losses = 0  # connections lost (the process exited, or a Diverged delta)

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

    # The connection
    def start(self) -> None:
        """Connect, and from now on ``state`` is live: fresh and ready as the process says."""
        self.state.live = True
        self.state.last_sync = lambda: self.last_sync
        self.state.synced = lambda: self.synced
        threading.Thread(target=self._read, name="inventory-feed", daemon=True).start()

    def stop(self) -> None:
        self._stopping.set()
        self._hang_up()

    def _hang_up(self) -> None:
        """End the current connection: the reader sees its end and connects again."""
        conn = self._conn
        if conn is not None:
            with contextlib.suppress(OSError), socket.socket(fileno=os.dup(conn.fileno())) as end:
                end.shutdown(socket.SHUT_RDWR)  # the socket itself, not just this descriptor

    def _read(self) -> None:
        """Reader thread: connect, then one message per call of ``_receive`` on the loop
        (waiting in ``recv_bytes`` releases the GIL); again when the connection ends."""
        delay = RECONNECT_INITIAL
        while not self._stopping.is_set():
            try:
                conn = Client(self.address, family="AF_UNIX")
            except OSError:  # not listening yet, or restarting
                self._stopping.wait(delay)
                delay = min(RECONNECT_MAX, delay * 2)
                continue
            delay = RECONNECT_INITIAL
            try:
                self._loop.call_soon_threadsafe(self._connected, conn)
                while True:  # no name keeps a message alive while the next is awaited
                    self._loop.call_soon_threadsafe(self._receive, conn, read_message(conn))
            except (EOFError, OSError):
                pass
            except RuntimeError:
                return  # the loop is closed: shutting down
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._lost, conn)

    def _connected(self, conn: Connection) -> None:
        self._conn = conn
        self._fresh = True
        self._delivered = False
        self._pending.clear()

    def _lost(self, conn: Connection) -> None:
        with contextlib.suppress(OSError):
            conn.close()
        if self._stopping.is_set() or conn is not self._conn:
            return
        self._conn = None
        if not self._delivered:
            return  # accepted by a process on its way out, or before its first build
        self.losses += 1
        if self.metrics is not None:
            self.metrics.inventory_updates.process_restarts.inc()
        log.warning("inventory process connection lost; connecting again")

    # Messages, in order, on the event loop
    def _receive(self, conn: Connection, message: Whole | Batch) -> None:
        if conn is self._conn:  # not from a connection ended since
            self.accept(message)

    def accept(self, message: Whole | Batch) -> None:
        """Apply a message of the current process (in the order sent; on the event loop).
        A connection's Batches before its Whole are dropped: the last status stands until
        then."""
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
                    # The Whole's snapshot dies with this callback's handle: after that,
                    # the records out of the collector's reach and the freed pages back to
                    # the system (docs/inventory.md, "A worker's heap").
                    self._loop.call_soon(settle_records, self.full_builds > 1)
                else:
                    self._batch(message)
            except Diverged as exc:
                log.warning("inventory delta for a node not held", extra={"node": str(exc)})
                self._pending.clear()
                self._fresh = True  # nothing more until the next connection's Whole
                self._hang_up()
                return

    def _whole(self, message: Whole) -> None:
        started = time.monotonic()
        self.editor = SnapshotEditor(message.snapshot, reserve=True)
        snapshot = self.editor.snapshot  # over the reserved arrays: the Whole's are freed
        self._fresh = False
        self._delivered = True
        self.status = message.status
        self._errors = message.errors
        self.full_builds += 1
        if self.metrics is not None:
            self.metrics.inventory_updates.rebuilt(message.seconds)
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
        try:
            changes, usage = editor.split_usage(message.usage)
        except UnknownNode as exc:
            raise Diverged(exc.args[0]) from None
        changes.update(message.records)
        if editor.fits(changes):
            snapshot = editor.apply(changes, usage)
            install_update(
                self.state, snapshot, self._errors, message.events, started, self.metrics
            )
            return
        # A resource new to the packed table: the snapshot is built whole, in a thread;
        # later messages wait for it.
        self._busy = True
        task = self._loop.create_task(asyncio.to_thread(editor.apply, changes, usage))
        task.add_done_callback(lambda t: self._rebuilt(t, message, started))

    def _rebuilt(self, task: asyncio.Future[Snapshot], message: Batch, started: float) -> None:
        self._busy = False
        try:
            snapshot = task.result()
        except Exception as exc:  # the last good view stays; a new connection starts afresh
            log.exception("inventory build failed")
            self.state.record_failure(f"cluster inventory: {exc}")
            self._fresh = True
            self._hang_up()  # the next connection's Whole starts afresh
            return
        self.full_builds += 1
        if self.metrics is not None:
            self.metrics.inventory_updates.rebuilt(time.monotonic() - started)
        install_update(self.state, snapshot, self._errors, message.events, started, self.metrics)
        self._next()


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
