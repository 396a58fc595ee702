"""Every upstream test-table fact of research/kubelet-topology-manager.md §6 (items 1-41)
and upstream-schedulers.md 1.6 / 2.6 / 4.3, against both kernels (``impl``).

Notation as in the research file: ``{0,1}T`` is mask {0,1} preferred. Items about a
kubelet restart (already-assigned containers: 26 second half, 34 second half, 37, 39) and
the alpha align-by-socket option (27) concern state an admission checker never sees; they
are listed at the end of this file with the reason.
"""

from __future__ import annotations

import dataclasses
from types import ModuleType

import pytest

from core.snapshot.snapshot import Demand, Snapshot
from tests.builders.model import (
    GI,
    MI,
    container,
    cpu_node,
    ids,
    node,
    pod,
    run,
    zone,
)

BE, R, S = 1, 2, 3


def m(*bits: int) -> int:
    out = 0
    for b in bits:
        out |= 1 << b
    return out


def T(*bits: int) -> tuple[int, bool]:
    return (m(*bits), True)


def F(*bits: int) -> tuple[int, bool]:
    return (m(*bits), False)


NIL_T = (None, True)
NIL_F = (None, False)

# (item, lists, n, {policy: expected (mask or None, preferred)})
MERGE_TABLE = [
    ("1 both {0}T", [[T(0)], [T(0)]], 2, {BE: T(0), R: T(0), S: T(0)}),
    ("1 both {1}T", [[T(1)], [T(1)]], 2, {BE: T(1), R: T(1), S: T(1)}),
    ("2 one provider has no hints", [None, [T(0)]], 2, {BE: T(0), R: T(0), S: T(0)}),
    ("3 r2 {0}T", [[T(0), T(1)], [T(0)]], 2, {BE: T(0), R: T(0), S: T(0)}),
    ("3 r2 {1}T", [[T(0), T(1)], [T(1)]], 2, {BE: T(1), R: T(1), S: T(1)}),
    ("4", [[T(0), T(1)], [T(0), F(0, 1)]], 2, {BE: T(0), R: T(0), S: T(0)}),
    (
        "5 less narrow preferred beats narrower non-preferred",
        [[T(1), F(0, 1)], [T(0), T(1), F(0, 1)]],
        2,
        {BE: T(1), R: T(1), S: T(1)},
    ),
    ("7 no providers", [], 4, {BE: T(0, 1, 2, 3)}),
    ("7 resource nil", [None], 4, {BE: T(0, 1, 2, 3)}),
    ("7 resource []", [[]], 4, {BE: F(0, 1, 2, 3)}),
    ("7 [{nil,T}]", [[NIL_T]], 4, {BE: T(0, 1, 2, 3)}),
    ("7 [{nil,F}]", [[NIL_F]], 4, {BE: F(0, 1, 2, 3)}),
    ("8 no common mask", [[T(0)], [T(1)]], 2, {BE: F(0, 1), R: F(0, 1), S: (None, False)}),
    ("9 same mask, one not preferred", [[T(0)], [F(0)]], 2, {BE: F(0), S: (None, False)}),
    ("10 {0}T vs {0,1}T", [[T(0)], [T(0, 1)]], 2, {BE: F(0), R: F(0)}),
    ("10 {1}T vs {0,1}T", [[T(1)], [T(0, 1)]], 2, {BE: F(1), R: F(1)}),
    ("11", [[T(0), T(1)], [F(0, 1)]], 2, {BE: F(0), R: F(0), S: (None, False)}),
    ("12 numeric tie-break", [[T(0, 1), T(0, 2)], [T(0, 1), T(0, 2)]], 3, {BE: T(0, 1)}),
    ("13 r2 {0,1}F", [[F(0, 1, 2, 3), F(0, 1)], [F(0, 1)]], 4, {BE: F(0, 1)}),
    ("13 r2 {0,3}F", [[F(0, 1, 2, 3), F(0, 1)], [F(0, 3)]], 4, {BE: F(0, 3)}),
    ("13 r2 {1,2}F", [[F(0, 1, 2, 3), F(0, 1)], [F(1, 2)]], 4, {BE: F(1, 2)}),
    ("13 r2 {2,3}F", [[F(0, 1, 2, 3), F(0, 1)], [F(2, 3)]], 4, {BE: F(2, 3)}),
    ("13 r2 {1,2}F,{2,3}F", [[F(0, 1, 2, 3), F(0, 1)], [F(1, 2), F(2, 3)]], 4, {BE: F(1, 2)}),
    (
        "13 r2 four",
        [[F(0, 1, 2, 3), F(0, 1)], [F(1, 2, 3), F(1, 2), F(1, 3), F(2, 3)]],
        4,
        {BE: F(1, 2)},
    ),
    ("15 r1 only a wide hint", [[T(0, 1)], [T(0), T(1), F(0, 1)]], 2, {S: (None, False)}),
    ("15 with a nil provider", [[T(0), T(1), F(0, 1)], None], 2, {S: T(0)}),
    (
        "16 filterSingleNumaHints keeps {0}T,{1}T",
        [[T(0), T(1), F(1, 2), F(0, 1, 2), NIL_F]],
        3,
        {S: T(0)},
    ),
    (
        "16 resources with only wide or non-preferred hints become empty",
        [[T(0), T(1), F(1, 2), F(0, 1, 2), NIL_F], [T(0, 1), F(0, 1, 2)], [F(0), F(1)]],
        3,
        {S: (None, False)},
    ),
    ("17 BestEffort pod, empty providers", [None, None, None], 2, {R: T(0, 1), S: (None, True)}),
    ("17 [{0}T,{0,1}F]", [[T(0), F(0, 1)]], 2, {BE: T(0), R: T(0)}),
    ("17 [{0}T,{1}T,{0,1}F]", [[T(0), T(1), F(0, 1)]], 2, {BE: T(0), R: T(0)}),
    ("17 [{0,1}F] restricted rejects", [[F(0, 1)]], 2, {BE: F(0, 1), R: F(0, 1)}),
    # upstream-schedulers 2.6 (Volcano policy tests; first three shared with the kubelet)
    (
        "volcano single: cpu {0,1}F,{0}T + gpu {0,1}F,{0}T",
        [[F(0, 1), T(0)], [F(0, 1), T(0)]],
        2,
        {S: T(0), R: T(0), BE: T(0)},
    ),
    (
        "volcano single: same with {1}",
        [[F(0, 1), T(1)], [F(0, 1), T(1)]],
        2,
        {S: T(1), R: T(1), BE: T(1)},
    ),
    ("volcano: both {0}T,{1}T", [[T(0), T(1)], [T(0), T(1)]], 2, {S: T(0), R: T(0), BE: T(0)}),
    ("volcano: both {0,1}T", [[T(0, 1)], [T(0, 1)]], 2, {R: T(0, 1), BE: T(0, 1)}),
    ("volcano single: cpu {0}T + gpu only {0,1}T", [[T(0)], [T(0, 1)]], 2, {S: (None, False)}),
]


@pytest.mark.parametrize(
    ("item", "lists", "n", "expected"), MERGE_TABLE, ids=[c[0] for c in MERGE_TABLE]
)
def test_merge_table(impl: ModuleType, item: str, lists: list, n: int, expected: dict) -> None:
    for policy, want in expected.items():
        assert impl.merge_hints(lists, policy=policy, n=n) == want, (item, policy)


def test_admission_follows_preferred(impl: ModuleType) -> None:
    # item 17 and 2.6: restricted / single-numa-node admit only preferred hints;
    # cpu {0}P vs gpu {1}P: restricted rejects, best-effort admits.
    assert impl.merge_hints([[T(0)], [T(1)]], policy=R, n=2)[1] is False
    assert impl.merge_hints([[T(0)], [T(1)]], policy=BE, n=2)[0] is not None
    # policy none: no merge at all, {nil, false} (item 17 "none with no hints admits")
    assert impl.merge_hints([[T(0)]], policy=0, n=2) == (None, False)


EIGHT = [
    [10, 11, 12, 12, 30, 30, 30, 30],
    [11, 10, 12, 12, 30, 30, 30, 30],
    [12, 12, 10, 11, 30, 30, 30, 30],
    [12, 12, 11, 10, 30, 30, 30, 30],
    [30, 30, 30, 30, 10, 11, 12, 12],
    [30, 30, 30, 30, 11, 10, 12, 12],
    [30, 30, 30, 30, 12, 12, 10, 11],
    [30, 30, 30, 30, 12, 12, 11, 10],
]
DIST8 = [d for row in EIGHT for d in row]


@pytest.mark.parametrize(
    ("lists", "want"),
    [
        ([[T(0, 4), T(0, 2)], [T(0, 4), T(0, 2)]], T(0, 2)),
        ([[T(4), T(0, 2)], [T(4), T(0, 2)]], T(4)),  # width first
        ([[F(0, 1, 2, 3), F(0, 1)], [F(1, 2), F(2, 3)]], F(2, 3)),  # 10.5 < 11
        ([[F(0, 1, 2, 3), F(0, 1)], [F(1, 2, 3), F(1, 2), F(1, 3), F(2, 3)]], F(2, 3)),
    ],
)
def test_item14_prefer_closest_numa_nodes(impl: ModuleType, lists: list, want: tuple) -> None:
    got = impl.merge_hints(lists, policy=BE, n=8, prefer_closest=True, distances=DIST8)
    assert got == want
    # single-numa-node ignores the option
    single = impl.merge_hints([[T(4), T(0)]], policy=S, n=8, prefer_closest=True, distances=DIST8)
    assert single == T(0)


def test_item19_max_of_min_affinity_counts(impl: ModuleType) -> None:
    assert impl.best_nonpreferred_count([[F(0, 1), F(0, 1, 2)]]) == 2
    assert impl.best_nonpreferred_count([[F(0, 1), F(0, 1, 2)], [F(0, 1, 2)]]) == 3
    assert impl.best_nonpreferred_count([[]]) == 0


# --- CPU manager (items 20-25, 28): 2 NUMA x 6 CPUs -----------------------------------


def twelve(free0: int, free1: int, policy: str) -> object:
    return cpu_node([6, 6], [free0, free1], policy=policy)


@pytest.mark.parametrize(
    ("request_", "policy", "ok", "mask", "pref"),
    [
        (2, "restricted", 1, {0}, 1),  # item 20: {0}T,{1}T,{0,1}F
        (2, "single-numa-node", 1, {0}, 1),
        (5, "restricted", 1, {1}, 1),  # item 21: {1}T,{0,1}F
        (5, "single-numa-node", 1, {1}, 1),
        (7, "restricted", 1, {0, 1}, 1),  # item 22: {0,1}T (no node has 7 CPUs)
        (7, "single-numa-node", 0, set(), 0),
        (11, "best-effort", 0, set(), 0),  # item 23: no hints, allocation fails
    ],
)
def test_cpu_hints_free_2_to_11(
    impl: ModuleType, request_: int, policy: str, ok: int, mask: set, pref: int
) -> None:
    res = run(impl, twelve(4, 6, policy), pod(container(cpu=request_)))
    assert (res[0], ids(res[1]), res[2]) == (ok, mask, pref)


def test_item24_capacity_rule_gives_only_wide_nonpreferred(impl: ModuleType) -> None:
    n_be = twelve(1, 1, "best-effort")
    res = run(impl, n_be, pod(container(cpu=2)))
    assert (res[0], ids(res[1]), res[2]) == (1, {0, 1}, 0)
    res = run(impl, twelve(1, 1, "restricted"), pod(container(cpu=2)))
    assert res[0] == 0 and res[3] == 3  # restricted: no preferred hint


def test_item25_not_enough_free(impl: ModuleType) -> None:
    res = run(impl, twelve(3, 1, "best-effort"), pod(container(cpu=5)))
    assert res[0] == 0 and res[3] == 5 and res[6:] == (5, 4)


@pytest.mark.parametrize(
    ("containers", "want"),
    [
        ([("init", 2), ("app", 5)], 5),
        ([("init", 5), ("app", 2)], 5),
        ([("app", 2), ("app", 4)], 6),
        ([("sidecar", 1), ("app", 1)], 2),
        ([("init", 5), ("sidecar", 1), ("sidecar", 2), ("sidecar", 3), ("app", 1)], 7),
        ([("init", 5), ("sidecar", 1), ("sidecar", 2), ("init", 5), ("sidecar", 3), ("app", 1)], 8),
        ([("sidecar", 10), ("init", 200), ("app", 100)], 210),
    ],
)
def test_item28_pod_guaranteed_cpus(containers: list, want: int) -> None:
    snap = Snapshot.build([cpu_node([4], [4])])
    cs = [container(f"c{i}", kind=k, cpu=c) for i, (k, c) in enumerate(containers)]
    d = Demand.build(pod(*cs), snap)
    assert d.unit_cpu[d.n_units - 1] == want
    # a non-Guaranteed pod has no exclusive CPUs at all
    burst = [
        container(f"c{i}", kind=k, cpu=c, exclusive=False) for i, (k, c) in enumerate(containers)
    ]
    d = Demand.build(pod(*burst, qos="Burstable"), snap)
    assert d.unit_cpu[d.n_units - 1] == 0


# --- device manager (items 29-35): 2 NUMA nodes ----------------------------------------

GPU = "nvidia.com/gpu"


def gpu_node(
    per0: int,
    per1: int,
    *,
    free0: int | None = None,
    free1: int | None = None,
    unaligned: int = 0,
    policy: str = "restricted",
) -> object:
    zones = [
        zone(0, {"cpu": 8000, GPU: per0}, {"cpu": 8000, GPU: per0 if free0 is None else free0}),
        zone(1, {"cpu": 8000, GPU: per1}, {"cpu": 8000, GPU: per1 if free1 is None else free1}),
    ]
    return node("g", zones, policy=policy, unaligned_devices={GPU: unaligned} if unaligned else {})


def gpus(k: int, name: str = "c") -> object:
    return container(name, nvidia_com__gpu=k)


def test_item29_devices_without_topology_do_not_care(impl: ModuleType) -> None:
    n = node(
        "g",
        [zone(0, {"cpu": 8000}), zone(1, {"cpu": 8000})],
        policy="single-numa-node",
        allocatable={"cpu": 16000, GPU: 2},
    )
    res = run(impl, n, pod(gpus(1)))
    assert res[:3] == (1, 0, 1)  # admitted, nil affinity (no provider cares), preferred


def test_item30_one_unaligned_one_on_numa1(impl: ModuleType) -> None:
    res = run(impl, gpu_node(0, 1, unaligned=1), pod(gpus(1)))
    assert (res[0], ids(res[1]), res[2]) == (1, {1}, 1)


def test_item31_one_device_per_node(impl: ModuleType) -> None:
    res = run(impl, gpu_node(1, 1), pod(gpus(1)))
    assert (ids(res[1]), res[2]) == ({0}, 1)
    res = run(impl, gpu_node(1, 1), pod(gpus(2)))
    assert (res[0], ids(res[1]), res[2]) == (1, {0, 1}, 1)


def test_item32_forced_cross_numa(impl: ModuleType) -> None:
    assert ids(run(impl, gpu_node(2, 2), pod(gpus(2)))[1]) == {0}
    taken = gpu_node(2, 2, free0=1, free1=1)
    assert run(impl, taken, pod(gpus(2)))[0] == 0  # restricted: only {0,1}F
    be = gpu_node(2, 2, free0=1, free1=1, policy="best-effort")
    res = run(impl, be, pod(gpus(2)))
    assert (res[0], ids(res[1]), res[2]) == (1, {0, 1}, 0)


def test_item33_two_device_resources(impl: ModuleType) -> None:
    zones = [
        zone(0, {"cpu": 8000, "vendor.com/dev1": 2, "vendor.com/dev2": 1}),
        zone(1, {"cpu": 8000, "vendor.com/dev1": 2}),
    ]
    c = container("c", vendor_com__dev1=2, vendor_com__dev2=1)
    res = run(impl, node("g", zones, policy="restricted"), pod(c))
    assert (res[0], ids(res[1]), res[2]) == (1, {0}, 1)


def test_item34_more_requested_than_exist(impl: ModuleType) -> None:
    res = run(impl, gpu_node(2, 2, policy="best-effort"), pod(gpus(6)))
    assert res[0] == 0 and res[3] == 7 and res[6:] == (6, 4)


def test_item35_allocation_fills_the_hint_then_spills(impl: ModuleType) -> None:
    # 3 per node; a 4-device container takes 3 from NUMA 0 and 1 from NUMA 1 (ascending),
    # so the next 2-device container fits NUMA 1 alone.
    n = gpu_node(3, 3, policy="best-effort")
    res = run(impl, n, pod(gpus(4, "a"), gpus(2, "b")))
    assert res[0] == 1 and ids(res[1]) == {0, 1}
    res = run(impl, gpu_node(3, 3, policy="single-numa-node"), pod(gpus(3, "a"), gpus(3, "b")))
    assert res[0] == 1


# --- memory manager (items 36, 38, 40, 41; issue #128669) ------------------------------


def mem_node(
    allocs: list[int],
    frees: list[int],
    *,
    policy: str = "restricted",
    hp: list[int] | None = None,
    hp_free: list[int] | None = None,
    hp_name: str = "hugepages-1Gi",
) -> object:
    zones = []
    for i, (a, f) in enumerate(zip(allocs, frees, strict=False)):
        cap = {"cpu": 8000, "memory": a}
        free = {"cpu": 8000, "memory": f}
        if hp is not None:
            cap[hp_name] = hp[i]
            free[hp_name] = (hp_free or hp)[i]
        zones.append(zone(i, cap, free))
    return node("m", zones, policy=policy, memory_manager_policy="Static")


def test_item36_burstable_gets_no_memory_hints(impl: ModuleType) -> None:
    n = mem_node([GI, GI], [GI, GI])
    res = run(impl, n, pod(container(memory=2 * GI), qos="Burstable"))
    # no provider gives a hint: the default {all NUMA nodes, preferred} (policy.go)
    assert res[:3] == (1, 0b11, 1)


def test_item38_free_per_numa(impl: ModuleType) -> None:
    n = mem_node(
        [2 * GI] * 4,
        [0, GI, GI + GI // 2, GI + GI // 2],
        hp=[GI] * 4,
        hp_free=[0, 0, GI, GI],
    )
    res = run(impl, n, pod(container(memory=GI, hugepages_1Gi=GI)))
    assert (res[0], ids(res[1]), res[2]) == (1, {2}, 1)


def test_item40_grouped_nodes_only_give_the_group(impl: ModuleType) -> None:
    # container a needs both NUMA nodes (3Gi over 2Gi each): a group [0,1] forms; then
    # b (1Gi + 16Mi) fits a single node by allocatable but may only use {0,1}: {0,1}F.
    n = mem_node(
        [2 * GI, 2 * GI],
        [2 * GI, 2 * GI],
        hp=[32 * MI] * 2,
        hp_name="hugepages-2Mi",
        policy="best-effort",
    )
    a = container("a", memory=3 * GI)
    b = container("b", memory=GI, hugepages_2Mi=16 * MI)
    res = run(impl, n, pod(a, b))
    assert (res[0], ids(res[1]), res[2]) == (1, {0, 1}, 0)
    n_r = mem_node([2 * GI, 2 * GI], [2 * GI, 2 * GI], hp=[32 * MI] * 2, hp_name="hugepages-2Mi")
    assert run(impl, n_r, pod(a))[:3] == (1, 0b11, 1)
    res = run(impl, n_r, pod(a, b))
    assert res[0] == 0 and res[3] == 3 and res[4] == 1


@pytest.mark.parametrize(
    ("containers", "want"),
    [
        ([("init", GI), ("init", 4 * GI), ("app", GI), ("app", 2 * GI)], 4 * GI),
        ([("init", 3 * GI), ("app", 2 * GI), ("app", 3 * GI)], 5 * GI),
        ([("sidecar", 2 * GI), ("init", 4 * GI), ("app", GI), ("app", 2 * GI)], 6 * GI),
    ],
)
def test_item41_pod_requested_memory(containers: list, want: int) -> None:
    snap = Snapshot.build([mem_node([8 * GI], [8 * GI])])
    cs = [container(f"c{i}", kind=k, memory=v) for i, (k, v) in enumerate(containers)]
    d = Demand.build(pod(*cs), snap)
    r = snap.packed.res_names.index("memory")
    assert d.unit_res[(d.n_units - 1) * snap.packed.n_res + r] == want


def test_issue_128669_memory_over_one_numa_with_one_cpu(impl: ModuleType) -> None:
    zones = [zone(i, {"cpu": 8000, "memory": 8 * GI}) for i in range(2)]
    c = container(cpu=1, memory=9 * GI)
    r = node("m", zones, policy="restricted", memory_manager_policy="Static")
    assert run(impl, r, pod(c))[0] == 0  # CPU {0}T and memory {0,1}T are not identical
    be = node("m", zones, policy="best-effort", memory_manager_policy="Static")
    res = run(impl, be, pod(c))
    assert (res[0], ids(res[1]), res[2]) == (1, {0, 1}, 0)


def test_memory_empty_map_quirk_fails_in_allocate(impl: ModuleType) -> None:
    # no mask qualifies (2Gi free in total, 3Gi asked) -> "don't care" hints, then
    # Allocate fails: the pod is rejected under best-effort too (#128708).
    n = mem_node([2 * GI, 2 * GI], [GI, GI], policy="best-effort")
    res = run(impl, n, pod(container(memory=3 * GI)))
    assert res[0] == 0 and res[3] == 8


# --- full-pcpus-only and SMT -----------------------------------------------------------


def test_full_pcpus_only_rejects_odd_requests(impl: ModuleType) -> None:
    n = cpu_node([8, 8], [8, 8], full_pcpus_only=True, threads_per_core=2)
    res = run(impl, n, pod(container(cpu=3)))
    assert res[0] == 0 and res[3] == 6 and res[6:] == (3, 2)
    assert run(impl, n, pod(container(cpu=4)))[0] == 1
    none = cpu_node([8, 8], [8, 8], policy="none", full_pcpus_only=True, threads_per_core=2)
    assert run(impl, none, pod(container(cpu=3)))[0] == 0  # every policy


# --- container vs pod scope --------------------------------------------------------------


def test_container_scope_earlier_containers_consume(impl: ModuleType) -> None:
    n = cpu_node([4, 4], [4, 4], policy="single-numa-node")
    assert run(impl, n, pod(container("a", cpu=3), container("b", cpu=3)))[0] == 1
    assert (
        run(impl, n, pod(container("a", cpu=3), container("b", cpu=3), container("c", cpu=3)))[0]
        == 0
    )


def test_regular_init_cpus_are_reusable_sidecars_are_not(impl: ModuleType) -> None:
    n = cpu_node([4, 4], [4, 4], policy="single-numa-node")
    init_then_apps = pod(
        container("i", kind="init", cpu=4), container("a", cpu=4), container("b", cpu=4)
    )
    assert run(impl, n, init_then_apps)[0] == 1
    sidecar_then_apps = pod(
        container("s", kind="sidecar", cpu=4), container("a", cpu=4), container("b", cpu=4)
    )
    assert run(impl, n, sidecar_then_apps)[0] == 0


def test_pod_scope_merges_the_whole_pod(impl: ModuleType) -> None:
    # NRT filter_test node3 (upstream-schedulers 4.3): pod scope, cpu 2/4 free per NUMA
    zones = [zone(0, {"cpu": 4000}, {"cpu": 2000}), zone(1, {"cpu": 4000}, {"cpu": 4000})]
    n = node("node3", zones, policy="single-numa-node", tm_scope="pod")
    three = pod(*(container(f"c{i}", cpu=3) for i in range(3)))
    assert run(impl, n, three)[0] == 0  # cannot align pod
    ones = pod(*(container(f"c{i}", cpu=1) for i in range(3)))
    res = run(impl, n, ones)
    assert (res[0], ids(res[1])) == (1, {1})
    # the same pod in container scope fits
    cn = node("node3", zones, policy="single-numa-node")
    assert run(impl, cn, three)[0] == 0
    assert run(impl, cn, ones)[0] == 1


def test_nrt_filter_table_node1(impl: ModuleType) -> None:
    # node1: container scope, cpu avail 4/8, memory 8Gi/8Gi, nic 10/10 (4.3)
    zones = [
        zone(
            0,
            {"cpu": 8000, "memory": 8 * GI, "example.com/nic": 10},
            {"cpu": 4000, "memory": 8 * GI, "example.com/nic": 10},
        ),
        zone(1, {"cpu": 8000, "memory": 8 * GI, "example.com/nic": 10}),
    ]
    n = node("node1", zones, policy="single-numa-node", memory_manager_policy="Static")
    assert run(impl, n, pod(container(cpu=2, memory=2 * GI)))[0] == 1
    assert run(impl, n, pod(container(cpu=9, memory=GI)))[0] == 0
    be = container(cpu=19, exclusive=False, memory=5 * GI, example_com__nic=5)
    assert run(impl, n, pod(be, qos="Burstable"))[0] == 1  # cpu/memory not NUMA-checked
    assert run(impl, n, pod(container(example_com__nic=20), qos="BestEffort"))[0] == 0


# --- Koordinator checkExclusivePolicy (upstream-schedulers 1.6) --------------------------

IDLE, SHARED, SINGLE = 0, 1, 2


@pytest.mark.parametrize(
    ("mask", "states", "want"),
    [
        ({0}, [IDLE, SINGLE], True),
        ({0}, [SHARED, SINGLE], False),
        ({0}, [SHARED, SHARED], False),
        ({0}, [SINGLE, SHARED], True),
        ({0, 1}, [SHARED, SINGLE], False),
        ({0, 1}, [SHARED, IDLE], True),
        ({0, 1}, [SHARED, SHARED], True),
    ],
)
def test_check_exclusive_required(impl: ModuleType, mask: set, states: list, want: bool) -> None:
    assert impl.check_exclusive(m(*mask), states) is want


def test_exclusive_keeps_multi_numa_pod_off_single_numa_nodes(impl: ModuleType) -> None:
    zones = [zone(0, {"cpu": 4000}), zone(1, {"cpu": 4000})]
    busy = node("k", zones, policy="restricted", numa_states=("single", "idle"))
    big = pod(container(cpu=6))
    assert run(impl, busy, big, flags=impl.F_EXCLUSIVE)[3] == 9
    assert run(impl, busy, big)[0] == 1
    shared = node("k", zones, policy="restricted", numa_states=("shared", "idle"))
    res = run(impl, shared, pod(container(cpu=2)), flags=impl.F_EXCLUSIVE)
    assert (res[0], ids(res[1])) == (1, {1})


# Not applicable to an admission checker (state of containers already running after a
# kubelet restart, or an alpha option without socket data in any inventory):
NOT_APPLICABLE = {
    "26": "regenerated hints for CPUs already assigned to the same container",
    "27": "align-by-socket (alpha) needs socket data no inventory source reports",
    "34b": "devices already held by the same container",
    "37": "memory assignment regenerated after a restart",
    "39": "existing assignment with a different size",
}


# --- issue 15: a pod without topology hints (kubelet-topology-manager.md 1.3-1.6) ----------
# kubernetes pkg/kubelet/cm/topologymanager/policy.go: every provider without hints gives
# {nil, preferred}; mergePermutation ANDs nil as all NUMA nodes, so the merged hint is the
# default {all NUMA nodes, preferred} (policy_test.go "TopologyHint not set",
# "HintProvider returns empty non-nil map[string][]TopologyHint"); restricted admits it
# (policy_restricted.go canAdmitPodResult), single-numa-node maps all nodes to nil
# (policy_single_numa_node.go), policy none stores {nil, false}. Burstable: the CPU manager
# (guaranteedCPUs 0) and the memory manager (Guaranteed only) give none.
NO_HINTS = [
    # (policy, scope, admitted mask, preferred)
    ("none", "container", 0, 0),
    ("best-effort", "container", 0b11, 1),
    ("restricted", "container", 0b11, 1),
    ("restricted", "pod", 0b11, 1),
    ("single-numa-node", "container", 0, 1),
    ("single-numa-node", "pod", 0, 1),
]


@pytest.mark.parametrize(("policy", "scope", "mask", "preferred"), NO_HINTS)
def test_pod_without_hints_gets_the_default_hint(
    impl: ModuleType, policy: str, scope: str, mask: int, preferred: int
) -> None:
    n = mem_node([4 * GI, 4 * GI], [4 * GI, 4 * GI], policy=policy)
    n = dataclasses.replace(n, tm_scope=scope)
    burstable = pod(container("a", cpu=1, exclusive=False, memory=GI), qos="Burstable")
    assert run(impl, n, burstable)[:3] == (1, mask, preferred)


def test_hintless_container_places_nothing_next_to_one_with_hints(impl: ModuleType) -> None:
    # container scope: the pod's NUMA set is where its hinted containers were aligned; a
    # container without hints ({all, preferred}) widens nothing
    n = cpu_node([4, 4], [4, 4], policy="restricted")
    two = pod(container("side", cpu=1, exclusive=False), container("app", cpu=2))
    assert run(impl, n, two)[:3] == (1, 0b01, 1)
