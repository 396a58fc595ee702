"""The packed arrays of an edited snapshot, copy-on-write: a new shape, or a shape's moved
usage, is written where no snapshot handed out reads (past the prefix each one reads, or a
slot or zone region freed before the last copy of the arrays). docs/inventory.md, "The
data flow", says why and what it costs.
"""

from __future__ import annotations

import sys
from array import array
from dataclasses import replace
from pickle import PickleBuffer
from typing import Any

from core.feasibility.codes import SHAPE_FIELDS, topology_size
from core.snapshot.rows import ShapeRows
from core.snapshot.snapshot import Packed

_FIELDS = ("shape_info", "zone_off", "topology", "available", "states")
# The topology blocks go with the slots: a new block comes only with a new slot (a shape
# of a new topology class), and blocks are never freed (a Whole starts afresh).
_SLOT_ARRAYS = frozenset({"shape_info", "zone_off", "topology"})
_ZONE_ARRAYS = frozenset({"available", "states"})
# A renewal copies the arrays at the same length when at least this share of the slots
# is free (their holes take the next shapes), else grows them x1.5.
_REUSE_SHARE = 4


class PackedStore:
    """Owns the arrays behind a lineage of Packed tables (one resource table)."""

    def __init__(self, packed: Packed) -> None:
        # The resource table only: holding ``packed`` itself kept its arrays (39 MiB at
        # 100,000 distinct shapes) alive for the editor's life once ``reserve`` or a
        # renewal had copied them (docs/inventory.md, "Where a worker's memory goes").
        self.base = replace(packed, **dict.fromkeys(_FIELDS, array("q")))
        self.n_shapes = packed.n_shapes
        self.zone_count = packed.zone_count
        self.topo_len = packed.topo_len
        # The arrays of ``packed`` are shared until the first write needs room.
        self.arrays = {name: getattr(packed, name) for name in _FIELDS}
        # Slot and region numbers in arrays, not lists of ints: under churn they are tens
        # of thousands, and the collector walked the lists (each int a cache miss).
        self.pending: dict[int, array[int]] = {}  # zones -> slots freed since the last copy
        self.free: dict[int, array[int]] = {}  # zones -> slots free in these arrays
        # Zone regions (offsets) of moved usage (move_usage) and of freed slots, freed and
        # free likewise: slots and regions are reused apart, each after a copy of its own
        # arrays only (_renew).
        self.regions_pending: dict[int, array[int]] = {}
        self.regions_free: dict[int, array[int]] = {}
        self.offsets_shared = True  # zone_off is read by a snapshot handed out (packed())
        self.renewals = 0  # copies of the arrays (growths included)
        self.moves = 0  # usage changes moved to a new zone region (move_usage)
        # Each array the last renewal replaced, kept so that the next renewal can copy
        # into it once no snapshot holds it any more (``_copy``).
        self.spare: dict[str, array[int]] = {}
        self.reused = 0  # arrays a renewal copied into a spare

    def release(self, s: int, n: int) -> None:
        """Slot s (a shape of n NUMA zones) and its zone region are free from now on
        (each reusable after a copy of its arrays)."""
        self.pending.setdefault(n, array("q")).append(s)
        zoff = self.arrays["zone_off"][s]
        self.regions_pending.setdefault(n, array("q")).append(zoff)

    def add(self, rows: ShapeRows) -> tuple[int, bool]:
        """A slot holding ``rows`` that no snapshot handed out reads; True when it is new
        (past every earlier slot), False when a freed one was reused."""
        for attempt in (0, 1):
            slots = self.free.get(rows.n)
            if slots or self._room(rows):
                s = slots.pop() if slots else self.n_shapes
                new = s == self.n_shapes
                self.n_shapes += int(new)
                # A region of its own (a reused slot's old one waits for a copy of the
                # zone arrays, release, which a copy of the slot arrays does not make).
                self.arrays["zone_off"][s] = self._region(rows.n)
                self._write(s, rows)
                return s, new
            if attempt == 0:
                self._renew(rows.n, slot=True)
        raise AssertionError("renewal made no room")  # pragma: no cover

    def move_usage(self, s: int, available: array[int], states: array[int]) -> None:
        """Live slot s with new usage (``rows.usage_values``): its free amounts and its
        states written to a region no snapshot handed out reads; the slot points there in
        a ``zone_off`` of this batch's own: the one per-shape array copied per batch
        (while it was a field of ``shape_info``, that copy, 10 MiB at 100,000 shapes, made
        a batch 3.8-4.0 ms of CPU against 2.3-2.5 without)."""
        a, nres = self.arrays, self.base.n_res
        n, zoff = a["shape_info"][s * SHAPE_FIELDS], a["zone_off"][s]
        new = self._region(n)
        a["available"][new * nres : (new + n) * nres] = available
        a["states"][new : new + n] = states
        if self.offsets_shared:  # one copy in one call (no zeroed array first: half the time)
            a["zone_off"] = array("q", a["zone_off"])
            self.offsets_shared = False
        a["zone_off"][s] = new
        self.regions_pending.setdefault(n, array("q")).append(zoff)
        self.moves += 1

    def _region(self, n: int) -> int:
        """The offset of n zones that no snapshot handed out reads."""
        for attempt in (0, 1):
            regions = self.regions_free.get(n)
            if regions:
                return regions.pop()
            end, a = self.zone_count + n, self.arrays
            if len(a["states"]) >= end and len(a["available"]) >= end * self.base.n_res:
                zoff = self.zone_count
                self.zone_count += n
                return zoff
            if attempt == 0:
                self._renew(n, slot=False)
        raise AssertionError("renewal made no room")  # pragma: no cover

    def _write(self, s: int, rows: ShapeRows) -> None:
        """Rows of the shape in slot s (free in these arrays, its zone region set), with
        its topology block written past the last one unless its class has it stored; the
        offset is recorded in ``rows``, which later shapes of the class copy (usage_rows)."""
        a, nres, n = self.arrays, self.base.n_res, rows.n
        if rows.topo_off < 0:
            rows.topo_off, self.topo_len = self.topo_len, self.topo_len + len(rows.topology)
            a["topology"][rows.topo_off : self.topo_len] = array("q", rows.topology)
        base, zoff = s * SHAPE_FIELDS, a["zone_off"][s]
        a["shape_info"][base : base + SHAPE_FIELDS] = array("q", (n, rows.topo_off, *rows.info))
        a["available"][zoff * nres : (zoff + n) * nres] = array("q", rows.available)
        a["states"][zoff : zoff + n] = array("q", rows.states)

    def _used(self) -> dict[str, int]:
        """How much of each array the slots so far use."""
        return {
            "shape_info": self.n_shapes * SHAPE_FIELDS,
            "zone_off": self.n_shapes,
            "topology": self.topo_len,
            "available": self.zone_count * self.base.n_res,
            "states": self.zone_count,
        }

    def _needs(self, n: int, *, slot: bool = True) -> dict[str, int]:
        """How long each array must be for one more slot of n zones past the last (with a
        topology block of its own), or (``slot`` False) for n more zones."""
        nres = self.base.n_res
        if slot:
            more = {"shape_info": SHAPE_FIELDS, "zone_off": 1,
                    "topology": topology_size(n, nres)}  # fmt: skip
        else:
            more = {"available": n * nres, "states": n}
        return {k: v + more.get(k, 0) for k, v in self._used().items()}

    def _room(self, rows: ShapeRows) -> bool:
        """Room for one more slot (its zones: _region)."""
        return all(len(self.arrays[k]) >= v for k, v in self._needs(rows.n).items())

    def _renew(self, n: int, *, slot: bool) -> None:
        """Copy the slot arrays (``slot``) or the zone arrays (the snapshots handed out
        keep the old ones), so that the slots, or the zone regions, freed so far become
        writable in the copy. Only one group: under usage churn nearly every renewal is
        of zone regions, and copying all seven arrays for it held the event loop ~250 ms
        at 100,000 nodes under load (docs/inventory.md, round 19). Same length when
        enough of what is asked for (a slot, or ``n`` zones) is free, else x1.5
        (amortized O(1) per value); at least room for it."""
        if slot:
            for n_, slots in self.pending.items():
                self.free.setdefault(n_, array("q")).extend(slots)
            self.pending = {}
            grow = sum(map(len, self.free.values())) * _REUSE_SHARE < self.n_shapes
            short = not self.free.get(n)
        else:
            for n_, regions in self.regions_pending.items():
                self.regions_free.setdefault(n_, array("q")).extend(regions)
            self.regions_pending = {}
            free = sum(k * len(v) for k, v in self.regions_free.items())
            grow = free * _REUSE_SHARE < self.zone_count
            short = not self.regions_free.get(n)
        # Room past the end only when nothing freed fits.
        needs = self._needs(n, slot=slot) if short else {}
        used = self._used()
        for name in _SLOT_ARRAYS if slot else _ZONE_ARRAYS:
            have = len(self.arrays[name])
            size = have * 3 // 2 if grow or needs.get(name, 0) > have else have
            self._copy(name, max(size, needs.get(name, 0), 64), used[name], renewal=True)
        self.renewals += 1

    def room(self, shapes: int) -> dict[str, int]:
        """Each array's length with room for ``shapes`` slots, each sized as the average
        shape so far (none when there is no shape to size them by)."""
        n = self.n_shapes
        return {k: int(used / n * shapes) + 1 for k, used in self._used().items()} if n else {}

    def reserve(self, shapes: int) -> None:
        """``room(shapes)``: the arrays are copied now instead of x1.5 at a time as churn
        makes shapes. Each copy is made on the writer's thread: at 100,000 nodes the zones
        array's took 40-190 ms, the p99 of the first minute of churn (docs/inventory.md).
        Arrays that arrived with that room (``pickled_with_room``) are not copied.

        The zone group's first renewal gets a spare made now, its pages written: under
        usage churn that renewal comes a minute or so after a Whole, and a new 31 MiB
        array's page faults held the event loop 160-170 ms at 100,000 nodes under load
        (docs/inventory.md, round 22). The slot group is renewed only as shapes are
        made, which usage churn does not do."""
        used = self._used()
        for name, want in self.room(shapes).items():
            if want > len(self.arrays[name]):
                self._copy(name, want, used[name])
        for name in _ZONE_ARRAYS:
            self.spare[name] = array("q", [0]) * len(self.arrays[name])

    def _copy(self, name: str, size: int, used: int, *, renewal: bool = False) -> None:
        """A new array of ``size`` holding the first ``used`` values (earlier snapshots
        keep the old one): one memcpy of those, then zeros (a zeroed array of ``size``
        first, then the copy, wrote the used part twice).

        A renewal's copy goes into the array the last renewal replaced when that one has
        the length and no snapshot holds it any more: its reference count, which every
        reader's hold adds to (a snapshot's table, a kernel's buffer view), is the store's
        own. Its pages are mapped already. A new array's first writes, a page fault per
        4 KiB, held the event loop ~150 ms per renewal at 100,000 nodes under churn, twice
        a minute, against ~7 ms for the copy alone (docs/inventory.md, "The stalls behind
        wrk's p99"). So no array a reader can reach is ever written."""
        old, spare = self.arrays[name], self.spare.pop(name, None)
        # 2: ``spare`` here and getrefcount's argument
        if spare is not None and len(spare) == size and sys.getrefcount(spare) == 2:
            memoryview(spare)[:used] = memoryview(old)[:used]
            # zeros from one calloc'd buffer (not written: no array of them made first)
            memoryview(spare)[used:] = memoryview(bytes(8 * (size - used))).cast("q")
            fresh = spare
            self.reused += 1
        else:
            fresh = old[:used]
            fresh.frombytes(bytes(8 * (size - used)))
        if renewal:
            self.spare[name] = old
        self.arrays[name] = fresh
        if name == "zone_off":
            self.offsets_shared = False

    def packed(self) -> Packed:
        """The table as it stands (sharing the arrays; its counts bound what it reads)."""
        self.offsets_shared = True
        return replace(
            self.base,
            n_shapes=self.n_shapes,
            zone_count=self.zone_count,
            topo_len=self.topo_len,
            **self.arrays,
        )


def pickled_with_room(packed: Packed, shapes: int) -> tuple[Any, ...]:
    """``packed``'s pickled form (a ``copyreg`` reduction) whose arrays arrive with the
    room ``PackedStore.reserve(shapes)`` makes: each one made at that length as it is
    read, so that the reader never holds the arrays twice (docs/inventory.md, "The
    replica at ready")."""
    room = PackedStore(packed).room(shapes)
    values = {f: getattr(packed, f) for f in Packed.__dataclass_fields__}
    values.update((k, _Room(values[k], room.get(k, 0))) for k in _FIELDS)
    return (Packed, tuple(values.values()))


class _Room:
    """An array pickled with the length it is to have (its values, then zeros)."""

    __slots__ = ("length", "values")

    def __init__(self, values: array[int], length: int) -> None:
        self.values, self.length = values, max(length, len(values))

    def __reduce__(self) -> tuple[Any, ...]:
        # The values' buffer goes into the pickle as it is (no copy of it first).
        return (_grown, (PickleBuffer(self.values), self.length))


def _grown(values: bytes | bytearray, length: int) -> array[int]:
    out = array("q", bytes(8 * length))  # bytes(): zero pages that are not written
    memoryview(out).cast("B")[: len(values)] = values
    return out
