"""One batch of a snapshot edit (``SnapshotEditor.apply``, core/snapshot/delta.py): the
next snapshot as copies of what the batch changes (the per-node columns' chunks, the
integer columns, the label indexes), the changed nodes moved between shapes and topology
classes, new shapes' rows written past what earlier snapshots read, dead shapes dropped
from their class's evaluation order; ``finish`` freezes it into a ``Snapshot``."""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from core.feasibility._kernel_py import SHAPE_FIELDS
from core.feasibility.bitsets import BitIndex, ValueIndex, expand, with_member, without_member
from core.model import NodeTopology, NumaZone
from core.snapshot.columns import Nodes, Usage, states_of, usage_from, usage_of, with_usage
from core.snapshot.packing import PackedStore
from core.snapshot.rows import ShapeRows, shape_rows, usage_rows, usage_values
from core.snapshot.snapshot import (
    Snapshot,
    SortMemo,
    _available_within_allocatable,
    _topology_key,
    rows_of,
    within_allocatable,
)

ShapeKey = tuple[Any, Usage]  # (topology key, usage_of)

# A class's dead shapes are dropped from its evaluation order once they are more than
# 1/DEAD_FRACTION of it: every review that scans the class walks them (at 1/2, a minute
# of churn at 100,000 nodes made reviews 5x slower), and dropping them costs a pass over
# the class, so amortized ~DEAD_FRACTION steps per dead shape.
DEAD_FRACTION = 8


class SnapshotEditor(Protocol):
    """The writer-side indexes a draft reads and updates (core/snapshot/delta.py)."""

    snapshot: Snapshot
    store: PackedStore
    count: list[int]
    shape_index: dict[int, int]  # hash of a live shape's key -> the shape
    shape_hash: array[int]  # shape -> the hash of its key
    topo_index: dict[Any, int]
    topo_keys: list[Any]  # class -> its topology key
    dead: dict[int, list[tuple[int, int]]]
    values: dict[str, set[str]]


class Draft:
    """The next snapshot while a batch is applied: copies of what it changes."""

    def __init__(self, editor: SnapshotEditor) -> None:
        snap = editor.snapshot
        self.ed = editor
        self.old = snap
        # Records as of their last change but usage, and usage written since (columns.py):
        # a draft reads only what usage never changes (names, labels, topology).
        self.base = snap.nodes.base.edit()
        self.usage = snap.nodes.usage.edit()
        self.shape_bits = snap.shape_bits.edit()
        # Node -> shape, shape -> representative and class: the old snapshot's until the
        # first write (_own). A batch of usage moves alone, most batches under churn,
        # writes none of them; copied anyway they were 2.4 MB a batch at 100,000 nodes.
        self.shape_of, self.shape_rep, self.topo_of = snap.shape_of, snap.shape_rep, snap.topo_of
        self.owned = False
        self.topo_bits = list(snap.topo_bits)
        self.topo_shapes = list(snap.topo_shapes)
        self.appended: dict[int, list[int]] = {}  # class -> shapes new in this batch
        self.topo_monotone = list(snap.topo_monotone)
        self.usage_gen = array("q", snap.usage_gen)
        self.name_index: Mapping[str, int] = snap.name_index
        self.label_bits = snap.label_bits
        self.key_bits: Mapping[str, int] = snap.key_bits
        self.touched_keys: set[str] = set()
        self.rows: dict[int, ShapeRows] = {}  # shapes written in this batch
        self.memo: SortMemo = {}  # _topology_key's sorted maps, for this batch
        self.moved = False  # a live shape's usage moved to a new zone region
        self.structural = False

    # -- nodes -----------------------------------------------------------------------------

    def _own(self) -> None:
        """Copies of shape_of, shape_rep and topo_of, before this batch writes one."""
        if not self.owned:
            self.shape_of, self.shape_rep, self.topo_of = (
                array("q", a) for a in (self.shape_of, self.shape_rep, self.topo_of)
            )
            self.owned = True

    def add(self, node: NodeTopology) -> None:
        self._own()
        i = len(self.base)
        self.base.append(node)
        self.usage.append(None)
        self.shape_of.append(-1)
        self._names()[node.name] = i
        self.structural = True
        self._place(i, node)
        self._labels(i, node.labels, add=True)

    def update(self, i: int, node: NodeTopology, *, usage_only: bool = False) -> None:
        """``usage_only``: core/inventory/usage_only.py holds against node i's record."""
        if usage_only:  # the record stays (its labels too): only its usage is written
            self._usage(i, [z.available for z in node.zones], node.numa_states)
            return
        old = self.base[i]
        s = self.shape_of[i]
        key = (_topology_key(node, self.memo), usage_of(node))
        h = hash(key)
        # Before node i is written: it may be the shape's representative.
        same = self.ed.shape_hash[s] == h and self._key_of(s) == key
        self.base[i], self.usage[i] = node, None
        if old.labels is not node.labels and old.labels != node.labels:
            self._labels(i, old.labels, add=False)
            self._labels(i, node.labels, add=True)
            self.structural = True
        if same:
            return
        # first, so an unchanged shape is not freed and re-made
        self._place(i, node, key, in_class=self.topo_of[s], skip=s)
        same_class = self.topo_of[self.shape_of[i]] == self.topo_of[s]
        self.structural = self.structural or not same_class
        self._unplace(i, s, keep_topology=same_class)

    def update_usage(self, i: int, free: Sequence[Mapping[str, int]]) -> None:
        """Node i with the free amounts ``free`` (one map per zone, in its record's order,
        each with its zone's keys: ``SnapshotEditor.split_usage``), its NUMA states kept.
        No record is made, compared and flattened again: that was a third of an event's
        CPU in a worker (docs/inventory.md, round 19)."""
        base, old = self.base[i], self.usage[i]
        states = base.numa_states if old is None else states_of(old, len(base.zones))
        self._usage(i, free, states)

    def _usage(self, i: int, free: Sequence[Mapping[str, int]], states: Sequence[str]) -> None:
        """Node i with the free amounts ``free`` and the NUMA ``states``, the rest of its
        record kept: the same topology class, whose key is known (computing it was the
        costliest part of an event), and usage written as atoms."""
        base, s = self.base[i], self.shape_of[i]
        key = (self.ed.topo_keys[self.topo_of[s]], usage_from(free, states))
        h = hash(key)
        # Before node i is written: it may be the shape's representative.
        same = self.ed.shape_hash[s] == h and self._key_of(s) == key
        self.usage[i] = key[1]
        if same or self._move_usage(s, h, key, base.zones, free, states):
            return
        # first, so an unchanged shape is not freed and re-made
        self._place(i, with_usage(base, key[1]), key, in_class=self.topo_of[s], skip=s)
        self._unplace(i, s, keep_topology=True)  # same topology key: same class

    def remove(self, i: int) -> None:
        self._own()
        last = len(self.base) - 1
        gone = self.base[i]
        self._unplace(i, self.shape_of[i], keep_topology=False)
        self._labels(i, gone.labels, add=False)
        names = self._names()
        del names[gone.name]
        if i != last:
            moved = self.base[last]
            self._move(last, i, moved)
            self.base[i], self.usage[i] = moved, self.usage[last]
            names[moved.name] = i
        self.base.pop()
        self.usage.pop()
        self.shape_of.pop()
        self.structural = True

    def _move(self, src: int, dst: int, node: NodeTopology) -> None:
        """Node ``src`` takes index ``dst`` (free): its bits move."""
        s = self.shape_of[src]
        self.shape_bits[s] = with_member(without_member(self.shape_bits[s], src), dst)
        self.topo_bits[self.topo_of[s]] ^= (1 << src) | (1 << dst)
        if self.shape_rep[s] == src:
            self.shape_rep[s] = dst
        self.shape_of[dst] = s
        self._labels(src, node.labels, add=False)
        self._labels(dst, node.labels, add=True)

    # -- shapes ----------------------------------------------------------------------------

    def _place(
        self,
        i: int,
        node: NodeTopology,
        key: ShapeKey | None = None,
        in_class: int = -1,
        skip: int = -1,
    ) -> None:
        """Node i joins its shape (``in_class``: its class's bitset has it already;
        ``skip``: its old shape, whose representative may be node i, written already)."""
        self._own()
        s = self._shape_for(node, key, skip)
        self.shape_bits[s] = with_member(self.shape_bits[s], i)
        if self.topo_of[s] != in_class:  # a wide int per event otherwise
            self.topo_bits[self.topo_of[s]] |= 1 << i
        self.ed.count[s] += 1
        if self.shape_rep[s] < 0 or self.ed.count[s] == 1:
            self.shape_rep[s] = i
        self.shape_of[i] = s

    def _unplace(self, i: int, s: int, *, keep_topology: bool) -> None:
        self._own()
        ed = self.ed
        t = self.topo_of[s]
        self.shape_bits[s] = without_member(self.shape_bits[s], i)
        ed.count[s] -= 1
        if not keep_topology:
            self.topo_bits[t] &= ~(1 << i)
        if ed.count[s] == 0:
            if ed.shape_index.get(ed.shape_hash[s]) == s:
                del ed.shape_index[ed.shape_hash[s]]
            n = self.rows[s].n if s in self.rows else self.old.packed.shape_info[s * SHAPE_FIELDS]
            dead = ed.dead.setdefault(t, [])
            dead.append((s, n))
            self.shape_rep[s] = -1
            if len(dead) > 16 + len(self.topo_shapes[t]) // DEAD_FRACTION:
                self._compact(t)
        elif self.shape_rep[s] == i:
            b = expand(self.shape_bits[s])
            self.shape_rep[s] = (b & -b).bit_length() - 1
        self.usage_gen[t] += 1

    def _move_usage(
        self,
        s: int,
        h: int,
        key: ShapeKey,
        zones: Sequence[NumaZone],
        free: Sequence[Mapping[str, int]],
        states: Sequence[str],
    ) -> bool:
        """A node's new usage (``key``; its ``zones`` with the free amounts ``free`` and
        the NUMA ``states``) given to its shape s, when s is its alone and no shape has
        that usage already: the rows move to a new zone region (``PackedStore.move_usage``),
        the slot, its bits and its place in the class's evaluation order stay. Under churn
        every node comes to have a shape of its own and nearly every event is this one;
        a new shape per event instead (a slot, its rows, a dead shape in the class's order
        until compaction) doubled the patch (docs/inventory.md)."""
        ed = self.ed
        if ed.count[s] != 1 or self._find(h, key, skip=s) is not None:
            return False
        t, n = self.topo_of[s], ed.store.arrays["shape_info"][s * SHAPE_FIELDS]
        available, codes = usage_values(zones, free, states, self.old.packed.res_names, n)
        ed.store.move_usage(s, available, codes)
        if ed.shape_index.get(ed.shape_hash[s]) == s:
            del ed.shape_index[ed.shape_hash[s]]
        ed.shape_index.setdefault(h, s)
        ed.shape_hash[s] = h
        self.topo_monotone[t] = self.topo_monotone[t] and within_allocatable(zones, free)
        self.usage_gen[t] += 1  # cached answers that read class t's usage are void
        self.moved = True
        return True

    def _key_of(self, s: int) -> ShapeKey:
        """Live shape s's key, from its representative: the editor keeps only the keys'
        hashes (the keys were ~60 MiB in a worker at 100,000 distinct shapes,
        docs/inventory.md). Read only when a hash matches."""
        rep = self.shape_rep[s]
        usage = self.usage[rep]
        if usage is None:
            usage = usage_of(self.base[rep])
        return self.ed.topo_keys[self.topo_of[s]], usage

    def _find(self, h: int, key: ShapeKey, skip: int = -1) -> int | None:
        """The live shape whose key is ``key`` (a hash found is checked against the key)."""
        s = self.ed.shape_index.get(h)
        return s if s is not None and s != skip and self._key_of(s) == key else None

    def _shape_for(self, node: NodeTopology, key: ShapeKey | None = None, skip: int = -1) -> int:
        ed = self.ed
        key = key or (_topology_key(node, self.memo), usage_of(node))
        tkey, h = key[0], hash(key)
        s = self._find(h, key, skip)
        if s is not None:
            return s
        t = ed.topo_index.get(tkey)
        if t is None:
            t = ed.topo_index[tkey] = len(self.topo_bits)
            ed.topo_keys.append(tkey)
            self.topo_bits.append(0)
            self.topo_shapes.append(array("q"))
            self.topo_monotone.append(True)
            self.usage_gen.append(0)
            self.structural = True
        rows = self._rows(node, t)
        s, new = ed.store.add(rows)
        if not new:
            self.topo_of[s] = t
        else:
            self.shape_bits.append(0)
            self.shape_rep.append(-1)
            self.topo_of.append(t)
            ed.count.append(0)
            ed.shape_hash.append(0)
        self.shape_bits[s] = 0
        self.rows[s] = rows
        # Two keys of one hash: the second shape is not indexed (a later node of its key
        # makes a shape of its own: the same verdicts, one more shape).
        ed.shape_index.setdefault(h, s)
        ed.shape_hash[s] = h
        self.appended.setdefault(t, []).append(s)
        self.topo_monotone[t] = self.topo_monotone[t] and _available_within_allocatable(node)
        return s

    def _rows(self, node: NodeTopology, t: int) -> ShapeRows:
        """The packed rows of a new shape of class t: from a live shape of the class when
        there is one (only usage differs), else from the record."""
        names = self.old.packed.res_names
        shapes = self.topo_shapes[t] or self.appended.get(t)
        if not shapes:
            return shape_rows(node, names)
        like = self.rows.get(shapes[0]) or rows_of(self.old.packed, shapes[0])
        return usage_rows(node, names, like)

    def _compact(self, t: int) -> None:
        """Drop class t's dead shapes from its evaluation order; their slots are free."""
        dead = self.ed.dead.pop(t)
        gone = {s for s, _ in dead}
        self.topo_shapes[t] = array("q", [x for x in self.topo_shapes[t] if x not in gone])
        if t in self.appended:
            self.appended[t] = [x for x in self.appended[t] if x not in gone]
        for s, n in dead:
            self.ed.store.release(s, n)

    # -- labels ----------------------------------------------------------------------------

    def _names(self) -> dict[str, int]:
        if self.name_index is self.old.name_index:
            self.name_index = dict(self.name_index)
        return self.name_index  # type: ignore[return-value]

    def _labels(self, i: int, labels: Mapping[str, str], *, add: bool) -> None:
        if not labels:
            return
        if self.label_bits is self.old.label_bits:
            self.label_bits = BitIndex(dict(self.label_bits.raw))
            self.key_bits = dict(self.key_bits)
        lb = self.label_bits
        kb: dict[str, int] = self.key_bits  # type: ignore[assignment]
        bit = 1 << i
        for k, v in labels.items():
            if add:
                lb.add((k, v), i)
                kb[k] = kb.get(k, 0) | bit
                self.ed.values.setdefault(k, set()).add(v)
            else:
                lb.discard((k, v), i)
                kb[k] &= ~bit
                if (k, v) not in lb:
                    self.ed.values[k].discard(v)
                if not kb[k]:
                    del kb[k]
            self.touched_keys.add(k)

    def _values_of(self) -> Mapping[str, tuple[tuple[str, int], ...]]:
        old = self.old.values_of
        if not self.touched_keys:
            return old
        out = dict(self.old.values_of.values)
        for k in self.touched_keys:
            vs = self.ed.values.get(k)
            if vs:
                out[k] = tuple(vs)
            else:
                out.pop(k, None)
                self.ed.values.pop(k, None)
        return ValueIndex(self.label_bits, out)

    # -- the new snapshot ------------------------------------------------------------------

    def finish(self) -> Snapshot:
        old = self.old
        for t, added in self.appended.items():
            # A new array: the old snapshot's readers still iterate the old one.
            self.topo_shapes[t] = self.topo_shapes[t] + array("q", added)
        return Snapshot(
            nodes=Nodes(self.base.freeze(), self.usage.freeze()),
            packed=self.ed.store.packed() if self.rows or self.moved else old.packed,
            shape_of=self.shape_of,
            shape_bits=self.shape_bits.freeze(),
            shape_rep=self.shape_rep,
            topo_of=self.topo_of,
            topo_bits=tuple(self.topo_bits),
            topo_shapes=tuple(self.topo_shapes),
            topo_monotone=tuple(self.topo_monotone),
            all_bits=(1 << len(self.base)) - 1,
            name_index=self.name_index,
            label_bits=self.label_bits,
            key_bits=self.key_bits,
            values_of=self._values_of(),
            structure=object() if self.structural else old.structure,
            usage_gen=self.usage_gen,
        )
