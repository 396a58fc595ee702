# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled NUMA feasibility kernel: the same names, signatures, results and exceptions as
core/feasibility/_kernel_py.py (the readable reference; read it for the kubelet rules). Masks are
uint64 over NUMA positions, quantities int64, all state in C arrays: no Python objects in
the inner loops."""

from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcpy, memset

from core.errors import InvalidInput

__all__ = [
    "F_CPU_ONLY",
    "F_EMPTY",
    "F_EXCLUSIVE",
    "F_POD_SCOPE",
    "KERNEL_VERSION",
    "MAX_ENUM_NUMA",
    "RES_CPU",
    "RES_DEVICE",
    "RES_IGNORED",
    "RES_MEMORY",
    "Kernel",
    "Result",
    "best_nonpreferred_count",
    "check_exclusive",
    "merge_hints",
]

KERNEL_VERSION = 2
Result = tuple

ctypedef long long i64
ctypedef unsigned long long u64

DEF P_NONE = 0
DEF P_RESTRICTED = 2
DEF P_SINGLE = 3
DEF C_RES_CPU = 0
DEF C_RES_MEMORY = 1
DEF C_RES_DEVICE = 2
DEF C_RES_IGNORED = 3
DEF C_F_EMPTY = 1
DEF C_F_POD_SCOPE = 2
DEF C_F_EXCLUSIVE = 4
DEF C_F_CPU_ONLY = 8
DEF SF_N = 0
DEF SF_ZONE_OFF = 1
DEF SF_DIST_OFF = 2
DEF SF_MAX_NUMA = 3
DEF SF_PREFER_CLOSEST = 4
DEF SF_CPU_STATIC = 5
DEF SF_FULL_PCPUS = 6
DEF SF_THREADS = 7
DEF SF_MEM_STATIC = 8
DEF SHAPE_FIELDS = 9
DEF U_INIT = 0
DEF R_OK = 0
DEF R_TOO_MANY_NUMA = 1
DEF R_NODE_SHORT = 2
DEF R_NOT_PREFERRED = 3
DEF R_SINGLE_NO_HINT = 4
DEF R_CPU_SHORT = 5
DEF R_SMT = 6
DEF R_DEVICE_SHORT = 7
DEF R_MEMORY_SHORT = 8
DEF R_EXCLUSIVE = 9
DEF R_TOO_LARGE = 10
DEF L_DONTCARE = 0
DEF L_IMPOSSIBLE = 1
DEF L_HINTS = 2
DEF C_MAX_ENUM = 12

RES_CPU = C_RES_CPU
RES_MEMORY = C_RES_MEMORY
RES_DEVICE = C_RES_DEVICE
RES_IGNORED = C_RES_IGNORED
F_EMPTY = C_F_EMPTY
F_POD_SCOPE = C_F_POD_SCOPE
F_EXCLUSIVE = C_F_EXCLUSIVE
F_CPU_ONLY = C_F_CPU_ONLY
MAX_ENUM_NUMA = C_MAX_ENUM


cdef struct HList:
    int kind
    int resource
    int count
    int min_width
    u64* masks
    char* prefs


cdef struct State:
    int n
    int nres
    i64* cap      # n * nres
    i64* total    # n * nres
    i64* fr       # n * nres (free)
    i64* reuse    # n * nres
    i64* unaligned  # nres
    u64* cells    # n
    i64* assigns  # n


cdef struct Out:
    int ok
    u64 mask
    int pref
    int code
    int unit
    int res
    i64 a
    i64 b


cdef inline int popc(u64 m) noexcept nogil:
    return __builtin_popcountll(m)


cdef extern from *:
    int __builtin_popcountll(unsigned long long) nogil


cdef inline i64 msum(const i64* rows, int nres, u64 mask, int r) noexcept nogil:
    cdef i64 t = 0
    cdef int z = 0
    while mask:
        if mask & 1:
            t += rows[z * nres + r]
        mask >>= 1
        z += 1
    return t


cdef inline i64 outside(const i64* rows, int n, int nres, u64 mask, int r) noexcept nogil:
    cdef i64 t = 0
    cdef int z
    for z in range(n):
        if not ((mask >> z) & 1):
            t += rows[z * nres + r]
    return t


cdef inline i64 total_free(State* st, int r) noexcept nogil:
    cdef i64 t = 0
    cdef int z
    for z in range(st.n):
        t += st.fr[z * st.nres + r] + st.reuse[z * st.nres + r]
    return t


cdef inline void set_out(Out* o, int ok, u64 mask, int pref, int code, int unit, int res,
                         i64 a, i64 b) noexcept nogil:
    o.ok = ok
    o.mask = mask
    o.pref = pref
    o.code = code
    o.unit = unit
    o.res = res
    o.a = a
    o.b = b


cdef void finish(HList* hl, int min_width) noexcept nogil:
    cdef int i
    for i in range(hl.count):
        hl.prefs[i] = popc(hl.masks[i]) == min_width
    hl.min_width = min_width
    if hl.count == 0:
        hl.kind = L_IMPOSSIBLE


cdef void cpu_hints(State* st, i64 request, HList* hl) noexcept nogil:
    # cpumanager policy_static.go generateCPUTopologyHints
    cdef int n = st.n, nres = st.nres, w
    cdef int min_width = n
    cdef u64 mask, full = (1ULL << n) - 1
    hl.kind = L_HINTS
    hl.resource = 0
    hl.count = 0
    for mask in range(1, full + 1):
        w = popc(mask)
        if msum(st.cap, nres, mask, 0) >= request and w < min_width:
            min_width = w
        if outside(st.reuse, n, nres, mask, 0) > 0:
            continue
        if msum(st.reuse, nres, mask, 0) + msum(st.fr, nres, mask, 0) < request:
            continue
        hl.masks[hl.count] = mask
        hl.count += 1
    finish(hl, min_width)


cdef void device_hints(State* st, int r, i64 request, HList* hl) noexcept nogil:
    # devicemanager topology_hints.go
    cdef int n = st.n, nres = st.nres, z, w
    cdef int has_topo = 0
    cdef i64 ftotal
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
    ftotal = total_free(st, r) + st.unaligned[r]
    if ftotal < request:
        hl.kind = L_IMPOSSIBLE
        return
    hl.kind = L_HINTS
    for mask in range(1, full + 1):
        w = popc(mask)
        if msum(st.cap, nres, mask, r) >= request and w < min_width:
            min_width = w
        if outside(st.reuse, n, nres, mask, r) > 0:
            continue
        if msum(st.reuse, nres, mask, r) + msum(st.fr, nres, mask, r) < request:
            continue
        hl.masks[hl.count] = mask
        hl.count += 1
    finish(hl, min_width)


cdef int memory_mask_ok(State* st, u64 mask) noexcept nogil:
    cdef int width = popc(mask), z
    cdef u64 cells
    for z in range(st.n):
        if not ((mask >> z) & 1):
            continue
        cells = st.cells[z]
        if width == 1:
            if cells and popc(cells) > 1:
                return 0
        elif st.assigns[z] > 0 and (popc(cells) == 1 or cells != mask):
            return 0
    return 1


cdef void memory_hints(State* st, const i64* req, const i64* kinds, HList* hl) noexcept nogil:
    # memorymanager policy_static.go calculateHints (the empty-map quirk: don't care)
    cdef int n = st.n, nres = st.nres, t, w, skip, first = -1
    cdef int min_width = n
    cdef u64 mask, full = (1ULL << n) - 1
    hl.count = 0
    hl.min_width = 0
    for t in range(nres):
        if kinds[t] == C_RES_MEMORY and req[t] > 0:
            first = t
            break
    if first < 0:
        hl.kind = L_DONTCARE
        hl.resource = -1
        return
    hl.kind = L_HINTS
    hl.resource = first
    for mask in range(1, full + 1):
        skip = 0
        for t in range(nres):
            if kinds[t] == C_RES_MEMORY and req[t] > 0 and msum(st.total, nres, mask, t) < req[t]:
                skip = 1
                break
        if skip:
            continue
        w = popc(mask)
        if w < min_width:
            min_width = w
        if not memory_mask_ok(st, mask):
            continue
        for t in range(nres):
            if kinds[t] == C_RES_MEMORY and req[t] > 0:
                if msum(st.fr, nres, mask, t) + msum(st.reuse, nres, mask, t) < req[t]:
                    skip = 1
                    break
        if skip:
            continue
        hl.masks[hl.count] = mask
        hl.count += 1
    for t in range(hl.count):
        hl.prefs[t] = popc(hl.masks[t]) == min_width
    hl.min_width = min_width
    if hl.count == 0:
        hl.kind = L_DONTCARE


# --- merge -----------------------------------------------------------------------------------

cdef inline i64 dist_sum(u64 mask, const i64* dist, int n) noexcept nogil:
    cdef i64 t = 0
    cdef int i, j
    for i in range(n):
        if (mask >> i) & 1:
            for j in range(n):
                if (mask >> j) & 1:
                    t += dist[i * n + j]
    return t


cdef inline int fit_cmp(u64 a, u64 b, int closest, const i64* dist, int n) noexcept nogil:
    # -1 when a is the fitter hint: narrowest (count, then numeric value), or closest
    cdef int ca = popc(a), cb = popc(b)
    cdef i64 da, db
    if ca != cb:
        return -1 if ca < cb else 1
    if closest:
        da = dist_sum(a, dist, n)
        db = dist_sum(b, dist, n)
        if da != db:
            return -1 if da < db else 1
    if a == b:
        return 0
    return -1 if a < b else 1


cdef inline int group_of(u64 m, int bnp) noexcept nogil:
    cdef int w = popc(m)
    if w == bnp:
        return 0
    if w < bnp:
        return 1
    return 2


cdef inline int nonpref_cmp(u64 a, u64 b, int bnp, int closest, const i64* dist, int n) noexcept nogil:
    cdef int ga = group_of(a, bnp), gb = group_of(b, bnp)
    if ga != gb:
        return -1 if ga < gb else 1
    if ga == 1 and popc(a) != popc(b):
        return -1 if popc(a) > popc(b) else 1
    return fit_cmp(a, b, closest, dist, n)


cdef inline int exclusive_ok(u64 mask, const i64* states, int n) noexcept nogil:
    cdef int w = popc(mask), z
    for z in range(n):
        if (mask >> z) & 1:
            if w > 1 and states[z] == 2:
                return 0
            if w == 1 and states[z] == 1:
                return 0
    return 1


cdef void filter_single(HList* src, HList* dst) noexcept nogil:
    cdef int i
    dst.resource = src.resource
    dst.min_width = src.min_width
    dst.count = 0
    if src.kind == L_DONTCARE:
        dst.kind = L_DONTCARE
        return
    dst.kind = L_HINTS
    for i in range(src.count):
        if src.prefs[i] and popc(src.masks[i]) == 1:
            dst.masks[dst.count] = src.masks[i]
            dst.prefs[dst.count] = 1
            dst.count += 1
    if dst.count == 0:
        dst.kind = L_IMPOSSIBLE


cdef int merge(HList* lists, int nl, int policy, int n, int closest, const i64* dist,
               int exclusive, const i64* states, unsigned char* mark, unsigned char* cur,
               unsigned char* nxt, u64* out_mask) noexcept nogil:
    """Returns 1 preferred, 0 non-preferred, -1 rejected by exclusivity; out_mask 0 = nil."""
    cdef u64 full = (1ULL << n) - 1
    cdef u64 size = full + 1
    cdef u64 m, a, x, best = 0
    cdef int i, j, nh = 0, have = 0, bnp = 0, w, mn, before
    cdef unsigned char* tmp
    if policy == P_SINGLE:
        for i in range(nl):
            if lists[i].kind == L_IMPOSSIBLE:
                out_mask[0] = 0
                return 0
        closest = 0
    # preferred candidates: masks every hint list offers as preferred
    memset(mark, 0, size)
    for i in range(nl):
        if lists[i].kind == L_IMPOSSIBLE:
            nh = -1
            break
        if lists[i].kind != L_HINTS:
            continue
        nh += 1
        for j in range(lists[i].count):
            if lists[i].prefs[j]:
                mark[lists[i].masks[j]] += 1
    if nh == 0:
        if not exclusive or exclusive_ok(full, states, n):
            best = full
            have = 1
    elif nh > 0:
        for m in range(1, size):
            if mark[m] == nh and (not exclusive or exclusive_ok(m, states, n)):
                if not have or fit_cmp(m, best, closest, dist, n) < 0:
                    best = m
                    have = 1
    if have:
        out_mask[0] = 0 if (policy == P_SINGLE and best == full) else best
        return 1
    # every AND of one hint per list (nil acts as all nodes)
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
    for i in range(nl):
        if lists[i].kind == L_HINTS and lists[i].count:
            mn = 64
            for j in range(lists[i].count):
                w = popc(lists[i].masks[j])
                if w < mn:
                    mn = w
            if mn > bnp:
                bnp = mn
    before = 0
    for m in range(1, size):
        if not cur[m]:
            continue
        before = 1
        if exclusive and not exclusive_ok(m, states, n):
            continue
        if not have or nonpref_cmp(m, best, bnp, closest, dist, n) < 0:
            best = m
            have = 1
    if exclusive and before and not have:
        out_mask[0] = full
        return -1
    if not have:
        best = full
    out_mask[0] = 0 if (policy == P_SINGLE and best == full) else best
    return 0


# --- allocation ----------------------------------------------------------------------------

cdef i64 take(State* st, int r, u64 mask, i64 amount, i64* got) noexcept nogil:
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
        t = st.fr[k] if st.fr[k] < amount else amount
        st.fr[k] -= t
        amount -= t
        got[z] += t
    return amount


cdef void allocate_spill(State* st, int r, u64 mask, i64 amount, i64* got) noexcept nogil:
    cdef u64 full = (1ULL << st.n) - 1
    cdef u64 inside = mask if mask else full
    cdef i64 left
    memset(got, 0, st.n * sizeof(i64))
    left = take(st, r, inside, amount, got)
    left = take(st, r, full & ~inside, left, got)
    if left:
        st.unaligned[r] -= left


cdef inline void remember(State* st, int r, i64* got, i64 kind) noexcept nogil:
    cdef int z
    if kind == U_INIT:
        for z in range(st.n):
            st.reuse[z * st.nres + r] += got[z]


cdef int best_mem(HList* hl, u64 within, u64* out, int* pref) noexcept nogil:
    cdef int i, have = 0, bp = 0, p
    cdef u64 b = 0, m
    for i in range(hl.count):
        m = hl.masks[i]
        if (m & within) != within:
            continue
        p = hl.prefs[i]
        if (not have or (p and not bp) or
                (p == bp and (popc(m) < popc(b) or (popc(m) == popc(b) and m < b)))):
            b = m
            bp = p
            have = 1
    out[0] = b
    pref[0] = bp
    return have


cdef int allocate_memory(State* st, const i64* req, const i64* kinds, u64 mask, int preferred,
                         i64 kind, HList* hl, i64* got, Out* o, int unit) noexcept nogil:
    cdef int nres = st.nres, t, first = -1, z, bp
    cdef u64 bm
    cdef i64 have
    for t in range(nres):
        if kinds[t] == C_RES_MEMORY and req[t] > 0:
            first = t
            break
    if first < 0:
        return 1
    memory_hints(st, req, kinds, hl)
    if mask == 0:
        if hl.kind != L_HINTS or not best_mem(hl, 0, &bm, &bp) or (not bp and preferred):
            set_out(o, 0, 0, 0, R_MEMORY_SHORT, unit, first, req[first], total_free(st, first))
            return 0
        mask = bm
        preferred = bp
    for t in range(nres):
        if kinds[t] == C_RES_MEMORY and req[t] > 0:
            have = msum(st.fr, nres, mask, t) + msum(st.reuse, nres, mask, t)
            if have < req[t]:
                if hl.kind != L_HINTS or not best_mem(hl, mask, &bm, &bp) or (not bp and preferred):
                    set_out(o, 0, 0, 0, R_MEMORY_SHORT, unit, t, req[t], have)
                    return 0
                mask = bm
                break
    if popc(mask) > 1:
        for z in range(st.n):
            if (mask >> z) & 1 and st.assigns[z] > 0:
                if popc(st.cells[z]) == 1 or st.cells[z] != mask:
                    set_out(o, 0, 0, 0, R_MEMORY_SHORT, unit, first, req[first], 0)
                    return 0
    for t in range(nres):
        if kinds[t] == C_RES_MEMORY and req[t] > 0:
            memset(got, 0, st.n * sizeof(i64))
            take(st, t, mask, req[t], got)
            remember(st, t, got, kind)
    for z in range(st.n):
        if (mask >> z) & 1:
            st.cells[z] = mask
            st.assigns[z] += 1
    return 1


# --- the kernel ----------------------------------------------------------------------------

cdef class Kernel:
    """The feasibility kernel over one packed snapshot (core.feasibility.snapshot.Packed)."""

    cdef object packed
    cdef const i64[::1] info
    cdef const i64[::1] zones
    cdef const i64[::1] node_alloc
    cdef const i64[::1] unaligned
    cdef const i64[::1] dist
    cdef const i64[::1] states
    cdef const i64[::1] idle
    cdef const i64[::1] kinds
    cdef int nres
    cdef int nshapes

    def __init__(self, packed):
        if packed.n_res < 1:
            raise InvalidInput("packed snapshot: n_res must be at least 1 (cpu)")
        self.packed = packed
        self.info = packed.shape_info
        self.zones = packed.zones
        self.node_alloc = packed.node_alloc
        self.unaligned = packed.unaligned
        self.dist = packed.dist
        self.states = packed.states
        self.idle = packed.idle_states
        self.kinds = packed.res_kind
        self.nres = packed.n_res
        self.nshapes = packed.n_shapes

    def check(self, demand, int shape, int policy, int flags):
        """Admit the pod (``demand``) on node shape ``shape`` under topology manager policy
        ``policy`` (0 none .. 3 single-numa-node)."""
        if not 0 <= shape < self.nshapes:
            raise InvalidInput(f"shape {shape} is out of range 0..{self.nshapes - 1}")
        if not 0 <= policy <= 3:
            raise InvalidInput(f"policy code {policy} is not one of 0, 1, 2, 3")
        cdef const i64[::1] ukind = demand.unit_kind
        cdef const i64[::1] ucpu = demand.unit_cpu
        cdef const i64[::1] ures = demand.unit_res
        cdef int nunits = demand.n_units
        cdef int guaranteed = demand.guaranteed
        cdef Out o
        with nogil:
            self._check(&ukind[0], &ucpu[0], &ures[0], nunits, guaranteed, shape, policy,
                        flags, &o)
        return (o.ok, o.mask, o.pref, o.code, o.unit, o.res, o.a, o.b)

    cdef void _check(self, const i64* ukind, const i64* ucpu, const i64* ures, int nunits,
                     int guaranteed, int shape, int policy, int flags, Out* o) noexcept nogil:
        cdef int base = shape * SHAPE_FIELDS
        cdef int n = <int>self.info[base + SF_N]
        cdef int nres = self.nres
        cdef int pod = nunits - 1, r, z, u, u0, u1
        cdef i64 need, have
        cdef State st
        cdef int zoff = <int>self.info[base + SF_ZONE_OFF]
        cdef int col = 1 if flags & C_F_EMPTY else 2
        cdef u64 union_mask = 0
        cdef int all_pref = 1
        cdef HList* lists = NULL
        cdef u64* pool = NULL
        cdef char* prefs = NULL
        cdef unsigned char* marks = NULL
        cdef i64* buf = NULL
        cdef int nl = nres + 2, i
        cdef u64 size
        if policy != P_NONE and n > self.info[base + SF_MAX_NUMA]:
            set_out(o, 0, 0, 0, R_TOO_MANY_NUMA, -1, -1, n, self.info[base + SF_MAX_NUMA])
            return
        if n > C_MAX_ENUM:
            set_out(o, 0, 0, 0, R_TOO_LARGE, -1, -1, n, C_MAX_ENUM)
            return
        for r in range(nres):
            need = ures[pod * nres + r]
            have = self.node_alloc[shape * nres + r]
            if need > 0 and have >= 0 and need > have and self.kinds[r] != C_RES_IGNORED:
                set_out(o, 0, 0, 0, R_NODE_SHORT, pod, r, need, have)
                return
        size = 1ULL << n
        buf = <i64*>calloc(5 * n * nres + nres + 2 * n + n, sizeof(i64))
        lists = <HList*>malloc(2 * nl * sizeof(HList))
        pool = <u64*>malloc(2 * nl * size * sizeof(u64))
        prefs = <char*>malloc(2 * nl * size)
        marks = <unsigned char*>malloc(3 * size)
        if buf == NULL or lists == NULL or pool == NULL or prefs == NULL or marks == NULL:
            set_out(o, 0, 0, 0, R_TOO_LARGE, -1, -1, n, C_MAX_ENUM)
        else:
            st.n = n
            st.nres = nres
            st.cap = buf
            st.total = buf + n * nres
            st.fr = buf + 2 * n * nres
            st.reuse = buf + 3 * n * nres
            st.unaligned = buf + 4 * n * nres
            st.cells = <u64*>(buf + 4 * n * nres + nres)
            st.assigns = buf + 4 * n * nres + nres + n
            for z in range(n):
                for r in range(nres):
                    st.cap[z * nres + r] = self.zones[((zoff + z) * nres + r) * 3]
                    st.total[z * nres + r] = self.zones[((zoff + z) * nres + r) * 3 + 1]
                    st.fr[z * nres + r] = self.zones[((zoff + z) * nres + r) * 3 + col]
            for r in range(nres):
                st.unaligned[r] = self.unaligned[shape * nres + r]
            for i in range(2 * nl):
                lists[i].masks = pool + i * size
                lists[i].prefs = prefs + i * size
            if flags & C_F_POD_SCOPE:
                u0 = pod
                u1 = pod + 1
            else:
                u0 = 0
                u1 = pod
            set_out(o, 1, 0, 0, R_OK, -1, -1, 0, 0)
            for u in range(u0, u1):
                self._unit(&st, base, zoff, ukind, ucpu, ures, guaranteed, u, policy, flags,
                           lists, nl, marks, buf + 4 * n * nres + nres + 2 * n, o)
                if not o.ok:
                    break
                union_mask |= o.mask
                all_pref &= o.pref
            if o.ok:
                if policy == P_NONE:
                    set_out(o, 1, 0, 0, R_OK, -1, -1, 0, 0)
                else:
                    set_out(o, 1, union_mask, all_pref, R_OK, -1, -1, 0, 0)
        free(buf)
        free(lists)
        free(pool)
        free(prefs)
        free(marks)

    cdef void _unit(self, State* st, int base, int zoff, const i64* ukind, const i64* ucpu,
                    const i64* ures, int guaranteed, int u, int policy, int flags, HList* lists,
                    int nl, unsigned char* marks, i64* got, Out* o) noexcept nogil:
        cdef int nres = st.nres, n = st.n, r, cnt = 0, i, informative = 0, res
        cdef const i64* req = ures + u * nres
        cdef const i64* kinds = &self.kinds[0]
        cdef int cpu_only = flags & C_F_CPU_ONLY
        cdef int cpu_static = <int>self.info[base + SF_CPU_STATIC]
        cdef int mem_static = <int>self.info[base + SF_MEM_STATIC]
        cdef i64 excl = ucpu[u] if cpu_static else 0
        cdef i64 threads, fr
        cdef u64 mask = 0, full = (1ULL << n) - 1
        cdef int preferred = 0, exclusive
        cdef const i64* states
        cdef HList* use
        # cheap bounds: SMT alignment and totals
        if excl > 0:
            threads = self.info[base + SF_THREADS]
            if self.info[base + SF_FULL_PCPUS] and threads > 1 and excl % threads:
                set_out(o, 0, 0, 0, R_SMT, u, 0, excl, threads)
                return
            fr = total_free(st, 0)
            if fr < excl:
                set_out(o, 0, 0, 0, R_CPU_SHORT, u, 0, excl, fr)
                return
        if not cpu_only:
            for r in range(nres):
                if req[r] > 0 and kinds[r] == C_RES_DEVICE:
                    fr = total_free(st, r) + st.unaligned[r]
                    if fr < req[r]:
                        set_out(o, 0, 0, 0, R_DEVICE_SHORT, u, r, req[r], fr)
                        return
        # hint providers in order: devices, CPU, memory (filterProvidersHints)
        if not cpu_only:
            for r in range(nres):
                if kinds[r] == C_RES_DEVICE and req[r] > 0:
                    device_hints(st, r, req[r], &lists[cnt])
                    cnt += 1
        if cpu_static and ucpu[u] > 0:
            cpu_hints(st, ucpu[u], &lists[cnt])
            cnt += 1
        if not cpu_only and mem_static and guaranteed:
            memory_hints(st, req, kinds, &lists[cnt])
            cnt += 1
        if policy != P_NONE:
            use = lists
            if policy == P_SINGLE:
                for i in range(cnt):
                    filter_single(&lists[i], &lists[nl + i])
                use = lists + nl
            states = &self.idle[0] if flags & C_F_EMPTY else &self.states[zoff]
            exclusive = (flags & C_F_EXCLUSIVE) and policy >= P_RESTRICTED
            res = merge(use, cnt, policy, n, <int>self.info[base + SF_PREFER_CLOSEST],
                        &self.dist[<int>self.info[base + SF_DIST_OFF]], exclusive, states,
                        marks, marks + (full + 1), marks + 2 * (full + 1), &mask)
            if res < 0:
                set_out(o, 0, 0, 0, R_EXCLUSIVE, u, -1, 0, 0)
                return
            if policy >= P_RESTRICTED and res == 0:
                self._not_preferred(lists, cnt, policy, u, n, o)
                return
            preferred = res
        # Allocate on every provider in order (device, CPU, memory)
        if not cpu_only:
            for r in range(nres):
                if kinds[r] == C_RES_DEVICE and req[r] > 0:
                    allocate_spill(st, r, mask, req[r], got)
                    remember(st, r, got, ukind[u])
        if excl > 0:
            allocate_spill(st, 0, mask, excl, got)
            remember(st, 0, got, ukind[u])
        if not cpu_only and mem_static and guaranteed:
            if not allocate_memory(st, req, kinds, mask, preferred, ukind[u], &lists[2 * nl - 1],
                                   got, o, u):
                return
        for i in range(cnt):
            if lists[i].kind != L_DONTCARE:
                informative = 1
        set_out(o, 1, mask if informative else 0, preferred, R_OK, u, -1, 0, 0)

    cdef void _not_preferred(self, HList* lists, int cnt, int policy, int u, int n,
                             Out* o) noexcept nogil:
        cdef int i, j, mn, w, any_pref
        for i in range(cnt):
            if lists[i].kind == L_IMPOSSIBLE:
                set_out(o, 0, 0, 0, R_NOT_PREFERRED, u, lists[i].resource,
                        lists[i].min_width if lists[i].min_width else n, 0)
                return
            if lists[i].kind != L_HINTS:
                continue
            mn = 64
            any_pref = 0
            for j in range(lists[i].count):
                if lists[i].prefs[j]:
                    any_pref = 1
                    w = popc(lists[i].masks[j])
                    if w < mn:
                        mn = w
            if not any_pref or (policy == P_SINGLE and mn > 1):
                set_out(o, 0, 0, 0, R_SINGLE_NO_HINT if policy == P_SINGLE else R_NOT_PREFERRED,
                        u, lists[i].resource, lists[i].min_width, 0)
                return
        set_out(o, 0, 0, 0, R_NOT_PREFERRED, u, -1, 0, 0)


# --- public merge entry point ----------------------------------------------------------------

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
    if not 1 <= n <= C_MAX_ENUM:
        raise InvalidInput(f"NUMA node count {n} is not in 1..{C_MAX_ENUM}")
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
    cdef int nl = len(raws), i, j, res
    cdef u64 size = 1ULL << n
    cdef u64 out = 0
    cdef HList* hls = <HList*>malloc((2 * nl + 1) * sizeof(HList))
    cdef u64* pool = <u64*>malloc((2 * nl + 1) * size * sizeof(u64))
    cdef char* prefs = <char*>malloc((2 * nl + 1) * size)
    cdef unsigned char* marks = <unsigned char*>malloc(3 * size)
    cdef i64* cdist = <i64*>malloc(n * n * sizeof(i64))
    cdef i64* states = <i64*>calloc(n, sizeof(i64))
    try:
        for i in range(n * n):
            cdist[i] = dist[i]
        for i in range(2 * nl + 1):
            hls[i].masks = pool + i * size
            hls[i].prefs = prefs + i * size
        for i in range(nl):
            kind, ms, ps = raws[i]
            hls[i].kind = kind
            hls[i].resource = i
            hls[i].count = len(ms)
            hls[i].min_width = 0
            for j in range(len(ms)):
                hls[i].masks[j] = ms[j]
                hls[i].prefs[j] = ps[j]
        if policy == P_SINGLE:
            for i in range(nl):
                filter_single(&hls[i], &hls[nl + i])
            res = merge(hls + nl, nl, policy, n, 0, cdist, 0, states, marks, marks + size,
                        marks + 2 * size, &out)
        else:
            res = merge(hls, nl, policy, n, prefer_closest, cdist, 0, states, marks, marks + size,
                        marks + 2 * size, &out)
    finally:
        free(hls)
        free(pool)
        free(prefs)
        free(marks)
        free(cdist)
        free(states)
    return (None if out == 0 else out, res == 1)


def best_nonpreferred_count(lists):
    """bestNonPreferredAffinityCount (TestMaxOfMinAffinityCounts)."""
    cdef int best = 0, w, mn
    for i, raw in enumerate(lists):
        kind, ms, ps = _raw_list(raw, 1, i)
        if kind == L_HINTS and ms:
            mn = 64
            for m in ms:
                w = popc(m)
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
    return bool(exclusive_ok(<u64>mask, cs, n))
