"""The inventory process's end: one process per replica lists and watches, parses and
merges, and sends every worker a ``Whole`` then a ``Batch`` per round, each with its
``Status`` (docs/inventory.md, "The inventory process"). The worker's end is
webhook/inventory/fed.py; the process's start and restarts webhook/inventory/owner.py."""

from __future__ import annotations

import contextlib
import copyreg
import io
import pickle
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from core.inventory.incremental import IncrementalInventory, ObjectKey, parse_object
from core.model import NodeTopology
from core.snapshot.delta import reserved_shapes
from core.snapshot.packing import pickled_with_room
from core.snapshot.snapshot import Packed, Snapshot
from webhook.heap import release_free_heap
from webhook.inventory.objects import fingerprint
from webhook.logs import get_logger

log = get_logger("inventory")

Event = tuple[float, str, str]  # (monotonic time received, resource, event type)
# An Event, then the object's key and its parsed parts (None: deleted).
Queued = tuple[float, str, str, ObjectKey, Any]
# At most this many events per Batch: a worker applies one Batch in one go on its event
# loop (~60 us per event at 100,000 nodes), so a backlog (a relist) arrives as batches
# with the worker's other work in between.
MAX_BATCH_EVENTS = 256
HEARTBEAT_SECONDS = 1.0


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


class Peer(Protocol):
    """A worker's end as the process sees it (a multiprocessing Connection)."""

    def send_bytes(self, buf: bytes) -> None: ...

    def close(self) -> None: ...


class Fanout:
    """The workers connected to the inventory process. Those that joined since the last
    round get a Whole first (``take_joined``); every message then goes to all of them. A
    worker whose socket fails is dropped: it reconnects, and starts with a Whole again."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._joined: list[Peer] = []
        self._served: list[Peer] = []
        self.wake: Callable[[], None] = lambda: None

    def join(self, peer: Peer) -> None:
        """A worker connected (the accepting thread)."""
        with self._lock:
            self._joined.append(peer)
        self.wake()

    def take_joined(self) -> list[Peer]:
        with self._lock:
            joined, self._joined = self._joined, []
        return joined

    def send(self, data: bytes, to: list[Peer] | None = None) -> None:
        """``data`` to ``to`` (then served from now on), or to every worker served."""
        if to is not None:
            self._served.extend(to)
        for peer in list(self._served if to is None else to):
            try:
                peer.send_bytes(data)
            except OSError:  # gone: it reconnects, or its replica stops
                self._served.remove(peer)
                with contextlib.suppress(OSError):
                    peer.close()


class Feed:
    """The LiveSource listener of the inventory process, and its loop: every ``window``
    it merges the queued events and sends what changed to the workers in ``fanout``."""

    def __init__(
        self,
        fanout: Fanout,
        *,
        window: float = 0.05,
        heartbeat: float = HEARTBEAT_SECONDS,
        max_batch: int = MAX_BATCH_EVENTS,
    ) -> None:
        self.fanout = fanout
        self.window = window
        self.heartbeat = heartbeat
        self.max_batch = max_batch
        self.inventory = IncrementalInventory()
        self.synced: Callable[[], bool] = lambda: True
        self.last_sync: Callable[[], float | None] = lambda: None
        self.sync: Callable[[], Sequence[tuple[str, float | None]]] = lambda: ()
        self.built = False
        self._queue: deque[Queued] = deque()
        self._unbuilt: list[Queued] = []  # events taken in before the first build
        self._wake = threading.Event()
        fanout.wake = self._wake.set

    # Listener (reflector threads): each object parsed there, stamped and queued
    def on_event(self, reflector: Any, kind: str, key: Any, item: dict[str, Any]) -> None:
        self._queue.append(self._queued(reflector, kind, key, item, time.monotonic()))
        self._wake.set()

    def on_replaced(
        self, reflector: Any, old: Mapping[Any, Any], new: Mapping[Any, Any], changed: bool
    ) -> None:
        """What a (re)list changed against what was held (by fingerprint): a relist of an
        unchanged cluster costs a comparison per object."""
        now = time.monotonic()
        queued = [
            self._queued(reflector, "ADDED", key, item, now)
            for key, item in new.items()
            if old.get(key) != fingerprint(item)
        ]
        gone = old.keys() - new.keys()
        queued.extend(self._queued(reflector, "DELETED", key, {}, now) for key in gone)
        self._queue.extend(queued)
        self._wake.set()

    def on_touch(self) -> None:
        self._wake.set()

    def _queued(
        self, reflector: Any, kind: str, key: Any, item: dict[str, Any], now: float
    ) -> Queued:
        resource = reflector.resource
        parsed = None if kind == "DELETED" else parse_object(item, self.inventory.units)
        return (now, resource.name, kind, (resource.kind, *key), parsed)

    # The loop
    def run(self, stop: threading.Event | None = None) -> None:
        """Until ``stop`` is set (the process: until it is killed)."""
        while stop is None or not stop.is_set():
            if self._wake.wait(self.heartbeat):
                time.sleep(self.window)  # gather a window of events
            self._wake.clear()
            self.step()

    def step(self) -> None:
        """Send what is ready: the first build once every type listed, else the queued
        events in batches of at most ``max_batch`` (a status alone when none), then a
        Whole to each worker that joined since."""
        if not self.built:
            if self.synced():
                self._send_whole()
            else:
                self._drain_unbuilt()
            return
        while True:
            self._send_batch()
            if not self._queue:
                break
        joined = self.fanout.take_joined()
        if joined:
            self._welcome(joined)

    def _apply(self, limit: int | None = None) -> list[Queued]:
        """Take up to ``limit`` events off the queue into the inventory (not flushed); the
        events taken. Only the last state of each object matters (events of different
        objects commute: the result is the build of the final objects)."""
        queue, drained = self._queue, []
        while queue and (limit is None or len(drained) < limit):
            drained.append(queue.popleft())
        last = {item[3]: item for item in drained}
        for item in last.values() if len(last) < len(drained) else drained:
            if item[4] is None:
                self.inventory.delete(item[3])
            else:
                self.inventory.set(item[4])
        return drained

    def _drain_unbuilt(self) -> None:
        """Before the first build, while the lists come in: the queued objects into the
        inventory, where their maps are shared as they go in; their events (without the
        objects) kept for the first build to report. Left queued until the first build,
        every object's own copies were alive at once: 25 MiB of RSS at 10,000 nodes
        (docs/inventory.md, "Memory")."""
        self._unbuilt.extend((*item[:4], None) for item in self._apply())

    def _snapshot(self) -> Snapshot:
        records = self.inventory.records
        return Snapshot.build([records[k] for k in sorted(records)])

    def _status(self) -> Status:
        queue = self._queue  # drained only on this thread: no race with the emptiness test
        oldest = queue[0][0] if queue else None
        return Status(self.synced(), self.last_sync(), tuple(self.sync()), oldest)

    def _send(self, message: Whole | Batch, to: list[Peer] | None = None) -> None:
        self.fanout.send(encode(message), to)

    def _send_whole(self) -> None:
        started = time.monotonic()
        drained = [*self._unbuilt, *self._apply()]
        self._unbuilt = []
        self.inventory.flush()
        snapshot = self._snapshot()
        seconds = time.monotonic() - started
        log.info(
            "inventory built whole",
            extra={
                "reason": "first build",
                "nodes": len(snapshot.nodes),
                "seconds": round(seconds, 3),
            },
        )
        self.inventory.share_usage(False)  # from now on, events one by one
        errors = self.inventory.errors()
        message = Whole(snapshot, errors, _events(drained), seconds, self._status())
        data = encode(message)
        # Only the bytes are needed now: the snapshot's own arrays, the lists' pages and the
        # build's garbage go back to the system before the workers read the Whole, not after
        # (the replica's startup peak, docs/inventory.md "The startup peak").
        del snapshot, message
        release_free_heap()
        self.fanout.send(data, self.fanout.take_joined())
        del data
        release_free_heap()  # the bytes and the pickling's scraps, once the workers have them
        self.built = True

    def _welcome(self, joined: list[Peer]) -> None:
        """A Whole of the records held now (every queued event sent before it)."""
        started = time.monotonic()
        snapshot = self._snapshot()
        seconds = time.monotonic() - started
        whole = Whole(snapshot, self.inventory.errors(), (), seconds, self._status())
        self._send(whole, joined)
        nodes = len(snapshot.nodes)
        log.info("worker joined", extra={"nodes": nodes, "seconds": round(seconds, 3)})

    def _send_batch(self) -> None:
        inventory = self.inventory
        drained = self._apply(self.max_batch)
        changes = inventory.flush()
        usage = tuple(
            (name, tuple(z.available for z in changes.pop(name).zones))  # type: ignore[union-attr]
            for name in inventory.usage_flushed
        )
        errors = inventory.errors() if inventory.errors_changed else None
        records = tuple(changes.items())
        self._send(Batch(usage, records, errors, _events(drained), self._status()))


def _events(drained: Sequence[Queued]) -> tuple[Event, ...]:
    """What the workers' metrics need of each event: received, resource, type."""
    return tuple((d[0], d[1], d[2]) for d in drained)


# The bytes of a message on the socket (docs/inventory.md, "The replica at ready"). A Batch
# is its pickle. A Whole is its pickle compressed as it is written (zlib level 1: 73 -> 9
# MiB at 100,000 nodes, 0.4 s), its packed arrays pickled with the room a worker's editor
# reserves: the process holds the small bytes until the last worker has them, and a
# worker unpickles as it decompresses and never holds the arrays twice.
CHUNK = 1 << 20
_PICKLE = pickle.PROTO  # how every pickle of protocol 2+ starts


def encode(message: Whole | Batch) -> bytes:
    if isinstance(message, Batch):
        return pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    shapes = reserved_shapes(len(message.snapshot.nodes))
    return deflated(message, {Packed: lambda p: pickled_with_room(p, shapes)})


def deflated(obj: Any, reducers: Mapping[type, Callable[[Any], Any]]) -> bytes:
    """``obj`` pickled (``reducers`` for their types) and compressed as it is written."""
    out, z = [], zlib.compressobj(1)
    pickler = pickle.Pickler(_Sink(lambda b: out.append(z.compress(b))), pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = {**copyreg.dispatch_table, **reducers}
    pickler.dump(obj)
    out.append(z.flush())
    return b"".join(out)


def decode(data: bytes | bytearray) -> Whole | Batch:
    """The message of ``encode``'s bytes."""
    if data[:1] == _PICKLE:
        return pickle.loads(data)  # type: ignore[no-any-return]
    return load(io.BufferedReader(io.BytesIO(data)))


def load(stream: io.BufferedReader) -> Whole | Batch:
    """The message of ``encode``'s bytes read from ``stream`` (to its end) as they come:
    a Whole unpickled as it is decompressed, never its whole pickle in memory."""
    if stream.peek(1)[:1] == _PICKLE:
        return pickle.load(stream)  # type: ignore[no-any-return]
    inflated = io.BufferedReader(_Inflated(stream.read), CHUNK)
    message = pickle.load(inflated)
    if inflated.read(1):  # never from ``encode``: one pickle per stream
        raise pickle.UnpicklingError("inventory message longer than its pickle")
    return message  # type: ignore[no-any-return]


class _Sink:
    def __init__(self, write: Callable[[Any], None]) -> None:
        self.write = write


class _Inflated(io.RawIOBase):
    """The decompressed bytes of a zlib stream, made a chunk at a time as they are read
    from ``read`` (64 KiB of it at a time: the sender's pace is the reader's)."""

    def __init__(self, read: Callable[[int], bytes]) -> None:
        self.z, self.take, self.out = zlib.decompressobj(), read, memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buf: Any) -> int:
        while not self.out and not self.z.eof:
            tail = self.z.unconsumed_tail or self.take(1 << 16)
            if not tail:
                raise EOFError("inventory message cut short")
            self.out = memoryview(self.z.decompress(tail, CHUNK))
        n = min(len(buf), len(self.out))
        buf[:n], self.out = self.out[:n], self.out[n:]
        return n
