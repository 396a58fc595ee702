"""Reference implementation of the NUMA feasibility kernel: the kubelet Topology Manager
and its hint providers, rule by rule (research/kubelet-topology-manager.md).

The kernel reads the packed snapshot (core/snapshot/snapshot.py) and a packed pod demand, and
answers for one node shape with a ``KernelResult`` (core/feasibility/codes.py): admitted
or not, the admitted NUMA mask, whether it is preferred, and a reason code.
``core/feasibility/_kernel_c.pyx`` has the same helpers under the same names, cut at the
same seams, with the same results; the differential tests prove it.

Masks are over NUMA *positions* (0..n-1, ascending NUMA id). Positions map monotonically
to ids, so counts, subset relations and the numeric tie-break (IsNarrowerThan) are the same
as over the ids.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from functools import cmp_to_key
from typing import Any

from core.errors import InvalidInput
from core.feasibility.codes import (
    F_CPU_ONLY,
    F_EMPTY,
    F_EXCLUSIVE,
    F_KOORD_HINTS,
    F_KOORD_REQUESTS,
    F_POD_SCOPE,
    KERNEL_VERSION,
    L_DONTCARE,
    L_HINTS,
    L_IMPOSSIBLE,
    MAX_ENUM_NUMA,
    P_BEST_EFFORT,
    P_NONE,
    P_RESTRICTED,
    P_SINGLE,
    R_CPU_SHORT,
    R_DEVICE_SHORT,
    R_EXCLUSIVE,
    R_MEMORY_SHORT,
    R_NODE_SHORT,
    R_NOT_PREFERRED,
    R_SINGLE_NO_HINT,
    R_SMT,
    R_TOO_LARGE,
    R_TOO_MANY_NUMA,
    RES_CPU,
    RES_DEVICE,
    RES_IGNORED,
    RES_MEMORY,
    SF_CPU_STATIC,
    SF_FULL_PCPUS,
    SF_MAX_NUMA,
    SF_MEM_STATIC,
    SF_N,
    SF_PREFER_CLOSEST,
    SF_THREADS,
    SF_TOPO_OFF,
    SHAPE_FIELDS,
    U_INIT,
    KernelResult,
    ScanResult,
    topology_size,
)
from core.feasibility.codes import U_APP as U_APP  # read by snapshot.py through the reference
from core.feasibility.codes import U_SIDECAR as U_SIDECAR
from core.feasibility.codes import UNLIMITED as UNLIMITED
from core.feasibility.codes import fail as _fail
from core.feasibility.codes import ok as _ok

__all__ = [
    "F_CPU_ONLY",
    "F_EMPTY",
    "F_EXCLUSIVE",
    "F_KOORD_HINTS",
    "F_KOORD_REQUESTS",
    "F_POD_SCOPE",
    "KERNEL_VERSION",
    "MAX_ENUM_NUMA",
    "RES_CPU",
    "RES_DEVICE",
    "RES_IGNORED",
    "RES_MEMORY",
    "Kernel",
    "KernelResult",
    "best_nonpreferred_count",
    "check_exclusive",
    "class_selection",
    "merge_hints",
]


class _HintList:
    """One resource's hints: kind, masks and their preferred flags, and provenance."""

    __slots__ = ("kind", "masks", "min_width", "prefs", "resource")

    def __init__(self, kind: int, resource: int) -> None:
        self.kind = kind
        self.resource = resource
        self.masks: list[int] = []
        self.prefs: list[bool] = []
        self.min_width = 0


def _block(p: Any, base: int) -> Any:
    """The topology block of the shape at ``base`` (codes.SF_TOPO_OFF has its layout):
    node allocatable, unaligned devices, zone limits, distances."""
    n, start = p.shape_info[base + SF_N], p.shape_info[base + SF_TOPO_OFF]
    return p.topology[start : start + topology_size(n, p.n_res)]


def _dist(p: Any, base: int) -> Any:
    n = p.shape_info[base + SF_N]
    return _block(p, base)[topology_size(n, p.n_res) - n * n :]


class _State:
    """Mutable per-call node state: free amounts, reusable init-container amounts per NUMA
    node, unaligned devices, and memory-manager groups (Cells, NumberOfAssignments)."""

    __slots__ = ("assigns", "cap", "cells", "free", "n", "nres", "reuse", "total", "unaligned")

    def __init__(self, packed: Any, shape: int, empty: bool) -> None:
        info = packed.shape_info
        base = shape * SHAPE_FIELDS
        n = info[base + SF_N]
        zoff = packed.zone_off[shape]
        nres = packed.n_res
        block = _block(packed, base)
        limits = block[2 * nres :]  # (capacity, allocatable) per (zone, resource)
        self.n = n
        self.nres = nres
        self.cap = [[limits[(z * nres + r) * 2] for r in range(nres)] for z in range(n)]
        self.total = [[limits[(z * nres + r) * 2 + 1] for r in range(nres)] for z in range(n)]
        # "empty": available := allocatable (docs/contracts.md: Verdicts)
        free = packed.available[zoff * nres : (zoff + n) * nres]
        self.free = (
            [row[:] for row in self.total]
            if empty
            else [list(free[z * nres : (z + 1) * nres]) for z in range(n)]
        )
        self.reuse = [[0] * nres for _ in range(n)]
        self.unaligned = list(block[nres : 2 * nres])
        self.cells = [0] * n
        self.assigns = [0] * n


def _popcount(mask: int) -> int:
    return mask.bit_count()


def _masks(n: int) -> range:
    """bitmask.IterateBitMasks: every non-empty subset. Order does not matter here: the
    kernel builds hint *sets*, and the best-hint ordering is total (see _better)."""
    return range(1, 1 << n)


def _sum(rows: list[list[int]], mask: int, r: int) -> int:
    total = 0
    z = 0
    while mask:
        if mask & 1:
            total += rows[z][r]
        mask >>= 1
        z += 1
    return total


def _outside(rows: list[list[int]], mask: int, r: int) -> int:
    return sum(rows[z][r] for z in range(len(rows)) if not (mask >> z) & 1)


def _finish(hl: _HintList, n: int, min_width: int) -> _HintList:
    # Hints whose width equals the minimal width (from CAPACITY) are preferred.
    hl.prefs = [_popcount(m) == min_width for m in hl.masks]
    hl.min_width = min_width
    if not hl.masks:
        hl.kind = L_IMPOSSIBLE  # an empty, non-nil list: "cannot be satisfied"
    return hl


# --- hint providers (device, CPU, memory: container_manager_linux.go order) -----------------


def cpu_hints(st: _State, request: int) -> _HintList:
    """cpumanager policy_static.go generateCPUTopologyHints: minimal width from capacity
    (every CPU of the NUMA nodes), hints from free CPUs plus this pod's reusable CPUs, which
    must all lie inside the mask."""
    hl = _HintList(L_HINTS, 0)
    min_width = st.n
    for mask in _masks(st.n):
        if _sum(st.cap, mask, 0) >= request:
            min_width = min(min_width, _popcount(mask))
        if _outside(st.reuse, mask, 0) > 0:
            continue
        if _sum(st.reuse, mask, 0) + _sum(st.free, mask, 0) < request:
            continue
        hl.masks.append(mask)
    return _finish(hl, st.n, min_width)


def device_hints(st: _State, r: int, request: int) -> _HintList:
    """devicemanager topology_hints.go: nil when no device of the resource has topology;
    [] when fewer devices are free in total; devices without topology count in no mask."""
    if not any(st.cap[z][r] > 0 for z in range(st.n)):
        return _HintList(L_DONTCARE, r)
    free_total = sum(st.free[z][r] + st.reuse[z][r] for z in range(st.n)) + st.unaligned[r]
    if free_total < request:
        return _HintList(L_IMPOSSIBLE, r)
    hl = _HintList(L_HINTS, r)
    min_width = st.n
    for mask in _masks(st.n):
        if _sum(st.cap, mask, r) >= request:
            min_width = min(min_width, _popcount(mask))
        if _outside(st.reuse, mask, r) > 0:
            continue
        if _sum(st.reuse, mask, r) + _sum(st.free, mask, r) < request:
            continue
        hl.masks.append(mask)
    return _finish(hl, st.n, min_width)


def _memory_mask_ok(st: _State, mask: int) -> bool:
    """memorymanager policy_static.go calculateHints: group (Cells) rules."""
    width = _popcount(mask)
    for z in range(st.n):
        if not (mask >> z) & 1:
            continue
        cells = st.cells[z]
        if width == 1:
            if cells and _popcount(cells) > 1:
                return False  # the node already belongs to a multi-NUMA group
        elif st.assigns[z] > 0 and (_popcount(cells) == 1 or cells != mask):
            return False  # serves single-NUMA allocations, or another group
    return True


def memory_hints(st: _State, req: Sequence[int], kinds: Sequence[int]) -> _HintList:
    """memorymanager calculateHints for every memory type at once (each type gets the same
    list). No qualifying mask gives an EMPTY MAP, i.e. "don't care" (issues #128708,
    #120733); the failure surfaces in Allocate."""
    types = [r for r in range(st.nres) if kinds[r] == RES_MEMORY and req[r] > 0]
    if not types:
        return _HintList(L_DONTCARE, -1)
    hl = _HintList(L_HINTS, types[0])
    min_width = st.n
    for mask in _masks(st.n):
        if any(_sum(st.total, mask, t) < req[t] for t in types):
            continue  # capacity rule: allocatable over the mask
        min_width = min(min_width, _popcount(mask))
        if not _memory_mask_ok(st, mask):
            continue
        if any(_sum(st.free, mask, t) + _sum(st.reuse, mask, t) < req[t] for t in types):
            continue
        hl.masks.append(mask)
    hl.prefs = [_popcount(m) == min_width for m in hl.masks]
    hl.min_width = min_width
    if not hl.masks:
        hl.kind = L_DONTCARE
    return hl


# --- merge (topologymanager policy.go) ------------------------------------------------------


def _dist_sum(mask: int, dist: Sequence[int], n: int) -> int:
    """The sum of distances over every ordered pair of the mask's NUMA nodes (i == j too)."""
    bits = [z for z in range(n) if (mask >> z) & 1]
    return sum(dist[i * n + j] for i in bits for j in bits)


def _fitter_cmp(a: int, b: int, closest: bool, dist: Sequence[int], n: int) -> int:
    """HintMerger's fitter, as a comparison (-1: ``a`` is the fitter hint). Narrowest:
    fewer NUMA nodes, then the smaller numeric value (IsNarrowerThan). Closest
    (prefer-closest-numa-nodes): same width -> smaller average distance; with the same
    width the averages share a denominator, so the sums compare."""
    ca, cb = _popcount(a), _popcount(b)
    if ca != cb:
        return -1 if ca < cb else 1
    if closest:
        da, db = _dist_sum(a, dist, n), _dist_sum(b, dist, n)
        if da != db:
            return -1 if da < db else 1
    return (a > b) - (a < b)


def _nonpreferred_group(mask: int, bnp: int) -> int:
    """0: width equal to bestNonPreferredAffinityCount; 1: narrower; 2: wider."""
    width = _popcount(mask)
    return 0 if width == bnp else (1 if width < bnp else 2)


def _nonpreferred_cmp(a: int, b: int, bnp: int, closest: bool, dist: Sequence[int], n: int) -> int:
    """HintMerger for two non-preferred hints: a width equal to
    bestNonPreferredAffinityCount wins, then widths below it (wider first), then widths
    above it (narrowest first). That comparison is a total order, so the best of a set
    does not depend on the permutation order."""
    ga, gb = _nonpreferred_group(a, bnp), _nonpreferred_group(b, bnp)
    if ga != gb:
        return -1 if ga < gb else 1
    if ga == 1 and _popcount(a) != _popcount(b):
        return -1 if _popcount(a) > _popcount(b) else 1
    return _fitter_cmp(a, b, closest, dist, n)


def _filter_single_numa(lists: list[_HintList]) -> list[_HintList]:
    """policy_single_numa_node.go filterSingleNumaHints: keep {nil,true} and single-NUMA
    preferred hints; {nil,false} is always dropped."""
    out = []
    for hl in lists:
        if hl.kind == L_DONTCARE:
            out.append(hl)
            continue
        f = _HintList(L_HINTS, hl.resource)
        f.min_width = hl.min_width
        for m, p in zip(hl.masks, hl.prefs, strict=True):
            if p and _popcount(m) == 1:
                f.masks.append(m)
                f.prefs.append(True)
        if not f.masks:
            f.kind = L_IMPOSSIBLE
        out.append(f)
    return out


def _exclusive_ok(mask: int, states: Sequence[int], soff: int, n: int) -> bool:
    """Koordinator checkExclusivePolicy (Required): a multi-NUMA hint may not cover a NUMA
    node in state single (2); a single-NUMA hint may not sit on a shared (1) one."""
    width = _popcount(mask)
    for z in range(n):
        if (mask >> z) & 1:
            s = states[soff + z]
            if width > 1 and s == 2:
                return False
            if width == 1 and s == 1:
                return False
    return True


def _preferred_candidates(lists: list[_HintList], full: int) -> set[int]:
    """mergePermutation: a permutation is preferred only when every hint is preferred and
    every non-nil mask is IDENTICAL (PR #108052). So a preferred mask is one every hint list
    offers as preferred (or does not care about)."""
    cands: set[int] | None = None
    for hl in lists:
        if hl.kind == L_DONTCARE:
            continue
        if hl.kind == L_IMPOSSIBLE:
            return set()
        offered = {m for m, p in zip(hl.masks, hl.prefs, strict=True) if p}
        cands = offered if cands is None else cands & offered
    return {full} if cands is None else cands


def _achievable_masks(lists: list[_HintList], full: int) -> set[int]:
    """Every AND of one hint per list (nil acts as all nodes); an empty AND is skipped."""
    acc = {full}
    for hl in lists:
        if hl.kind != L_HINTS:
            continue
        acc = {a & m for a in acc for m in hl.masks if a & m}
    return acc


def _best_nonpreferred_count(lists: list[_HintList]) -> int:
    """bestNonPreferredAffinityCount: the widest of the lists' narrowest non-nil hints."""
    best = 0
    for hl in lists:
        if hl.kind == L_HINTS and hl.masks:
            best = max(best, min(_popcount(m) for m in hl.masks))
    return best


class _Merged:
    __slots__ = ("mask", "preferred", "rejected_by_exclusive")

    def __init__(self, mask: int, preferred: bool, rejected: bool = False) -> None:
        self.mask = mask  # 0 = nil
        self.preferred = preferred
        self.rejected_by_exclusive = rejected


def merge(
    lists: list[_HintList],
    *,
    policy: int,
    n: int,
    closest: bool,
    dist: Sequence[int],
    exclusive: bool,
    states: Sequence[int],
    soff: int,
) -> _Merged:
    """The policy's Merge: filter (single-numa-node), choose the best merged hint
    (HintMerger), and map an all-nodes single-numa-node hint to nil."""
    full = (1 << n) - 1
    if policy == P_SINGLE:
        lists = _filter_single_numa(lists)
        if any(hl.kind == L_IMPOSSIBLE for hl in lists):
            return _Merged(0, False)  # no permutation: {nil, false}
        closest = False  # prefer-closest-numa-nodes is ignored by this policy
    pref = _preferred_candidates(lists, full)
    if exclusive:
        pref = {m for m in pref if _exclusive_ok(m, states, soff, n)}
    if pref:
        best = min(pref, key=cmp_to_key(lambda a, b: _fitter_cmp(a, b, closest, dist, n)))
        return _Merged(0 if policy == P_SINGLE and best == full else best, True)
    nonpref = _achievable_masks(lists, full)
    if exclusive:
        before = len(nonpref)
        nonpref = {m for m in nonpref if _exclusive_ok(m, states, soff, n)}
        if before and not nonpref:
            return _Merged(full, False, True)
    if not nonpref:
        best = full  # no permutation produced a mask: {all nodes, false}
    else:
        bnp = _best_nonpreferred_count(lists)
        key = cmp_to_key(lambda a, b: _nonpreferred_cmp(a, b, bnp, closest, dist, n))
        best = min(nonpref, key=key)
    return _Merged(0 if policy == P_SINGLE and best == full else best, False)


# --- allocation (providers' Allocate) -------------------------------------------------------


def _take(st: _State, r: int, mask: int, amount: int, got: list[int]) -> int:
    """Take up to ``amount`` of resource r from the NUMA nodes in mask, reusable first,
    ascending NUMA id; record per-node amounts in ``got``. Returns what is still missing."""
    for z in range(st.n):
        if amount == 0:
            break
        if not (mask >> z) & 1:
            continue
        t = min(st.reuse[z][r], amount)
        st.reuse[z][r] -= t
        amount -= t
        got[z] += t
        t = min(st.free[z][r], amount)
        st.free[z][r] -= t
        amount -= t
        got[z] += t
    return amount


def allocate_spill(st: _State, r: int, mask: int, amount: int) -> list[int]:
    """CPU allocateCPUs and device devicesToAllocate: inside the hint first, then anywhere
    (then, for devices, those without topology). Callers checked the total beforehand."""
    n = st.n
    full = (1 << n) - 1
    got = [0] * n
    inside = mask if mask else full
    left = _take(st, r, inside, amount, got)
    left = _take(st, r, full & ~inside, left, got)
    if left:
        st.unaligned[r] -= left
    return got


def _remember_reusable(st: _State, r: int, got: list[int], kind: int) -> None:
    """Regular init containers' resources are reusable by later containers; sidecars'
    and app containers' are not (cpumanager updateCPUsToReuse)."""
    if kind == U_INIT:
        for z in range(st.n):
            st.reuse[z][r] += got[z]


def _total_free(st: _State, r: int) -> int:
    return sum(st.free[z][r] + st.reuse[z][r] for z in range(st.n))


def _best_memory_hint(hl: _HintList, within: int) -> tuple[int, bool] | None:
    """Preferred first, then the narrowest (memorymanager findBestHint), among hints whose
    mask contains ``within``."""
    cands = [
        (not p, _popcount(m), m, p)
        for m, p in zip(hl.masks, hl.prefs, strict=True)
        if m & within == within
    ]
    if not cands:
        return None
    best = min(cands)
    return best[2], best[3]


def allocate_memory(
    st: _State,
    req: Sequence[int],
    kinds: Sequence[int],
    mask: int,
    preferred: bool,
    kind: int,
    unit: int,
) -> KernelResult | None:
    """memorymanager policy_static.go Allocate (admission-relevant parts). Returns the
    R_MEMORY_SHORT failure, or None on success."""
    types = [r for r in range(st.nres) if kinds[r] == RES_MEMORY and req[r] > 0]
    if not types:
        return None
    hl = memory_hints(st, req, kinds)
    first = types[0]
    if mask == 0:
        best = _best_memory_hint(hl, 0) if hl.kind == L_HINTS else None
        if best is None or (not best[1] and preferred):
            return _fail(R_MEMORY_SHORT, unit, first, req[first], _total_free(st, first))
        mask, preferred = best
    short = [t for t in types if _sum(st.free, mask, t) + _sum(st.reuse, mask, t) < req[t]]
    if short:
        # "extend" the topology manager hint to a wider one that contains it
        best = _best_memory_hint(hl, mask) if hl.kind == L_HINTS else None
        if best is None or (not best[1] and preferred):
            t = short[0]
            have = _sum(st.free, mask, t) + _sum(st.reuse, mask, t)
            return _fail(R_MEMORY_SHORT, unit, t, req[t], have)
        mask = best[0]
    if _popcount(mask) > 1:
        for z in range(st.n):
            grouped_elsewhere = _popcount(st.cells[z]) == 1 or st.cells[z] != mask
            if (mask >> z) & 1 and st.assigns[z] > 0 and grouped_elsewhere:
                return _fail(R_MEMORY_SHORT, unit, first, req[first], 0)  # issue #138495
    for t in types:
        got = [0] * st.n
        _take(st, t, mask, req[t], got)
        _remember_reusable(st, t, got, kind)
    for z in range(st.n):
        if (mask >> z) & 1:
            st.cells[z] = mask
            st.assigns[z] += 1
    return None


# --- the kernel ----------------------------------------------------------------------------


class Kernel:
    """The feasibility kernel over one packed snapshot (core.snapshot.snapshot.Packed)."""

    __slots__ = ("classes", "packed")

    def __init__(self, packed: Any) -> None:
        if packed.n_res < 1:
            raise InvalidInput("packed snapshot: n_res must be at least 1 (cpu)")
        self.packed = packed
        # What core.feasibility.verdicts keeps per snapshot (the kernel is built once per
        # snapshot and implementation): set by its first evaluation, not read here.
        self.classes: Any = None

    def check(self, demand: Any, shape: int, policy: int, flags: int) -> KernelResult:
        """Admit the pod (``demand``: core.snapshot.snapshot.Demand) on node shape ``shape`` under
        topology manager policy ``policy`` (0 none .. 3 single-numa-node)."""
        p = self.packed
        if not 0 <= shape < p.n_shapes:
            raise InvalidInput(f"shape {shape} is out of range 0..{p.n_shapes - 1}")
        if not 0 <= policy <= 3:
            raise InvalidInput(f"policy code {policy} is not one of 0, 1, 2, 3")
        base = shape * SHAPE_FIELDS
        n = p.shape_info[base + SF_N]
        koord = flags & F_KOORD_HINTS
        if policy != P_NONE and not koord and n > p.shape_info[base + SF_MAX_NUMA]:
            # topology_manager.go NewManager: the kubelet refuses this policy
            return _fail(R_TOO_MANY_NUMA, -1, -1, n, p.shape_info[base + SF_MAX_NUMA])
        if n > MAX_ENUM_NUMA:
            return _fail(R_TOO_LARGE, -1, -1, n, MAX_ENUM_NUMA)
        short = _node_level_short(p, shape, demand)
        if short is not None:
            return short
        st = _State(p, shape, bool(flags & F_EMPTY))
        return _admit_units(p, shape, st, demand, policy, flags)

    def scan(
        self,
        demand: Any,
        start: int,
        inside: Sequence[int],
        outside: Sequence[int],
        firsts: Sequence[int],
        shape_of: Sequence[int],
        group_of: Sequence[int],
        codes: Sequence[int],
        flags: Sequence[int],
        monotone: Sequence[int],
    ) -> ScanResult:
        """The "node empty" run over topology classes from ``start``, in order, while each
        class is never-fits on it: a class t with ``inside[t]`` selected nodes (first
        ``firsts[t]``) is judged on its first node's shape with its group's (``group_of``)
        policy code and flags; a code below 0 (not known yet, or a verdict without a run),
        a class not ``monotone``, a run that admits or is too large stop the scan there,
        for the caller to judge that class. ``outside[t]`` counts unselected nodes."""
        n_topo = len(inside)
        if not len(outside) == len(firsts) == len(group_of) == len(monotone) == n_topo:
            raise InvalidInput(f"scan: per-class columns must all have {n_topo} items")
        if len(codes) != len(flags):
            raise InvalidInput(f"scan: {len(codes)} group codes but {len(flags)} group flags")
        if not 0 <= start <= n_topo:
            raise InvalidInput(f"scan: start {start} is out of range 0..{n_topo}")
        not_selected = never = 0
        near, near_result = -1, None
        usage = array("q")
        t = start
        while t < n_topo:
            n = inside[t]
            if n:
                g = group_of[t]
                if not 0 <= g < len(codes):
                    raise InvalidInput(f"class {t}: group {g} is out of range 0..{len(codes) - 1}")
                if codes[g] < 0 or not monotone[t]:
                    return ScanResult(t, not_selected, never, near, near_result, None, usage)
                i = firsts[t]
                if not 0 <= i < len(shape_of):
                    raise InvalidInput(
                        f"class {t}: node {i} is out of range 0..{len(shape_of) - 1}"
                    )
                result = self.check(demand, shape_of[i], codes[g], flags[g] | F_EMPTY)
                if result.admitted or result.reason == R_TOO_LARGE:
                    return ScanResult(t, not_selected, never, near, near_result, result, usage)
                never += n
                usage.append(t)
                if near < 0 or i < firsts[near]:
                    near, near_result = t, result
            not_selected += outside[t]
            t += 1
        return ScanResult(n_topo, not_selected, never, near, near_result, None, usage)


def _node_level_short(p: Any, shape: int, demand: Any) -> KernelResult | None:
    """Cheap bound: the node's allocatable must hold the pod's requests (kubelet admit)."""
    nres = p.n_res
    pod = demand.n_units - 1
    node_alloc = _block(p, shape * SHAPE_FIELDS)
    for r in range(nres):
        need = demand.unit_res[pod * nres + r]
        have = node_alloc[r]
        if need > 0 and have >= 0 and need > have and p.res_kind[r] != RES_IGNORED:
            return _fail(R_NODE_SHORT, pod, r, need, have)
    return None


def _unit_range(demand: Any, flags: int) -> range:
    # pod scope: one merge with the pod-level amounts (the last unit); container scope:
    # every container in kubelet order (scope_container.go).
    pod = demand.n_units - 1
    return range(pod, pod + 1) if flags & F_POD_SCOPE else range(pod)


def _admit_units(
    p: Any, shape: int, st: _State, demand: Any, policy: int, flags: int
) -> KernelResult:
    """Admit every unit in order (container scope) or the pod-level unit (pod scope); the
    pod's affinity is the union of the units' hints, preferred when all of them are."""
    base = shape * SHAPE_FIELDS
    union = 0
    all_pref = 1
    koord = None
    if flags & F_KOORD_REQUESTS and policy >= P_RESTRICTED and not _binds_cpus(p, base, demand):
        koord = koord_filter(p, base, st, demand, policy, flags)
        if not koord.admitted:
            return koord
    for u in _unit_range(demand, flags):
        res = _admit_unit(p, base, st, demand, u, policy, flags)
        if not res.admitted:
            return res
        union |= res.mask
        all_pref &= res.preferred
    if policy == P_NONE:
        return _ok(0, 0)  # policy none stores no hint: {nil, false}
    if union == 0 and koord is not None and koord.mask:
        union = koord.mask  # the kubelet places nothing: koord-scheduler's NUMA nodes
    if union == 0 and policy != P_SINGLE:
        # No unit has a hint (a Burstable pod: no provider cares): the kubelet's merged
        # hint is the default {all NUMA nodes, preferred} (policy.go mergeFilteredHints);
        # single-numa-node maps it to nil (policy_single_numa_node.go).
        union = (1 << st.n) - 1
    return _ok(union, all_pref)


def _binds_cpus(p: Any, base: int, demand: Any) -> bool:
    """The pod gets exclusive CPUs from the kubelet's static CPU manager."""
    return bool(p.shape_info[base + SF_CPU_STATIC]) and demand.unit_cpu[demand.n_units - 1] > 0


def _known(rows: list[list[int]], r: int) -> bool:
    return any(row[r] > 0 for row in rows)


def koord_filter(
    p: Any, base: int, st: _State, demand: Any, policy: int, flags: int
) -> KernelResult:
    """koord-scheduler's FilterByNUMANode for a pod that binds no CPUs (plugin.go Filter;
    resource_manager.go GetTopologyHints, generateResourceHints): the pod's requests (CPU
    in millicores, rounded up to whole CPUs here: the zones' CPU amounts are whole CPUs)
    must fit the NUMA nodes of a preferred hint; memory and hugepages count whatever the
    kubelet's memory manager. A resource no NUMA node reports is not aligned (it is not in
    the NUMA nodes' resources upstream). Runs before the kubelet's admission on a fresh
    state; the NUMA nodes it admits stand when the kubelet places nothing."""
    nres = p.n_res
    pod = demand.n_units - 1
    req = [demand.unit_res[pod * nres + r] for r in range(nres)]
    kinds = p.res_kind
    lists: list[_HintList] = []
    if req[0] > 0 and _known(st.cap, 0):
        lists.append(cpu_hints(st, -(-req[0] // 1000)))
    memory = [r for r in range(nres) if kinds[r] == RES_MEMORY and req[r] > 0]
    if memory and all(_known(st.total, r) for r in memory):
        hl = memory_hints(st, req, kinds)
        if not hl.masks:
            hl.kind = L_IMPOSSIBLE  # no NUMA combination holds it: no hint, not "don't care"
        lists.append(hl)
    for hl in lists:
        if hl.kind == L_HINTS:
            _koord_preferences(hl, policy == P_RESTRICTED)
    info = p.shape_info
    merged = merge(
        lists,
        policy=policy,
        n=st.n,
        closest=bool(info[base + SF_PREFER_CLOSEST]),
        dist=_dist(p, base),
        exclusive=bool(flags & F_EXCLUSIVE),
        states=p.states if not flags & F_EMPTY else p.idle_states,
        soff=0 if flags & F_EMPTY else p.zone_off[base // SHAPE_FIELDS],
    )
    if merged.rejected_by_exclusive:
        return _fail(R_EXCLUSIVE, pod, -1, 0, 0)
    if not merged.preferred:
        return _not_preferred(lists, policy, pod, st.n)
    return _ok(merged.mask, 1, pod)


def _unit_lists(
    p: Any, base: int, st: _State, demand: Any, u: int, req: list[int], policy: int, flags: int
) -> list[_HintList]:
    """filterProvidersHints in provider order: devices, CPU, memory."""
    nres = p.n_res
    lists: list[_HintList] = []
    cpu_only = bool(flags & F_CPU_ONLY)
    if not cpu_only:
        for r in range(nres):
            if p.res_kind[r] == RES_DEVICE and req[r] > 0:
                lists.append(device_hints(st, r, req[r]))
    excl = demand.unit_cpu[u]
    if p.shape_info[base + SF_CPU_STATIC] and excl > 0:
        lists.append(cpu_hints(st, excl))
    if not cpu_only and p.shape_info[base + SF_MEM_STATIC] and demand.guaranteed:
        lists.append(memory_hints(st, req, p.res_kind))
    if flags & F_KOORD_HINTS:
        for hl in lists:
            if hl.kind == L_HINTS:
                device = p.res_kind[hl.resource] == RES_DEVICE
                _koord_preferences(hl, policy == P_RESTRICTED and not device)
    return lists


def _koord_preferences(hl: _HintList, all_preferred: bool) -> None:
    """koord-scheduler's preferences: the minimal width is the narrowest mask that fits
    now, not the narrowest by capacity; under Restricted every fitting CPU and memory hint
    is preferred (resource_manager.go generateResourceHints), device hints keep the
    narrowest fitting (deviceshare topology_hint.go generateTopologyHints)."""
    min_width = min(_popcount(m) for m in hl.masks)
    hl.prefs = [all_preferred or _popcount(m) == min_width for m in hl.masks]
    hl.min_width = min_width


def _admit_unit(
    p: Any, base: int, st: _State, demand: Any, u: int, policy: int, flags: int
) -> KernelResult:
    """scope_container.go / scope_pod.go for one unit: bounds, the providers' hints, the
    policy's Merge and admit (restricted, single-numa-node: preferred only), Allocate."""
    info = p.shape_info
    n = st.n
    req = [demand.unit_res[u * p.n_res + r] for r in range(p.n_res)]
    excl = demand.unit_cpu[u] if info[base + SF_CPU_STATIC] else 0
    bound = _unit_bounds(p, base, st, req, excl, u, flags)
    if bound is not None:
        return bound
    lists = _unit_lists(p, base, st, demand, u, req, policy, flags)
    mask, preferred = 0, False
    if policy != P_NONE:
        merged = merge(
            lists,
            policy=policy,
            n=n,
            closest=bool(info[base + SF_PREFER_CLOSEST]),
            dist=_dist(p, base),
            exclusive=bool(flags & F_EXCLUSIVE) and policy >= P_RESTRICTED,
            states=p.states if not flags & F_EMPTY else p.idle_states,
            soff=0 if flags & F_EMPTY else p.zone_off[base // SHAPE_FIELDS],
        )
        if merged.rejected_by_exclusive:
            return _fail(R_EXCLUSIVE, u, -1, 0, 0)
        if policy >= P_RESTRICTED and not merged.preferred:
            return _not_preferred(lists, policy, u, n)
        mask, preferred = merged.mask, merged.preferred
    fail = _allocate_unit(p, base, st, demand, u, req, excl, mask, preferred, flags)
    if fail is not None:
        return fail
    # A unit no provider cares about gets {all nodes, true}: it places nothing.
    informative = any(hl.kind != L_DONTCARE for hl in lists)
    return _ok(mask if informative else 0, int(preferred), u)


def _unit_bounds(
    p: Any, base: int, st: _State, req: list[int], excl: int, u: int, flags: int
) -> KernelResult | None:
    """Cheap bounds before any enumeration: SMT alignment and totals. A unit short of free
    resources in total fails under every policy (the merge can only make it worse)."""
    info = p.shape_info
    if excl > 0:
        threads = info[base + SF_THREADS]
        if info[base + SF_FULL_PCPUS] and threads > 1 and excl % threads:
            return _fail(R_SMT, u, 0, excl, threads)  # full-pcpus-only SMTAlignmentError
        free = _total_free(st, 0)
        if free < excl:
            return _fail(R_CPU_SHORT, u, 0, excl, free)
    if flags & F_CPU_ONLY:
        return None
    for r in range(p.n_res):
        if req[r] <= 0:
            continue
        kind = p.res_kind[r]
        if kind == RES_DEVICE:
            free = _total_free(st, r) + st.unaligned[r]
            if free < req[r]:
                return _fail(R_DEVICE_SHORT, u, r, req[r], free)
    return None


def _not_preferred(lists: list[_HintList], policy: int, u: int, n: int) -> KernelResult:
    """Explain a rejection by restricted / single-numa-node: the first resource with no
    usable preferred hint, else the resources prefer different NUMA nodes."""
    for hl in lists:
        if hl.kind == L_IMPOSSIBLE:
            return _fail(R_NOT_PREFERRED, u, hl.resource, hl.min_width or n, 0)
        if hl.kind != L_HINTS:
            continue
        widths = [_popcount(m) for m, pr in zip(hl.masks, hl.prefs, strict=True) if pr]
        if not widths or (policy == P_SINGLE and min(widths) > 1):
            code = R_SINGLE_NO_HINT if policy == P_SINGLE else R_NOT_PREFERRED
            return _fail(code, u, hl.resource, hl.min_width, 0)
    return _fail(R_NOT_PREFERRED, u, -1, 0, 0)


def _allocate_unit(
    p: Any,
    base: int,
    st: _State,
    demand: Any,
    u: int,
    req: list[int],
    excl: int,
    mask: int,
    preferred: bool,
    flags: int,
) -> KernelResult | None:
    """Allocate on every provider in order (device, CPU, memory); any error rejects the
    pod under every policy (scope.go allocateAlignedResources)."""
    kind = demand.unit_kind[u]
    cpu_only = bool(flags & F_CPU_ONLY)
    if not cpu_only:
        for r in range(p.n_res):
            if p.res_kind[r] == RES_DEVICE and req[r] > 0:
                got = allocate_spill(st, r, mask, req[r])
                _remember_reusable(st, r, got, kind)
    if excl > 0:
        got = allocate_spill(st, 0, mask, excl)
        _remember_reusable(st, 0, got, kind)
    if not cpu_only and p.shape_info[base + SF_MEM_STATIC] and demand.guaranteed:
        return allocate_memory(st, req, p.res_kind, mask, preferred, kind, u)
    return None


# --- public merge entry point (the kubelet's Policy.Merge over explicit hint lists) --------

RawHint = tuple["int | None", bool]


def _raw_list(raw: Sequence[RawHint] | None, policy: int, resource: int) -> _HintList:
    """filterProvidersHints for one resource: None -> {nil,true}; [] -> {nil,false}."""
    if raw is None:
        return _HintList(L_DONTCARE, resource)
    masks = [(m, bool(p)) for m, p in raw if m is not None]
    nils = [bool(p) for m, p in raw if m is None]
    if not masks:
        if not nils:
            return _HintList(L_IMPOSSIBLE, resource)
        return _HintList(L_DONTCARE if any(nils) else L_IMPOSSIBLE, resource)
    if any(nils) or (policy != P_SINGLE and nils):
        # the providers never mix nil and non-nil hints; single-numa-node drops {nil,false}
        raise InvalidInput(f"hint list {resource}: nil hints mixed with NUMA masks")
    hl = _HintList(L_HINTS, resource)
    for m, p in masks:
        if m <= 0 or m >= 1 << 64:
            raise InvalidInput(f"hint list {resource}: mask {m} is not a non-empty uint64")
        if m in hl.masks:  # the same mask twice: the preferred copy dominates
            i = hl.masks.index(m)
            hl.prefs[i] = hl.prefs[i] or p
        else:
            hl.masks.append(m)
            hl.prefs.append(p)
    hl.min_width = min(_popcount(m) for m in hl.masks)
    return hl


def merge_hints(
    lists: Sequence[Sequence[RawHint] | None],
    *,
    policy: int,
    n: int,
    prefer_closest: bool = False,
    distances: Sequence[int] = (),
) -> tuple[int | None, bool]:
    """The topology manager policy's Merge over hint lists (one per resource, provider
    order); a hint is (mask or None for nil, preferred). Returns the admitted hint."""
    if not 1 <= n <= MAX_ENUM_NUMA:
        raise InvalidInput(f"NUMA node count {n} is not in 1..{MAX_ENUM_NUMA}")
    if not 0 <= policy <= 3:
        raise InvalidInput(f"policy code {policy} is not one of 0, 1, 2, 3")
    if policy == P_NONE:
        return (None, False)  # policy_none.go: no merge, {nil, false}
    dist = (
        list(distances) if distances else [10 if i == j else 20 for i in range(n) for j in range(n)]
    )
    if len(dist) != n * n:
        raise InvalidInput(f"distances: expected {n * n} values, got {len(dist)}")
    hls = [_raw_list(raw, policy, i) for i, raw in enumerate(lists)]
    for hl in hls:
        for mask in hl.masks:
            if mask >= 1 << n:
                raise InvalidInput(f"mask {mask} has bits beyond {n} NUMA nodes")
    m = merge(
        hls,
        policy=policy,
        n=n,
        closest=prefer_closest,
        dist=dist,
        exclusive=False,
        states=[0] * n,
        soff=0,
    )
    return (None if m.mask == 0 else m.mask, m.preferred)


def best_nonpreferred_count(lists: Sequence[Sequence[RawHint] | None]) -> int:
    """bestNonPreferredAffinityCount (TestMaxOfMinAffinityCounts)."""
    return _best_nonpreferred_count(
        [_raw_list(raw, P_BEST_EFFORT, i) for i, raw in enumerate(lists)]
    )


def check_exclusive(mask: int, states: Sequence[int]) -> bool:
    """Koordinator checkExclusivePolicy for Required (states: 0 idle, 1 shared, 2 single)."""
    if mask <= 0 or mask >= 1 << len(states):
        raise InvalidInput(f"mask {mask} is not a non-empty mask over {len(states)} NUMA nodes")
    return _exclusive_ok(mask, list(states), 0, len(states))


def class_selection(
    selected: int, topo_bits: Sequence[int], shape_of: Sequence[int], topo_of: Sequence[int]
) -> tuple[array[int], array[int], array[int]]:
    """Per topology class: how many of its nodes are in the bitset ``selected``, how many
    are not, and the first selected node (-1: none). ``topo_bits``, ``shape_of`` and
    ``topo_of`` as in core.snapshot.snapshot.Snapshot: the same classes told two ways;
    this reference reads the class bitsets, the compiled kernel makes one pass over
    ``shape_of`` (a popcount of a 10,000-bit int costs as much as that whole pass)."""
    if selected < 0:
        raise InvalidInput(f"selected nodes: a bitset must not be negative, got {selected}")
    inside, outside, first = array("q"), array("q"), array("q")
    for bits in topo_bits:
        sel = bits & selected
        n = sel.bit_count()
        inside.append(n)
        outside.append(bits.bit_count() - n)
        first.append((sel & -sel).bit_length() - 1)
    return inside, outside, first
