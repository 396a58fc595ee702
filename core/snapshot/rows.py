"""A node's rows of the packed arrays (``ShapeRows``): what one shape contributes to the
table the kernel reads (core/snapshot/snapshot.py, ``Packed``), computed whole for a
new topology class (``shape_rows``) or only its usage part for a known one
(``usage_rows``); read back from a packed table by snapshot.rows_of."""

from __future__ import annotations

import functools
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, repeat

from core.feasibility import _kernel_py as ref
from core.model import NodeTopology, NumaZone

_IGNORED = frozenset({"ephemeral-storage", "storage", "pods"})
_STATE_CODES = {"idle": 0, "shared": 1, "single": 2}
UNLIMITED = ref.UNLIMITED
# One documented range for both kernels (int64 in the compiled one): a zone amount is
# clamped to 2^56 so that sums over up to 64 NUMA nodes stay below 2^62, a request to 2^60.
# Both bounds are far above any real machine (64 PiB per NUMA node).
MAX_ZONE_AMOUNT = 2**56
MAX_REQUEST = 2**60


def _zone_amount(v: int) -> int:
    return min(max(v, 0), MAX_ZONE_AMOUNT)


@functools.lru_cache(maxsize=1024)
def resource_kind(name: str) -> int:
    """Which kubelet hint provider owns a resource (cached: called per resource per
    container per review)."""
    if name == "cpu":
        return ref.RES_CPU
    if name == "memory" or name.startswith("hugepages-"):
        return ref.RES_MEMORY
    if name in _IGNORED:
        return ref.RES_IGNORED
    return ref.RES_DEVICE


def node_allocatable_known(node: NodeTopology) -> bool:
    """The node's allocatable comes from its Node object (not summed from NUMA zones), so a
    device it does not list is absent."""
    if node.sources:
        return "Node" in node.sources and bool(node.allocatable)
    return bool(node.allocatable)


def _zone_row(amounts: Mapping[str, int], ordered: Sequence[str]) -> list[int]:
    """_zone_amount of every resource in ``ordered`` (0 when absent), in one pass."""
    top = MAX_ZONE_AMOUNT
    return [0 if v < 0 else (v if v <= top else top) for v in map(amounts.get, ordered, repeat(0))]


@dataclass(slots=True)
class ShapeRows:
    """One shape's rows of the packed arrays (its zone offset left out: it depends on where
    the shape is stored)."""

    n: int
    info: Sequence[int]  # SHAPE_FIELDS minus the 2 leading (n, topology offset)
    topology: Sequence[int]  # its topology block (codes.SF_TOPO_OFF), shared by its class
    available: Sequence[int]  # free amount per (zone, resource): n * n_res
    states: Sequence[int]
    topo_off: int = -1  # where ``topology`` is stored already (-1: nowhere yet)


def resource_names(shapes: Sequence[NodeTopology]) -> tuple[str, ...]:
    """The packed resource table: cpu first, then every other resource sorted."""
    names = {"cpu"}
    for node in shapes:
        names.update(node.allocatable)
        for z in node.zones:
            names.update(z.capacity, z.allocatable, z.available)
    return ("cpu", *sorted(names - {"cpu"}))


def shape_rows(node: NodeTopology, ordered: Sequence[str]) -> ShapeRows:
    zs = sorted(node.zones, key=lambda z: z.id)
    n = len(zs)
    # Zones that report no CPU (or no memory) leave that provider unknown: it is not
    # simulated rather than read as "zero CPUs" (no false rejection on partial NRTs).
    cpu_known = any(z.capacity.get("cpu", 0) for z in zs)
    mem_known = any(z.capacity.get("memory", 0) or z.allocatable.get("memory", 0) for z in zs)
    info = [
        # the NUMA-count limit belongs to the node's kubelet: with its policy none the
        # kubelet starts on any machine (topology_manager.go NewManager)
        node.max_numa_nodes if node.tm_policy != "none" else 64,
        int(node.prefer_closest),
        int(node.cpu_manager_policy == "static" and cpu_known),
        int(node.full_pcpus_only),
        max(1, node.threads_per_core),
        int(node.memory_manager_policy == "Static" and mem_known),
    ]
    limits: list[int] = []
    for z in zs:
        rows = (_zone_row(z.capacity, ordered), _zone_row(z.allocatable, ordered))
        for row in rows:  # ordered[0] is cpu: whole CPUs, the static policy's unit
            row[0] //= 1000
        limits.extend(chain.from_iterable(zip(*rows, strict=True)))
    available, states = usage_values(zs, [z.available for z in zs], node.numa_states, ordered, n)
    ids = [z.id for z in zs]
    dist: list[int] = []
    for i, zi in enumerate(zs):
        row = list(map(zi.costs.get, ids, repeat(20)))
        row[i] = zi.costs.get(zi.id, 10)  # to itself: 10 unless reported
        dist.extend(row)
    node_alloc: list[int] = []
    unaligned: list[int] = []
    authoritative = node_allocatable_known(node)
    present = {r for z in zs for m in (z.capacity, z.allocatable) for r, v in m.items() if v}
    for r in ordered:
        in_zones = r in present
        alloc = node.allocatable.get(r) if authoritative else None
        if alloc is None:
            # absent: only a device the Node object does not list is known to be 0
            known_zero = authoritative and not in_zones and resource_kind(r) == ref.RES_DEVICE
            alloc = 0 if known_zero else -1
        node_alloc.append(alloc)
        alloc = min(alloc, MAX_REQUEST)
        if in_zones:
            unaligned.append(_zone_amount(node.unaligned_devices.get(r, 0)))
        else:  # no topology at all: every device of it is unaligned
            fallback = alloc if alloc >= 0 else UNLIMITED
            unaligned.append(min(node.unaligned_devices.get(r, fallback), UNLIMITED))
    return ShapeRows(n, info, node_alloc + unaligned + limits + dist, available, states)


def _states(states: Sequence[str], n: int) -> list[int]:
    if not states:  # no Koordinator NUMA states reported (most nodes): all idle
        return [0] * n
    return [_STATE_CODES.get(states[pos] if pos < len(states) else "idle", 0) for pos in range(n)]


def usage_rows(node: NodeTopology, ordered: Sequence[str], like: ShapeRows) -> ShapeRows:
    """``shape_rows(node)`` for a node of the topology class of ``like`` (a shape of that
    class): the class fixes every row but the zones' available amounts and the NUMA
    states (_topology_key has everything else), so only those are computed, and the
    class's topology block is shared. Under watch churn most events change usage only
    (NFD's topology-updater rewrites ``available``)."""
    free = [z.available for z in node.zones]
    available, states = usage_values(node.zones, free, node.numa_states, ordered, like.n)
    return ShapeRows(like.n, like.info, like.topology, available, states, like.topo_off)


def usage_values(
    zones: Sequence[NumaZone],
    free: Sequence[Mapping[str, int]],
    states: Sequence[str],
    ordered: Sequence[str],
    n: int,
) -> tuple[array[int], array[int]]:
    """What usage contributes to a shape's rows (``n`` zones): every zone's free amounts
    (``free``, aligned with ``zones``) in zone id order, one resource after another (its
    region of ``Packed.available``), and the NUMA states' codes."""
    flat: list[int] = []
    for _, amounts in sorted(zip(zones, free, strict=True), key=_zone_id):
        row = _zone_row(amounts, ordered)
        row[0] //= 1000  # ordered[0] is cpu: whole CPUs, the static policy's unit
        flat += row
    return array("q", flat), array("q", _states(states, n))


def _zone_id(pair: tuple[NumaZone, Mapping[str, int]]) -> int:
    return pair[0].id
