"""The packed arrays of an incrementally edited snapshot, grown in place.

Copying the packed arrays per batch of watch events cost a third of the event loop at
10,000 nodes under churn (py-spy): every event makes a new shape, so the arrays are as
large as the cluster, and a copy per batch is O(N). A :class:`PackedStore` keeps the
arrays with spare capacity (x1.5 when full) and writes a new shape past the end of
what any earlier snapshot uses: snapshots share the arrays, each reading only its own
``n_shapes``/``zone_count`` prefix, so an append is invisible to them.

A freed slot (a shape no node has any more) is rewritten in place only when no reader
can still use it: the caller registers every read of a snapshot that may overlap a
later batch (:class:`Readers`: the server's kernel threads, webhook/review/feasibility.py),
and a slot freed while generation g was current waits until no reader of g or older is
left. Readers on the writer's own thread (the event loop's inline evaluations) never
overlap a batch and need no entry. Without ``readers`` the arrays are copied before an
in-place write, so every earlier snapshot stays exactly as it was.
"""

from __future__ import annotations

import threading
from array import array
from collections import deque
from collections.abc import Sequence

from core.feasibility.codes import SHAPE_FIELDS
from core.feasibility.rows import ShapeRows
from core.feasibility.snapshot import Packed, packed_from

_FIELDS = ("shape_info", "zones", "node_alloc", "unaligned", "dist", "states", "idle_states")


class Readers:
    """The snapshot generations read right now off the writer's thread.

    ``enter`` (on the writer's thread, when the snapshot is taken: no batch can run in
    between) returns a :class:`Reading`; the reading thread calls ``start`` before it
    reads and ``done`` after, and the writer's side ``drop`` when it stops waiting (a
    reading that never started is released then; one that started releases itself).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count: dict[int, int] = {}

    def enter(self, generation: int) -> Reading:
        with self._lock:
            self._count[generation] = self._count.get(generation, 0) + 1
        return Reading(self, generation)

    def _release(self, generation: int) -> None:
        with self._lock:
            left = self._count[generation] - 1
            if left:
                self._count[generation] = left
            else:
                del self._count[generation]

    def oldest(self) -> int | None:
        """The oldest generation still read, None when none is."""
        with self._lock:
            return min(self._count) if self._count else None


class Reading:
    """One registered read (``Readers.enter``): waiting, then running, then released."""

    def __init__(self, readers: Readers, generation: int) -> None:
        self.readers = readers
        self.generation = generation
        self._state = "waiting"
        self._lock = threading.Lock()

    def start(self) -> bool:
        """Called by the reader before it reads: False when dropped meanwhile (then it
        must not read: the snapshot's freed slots may have been rewritten)."""
        with self._lock:
            if self._state != "waiting":
                return False
            self._state = "running"
            return True

    def done(self) -> None:
        self._finish("running")

    def drop(self) -> None:
        """The writer's side stops waiting: a reading that has not started never will."""
        self._finish("waiting")

    def _finish(self, expected: str) -> None:
        with self._lock:
            if self._state != expected:
                return
            self._state = "released"
        self.readers._release(self.generation)


class PackedStore:
    """Owns the arrays behind a lineage of Packed tables (one resource table)."""

    def __init__(self, packed: Packed, *, readers: Readers | None = None) -> None:
        self.base = packed
        self.readers = readers
        self.generation = 0  # of the newest snapshot a freed slot may still be read by
        self.n_shapes = packed.n_shapes
        self.zone_count = packed.zone_count
        self.dist_len = packed.n_shapes and _dist_end(packed)
        # The arrays of ``packed`` are shared until the first write needs room or a copy.
        self.arrays = {name: getattr(packed, name) for name in _FIELDS}
        self.free: dict[int, deque[tuple[int, int]]] = {}  # zones -> (slot, generation)
        self._copied = False  # this batch already works on fresh copies

    # -- slots -----------------------------------------------------------------------------

    def release(self, s: int, n: int) -> None:
        """Slot s (a shape of n NUMA zones) is free from now on."""
        self.free.setdefault(n, deque()).append((s, self.generation))

    def take(self, n: int) -> int | None:
        """A free slot for a shape of n zones whose readers are gone, if any."""
        slots = self.free.get(n)
        if not slots:
            return None
        if self.readers is not None:
            oldest = self.readers.oldest()
            if oldest is not None and oldest <= slots[0][1]:
                return None
        return slots.popleft()[0]

    # -- writes ----------------------------------------------------------------------------

    def begin(self, generation: int) -> None:
        """A new batch, made while snapshot ``generation`` is the newest: its first
        in-place rewrite without ``readers`` copies the arrays."""
        self.generation = generation
        self._copied = False

    def write(self, s: int, rows: ShapeRows) -> None:
        """Rows of the shape in slot s (a slot that exists, of the same zone count)."""
        if self.readers is None and not self._copied:
            self.arrays = {k: array("q", v) for k, v in self.arrays.items()}
            self._copied = True
        a, nres = self.arrays, self.base.n_res
        info = a["shape_info"]
        base = s * SHAPE_FIELDS
        zoff, doff = info[base + 1], info[base + 2]
        info[base + 3 : base + SHAPE_FIELDS] = array("q", rows.info)
        a["zones"][zoff * nres * 3 : (zoff + rows.n) * nres * 3] = array("q", rows.zones)
        a["dist"][doff : doff + rows.n * rows.n] = array("q", rows.dist)
        a["states"][zoff : zoff + rows.n] = array("q", rows.states)
        a["node_alloc"][s * nres : (s + 1) * nres] = array("q", rows.node_alloc)
        a["unaligned"][s * nres : (s + 1) * nres] = array("q", rows.unaligned)

    def rewritable(self) -> bool:
        """A live slot may be rewritten in place now: no reader off the writer's thread
        holds any snapshot (readers on its thread never overlap a batch)."""
        return self.readers is not None and self.readers.oldest() is None

    def write_usage(self, s: int, available: Sequence[array[int]], states: array[int]) -> None:
        """Slot s's usage (``snapshot.usage_values``) written over its own rows. Only when
        :meth:`rewritable`: every snapshot sharing the arrays sees it."""
        a, width = self.arrays, self.base.n_res * 3
        info = a["shape_info"]
        base = s * SHAPE_FIELDS
        n, zoff = info[base], info[base + 1]
        zones = a["zones"]
        for pos, row in enumerate(available):
            start = (zoff + pos) * width
            zones[start + 2 : start + width : 3] = row
        a["states"][zoff : zoff + n] = states

    def append(self, rows: ShapeRows) -> int:
        """A new slot past every snapshot's prefix, holding ``rows``."""
        s, n, nres = self.n_shapes, rows.n, self.base.n_res
        info = [n, self.zone_count, self.dist_len, *rows.info]
        self._put("shape_info", s * SHAPE_FIELDS, info)
        self._put("zones", self.zone_count * nres * 3, rows.zones)
        self._put("dist", self.dist_len, rows.dist)
        self._put("states", self.zone_count, rows.states)
        self._put("idle_states", self.zone_count, [0] * n)
        self._put("node_alloc", s * nres, rows.node_alloc)
        self._put("unaligned", s * nres, rows.unaligned)
        self.n_shapes += 1
        self.zone_count += n
        self.dist_len += n * n
        return s

    def reserve(self, shapes: int) -> None:
        """Room for ``shapes`` slots, each sized as the average shape so far: the arrays
        grow once, now, instead of x1.5 at a time as churn makes shapes. Each growth
        copies an array on the writer's thread: at 100,000 nodes the zones array's took
        40-190 ms, the p99 of the first minute of churn (docs/inventory.md)."""
        if not self.n_shapes:
            return  # no shape to size them by
        for name in _FIELDS:
            used = self._used(name)
            want = int(used / self.n_shapes * shapes) + 1
            if want > len(self.arrays[name]):
                self._grow(name, want, used)

    def _used(self, name: str) -> int:
        """How much of array ``name`` the slots so far use."""
        nres = self.base.n_res
        return {
            "shape_info": self.n_shapes * SHAPE_FIELDS,
            "zones": self.zone_count * nres * 3,
            "node_alloc": self.n_shapes * nres,
            "unaligned": self.n_shapes * nres,
            "dist": self.dist_len,
            "states": self.zone_count,
            "idle_states": self.zone_count,
        }[name]

    def _grow(self, name: str, size: int, used: int) -> array[int]:
        """A new, larger array holding the first ``used`` values (earlier snapshots keep
        the old one): zero pages from ``bytes`` and one memcpy, no temporary slice."""
        grown = array("q", bytes(8 * size))
        memoryview(grown)[:used] = memoryview(self.arrays[name])[:used]
        self.arrays[name] = grown
        return grown

    def _put(self, name: str, at: int, values: object) -> None:
        values = values if isinstance(values, array) else array("q", values)  # type: ignore[arg-type]
        arr = self.arrays[name]
        end = at + len(values)
        if end > len(arr):  # no room: a larger copy (amortized O(1) per value)
            arr = self._grow(name, max(end, len(arr) * 3 // 2, 64), at)
        arr[at:end] = values

    def packed(self) -> Packed:
        """The table as it stands (sharing the arrays; its counts bound what it reads)."""
        a = self.arrays
        p = self.base
        return packed_from(
            p.res_names,
            self.n_shapes,
            self.zone_count,
            a["shape_info"],
            a["zones"],
            a["node_alloc"],
            a["unaligned"],
            a["dist"],
            a["states"],
            like=p,
            idle_states=a["idle_states"],
        )


def _dist_end(p: Packed) -> int:
    """Where the last shape's distance matrix ends (shapes are stored in order)."""
    base = (p.n_shapes - 1) * SHAPE_FIELDS
    n, doff = p.shape_info[base], p.shape_info[base + 2]
    return doff + n * n
