"""A snapshot patched node by node: the write side of the incremental inventory.

``SnapshotEditor.apply`` returns a new :class:`Snapshot` sharing what it did not change
with the previous one; nothing a reader of an earlier snapshot can see is written
(docs/inventory.md, "The data flow": per-batch costs, dead shapes, moved usage). A removed
node's index is taken by the last node, so ``nodes`` is in order of arrival, not of name.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from core.feasibility.bitsets import count
from core.inventory.usage_only import usage_only, with_available
from core.model import NodeTopology
from core.snapshot.columns import usage_of
from core.snapshot.draft import Draft
from core.snapshot.packing import PackedStore
from core.snapshot.rows import resource_names
from core.snapshot.snapshot import Snapshot, SortMemo, _topology_key

# Reserved slots beyond one per node (``reserve``): the dead shapes classes list, the
# freed slots and zone regions that wait for the next copy of the arrays (packing.py).
_RESERVE_SPARE = 2


def reserved_shapes(nodes: int) -> int:
    """The slots an editor with ``reserve`` makes room for, for a snapshot of ``nodes``."""
    return nodes + nodes // _RESERVE_SPARE + 64


class UnknownNode(KeyError):
    """A usage delta for a node the editor does not hold as the delta says."""


class SnapshotEditor:
    """Owns a lineage of snapshots: the current one and the writer-side indexes."""

    def __init__(self, snapshot: Snapshot, *, reserve: bool = False) -> None:
        """``reserve``: make room in the packed arrays now for every node to have a shape
        of its own, the dead shapes classes keep and the freed ones awaiting a copy (what
        usage churn leads to: NFD's free amounts differ per node), so that they are not
        grown under churn (a live inventory)."""
        self.snapshot = snapshot
        self.rebuilt = 0
        self._reserve = reserve
        self._usage_memo: tuple[Mapping[str, NodeTopology | None], set[str]] | None = None
        self._index(snapshot)

    def _index(self, snap: Snapshot) -> None:
        self.shape_index: dict[int, int] = {}
        self.shape_hash = array("q", bytes(8 * len(snap.shape_rep)))
        self.topo_index: dict[Any, int] = {}
        self.topo_keys: list[Any] = [None] * len(snap.topo_bits)
        self.count = [count(b) for b in snap.shape_bits]
        self.store = PackedStore(snap.packed)
        if self._reserve:
            self.store.reserve(reserved_shapes(len(snap.nodes)))
            # Served from now on over the reserved copies, so that ``snap``'s own arrays
            # go with ``snap`` (51 MiB at 100,000 distinct shapes, docs/inventory.md).
            self.snapshot = replace(snap, packed=self.store.packed(), _kernels={})
        # Dead shapes still listed in their class's ``topo_shapes`` (no nodes: evaluation
        # skips them), as (slot, zone count): the list is filtered once an eighth of it
        # is dead, not once per dead shape (a class holds thousands of shapes under churn).
        # Their slots are reused only after that, so their rows stay in place meanwhile.
        self.dead: dict[int, list[tuple[int, int]]] = {}
        memo: SortMemo = {}
        for s, rep in enumerate(snap.shape_rep):
            if rep < 0:  # dead (a Whole of an edited snapshot): no key, never found
                continue
            node, usage = snap.nodes.base[rep], snap.nodes.usage[rep]
            tkey = _topology_key(node, memo)
            key = (tkey, usage_of(node) if usage is None else usage)
            h = self.shape_hash[s] = hash(key)
            self.shape_index.setdefault(h, s)
            self.topo_index.setdefault(tkey, snap.topo_of[s])
            self.topo_keys[snap.topo_of[s]] = tkey
        self.values: dict[str, set[str]] = {k: set(vs) for k, vs in snap.values_of.values.items()}
        # How many nodes report each resource: one no node reports any more must leave the
        # packed table, as a whole build leaves it out (verdicts.py: unadvertised resources
        # are not checked, since the kubelet drops them).
        self.reporting: dict[str, int] = {}
        for node in snap.nodes:
            for r in resource_names([node]):
                self.reporting[r] = self.reporting.get(r, 0) + 1

    def usage_only(self, changes: Mapping[str, NodeTopology | None]) -> set[str]:
        """The changed nodes whose new record differs from the current one at most in
        usage (core/inventory/usage_only.py): their resources and topology class stay. Memoized for
        the ``changes`` of one ``apply`` (``fits`` asks first)."""
        memo = self._usage_memo
        if memo is not None and memo[0] is changes:
            return memo[1]
        snap, out = self.snapshot, set()
        index, nodes = snap.name_index, snap.nodes
        for name, node in changes.items():
            i = index.get(name)
            # Against the base record: usage written since kept its keys (usage_only).
            if node is not None and i is not None and usage_only(nodes.base[i], node):
                out.add(name)
        self._usage_memo = (changes, out)
        return out

    def fits(self, changes: Mapping[str, NodeTopology | None]) -> bool:
        """Every changed node's resources are in the packed table (else ``apply``
        builds the snapshot whole)."""
        names, same = self.snapshot.packed.res_index, self.usage_only(changes)
        return all(
            node is None or name in same or all(r in names for r in resource_names([node]))
            for name, node in changes.items()
        )

    def split_usage(
        self, deltas: Iterable[tuple[str, Sequence[Mapping[str, int]]]]
    ) -> tuple[dict[str, NodeTopology | None], dict[str, Sequence[Mapping[str, int]]]]:
        """Usage deltas (node name, its zones' new free amounts in its record's order) as
        ``apply`` takes them: as ``usage`` when each map has the keys of the record's
        (a usage-only change, core/inventory/usage_only.py), else as records.
        ``UnknownNode`` for a node not held, or held with another zone count."""
        snap = self.snapshot
        index, nodes = snap.name_index, snap.nodes
        records: dict[str, NodeTopology | None] = {}
        usage: dict[str, Sequence[Mapping[str, int]]] = {}
        for name, free in deltas:
            i = index.get(name)
            zones = () if i is None else nodes.base[i].zones
            if i is None or len(zones) != len(free):
                raise UnknownNode(name)
            if [z.available.keys() for z in zones] == [f.keys() for f in free]:
                usage[name] = free
            else:
                records[name] = with_available(nodes[i], free)
        return records, usage

    def apply(
        self,
        changes: Mapping[str, NodeTopology | None],
        usage: Mapping[str, Sequence[Mapping[str, int]]] | None = None,
    ) -> Snapshot:
        """The snapshot with ``changes`` applied (name -> new record, None = removed) and
        ``usage`` (name -> new free amounts per zone, as ``split_usage`` gives them):
        those records stay and only their usage is written (most watch events under
        churn: the inventory process's compact deltas). A node in both: the record wins
        (applied after)."""
        usage = usage or {}
        if not changes and not usage:
            return self.snapshot
        try:
            same = self.usage_only(changes)
            whole = not self.fits(changes) or self._drops_resource(changes, same)
            if whole:
                return self._rebuild({**self._records(usage), **changes})
            draft = Draft(self)
            for name, free in usage.items():
                draft.update_usage(draft.name_index[name], free)
            for name, node in changes.items():
                i = draft.name_index.get(name)
                if node is None:
                    if i is not None:
                        draft.remove(i)
                elif i is None:
                    draft.add(node)
                else:
                    draft.update(i, node, usage_only=name in same)
            self.snapshot = draft.finish()
            return self.snapshot
        finally:
            self._usage_memo = None

    def _drops_resource(self, changes: Mapping[str, NodeTopology | None], same: set[str]) -> bool:
        """True when after ``changes`` no node reports a resource of the packed table (then
        ``apply`` builds whole); else the counts are moved to the changed records.
        ``same``: nodes whose resources stay (``usage_only``)."""
        snap, delta = self.snapshot, dict[str, int]()
        for name, node in changes.items():
            if name in same:
                continue
            i = snap.name_index.get(name)
            for r in resource_names([snap.nodes.base[i]]) if i is not None else ():
                delta[r] = delta.get(r, 0) - 1
            for r in resource_names([node]) if node is not None else ():
                delta[r] = delta.get(r, 0) + 1
        if any(self.reporting.get(r, 0) + d <= 0 for r, d in delta.items() if r != "cpu"):
            return True
        for r, d in delta.items():
            self.reporting[r] = self.reporting.get(r, 0) + d
        return False

    def _records(
        self, usage: Mapping[str, Sequence[Mapping[str, int]]]
    ) -> dict[str, NodeTopology | None]:
        """``usage`` as records (for a whole build)."""
        snap = self.snapshot
        return {n: with_available(snap.nodes[snap.name_index[n]], f) for n, f in usage.items()}

    def _rebuild(self, changes: Mapping[str, NodeTopology | None]) -> Snapshot:
        nodes = {n.name: n for n in self.snapshot.nodes}
        for name, node in changes.items():
            if node is None:
                nodes.pop(name, None)
            else:
                nodes[name] = node
        self.snapshot = Snapshot.build([nodes[k] for k in sorted(nodes)])
        self._index(self.snapshot)
        self.rebuilt += 1
        return self.snapshot
