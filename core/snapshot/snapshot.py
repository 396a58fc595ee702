"""The inventory packed for the feasibility kernel, immutable (docs/architecture.md).

Nodes with identical topology, usage and policies share a *shape*, evaluated once per pod;
selection works on bitsets of node indexes. Layout: ``Packed`` (int64 arrays; CPU in the
zone table in whole CPUs, every other amount in core units).
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from core.feasibility import _kernel_py as ref
from core.feasibility.bitsets import BitIndex, ValueIndex, bitset, compact, label_indexes
from core.feasibility.codes import SHAPE_FIELDS, topology_size
from core.model import NodeTopology, NumaZone, PodIntent
from core.snapshot.columns import Column, Nodes, usage_of
from core.snapshot.rows import (
    MAX_REQUEST,
    ShapeRows,
    node_allocatable_known,
    resource_kind,
    resource_names,
    shape_rows,
)

POLICY_CODES: Mapping[str, int] = {
    "none": 0,
    "best-effort": 1,
    "restricted": 2,
    "single-numa-node": 3,
}


@dataclass(frozen=True, slots=True)
class Packed:
    """What the kernel reads. ``shape_info`` holds SHAPE_FIELDS ints per shape, among them
    where its topology block starts in ``topology`` (codes.SF_TOPO_OFF: what only the
    topology fixes, one block per topology class, shared by its shapes); ``zone_off``
    where its zones start in ``available`` (by rows of n_res: the free amount per
    resource) and in ``states`` (one Koordinator NUMA state per zone: 0 idle, 1 shared,
    2 single). Under usage churn only ``available`` and ``states`` gain rows."""

    n_res: int
    n_shapes: int
    zone_count: int
    topo_len: int  # how much of ``topology`` the blocks use
    res_names: tuple[str, ...]
    res_index: Mapping[str, int]  # res_names -> position
    res_kind: array[int]
    shape_info: array[int]
    zone_off: array[int]
    topology: array[int]
    available: array[int]
    states: array[int]
    idle_states: array[int]


@dataclass(frozen=True, slots=True)
class Demand:
    """A pod packed against one snapshot's resource table: one unit per container in
    kubelet order, then the pod-level unit (pod-scope amounts, kubelet formulas)."""

    n_units: int
    unit_kind: array[int]
    unit_cpu: array[int]  # exclusive CPUs (guaranteedCPUs)
    unit_res: array[int]  # n_units * n_res, core units (cpu in millicores)
    guaranteed: int
    missing: tuple[str, ...]  # requested resources no node of the snapshot reports

    @classmethod
    def build(cls, intent: PodIntent, snapshot: Snapshot) -> Demand:
        # Per review: keep it to one pass over each container's resources.
        index = snapshot.packed.res_index
        nres = snapshot.packed.n_res
        kinds, cpus, rows = [], [], []
        missing: set[str] = set()
        for c in intent.containers:
            kinds.append(_UNIT_KINDS.get(c.kind, ref.U_APP))
            cpus.append(c.exclusive_cpus)
            row = [0] * nres
            requests, limits = c.requests, c.limits
            for name in requests.keys() | limits.keys():
                amount = _container_amount(name, requests, limits)
                if amount <= 0:
                    continue
                i = index.get(name)
                if i is not None:
                    row[i] = amount
                elif resource_kind(name) == ref.RES_DEVICE:
                    missing.add(name)  # a device no node reports
            rows.append(row)
        own = kinds[:]
        kinds.append(ref.U_APP)
        if own == [ref.U_APP]:  # one app container: the pod-level unit is that container
            cpus.append(cpus[0])
            rows.append(rows[0])
        else:
            cpus.append(_pod_level(own, cpus))
            columns = zip(*rows, strict=True) if rows else iter([()] * nres)
            rows.append([_pod_level(own, column) for column in columns])
        flat = [v for row in rows for v in row]
        return cls(
            n_units=len(kinds),
            unit_kind=array("q", kinds),
            unit_cpu=array("q", [min(c, MAX_REQUEST) for c in cpus]),
            unit_res=array(
                "q",
                flat
                if max(flat, default=0) <= MAX_REQUEST
                else [min(v, MAX_REQUEST) for v in flat],
            ),
            guaranteed=int(intent.qos == "Guaranteed"),
            missing=tuple(sorted(missing)),
        )


_UNIT_KINDS: Mapping[str, int] = {"init": ref.U_INIT, "sidecar": ref.U_SIDECAR}


def _container_amount(name: str, requests: Mapping[str, int], limits: Mapping[str, int]) -> int:
    # Devices are read from limits (device manager); cpu and memory from requests.
    if resource_kind(name) == ref.RES_DEVICE:
        return limits.get(name, requests.get(name, 0))
    return requests.get(name, limits.get(name, 0))


def _pod_level(kinds: Sequence[int], amounts: Sequence[int]) -> int:
    """podGuaranteedCPUs / getPodRequestedResources: max(every regular init container plus
    the sidecars started before it, sum of app containers and sidecars)."""
    sidecars = 0
    peak_init = 0
    apps = 0
    for kind, amount in zip(kinds, amounts, strict=False):
        if kind == ref.U_INIT:
            peak_init = max(peak_init, amount + sidecars)
        elif kind == ref.U_SIDECAR:
            sidecars += amount
        else:
            apps += amount
    return max(peak_init, apps + sidecars)


# sorted(m.items()) by the identity of m, for one build or one batch of events (the
# caller's dict, dropped with it; holding m, so the id is not reused): records' maps are
# never mutated once parsed and equal ones are shared (the incremental inventory's
# sharer), so a shared map is sorted once per build or batch instead of once per node.
SortMemo = dict[int, tuple[Mapping[Any, Any], tuple[Any, ...]]]


def _sorted_items(m: Mapping[Any, Any], memo: SortMemo) -> tuple[Any, ...]:
    got = memo.get(id(m))
    if got is not None and got[0] is m:
        return got[1]
    items = tuple(sorted(m.items()))
    memo[id(m)] = (m, items)
    return items


def _topology_key(node: NodeTopology, memo: SortMemo | None = None) -> tuple[Any, ...]:
    memo = {} if memo is None else memo
    zones = tuple(
        (
            z.id,
            _sorted_items(z.capacity, memo),
            _sorted_items(z.allocatable, memo),
            _sorted_items(z.costs, memo),
        )
        for z in node.zones
    )
    return (
        zones,
        _sorted_items(node.allocatable, memo),
        node.tm_policy,
        node.tm_scope,
        node.max_numa_nodes,
        node.prefer_closest,
        node.cpu_manager_policy,
        node.full_pcpus_only,
        node.threads_per_core,
        node.memory_manager_policy,
        node.koord_policy,
        node.volcano_policy,
        node.volcano_cpu_manager_policy,
        tuple(sorted(node.unaligned_devices.items())),
        node_allocatable_known(node),
    )


def _available_within_allocatable(node: NodeTopology) -> bool:
    return within_allocatable(node.zones, [z.available for z in node.zones])


def within_allocatable(zones: Sequence[NumaZone], free: Sequence[Mapping[str, int]]) -> bool:
    """Every free amount (``free``: one map per zone) is within its zone's allocatable.
    Then "fits now" implies "fits empty", and a class that never fits empty is never-fits
    for every usage without running the kernel per node."""
    # Loops, not generators: this runs per usage event (py-spy put the generators at a
    # seventh of a batch's apply, docs/inventory.md round 23).
    for z, amounts in zip(zones, free, strict=True):
        allocatable = z.allocatable
        for k, v in amounts.items():
            if v > allocatable.get(k, 0):
                return False
    return True


@dataclass(frozen=True, slots=True)
class Snapshot:
    """An immutable, packed inventory. Build with ``Snapshot.build(nodes)``."""

    nodes: Nodes  # records, with usage apart (columns.py)
    packed: Packed
    # Integer columns are array('q'): copied by memcpy and never traversed by the garbage
    # collector (core/snapshot/delta.py copies them once per batch of watch events).
    shape_of: array[int]  # node index -> shape
    shape_bits: Column[int]  # shape -> compact bitset of node indexes (bitsets.compact)
    shape_rep: array[int]  # shape -> first node index
    topo_of: array[int]  # shape -> topology class (shapes differing only in usage)
    topo_bits: tuple[int, ...]  # topology class -> bitset of node indexes
    # topology class -> its shapes, in evaluation order; after incremental updates also
    # dead ones (no nodes, shape_rep -1) until the class is compacted (delta.py). Arrays:
    # a batch of watch events makes a new one per class it touches (thousands of shapes
    # each under churn), and a tuple's int objects were most of the collector's work then
    # (each one visited, scattered over the heap).
    topo_shapes: tuple[array[int], ...]
    topo_monotone: tuple[bool, ...]  # available <= allocatable everywhere in the class
    all_bits: int
    name_index: Mapping[str, int]
    label_bits: BitIndex  # (key, value) -> compact bitset
    key_bits: Mapping[str, int]
    values_of: ValueIndex
    # What a cached decision depends on (webhook/review/decision_cache.py): ``structure``
    # is replaced whenever anything but usage changes (nodes added or removed, labels,
    # topology, policies); ``usage_gen[t]`` counts the usage changes of topology class t.
    structure: object = field(default_factory=object, compare=False, repr=False)
    usage_gen: array[int] = field(default_factory=lambda: array("q"))
    _kernels: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def build(cls, nodes: Sequence[NodeTopology]) -> Snapshot:
        nodes = tuple(nodes)
        shape_index: dict[tuple[Any, ...], int] = {}
        topo_index: dict[tuple[Any, ...], int] = {}
        shape_of: list[int] = []
        members: list[list[int]] = []
        reps: list[int] = []
        topo_of: list[int] = []
        memo: SortMemo = {}
        for i, node in enumerate(nodes):
            tkey = _topology_key(node, memo)
            key = (tkey, usage_of(node))
            s = shape_index.get(key)
            if s is None:
                s = shape_index[key] = len(reps)
                reps.append(i)
                members.append([])
                topo_of.append(topo_index.setdefault(tkey, len(topo_index)))
            members[s].append(i)
            shape_of.append(s)
        bits = [compact(m) for m in members]
        ntopo = len(topo_index)
        topo_members: list[list[int]] = [[] for _ in range(ntopo)]
        topo_shapes: list[list[int]] = [[] for _ in range(ntopo)]
        monotone = [True] * ntopo
        for s, t in enumerate(topo_of):
            topo_members[t].extend(members[s])
            topo_shapes[t].append(s)
            monotone[t] = monotone[t] and _available_within_allocatable(nodes[reps[s]])
        topo_bits = [bitset(sorted(m)) for m in topo_members]
        label_bits, key_bits, values_of = label_indexes(nodes)
        return cls(
            nodes=Nodes.of(nodes),
            packed=_pack([nodes[i] for i in reps]),
            shape_of=array("q", shape_of),
            shape_bits=Column.of(bits),
            shape_rep=array("q", reps),
            topo_of=array("q", topo_of),
            topo_bits=tuple(topo_bits),
            topo_shapes=tuple(array("q", x) for x in topo_shapes),
            topo_monotone=tuple(monotone),
            all_bits=(1 << len(nodes)) - 1,
            name_index={n.name: i for i, n in enumerate(nodes)},
            label_bits=label_bits,
            key_bits=key_bits,
            values_of=values_of,
            usage_gen=array("q", bytes(8 * ntopo)),
        )

    def __getstate__(self) -> tuple[Any, ...]:
        # Compiled kernels are per process (and not picklable): rebuilt on first use.
        return tuple(getattr(self, f) for f in _PICKLED_FIELDS)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        for name, value in zip(_PICKLED_FIELDS, state, strict=True):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_kernels", {})

    def kernel(self, module: ModuleType) -> Any:
        """The kernel of ``module`` (a feasibility implementation) over this snapshot,
        built once per implementation."""
        k = self._kernels.get(module.__name__)
        if k is None:
            k = self._kernels[module.__name__] = module.Kernel(self.packed)
        return k


_PICKLED_FIELDS = tuple(f for f in Snapshot.__dataclass_fields__ if f != "_kernels")


def rows_of(packed: Packed, s: int) -> ShapeRows:
    """Shape ``s``'s rows as stored in ``packed`` (the inverse of packing them)."""
    info, nres = packed.shape_info, packed.n_res
    base = s * SHAPE_FIELDS
    n, toff, zoff = info[base], info[base + 1], packed.zone_off[s]
    return ShapeRows(
        n,
        info[base + 2 : base + SHAPE_FIELDS],
        packed.topology[toff : toff + topology_size(n, nres)],
        packed.available[zoff * nres : (zoff + n) * nres],
        packed.states[zoff : zoff + n],
        toff,
    )


def _pack(shapes: Sequence[NodeTopology]) -> Packed:
    ordered = resource_names(shapes)
    info: list[int] = []
    zone_off: list[int] = []
    blocks: dict[tuple[int, ...], int] = {}  # a topology block -> its offset
    topology: list[int] = []
    available: list[int] = []
    states: list[int] = []
    zone_count = 0
    for node in shapes:
        rows = shape_rows(node, ordered)
        block = tuple(rows.topology)
        toff = blocks.get(block)
        if toff is None:  # the first shape of its topology class
            toff = blocks[block] = len(topology)
            topology += block
        info += [rows.n, toff, *rows.info]
        zone_off.append(zone_count)
        available += rows.available
        states += rows.states
        zone_count += rows.n
    return Packed(
        n_res=len(ordered),
        n_shapes=len(shapes),
        zone_count=zone_count,
        topo_len=len(topology),
        res_names=ordered,
        res_index={n: i for i, n in enumerate(ordered)},
        res_kind=array("q", [resource_kind(r) for r in ordered]),
        shape_info=array("q", info),
        zone_off=array("q", zone_off),
        topology=array("q", topology or [0]),
        available=array("q", available),
        states=array("q", states or [0]),
        idle_states=array("q", bytes(8 * 64)),  # every zone idle (n <= 64: u64 masks)
    )
