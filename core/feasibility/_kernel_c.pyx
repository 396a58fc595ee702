# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled NUMA feasibility kernel: the same helpers under the same names, cut at the same
seams, with the same results and exceptions as core/feasibility/_kernel_py.py (the readable
reference; read it for the kubelet rule behind each helper). Masks are uint64 over NUMA
positions, quantities int64, all state in C arrays: no Python objects in the inner loops.
The codes come from codes.pxd (the values of core/feasibility/codes.py)."""

from libc.stdlib cimport calloc, malloc
from libc.stdlib cimport free as c_free
from libc.string cimport memset
from cpython.array cimport array, clone

from core.feasibility.codes cimport (
    F_CPU_ONLY as C_F_CPU_ONLY,
    F_EMPTY as C_F_EMPTY,
    F_EXCLUSIVE as C_F_EXCLUSIVE,
    F_KOORD_HINTS as C_F_KOORD_HINTS,
    F_KOORD_REQUESTS as C_F_KOORD_REQUESTS,
    F_POD_SCOPE as C_F_POD_SCOPE,
    L_DONTCARE,
    L_HINTS,
    L_IMPOSSIBLE,
    MAX_ENUM_NUMA as C_MAX_ENUM_NUMA,
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
    R_OK,
    R_SINGLE_NO_HINT,
    R_SMT,
    R_TOO_LARGE,
    R_TOO_MANY_NUMA,
    RES_CPU as C_RES_CPU,
    RES_DEVICE as C_RES_DEVICE,
    RES_IGNORED as C_RES_IGNORED,
    RES_MEMORY as C_RES_MEMORY,
    SF_CPU_STATIC,
    SF_TOPO_OFF,
    SF_FULL_PCPUS,
    SF_MAX_NUMA,
    SF_MEM_STATIC,
    SF_N,
    SF_PREFER_CLOSEST,
    SF_THREADS,
    SHAPE_FIELDS,
    U_APP,
    U_INIT,
    U_SIDECAR,
)

from core.errors import InvalidInput
from core.feasibility.codes import (
    F_CPU_ONLY,
    F_EMPTY,
    F_EXCLUSIVE,
    F_KOORD_HINTS,
    F_KOORD_REQUESTS,
    F_POD_SCOPE,
    KERNEL_VERSION,
    MAX_ENUM_NUMA,
    RES_CPU,
    RES_DEVICE,
    RES_IGNORED,
    RES_MEMORY,
    KernelResult,
    ScanResult,
)

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

# The values this module was compiled with (codes.pxd), for the test that compares them
# with core/feasibility/codes.py.
PXD_CODES = {
    "P_NONE": P_NONE, "P_BEST_EFFORT": P_BEST_EFFORT, "P_RESTRICTED": P_RESTRICTED,
    "P_SINGLE": P_SINGLE,
    "RES_CPU": C_RES_CPU, "RES_MEMORY": C_RES_MEMORY, "RES_DEVICE": C_RES_DEVICE,
    "RES_IGNORED": C_RES_IGNORED,
    "F_EMPTY": C_F_EMPTY, "F_POD_SCOPE": C_F_POD_SCOPE, "F_EXCLUSIVE": C_F_EXCLUSIVE,
    "F_CPU_ONLY": C_F_CPU_ONLY, "F_KOORD_HINTS": C_F_KOORD_HINTS,
    "F_KOORD_REQUESTS": C_F_KOORD_REQUESTS,
    "SF_N": SF_N, "SF_TOPO_OFF": SF_TOPO_OFF,
    "SF_MAX_NUMA": SF_MAX_NUMA, "SF_PREFER_CLOSEST": SF_PREFER_CLOSEST,
    "SF_CPU_STATIC": SF_CPU_STATIC, "SF_FULL_PCPUS": SF_FULL_PCPUS, "SF_THREADS": SF_THREADS,
    "SF_MEM_STATIC": SF_MEM_STATIC, "SHAPE_FIELDS": SHAPE_FIELDS,
    "U_INIT": U_INIT, "U_SIDECAR": U_SIDECAR, "U_APP": U_APP,
    "L_DONTCARE": L_DONTCARE, "L_IMPOSSIBLE": L_IMPOSSIBLE, "L_HINTS": L_HINTS,
    "R_OK": R_OK, "R_TOO_MANY_NUMA": R_TOO_MANY_NUMA, "R_NODE_SHORT": R_NODE_SHORT,
    "R_NOT_PREFERRED": R_NOT_PREFERRED, "R_SINGLE_NO_HINT": R_SINGLE_NO_HINT,
    "R_CPU_SHORT": R_CPU_SHORT, "R_SMT": R_SMT, "R_DEVICE_SHORT": R_DEVICE_SHORT,
    "R_MEMORY_SHORT": R_MEMORY_SHORT, "R_EXCLUSIVE": R_EXCLUSIVE, "R_TOO_LARGE": R_TOO_LARGE,
    "MAX_ENUM_NUMA": C_MAX_ENUM_NUMA,
}

ctypedef long long i64
ctypedef unsigned long long u64

_tuple_new = tuple.__new__  # KernelResult without the NamedTuple's Python-level __new__


cdef struct _HintList:
    int kind
    int resource
    int count
    int min_width
    u64* masks
    char* prefs


cdef struct _State:
    int n
    int nres
    i64* cap        # n * nres
    i64* total      # n * nres
    i64* free       # n * nres
    i64* reuse      # n * nres
    i64* unaligned  # nres
    u64* cells      # n
    i64* assigns    # n


cdef struct _Merged:
    u64 mask  # 0 = nil
    int preferred
    int rejected_by_exclusive


cdef struct _KernelResult:  # codes.KernelResult
    int admitted
    u64 mask
    int preferred
    int reason
    int unit
    int resource
    i64 need
    i64 limit


cdef struct _Packed:  # core.snapshot.snapshot.Packed, as pointers
    const i64* shape_info
    const i64* zone_off
    const i64* topology
    const i64* available
    const i64* states
    const i64* idle_states
    const i64* res_kind
    int n_res
    int n_shapes


cdef struct _Demand:  # core.snapshot.snapshot.Demand, as pointers
    const i64* unit_kind
    const i64* unit_cpu
    const i64* unit_res
    int n_units
    int guaranteed


cdef struct _Scratch:  # per-call buffers: the reference's lists and sets
    _HintList* lists  # 2 * nl: the providers' lists, then single-numa-node's filtered ones
    int nl
    unsigned char* marks  # 3 * 2^n
    i64* got  # n
    i64* buf
    u64* pool
    char* prefs


cdef extern from *:
    int __builtin_popcountll(unsigned long long) nogil


cdef inline int _popcount(u64 m) noexcept nogil:
    return __builtin_popcountll(m)


cdef inline i64 _sum(const i64* rows, int nres, u64 mask, int r) noexcept nogil:
    cdef i64 t = 0
    cdef int z = 0
    while mask:
        if mask & 1:
            t += rows[z * nres + r]
        mask >>= 1
        z += 1
    return t


cdef inline i64 _outside(const i64* rows, int n, int nres, u64 mask, int r) noexcept nogil:
    cdef i64 t = 0
    cdef int z
    for z in range(n):
        if not ((mask >> z) & 1):
            t += rows[z * nres + r]
    return t


cdef inline void _ok(_KernelResult* o, u64 mask, int preferred, int unit) noexcept nogil:
    o.admitted = 1
    o.mask = mask
    o.preferred = preferred
    o.reason = R_OK
    o.unit = unit
    o.resource = -1
    o.need = 0
    o.limit = 0


cdef inline void _fail(_KernelResult* o, int reason, int unit, int resource, i64 need,
                       i64 limit) noexcept nogil:
    o.admitted = 0
    o.mask = 0
    o.preferred = 0
    o.reason = reason
    o.unit = unit
    o.resource = resource
    o.need = need
    o.limit = limit


cdef void _finish(_HintList* hl, int min_width) noexcept nogil:
    cdef int i
    for i in range(hl.count):
        hl.prefs[i] = _popcount(hl.masks[i]) == min_width
    hl.min_width = min_width
    if hl.count == 0:
        hl.kind = L_IMPOSSIBLE


# --- hint providers (device, CPU, memory: container_manager_linux.go order) -----------------

cdef void cpu_hints(_State* st, i64 request, _HintList* hl) noexcept nogil:
    cdef int n = st.n, nres = st.nres, w
    cdef int min_width = n
    cdef u64 mask, full = (1ULL << n) - 1
    hl.kind = L_HINTS
    hl.resource = 0
    hl.count = 0
    for mask in range(1, full + 1):
        w = _popcount(mask)
        if _sum(st.cap, nres, mask, 0) >= request and w < min_width:
            min_width = w
        if _outside(st.reuse, n, nres, mask, 0) > 0:
            continue
        if _sum(st.reuse, nres, mask, 0) + _sum(st.free, nres, mask, 0) < request:
            continue
        hl.masks[hl.count] = mask
        hl.count += 1
    _finish(hl, min_width)


cdef void device_hints(_State* st, int r, i64 request, _HintList* hl) noexcept nogil:
    cdef int n = st.n, nres = st.nres, z, w
    cdef int has_topo = 0
    cdef int min_width = n
    cdef u64 mask, full = (1ULL << n) - 1
    hl.resource = r
    hl.count = 0
    hl.min_width = 0
    for z in range(n):
        if st.cap[z * nres + r] > 0:
            has_topo = 1
    if not has_topo:
        hl.kind = L_DONTCARE
        return
    if _total_free(st, r) + st.unaligned[r] < request:
        hl.kind = L_IMPOSSIBLE
        return
    hl.kind = L_HINTS
    for mask in range(1, full + 1):
        w = _popcount(mask)
        if _sum(st.cap, nres, mask, r) >= request and w < min_width:
            min_width = w
        if _outside(st.reuse, n, nres, mask, r) > 0:
            continue
        if _sum(st.reuse, nres, mask, r) + _sum(st.free, nres, mask, r) < request:
            continue
        hl.masks[hl.count] = mask
        hl.count += 1
    _finish(hl, min_width)


cdef int _memory_mask_ok(_State* st, u64 mask) noexcept nogil:
    cdef int width = _popcount(mask), z
    cdef u64 cells
    for z in range(st.n):
        if not ((mask >> z) & 1):
            continue
        cells = st.cells[z]
        if width == 1:
            if cells and _popcount(cells) > 1:
                return 0
        elif st.assigns[z] > 0 and (_popcount(cells) == 1 or cells != mask):
            return 0
    return 1


cdef int _first_memory_type(const i64* req, const i64* kinds, int nres) noexcept nogil:
    cdef int t
    for t in range(nres):
        if kinds[t] == C_RES_MEMORY and req[t] > 0:
            return t
    return -1


cdef int _memory_short(_State* st, const i64* req, const i64* kinds, u64 mask,
                       const i64* rows) noexcept nogil:
    """The first memory type of the request that ``rows`` (total, or free + reusable when
    NULL) over ``mask`` cannot hold, or -1."""
    cdef int t, nres = st.nres
    cdef i64 have
    for t in range(nres):
        if kinds[t] == C_RES_MEMORY and req[t] > 0:
            if rows != NULL:
                have = _sum(rows, nres, mask, t)
            else:
                have = _sum(st.free, nres, mask, t) + _sum(st.reuse, nres, mask, t)
            if have < req[t]:
                return t
    return -1


cdef void memory_hints(_State* st, const i64* req, const i64* kinds, _HintList* hl) noexcept nogil:
    cdef int n = st.n, t, w, first
    cdef int min_width = n
    cdef u64 mask, full = (1ULL << n) - 1
    hl.count = 0
    hl.min_width = 0
    first = _first_memory_type(req, kinds, st.nres)
    if first < 0:
        hl.kind = L_DONTCARE
        hl.resource = -1
        return
    hl.kind = L_HINTS
    hl.resource = first
    for mask in range(1, full + 1):
        if _memory_short(st, req, kinds, mask, st.total) >= 0:
            continue  # capacity rule: allocatable over the mask
        w = _popcount(mask)
        if w < min_width:
            min_width = w
        if not _memory_mask_ok(st, mask):
            continue
        if _memory_short(st, req, kinds, mask, NULL) >= 0:
            continue
        hl.masks[hl.count] = mask
        hl.count += 1
    for t in range(hl.count):
        hl.prefs[t] = _popcount(hl.masks[t]) == min_width
    hl.min_width = min_width
    if hl.count == 0:
        hl.kind = L_DONTCARE


# --- merge (topologymanager policy.go) ------------------------------------------------------

cdef inline i64 _dist_sum(u64 mask, const i64* dist, int n) noexcept nogil:
    cdef i64 t = 0
    cdef int i, j
    for i in range(n):
        if (mask >> i) & 1:
            for j in range(n):
                if (mask >> j) & 1:
                    t += dist[i * n + j]
    return t


cdef inline int _fitter_cmp(u64 a, u64 b, int closest, const i64* dist, int n) noexcept nogil:
    cdef int ca = _popcount(a), cb = _popcount(b)
    cdef i64 da, db
    if ca != cb:
        return -1 if ca < cb else 1
    if closest:
        da = _dist_sum(a, dist, n)
        db = _dist_sum(b, dist, n)
        if da != db:
            return -1 if da < db else 1
    if a == b:
        return 0
    return -1 if a < b else 1


cdef inline int _nonpreferred_group(u64 m, int bnp) noexcept nogil:
    cdef int w = _popcount(m)
    if w == bnp:
        return 0
    if w < bnp:
        return 1
    return 2


cdef inline int _nonpreferred_cmp(u64 a, u64 b, int bnp, int closest, const i64* dist,
                                  int n) noexcept nogil:
    cdef int ga = _nonpreferred_group(a, bnp), gb = _nonpreferred_group(b, bnp)
    if ga != gb:
        return -1 if ga < gb else 1
    if ga == 1 and _popcount(a) != _popcount(b):
        return -1 if _popcount(a) > _popcount(b) else 1
    return _fitter_cmp(a, b, closest, dist, n)


cdef void _filter_single_numa(_HintList* src, _HintList* dst) noexcept nogil:
    cdef int i
    dst.resource = src.resource
    dst.min_width = src.min_width
    dst.count = 0
    if src.kind == L_DONTCARE:
        dst.kind = L_DONTCARE
        return
    dst.kind = L_HINTS
    for i in range(src.count):
        if src.prefs[i] and _popcount(src.masks[i]) == 1:
            dst.masks[dst.count] = src.masks[i]
            dst.prefs[dst.count] = 1
            dst.count += 1
    if dst.count == 0:
        dst.kind = L_IMPOSSIBLE


cdef inline int _exclusive_ok(u64 mask, const i64* states, int n) noexcept nogil:
    cdef int w = _popcount(mask), z
    for z in range(n):
        if (mask >> z) & 1:
            if w > 1 and states[z] == 2:
                return 0
            if w == 1 and states[z] == 1:
                return 0
    return 1


cdef int _preferred_candidates(_HintList* lists, int nl, unsigned char* mark,
                               u64 size) noexcept nogil:
    """Marks, per mask, how many hint lists offer it as preferred. Returns how many lists
    have hints (a mask is a candidate when all of them mark it; 0: only the full mask),
    or -1 when a list is impossible (no candidate)."""
    cdef int i, j, nh = 0
    memset(mark, 0, size)
    for i in range(nl):
        if lists[i].kind == L_IMPOSSIBLE:
            return -1
        if lists[i].kind != L_HINTS:
            continue
        nh += 1
        for j in range(lists[i].count):
            if lists[i].prefs[j]:
                mark[lists[i].masks[j]] += 1
    return nh


cdef unsigned char* _achievable_masks(_HintList* lists, int nl, u64 full, unsigned char* cur,
                                      unsigned char* nxt) noexcept nogil:
    """Every AND of one hint per list (nil acts as all nodes), as a set over 2^n masks."""
    cdef u64 a, x, size = full + 1
    cdef int i, j
    cdef unsigned char* tmp
    memset(cur, 0, size)
    cur[full] = 1
    for i in range(nl):
        if lists[i].kind != L_HINTS:
            continue
        memset(nxt, 0, size)
        for a in range(1, size):
            if not cur[a]:
                continue
            for j in range(lists[i].count):
                x = a & lists[i].masks[j]
                if x:
                    nxt[x] = 1
        tmp = cur
        cur = nxt
        nxt = tmp
    return cur


cdef int _best_nonpreferred_count(_HintList* lists, int nl) noexcept nogil:
    cdef int i, j, w, mn, best = 0
    for i in range(nl):
        if lists[i].kind == L_HINTS and lists[i].count:
            mn = 64
            for j in range(lists[i].count):
                w = _popcount(lists[i].masks[j])
                if w < mn:
                    mn = w
            if mn > best:
                best = mn
    return best


cdef void merge(_HintList* lists, int nl, int policy, int n, int closest, const i64* dist,
                int exclusive, const i64* states, _Scratch* sc, _Merged* out) noexcept nogil:
    cdef u64 full = (1ULL << n) - 1, size = full + 1, m, best = 0
    cdef int i, nh, have = 0, bnp, before = 0
    cdef unsigned char* cands
    out.rejected_by_exclusive = 0
    if policy == P_SINGLE:
        for i in range(nl):
            _filter_single_numa(&lists[i], &sc.lists[sc.nl + i])
        lists = sc.lists + sc.nl
        for i in range(nl):
            if lists[i].kind == L_IMPOSSIBLE:
                out.mask = 0  # no permutation: {nil, false}
                out.preferred = 0
                return
        closest = 0  # prefer-closest-numa-nodes is ignored by this policy
    nh = _preferred_candidates(lists, nl, sc.marks, size)
    if nh == 0:  # no list has hints: {all nodes} (0 on a node without NUMA data)
        if not exclusive or _exclusive_ok(full, states, n):
            best = full
            have = 1
    elif nh > 0:
        for m in range(1, size):
            if sc.marks[m] == nh and (not exclusive or _exclusive_ok(m, states, n)):
                if not have or _fitter_cmp(m, best, closest, dist, n) < 0:
                    best = m
                    have = 1
    if have:
        out.mask = 0 if (policy == P_SINGLE and best == full) else best
        out.preferred = 1
        return
    cands = _achievable_masks(lists, nl, full, sc.marks + size, sc.marks + 2 * size)
    bnp = _best_nonpreferred_count(lists, nl)
    for m in range(1, size):
        if not cands[m]:
            continue
        before = 1
        if exclusive and not _exclusive_ok(m, states, n):
            continue
        if not have or _nonpreferred_cmp(m, best, bnp, closest, dist, n) < 0:
            best = m
            have = 1
    out.preferred = 0
    if exclusive and before and not have:
        out.mask = full
        out.rejected_by_exclusive = 1
        return
    if not have:
        best = full  # no permutation produced a mask: {all nodes, false}
    out.mask = 0 if (policy == P_SINGLE and best == full) else best


# --- allocation (providers' Allocate) -------------------------------------------------------

cdef i64 _take(_State* st, int r, u64 mask, i64 amount, i64* got) noexcept nogil:
    cdef int z, k
    cdef i64 t
    for z in range(st.n):
        if amount == 0:
            break
        if not ((mask >> z) & 1):
            continue
        k = z * st.nres + r
        t = st.reuse[k] if st.reuse[k] < amount else amount
        st.reuse[k] -= t
        amount -= t
        got[z] += t
        t = st.free[k] if st.free[k] < amount else amount
        st.free[k] -= t
        amount -= t
        got[z] += t
    return amount


cdef void allocate_spill(_State* st, int r, u64 mask, i64 amount, i64* got) noexcept nogil:
    cdef u64 full = (1ULL << st.n) - 1
    cdef u64 inside = mask if mask else full
    cdef i64 left
    memset(got, 0, st.n * sizeof(i64))
    left = _take(st, r, inside, amount, got)
    left = _take(st, r, full & ~inside, left, got)
    if left:
        st.unaligned[r] -= left


cdef inline void _remember_reusable(_State* st, int r, i64* got, i64 kind) noexcept nogil:
    cdef int z
    if kind == U_INIT:
        for z in range(st.n):
            st.reuse[z * st.nres + r] += got[z]


cdef inline i64 _total_free(_State* st, int r) noexcept nogil:
    cdef i64 t = 0
    cdef int z
    for z in range(st.n):
        t += st.free[z * st.nres + r] + st.reuse[z * st.nres + r]
    return t


cdef int _best_memory_hint(_HintList* hl, u64 within, u64* out, int* pref) noexcept nogil:
    cdef int i, have = 0, bp = 0, p
    cdef u64 b = 0, m
    for i in range(hl.count):
        m = hl.masks[i]
        if (m & within) != within:
            continue
        p = hl.prefs[i]
        if (not have or (p and not bp) or
                (p == bp and (_popcount(m) < _popcount(b) or
                              (_popcount(m) == _popcount(b) and m < b)))):
            b = m
            bp = p
            have = 1
    out[0] = b
    pref[0] = bp
    return have


cdef int allocate_memory(_State* st, const i64* req, const i64* kinds, u64 mask, int preferred,
                         i64 kind, int unit, _HintList* hl, i64* got,
                         _KernelResult* o) noexcept nogil:
    cdef int nres = st.nres, t, first, z, bp
    cdef u64 bm
    first = _first_memory_type(req, kinds, nres)
    if first < 0:
        return 1
    memory_hints(st, req, kinds, hl)
    if mask == 0:
        if hl.kind != L_HINTS or not _best_memory_hint(hl, 0, &bm, &bp) or (not bp and preferred):
            _fail(o, R_MEMORY_SHORT, unit, first, req[first], _total_free(st, first))
            return 0
        mask = bm
        preferred = bp
    t = _memory_short(st, req, kinds, mask, NULL)
    if t >= 0:
        # "extend" the topology manager hint to a wider one that contains it
        if hl.kind != L_HINTS or not _best_memory_hint(hl, mask, &bm, &bp) or (not bp and preferred):
            _fail(o, R_MEMORY_SHORT, unit, t, req[t],
                  _sum(st.free, nres, mask, t) + _sum(st.reuse, nres, mask, t))
            return 0
        mask = bm
    if _popcount(mask) > 1:
        for z in range(st.n):
            if (mask >> z) & 1 and st.assigns[z] > 0:
                if _popcount(st.cells[z]) == 1 or st.cells[z] != mask:
                    _fail(o, R_MEMORY_SHORT, unit, first, req[first], 0)  # issue #138495
                    return 0
    for t in range(nres):
        if kinds[t] == C_RES_MEMORY and req[t] > 0:
            memset(got, 0, st.n * sizeof(i64))
            _take(st, t, mask, req[t], got)
            _remember_reusable(st, t, got, kind)
    for z in range(st.n):
        if (mask >> z) & 1:
            st.cells[z] = mask
            st.assigns[z] += 1
    return 1


# --- the kernel ----------------------------------------------------------------------------

cdef const i64* _int64s(object values, str field) except NULL:
    """The int64 items of a Demand column (an array('q') with at least one item)."""
    if type(values) is not array or (<array>values).ob_descr.typecode != b"q"[0] or not len(values):
        raise InvalidInput(f"demand.{field}: expected a non-empty array('q')")
    return <const i64*>(<array>values).data.as_longlongs


cdef inline const i64* _ptr(const i64[::1] view):
    return &view[0] if view.shape[0] else NULL


cdef class Kernel:
    """The feasibility kernel over one packed snapshot (core.snapshot.snapshot.Packed)."""

    cdef object packed
    cdef object _views  # keeps the buffers behind ``p`` alive
    cdef _Packed p
    # What core.feasibility.verdicts keeps per snapshot (the kernel is built once per
    # snapshot and implementation): set by its first evaluation, not read here.
    cdef public object classes

    def __init__(self, packed):
        if packed.n_res < 1:
            raise InvalidInput("packed snapshot: n_res must be at least 1 (cpu)")
        self.packed = packed
        views = (packed.shape_info, packed.topology, packed.available, packed.states,
                 packed.idle_states, packed.res_kind, packed.zone_off)
        self._views = views
        self.p.shape_info = _ptr(views[0])
        self.p.topology = _ptr(views[1])
        self.p.available = _ptr(views[2])
        self.p.states = _ptr(views[3])
        self.p.idle_states = _ptr(views[4])
        self.p.res_kind = _ptr(views[5])
        self.p.zone_off = _ptr(views[6])
        self.p.n_res = packed.n_res
        self.p.n_shapes = packed.n_shapes

    def check(self, demand, int shape, int policy, int flags):
        """Admit the pod (``demand``) on node shape ``shape`` under topology manager policy
        ``policy`` (0 none .. 3 single-numa-node): a KernelResult."""
        if not 0 <= shape < self.p.n_shapes:
            raise InvalidInput(f"shape {shape} is out of range 0..{self.p.n_shapes - 1}")
        if not 0 <= policy <= 3:
            raise InvalidInput(f"policy code {policy} is not one of 0, 1, 2, 3")
        cdef _Demand d
        cdef _KernelResult o
        _demand(demand, &d)
        with nogil:
            _check(&self.p, &d, shape, policy, flags, &o)
        return _result(&o)

    def scan(self, demand, Py_ssize_t start, inside, outside, firsts, shape_of, group_of,
             codes, flags, monotone):
        """The "node empty" run over topology classes from ``start`` while each is
        never-fits on it (see the reference): one call instead of one per class."""
        cdef Py_ssize_t n_topo = len(inside), ng = len(codes)
        if not len(outside) == len(firsts) == len(group_of) == len(monotone) == n_topo:
            raise InvalidInput(f"scan: per-class columns must all have {n_topo} items")
        if len(flags) != ng:
            raise InvalidInput(f"scan: {ng} group codes but {len(flags)} group flags")
        if not 0 <= start <= n_topo:
            raise InvalidInput(f"scan: start {start} is out of range 0..{n_topo}")
        cdef _Demand d
        cdef _ScanState sc
        _demand(demand, &d)
        usage = clone(array("q"), n_topo, False)
        sc.inside = _column(inside, "inside")
        sc.outside = _column(outside, "outside")
        sc.firsts = _column(firsts, "firsts")
        sc.shape_of = _column(shape_of, "shape_of")
        sc.n = len(shape_of)
        sc.group_of = _column(group_of, "group_of")
        sc.codes = _column(codes, "codes")
        sc.flags = _column(flags, "flags")
        sc.ng = ng
        sc.monotone = _column(monotone, "monotone")
        sc.usage = (<array>usage).data.as_longlongs
        with nogil:
            _scan(&self.p, &d, start, n_topo, &sc)
        if sc.bad:
            raise InvalidInput(_scan_error(&sc, self.p.n_shapes))
        del usage[sc.n_usage:]
        return _tuple_new(ScanResult, (
            sc.stop, sc.not_selected, sc.never, sc.near,
            _result(&sc.near_result) if sc.near >= 0 else None,
            _result(&sc.stop_result) if sc.has_stop_result else None, usage))


cdef int _demand(object demand, _Demand* d) except -1:
    """``d`` over the Demand's own buffers, not typed memoryviews: acquiring three of those
    was more than half of a call that fails on the node-level bound (docs/benchmarks.md,
    "The impossible pod's scan")."""
    d.unit_kind = _int64s(demand.unit_kind, "unit_kind")
    d.unit_cpu = _int64s(demand.unit_cpu, "unit_cpu")
    d.unit_res = _int64s(demand.unit_res, "unit_res")
    d.n_units = demand.n_units
    d.guaranteed = demand.guaranteed
    return 0


cdef inline object _result(_KernelResult* o):
    return _tuple_new(KernelResult, (o.admitted, o.mask, o.preferred, o.reason, o.unit,
                                     o.resource, o.need, o.limit))


cdef const i64* _column(object values, str field) except? NULL:
    """The int64 items of a per-class or per-group column (an array('q'); NULL if empty)."""
    if type(values) is not array or (<array>values).ob_descr.typecode != b"q"[0]:
        raise InvalidInput(f"scan: {field} must be an array('q')")
    return <const i64*>(<array>values).data.as_longlongs if len(values) else NULL


cdef struct _ScanState:  # Kernel.scan's columns and what it found
    const i64* inside
    const i64* outside
    const i64* firsts
    const i64* shape_of
    Py_ssize_t n
    const i64* group_of
    const i64* codes
    const i64* flags
    Py_ssize_t ng
    const i64* monotone
    i64* usage
    Py_ssize_t n_usage
    Py_ssize_t stop
    i64 not_selected
    i64 never
    Py_ssize_t near
    _KernelResult near_result
    int has_stop_result
    _KernelResult stop_result
    int bad  # 1 group, 2 node, 3 shape, 4 policy code out of range (at class ``stop``)
    i64 bad_value


cdef str _scan_error(_ScanState* sc, int n_shapes):
    cdef Py_ssize_t t = sc.stop
    if sc.bad == 1:
        return f"class {t}: group {sc.bad_value} is out of range 0..{sc.ng - 1}"
    if sc.bad == 2:
        return f"class {t}: node {sc.bad_value} is out of range 0..{sc.n - 1}"
    if sc.bad == 3:
        return f"shape {sc.bad_value} is out of range 0..{n_shapes - 1}"
    return f"policy code {sc.bad_value} is not one of 0, 1, 2, 3"


cdef void _scan(_Packed* p, _Demand* d, Py_ssize_t t, Py_ssize_t n_topo,
                _ScanState* sc) noexcept nogil:
    """Kernel.scan below the argument checks (the reference's loop)."""
    cdef i64 n, g, i, s, code
    cdef _KernelResult o
    sc.n_usage = 0
    sc.not_selected = 0
    sc.never = 0
    sc.near = -1
    sc.has_stop_result = 0
    sc.bad = 0
    while t < n_topo:
        sc.stop = t
        n = sc.inside[t]
        if n:
            g = sc.group_of[t]
            if g < 0 or g >= sc.ng:
                sc.bad, sc.bad_value = 1, g
                return
            code = sc.codes[g]
            if code < 0 or not sc.monotone[t]:
                return
            i = sc.firsts[t]
            if i < 0 or i >= sc.n:
                sc.bad, sc.bad_value = 2, i
                return
            s = sc.shape_of[i]
            if s < 0 or s >= p.n_shapes:
                sc.bad, sc.bad_value = 3, s
                return
            if code > 3:
                sc.bad, sc.bad_value = 4, code
                return
            _check(p, d, <int>s, <int>code, <int>(sc.flags[g] | C_F_EMPTY), &o)
            if o.admitted or o.reason == R_TOO_LARGE:
                sc.has_stop_result = 1
                sc.stop_result = o
                return
            sc.never += n
            sc.usage[sc.n_usage] = t
            sc.n_usage += 1
            if sc.near < 0 or i < sc.firsts[sc.near]:
                sc.near = t
                sc.near_result = o
        sc.not_selected += sc.outside[t]
        t += 1
    sc.stop = n_topo


cdef void _check(_Packed* p, _Demand* d, int shape, int policy, int flags,
                 _KernelResult* o) noexcept nogil:
    """Kernel.check below the argument checks (the reference's ``check``)."""
    cdef int base = shape * SHAPE_FIELDS
    cdef int n = <int>p.shape_info[base + SF_N]
    cdef _State st
    cdef _Scratch sc
    if policy != P_NONE and not (flags & C_F_KOORD_HINTS) and n > p.shape_info[base + SF_MAX_NUMA]:
        # topology_manager.go NewManager: the kubelet refuses this policy
        _fail(o, R_TOO_MANY_NUMA, -1, -1, n, p.shape_info[base + SF_MAX_NUMA])
        return
    if n > C_MAX_ENUM_NUMA:
        _fail(o, R_TOO_LARGE, -1, -1, n, C_MAX_ENUM_NUMA)
        return
    if _node_level_short(p, shape, d, o):
        return
    if not _scratch_alloc(&sc, n, p.n_res):
        _fail(o, R_TOO_LARGE, -1, -1, n, C_MAX_ENUM_NUMA)
    else:
        _state_init(&st, p, shape, flags & C_F_EMPTY, sc.buf)
        _admit_units(p, shape, &st, d, policy, flags, &sc, o)
    _scratch_free(&sc)


cdef int _scratch_alloc(_Scratch* sc, int n, int nres) noexcept nogil:
    """Buffers for one call; 0 when memory is short."""
    cdef u64 size = 1ULL << n
    cdef int i
    sc.nl = nres + 2  # devices, CPU, memory
    sc.buf = <i64*>calloc(5 * n * nres + nres + 3 * n, sizeof(i64))
    sc.lists = <_HintList*>malloc(2 * sc.nl * sizeof(_HintList))
    sc.pool = <u64*>malloc(2 * sc.nl * size * sizeof(u64))
    sc.prefs = <char*>malloc(2 * sc.nl * size)
    sc.marks = <unsigned char*>malloc(3 * size)
    if sc.buf == NULL or sc.lists == NULL or sc.pool == NULL or sc.prefs == NULL or sc.marks == NULL:
        return 0
    sc.got = sc.buf + 4 * n * nres + nres + 2 * n
    for i in range(2 * sc.nl):
        sc.lists[i].masks = sc.pool + i * size
        sc.lists[i].prefs = sc.prefs + i * size
    return 1


cdef void _scratch_free(_Scratch* sc) noexcept nogil:
    c_free(sc.buf)
    c_free(sc.lists)
    c_free(sc.pool)
    c_free(sc.prefs)
    c_free(sc.marks)


cdef inline const i64* _block(_Packed* p, int base) noexcept nogil:
    """The topology block of the shape at ``base`` (codes.SF_TOPO_OFF has its layout)."""
    return p.topology + p.shape_info[base + SF_TOPO_OFF]


cdef inline const i64* _dist(_Packed* p, int base) noexcept nogil:
    cdef int n = <int>p.shape_info[base + SF_N]
    return _block(p, base) + 2 * p.n_res + 2 * n * p.n_res


cdef void _state_init(_State* st, _Packed* p, int shape, int empty, i64* buf) noexcept nogil:
    """The reference's ``_State(packed, shape, empty)``, in ``buf``."""
    cdef int base = shape * SHAPE_FIELDS
    cdef int n = <int>p.shape_info[base + SF_N], nres = p.n_res, z, r, k
    cdef int zoff = <int>p.zone_off[shape]
    cdef const i64* block = _block(p, base)
    cdef const i64* limits = block + 2 * nres  # (capacity, allocatable) per (zone, resource)
    st.n = n
    st.nres = nres
    st.cap = buf
    st.total = buf + n * nres
    st.free = buf + 2 * n * nres
    st.reuse = buf + 3 * n * nres
    st.unaligned = buf + 4 * n * nres
    st.cells = <u64*>(buf + 4 * n * nres + nres)
    st.assigns = buf + 4 * n * nres + nres + n
    for z in range(n):
        for r in range(nres):
            k = z * nres + r
            st.cap[k] = limits[2 * k]
            st.total[k] = limits[2 * k + 1]
            # "empty": available := allocatable (docs/contracts.md: Verdicts)
            st.free[k] = limits[2 * k + 1] if empty else p.available[zoff * nres + k]
    for r in range(nres):
        st.unaligned[r] = block[nres + r]


cdef int _node_level_short(_Packed* p, int shape, _Demand* d, _KernelResult* o) noexcept nogil:
    cdef int nres = p.n_res, pod = d.n_units - 1, r
    cdef i64 need, have
    cdef const i64* node_alloc = _block(p, shape * SHAPE_FIELDS)
    for r in range(nres):
        need = d.unit_res[pod * nres + r]
        have = node_alloc[r]
        if need > 0 and have >= 0 and need > have and p.res_kind[r] != C_RES_IGNORED:
            _fail(o, R_NODE_SHORT, pod, r, need, have)
            return 1
    return 0


cdef inline void _unit_range(_Demand* d, int flags, int* u0, int* u1) noexcept nogil:
    cdef int pod = d.n_units - 1
    if flags & C_F_POD_SCOPE:
        u0[0] = pod
        u1[0] = pod + 1
    else:
        u0[0] = 0
        u1[0] = pod


cdef void _admit_units(_Packed* p, int shape, _State* st, _Demand* d, int policy, int flags,
                       _Scratch* sc, _KernelResult* o) noexcept nogil:
    cdef int base = shape * SHAPE_FIELDS, u, u0, u1, all_pref = 1, koord = 0
    cdef u64 union_mask = 0, koord_mask = 0
    if (flags & C_F_KOORD_REQUESTS) and policy >= P_RESTRICTED and not _binds_cpus(p, base, d):
        koord_filter(p, base, st, d, policy, flags, sc, o)
        if not o.admitted:
            return
        koord = 1
        koord_mask = o.mask
    _unit_range(d, flags, &u0, &u1)
    for u in range(u0, u1):
        _admit_unit(p, base, st, d, u, policy, flags, sc, o)
        if not o.admitted:
            return
        union_mask |= o.mask
        all_pref &= o.preferred
    if policy == P_NONE:
        _ok(o, 0, 0, -1)  # policy none stores no hint: {nil, false}
        return
    if union_mask == 0 and koord and koord_mask:
        union_mask = koord_mask  # the kubelet places nothing: koord-scheduler's NUMA nodes
    if union_mask == 0 and policy != P_SINGLE:
        union_mask = (1ULL << st.n) - 1  # the default hint {all NUMA nodes, preferred}
    _ok(o, union_mask, all_pref, -1)


cdef inline int _binds_cpus(_Packed* p, int base, _Demand* d) noexcept nogil:
    return p.shape_info[base + SF_CPU_STATIC] != 0 and d.unit_cpu[d.n_units - 1] > 0


cdef inline int _known(const i64* rows, int n, int nres, int r) noexcept nogil:
    cdef int z
    for z in range(n):
        if rows[z * nres + r] > 0:
            return 1
    return 0


cdef void koord_filter(_Packed* p, int base, _State* st, _Demand* d, int policy, int flags,
                       _Scratch* sc, _KernelResult* o) noexcept nogil:
    """koord-scheduler's FilterByNUMANode for a pod that binds no CPUs (see the reference)."""
    cdef int nres = p.n_res, pod = d.n_units - 1, cnt = 0, r, mem = 0, known = 1
    cdef const i64* req = d.unit_res + pod * nres
    cdef int soff = <int>p.zone_off[base // SHAPE_FIELDS]
    cdef _Merged merged
    if req[0] > 0 and _known(st.cap, st.n, nres, 0):
        cpu_hints(st, (req[0] + 999) // 1000, &sc.lists[cnt])
        cnt += 1
    for r in range(nres):
        if p.res_kind[r] == C_RES_MEMORY and req[r] > 0:
            mem = 1
            if not _known(st.total, st.n, nres, r):
                known = 0
    if mem and known:
        memory_hints(st, req, p.res_kind, &sc.lists[cnt])
        if sc.lists[cnt].count == 0:
            sc.lists[cnt].kind = L_IMPOSSIBLE  # no NUMA combination holds it
        cnt += 1
    for r in range(cnt):
        if sc.lists[r].kind == L_HINTS:
            _koord_preferences(&sc.lists[r], policy == P_RESTRICTED)
    merge(sc.lists, cnt, policy, st.n, <int>p.shape_info[base + SF_PREFER_CLOSEST],
          _dist(p, base), flags & C_F_EXCLUSIVE,
          p.idle_states if flags & C_F_EMPTY else p.states + soff, sc, &merged)
    if merged.rejected_by_exclusive:
        _fail(o, R_EXCLUSIVE, pod, -1, 0, 0)
        return
    if not merged.preferred:
        _not_preferred(sc.lists, cnt, policy, pod, st.n, o)
        return
    _ok(o, merged.mask, 1, pod)


cdef int _unit_lists(_Packed* p, int base, _State* st, _Demand* d, int u, const i64* req,
                     int policy, int flags, _HintList* lists) noexcept nogil:
    """filterProvidersHints in provider order: devices, CPU, memory. Returns the count."""
    cdef int r, device, cnt = 0, cpu_only = flags & C_F_CPU_ONLY
    if not cpu_only:
        for r in range(p.n_res):
            if p.res_kind[r] == C_RES_DEVICE and req[r] > 0:
                device_hints(st, r, req[r], &lists[cnt])
                cnt += 1
    if p.shape_info[base + SF_CPU_STATIC] and d.unit_cpu[u] > 0:
        cpu_hints(st, d.unit_cpu[u], &lists[cnt])
        cnt += 1
    if not cpu_only and p.shape_info[base + SF_MEM_STATIC] and d.guaranteed:
        memory_hints(st, req, p.res_kind, &lists[cnt])
        cnt += 1
    if flags & C_F_KOORD_HINTS:
        for r in range(cnt):
            if lists[r].kind == L_HINTS:
                device = p.res_kind[lists[r].resource] == C_RES_DEVICE
                _koord_preferences(&lists[r], policy == P_RESTRICTED and not device)
    return cnt


cdef void _koord_preferences(_HintList* hl, int all_preferred) noexcept nogil:
    cdef int i, w, min_width = 64
    for i in range(hl.count):
        w = _popcount(hl.masks[i])
        if w < min_width:
            min_width = w
    for i in range(hl.count):
        hl.prefs[i] = all_preferred or _popcount(hl.masks[i]) == min_width
    hl.min_width = min_width


cdef void _admit_unit(_Packed* p, int base, _State* st, _Demand* d, int u, int policy,
                      int flags, _Scratch* sc, _KernelResult* o) noexcept nogil:
    cdef const i64* req = d.unit_res + u * p.n_res
    cdef i64 excl = d.unit_cpu[u] if p.shape_info[base + SF_CPU_STATIC] else 0
    cdef int cnt, i, informative = 0, soff = <int>p.zone_off[base // SHAPE_FIELDS]
    cdef _Merged merged
    merged.mask = 0
    merged.preferred = 0
    if _unit_bounds(p, base, st, req, excl, u, flags, o):
        return
    cnt = _unit_lists(p, base, st, d, u, req, policy, flags, sc.lists)
    if policy != P_NONE:
        merge(sc.lists, cnt, policy, st.n, <int>p.shape_info[base + SF_PREFER_CLOSEST],
              _dist(p, base),
              (flags & C_F_EXCLUSIVE) and policy >= P_RESTRICTED,
              p.idle_states if flags & C_F_EMPTY else p.states + soff, sc, &merged)
        if merged.rejected_by_exclusive:
            _fail(o, R_EXCLUSIVE, u, -1, 0, 0)
            return
        if policy >= P_RESTRICTED and not merged.preferred:
            _not_preferred(sc.lists, cnt, policy, u, st.n, o)
            return
    if not _allocate_unit(p, base, st, d, u, req, excl, merged.mask, merged.preferred, flags,
                          sc, o):
        return
    # A unit no provider cares about gets {all nodes, true}: it places nothing.
    for i in range(cnt):
        if sc.lists[i].kind != L_DONTCARE:
            informative = 1
    _ok(o, merged.mask if informative else 0, merged.preferred, u)


cdef int _unit_bounds(_Packed* p, int base, _State* st, const i64* req, i64 excl, int u,
                      int flags, _KernelResult* o) noexcept nogil:
    cdef i64 threads, free
    cdef int r
    if excl > 0:
        threads = p.shape_info[base + SF_THREADS]
        if p.shape_info[base + SF_FULL_PCPUS] and threads > 1 and excl % threads:
            _fail(o, R_SMT, u, 0, excl, threads)  # full-pcpus-only SMTAlignmentError
            return 1
        free = _total_free(st, 0)
        if free < excl:
            _fail(o, R_CPU_SHORT, u, 0, excl, free)
            return 1
    if flags & C_F_CPU_ONLY:
        return 0
    for r in range(p.n_res):
        if req[r] > 0 and p.res_kind[r] == C_RES_DEVICE:
            free = _total_free(st, r) + st.unaligned[r]
            if free < req[r]:
                _fail(o, R_DEVICE_SHORT, u, r, req[r], free)
                return 1
    return 0


cdef void _not_preferred(_HintList* lists, int cnt, int policy, int u, int n,
                         _KernelResult* o) noexcept nogil:
    cdef int i, j, mn, w, any_pref
    for i in range(cnt):
        if lists[i].kind == L_IMPOSSIBLE:
            _fail(o, R_NOT_PREFERRED, u, lists[i].resource,
                  lists[i].min_width if lists[i].min_width else n, 0)
            return
        if lists[i].kind != L_HINTS:
            continue
        mn = 64
        any_pref = 0
        for j in range(lists[i].count):
            if lists[i].prefs[j]:
                any_pref = 1
                w = _popcount(lists[i].masks[j])
                if w < mn:
                    mn = w
        if not any_pref or (policy == P_SINGLE and mn > 1):
            _fail(o, R_SINGLE_NO_HINT if policy == P_SINGLE else R_NOT_PREFERRED, u,
                  lists[i].resource, lists[i].min_width, 0)
            return
    _fail(o, R_NOT_PREFERRED, u, -1, 0, 0)


cdef int _allocate_unit(_Packed* p, int base, _State* st, _Demand* d, int u, const i64* req,
                        i64 excl, u64 mask, int preferred, int flags, _Scratch* sc,
                        _KernelResult* o) noexcept nogil:
    """Returns 0 (with ``o`` set) when an allocation fails."""
    cdef i64 kind = d.unit_kind[u]
    cdef int r, cpu_only = flags & C_F_CPU_ONLY
    if not cpu_only:
        for r in range(p.n_res):
            if p.res_kind[r] == C_RES_DEVICE and req[r] > 0:
                allocate_spill(st, r, mask, req[r], sc.got)
                _remember_reusable(st, r, sc.got, kind)
    if excl > 0:
        allocate_spill(st, 0, mask, excl, sc.got)
        _remember_reusable(st, 0, sc.got, kind)
    if not cpu_only and p.shape_info[base + SF_MEM_STATIC] and d.guaranteed:
        return allocate_memory(st, req, p.res_kind, mask, preferred, kind, u,
                               &sc.lists[2 * sc.nl - 1], sc.got, o)
    return 1


# --- public merge entry point (the kubelet's Policy.Merge over explicit hint lists) --------

def _raw_list(raw, int policy, int resource):
    """filterProvidersHints for one resource: (kind, masks, prefs)."""
    if raw is None:
        return (L_DONTCARE, [], [])
    masks = [(m, bool(p)) for m, p in raw if m is not None]
    nils = [bool(p) for m, p in raw if m is None]
    if not masks:
        if not nils:
            return (L_IMPOSSIBLE, [], [])
        return (L_DONTCARE if any(nils) else L_IMPOSSIBLE, [], [])
    if any(nils) or policy != P_SINGLE and nils:
        raise InvalidInput(f"hint list {resource}: nil hints mixed with NUMA masks")
    ms = []
    ps = []
    for m, p in masks:
        if m <= 0 or m >= 1 << 64:
            raise InvalidInput(f"hint list {resource}: mask {m} is not a non-empty uint64")
        if m in ms:
            ps[ms.index(m)] = ps[ms.index(m)] or p
        else:
            ms.append(m)
            ps.append(p)
    return (L_HINTS, ms, ps)


def merge_hints(lists, *, int policy, int n, bint prefer_closest=False, distances=()):
    """The topology manager policy's Merge over hint lists (see the reference)."""
    if not 1 <= n <= C_MAX_ENUM_NUMA:
        raise InvalidInput(f"NUMA node count {n} is not in 1..{C_MAX_ENUM_NUMA}")
    if not 0 <= policy <= 3:
        raise InvalidInput(f"policy code {policy} is not one of 0, 1, 2, 3")
    if policy == P_NONE:
        return (None, False)
    dist = list(distances) if distances else [10 if i == j else 20 for i in range(n) for j in range(n)]
    if len(dist) != n * n:
        raise InvalidInput(f"distances: expected {n * n} values, got {len(dist)}")
    raws = [_raw_list(raw, policy, i) for i, raw in enumerate(lists)]
    for kind, ms, ps in raws:
        for m in ms:
            if m >= (1 << n):
                raise InvalidInput(f"mask {m} has bits beyond {n} NUMA nodes")
    cdef int nl = len(raws), i, j
    cdef u64 size = 1ULL << n
    cdef _Merged out
    cdef _Scratch sc
    cdef i64* cdist = <i64*>malloc(n * n * sizeof(i64))
    cdef i64* states = <i64*>calloc(n, sizeof(i64))
    sc.nl = nl
    sc.lists = <_HintList*>malloc((2 * nl + 1) * sizeof(_HintList))
    sc.pool = <u64*>malloc((2 * nl + 1) * size * sizeof(u64))
    sc.prefs = <char*>malloc((2 * nl + 1) * size)
    sc.marks = <unsigned char*>malloc(3 * size)
    sc.buf = NULL
    try:
        for i in range(n * n):
            cdist[i] = dist[i]
        for i in range(2 * nl + 1):
            sc.lists[i].masks = sc.pool + i * size
            sc.lists[i].prefs = sc.prefs + i * size
        for i in range(nl):
            kind, ms, ps = raws[i]
            sc.lists[i].kind = kind
            sc.lists[i].resource = i
            sc.lists[i].count = len(ms)
            sc.lists[i].min_width = 0
            for j in range(len(ms)):
                sc.lists[i].masks[j] = ms[j]
                sc.lists[i].prefs[j] = ps[j]
        merge(sc.lists, nl, policy, n, prefer_closest, cdist, 0, states, &sc, &out)
    finally:
        _scratch_free(&sc)
        c_free(cdist)
        c_free(states)
    return (None if out.mask == 0 else out.mask, out.preferred == 1)


def best_nonpreferred_count(lists):
    """bestNonPreferredAffinityCount (TestMaxOfMinAffinityCounts)."""
    cdef int best = 0, w, mn
    for i, raw in enumerate(lists):
        kind, ms, ps = _raw_list(raw, P_BEST_EFFORT, i)
        if kind == L_HINTS and ms:
            mn = 64
            for m in ms:
                w = _popcount(m)
                if w < mn:
                    mn = w
            if mn > best:
                best = mn
    return best


def check_exclusive(mask, states):
    """Koordinator checkExclusivePolicy for Required (states: 0 idle, 1 shared, 2 single)."""
    cdef int n = len(states), i
    cdef i64 cs[64]
    if mask <= 0 or mask >= 1 << n or n > 64:
        raise InvalidInput(f"mask {mask} is not a non-empty mask over {n} NUMA nodes")
    for i in range(n):
        cs[i] = states[i]
    return bool(_exclusive_ok(<u64>mask, cs, n))


def class_selection(selected, topo_bits, const i64[::1] shape_of, const i64[::1] topo_of):
    """Per topology class: selected nodes, unselected nodes, first selected node (-1: none),
    in one pass over ``shape_of`` (the reference reads ``topo_bits`` instead)."""
    cdef Py_ssize_t n_topo = len(topo_bits), n = shape_of.shape[0], n_shapes = topo_of.shape[0]
    if selected < 0:
        raise InvalidInput(f"selected nodes: a bitset must not be negative, got {selected}")
    template = array("q")
    inside = clone(template, n_topo, True)
    outside = clone(template, n_topo, True)
    first = clone(template, n_topo, False)
    raw = selected.to_bytes((selected.bit_length() + 7) // 8, "little")
    cdef Py_ssize_t bad = _count_classes(
        raw, len(raw), &shape_of[0] if n else NULL, n, &topo_of[0] if n_shapes else NULL,
        n_shapes, n_topo, (<array>inside).data.as_longlongs,
        (<array>outside).data.as_longlongs, (<array>first).data.as_longlongs)
    if bad >= 0:
        raise InvalidInput(f"node {bad}: shape {shape_of[bad]} has no topology class below {n_topo}")
    return inside, outside, first


cdef Py_ssize_t _count_classes(
    const unsigned char* bits, Py_ssize_t nb, const i64* shape_of, Py_ssize_t n,
    const i64* topo_of, Py_ssize_t n_shapes, Py_ssize_t n_topo,
    i64* inside, i64* outside, i64* first,
) noexcept nogil:
    """class_selection's pass; the first node whose shape has no class, else -1. Bits past
    ``nb`` bytes select nothing."""
    cdef Py_ssize_t i, t
    cdef u64 s
    for t in range(n_topo):
        first[t] = -1
    for i in range(n):
        s = <u64>shape_of[i]
        if s >= <u64>n_shapes or <u64>topo_of[s] >= <u64>n_topo:
            return i
        t = topo_of[s]
        if (i >> 3) < nb and (bits[i >> 3] >> (i & 7)) & 1:
            inside[t] += 1
            if first[t] < 0:
                first[t] = i
        else:
            outside[t] += 1
    return -1
