"""The packed arrays of an incrementally edited snapshot, grown in place.

Copying the packed arrays per batch of watch events cost a third of the event loop at
10,000 nodes under churn (py-spy): every event makes a new shape, so the arrays are as
large as the cluster, and a copy per batch is O(N). A :class:`PackedStore` keeps the
arrays with spare capacity (x1.5 when full) and writes a new shape past the end of
what any earlier snapshot uses: snapshots share the arrays, each reading only its own
``n_shapes``/``zone_count`` prefix, so an append is invisible to them.

A freed slot (a shape no node has any more) is rewritten in place only when the caller
says that no reader can still use it (``reuse_after``: the server passes a clock and the
longest time a review may read an older snapshot, webhook/inventory/updates.py); without
a clock the arrays are copied first, so every earlier snapshot stays exactly as it was.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Callable

from core.feasibility.codes import SHAPE_FIELDS
from core.feasibility.snapshot import Packed, ShapeRows, packed_from

_FIELDS = ("shape_info", "zones", "node_alloc", "unaligned", "dist", "states", "idle_states")


class PackedStore:
    """Owns the arrays behind a lineage of Packed tables (one resource table)."""

    def __init__(
        self,
        packed: Packed,
        *,
        clock: Callable[[], float] | None = None,
        reuse_after: float = 0.0,
    ) -> None:
        self.base = packed
        self.clock = clock
        self.reuse_after = reuse_after
        self.n_shapes = packed.n_shapes
        self.zone_count = packed.zone_count
        self.dist_len = packed.n_shapes and _dist_end(packed)
        # The arrays of ``packed`` are shared until the first write needs room or a copy.
        self.arrays = {name: getattr(packed, name) for name in _FIELDS}
        self.free: dict[int, deque[tuple[int, float]]] = {}  # zones -> (slot, freed at)
        self._copied = False  # this batch already works on fresh copies

    # -- slots -----------------------------------------------------------------------------

    def release(self, s: int, n: int) -> None:
        """Slot s (a shape of n NUMA zones) is free from now on."""
        self.free.setdefault(n, deque()).append((s, self.clock() if self.clock else 0.0))

    def take(self, n: int) -> int | None:
        """A free slot for a shape of n zones whose readers are gone, if any."""
        slots = self.free.get(n)
        if not slots:
            return None
        if self.clock is not None and self.clock() - slots[0][1] < self.reuse_after:
            return None
        return slots.popleft()[0]

    # -- writes ----------------------------------------------------------------------------

    def begin(self) -> None:
        """A new batch: its first in-place rewrite without a clock copies the arrays."""
        self._copied = False

    def write(self, s: int, rows: ShapeRows) -> None:
        """Rows of the shape in slot s (a slot that exists, of the same zone count)."""
        if self.clock is None and not self._copied:
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

    def _put(self, name: str, at: int, values: object) -> None:
        values = values if isinstance(values, array) else array("q", values)  # type: ignore[arg-type]
        arr = self.arrays[name]
        end = at + len(values)
        if end > len(arr):  # no room: a larger copy (amortized O(1) per value)
            grown = array("q", bytes(8 * max(end, len(arr) * 3 // 2, 64)))
            grown[:at] = arr[:at]
            self.arrays[name] = arr = grown
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
