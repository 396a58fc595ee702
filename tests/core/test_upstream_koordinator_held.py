"""koord-scheduler's held-back CPUs, its reading of the NRT policy list, and the pods that
bind no CPUs (issue 30), from koordinator-sh/koordinator at a7a1b76
(pkg/scheduler/plugins/nodenumaresource): each case names its upstream test, or says it is
written from a reading of the code where upstream has none. The path is the real one: raw
objects -> build_inventory -> evaluate (tests/core/upstream_cases.py)."""

from __future__ import annotations

from typing import Any

import pytest

from core.inventory.build import build_inventory
from tests.builders import objects as k8s
from tests.core.upstream_cases import Outcome, run

LABEL = "node.koordinator.sh/numa-topology-policy"
STATUS = "scheduling.koordinator.sh/resource-status"
SPEC = "scheduling.koordinator.sh/numa-topology-spec"
TOPOLOGY = "node.koordinator.sh/cpu-topology"
KUBELET = "kubelet.koordinator.sh/cpu-manager-policy"
ALLOCS = "node.koordinator.sh/pod-cpu-allocs"
RESERVATION = "node.koordinator.sh/reservation"
SYSTEM_QOS = "node.koordinator.sh/system-qos-resource"


def cpu_topology(per_numa: int, numas: int = 2, threads: int = 2) -> str:
    """buildCPUTopologyForTest(numas, 1, per_numa / threads, threads) as koordlet reports it:
    CPU ids in order, NUMA node by NUMA node."""
    detail = [
        {"id": c, "core": c // threads, "socket": c // per_numa, "node": c // per_numa}
        for c in range(per_numa * numas)
    ]
    return k8s.js({"detail": detail})


def koord_objects(
    per_numa: int,
    annotations: dict[str, str],
    *,
    label: str | None = "SingleNUMANode",
    numas: int = 2,
    memory: str = "64Gi",
    policies: list[str] | None = None,
    available: bool = False,
) -> list[dict[str, Any]]:
    """A Node and the NRT koordlet reports: every CPU allocatable per NUMA node (koordlet's
    zones; ``available``: with available = allocatable, as koordlet writes it)."""
    cpu = str(per_numa)
    values = (cpu, cpu, cpu) if available else (cpu, cpu)
    mem = (memory, memory, memory) if available else (memory, memory)
    zones = [k8s.zone(i, {"cpu": values, "memory": mem}) for i in range(numas)]
    total_memory = f"{int(memory.removesuffix('Gi')) * numas}Gi"
    node = k8s.node(
        "n",
        {"cpu": str(per_numa * numas), "memory": total_memory, "pods": "110"},
        labels={LABEL: label} if label is not None else {},
    )
    topology = k8s.nrt(
        "n",
        zones,
        attributes={"topologyManagerPolicy": "none", "cpuManagerPolicy": "static"},
        policies=policies,
        annotations={TOPOLOGY: cpu_topology(per_numa, numas), **annotations},
    )
    return [node, topology]


def koord_pod(cpu: str, memory: str = "1Gi", *, burstable: bool = False, spec: Any = None):
    limits: dict[str, str] | None = {} if burstable else None
    annotations = {SPEC: k8s.js(spec)} if spec is not None else None
    return k8s.pod(
        "p",
        [k8s.container("c", {"cpu": cpu, "memory": memory}, limits)],
        annotations=annotations,
        scheduler="koord-scheduler",
    )


def placed(outcome: Outcome) -> tuple[str, tuple[int, ...]]:
    v = outcome.verdicts["n"]
    return v.verdict, tuple(v.numa) if v.verdict == "fits" else ()


# topology_options_test.go TestTopologyOptionsManager: 2 NUMA nodes of 8 CPUs (CPUs 0-7 on
# NUMA 0), kubelet reserved 0-1, a kubelet-managed pod on 0-3, system QoS 4-5, node
# reservation 6-7: ReservedCPUs 0-7, NUMA 0 has 0 CPUs left, NUMA 1 all 8.
MANAGER_ANNOTATIONS = {
    KUBELET: k8s.js({"policy": "static", "options": {"static": "true"}, "reservedCPUs": "0-1"}),
    ALLOCS: k8s.js(
        [
            {
                "namespace": "default",
                "name": "pod-1",
                "uid": "4b0c7c4e",
                "cpuset": "0-3",
                "managedByKubelet": True,
            }
        ]
    ),
    SYSTEM_QOS: k8s.js({"cpuset": "4-5"}),
    RESERVATION: k8s.js({"reservedCPUs": "6-7"}),
}


def test_topology_options_manager_holds_back_every_category() -> None:
    outcome = run(koord_pod("2"), koord_objects(8, MANAGER_ANNOTATIONS))
    node = outcome.nodes["n"]
    assert not outcome.errors
    # 0-1 the kubelet's, 2-3 the pod's (0-1 counted once), 4-5 system QoS, 6-7 reservation
    assert node.koord_held == ((2, 2, 2, 2), (0, 0, 0, 0))
    zone0, zone1 = node.zones
    # Upstream: NUMA 0 has 8 - 8 = 0 CPUs. numagate: the kubelet's 2 leave the NUMA node's
    # allocatable (never-fits), the other 6 its free amount (no-room-now).
    assert (zone0.allocatable["cpu"], zone0.available["cpu"]) == (6000, 0)
    assert (zone1.allocatable["cpu"], zone1.available["cpu"]) == (8000, 8000)
    assert placed(outcome) == ("fits", (1,))


def test_topology_options_manager_after_the_pod_allocs_go() -> None:
    # The same test, after the update that deletes pod-cpu-allocs: ReservedCPUs 0-1,4-7.
    annotations = {k: v for k, v in MANAGER_ANNOTATIONS.items() if k != ALLOCS}
    node = build_inventory(koord_objects(8, annotations)).nodes[0]
    assert node.koord_held == ((2, 0, 2, 2), (0, 0, 0, 0))
    assert (node.zones[0].allocatable["cpu"], node.zones[0].available["cpu"]) == (6000, 2000)


def test_a_pod_that_fits_only_the_full_numa_node_never_fits() -> None:
    # The case (from NewTopologyOptions, no upstream test): 16 CPUs per NUMA node,
    # 2 reserved by the kubelet on each; a single-NUMA pod of 16 CPUs fit before.
    annotations = {KUBELET: k8s.js({"policy": "static", "reservedCPUs": "0-1,16-17"})}
    assert placed(run(koord_pod("16"), koord_objects(16, {})))[0] == "fits"
    outcome = run(koord_pod("16"), koord_objects(16, annotations))
    assert outcome.verdicts["n"].verdict == "never-fits"
    assert placed(run(koord_pod("14"), koord_objects(16, annotations)))[0] == "fits"


def test_the_numa_node_named_is_the_one_with_room() -> None:
    # Kubelet-managed pods hold 8 CPUs of NUMA 0: a 10-CPU pod goes to NUMA 1 (without the
    # annotation numagate named NUMA 0); with NUMA 1 held too it waits (no-room-now).
    pods = [{"uid": "u1", "cpuset": "2-9", "managedByKubelet": True}]
    annotations = {
        KUBELET: k8s.js({"policy": "static", "reservedCPUs": "0-1"}),
        ALLOCS: k8s.js(pods),
    }
    assert placed(run(koord_pod("10"), koord_objects(16, {}))) == ("fits", (0,))
    assert placed(run(koord_pod("10"), koord_objects(16, annotations))) == ("fits", (1,))
    pods.append({"uid": "u2", "cpuset": "16-25", "managedByKubelet": True})
    annotations[ALLOCS] = k8s.js(pods)
    assert placed(run(koord_pod("10"), koord_objects(16, annotations)))[0] == "no-room-now"


def test_held_cpus_come_off_koordlets_available_too() -> None:
    # koordlet writes available = allocatable (pkg/util ZoneResourcesToZoneList).
    node = build_inventory(koord_objects(8, MANAGER_ANNOTATIONS, available=True)).nodes[0]
    assert [(z.allocatable["cpu"], z.available["cpu"]) for z in node.zones] == [
        (6000, 0),
        (8000, 8000),
    ]


@pytest.mark.parametrize(
    ("entry", "held"),
    [
        ({"uid": "u", "cpuset": "2-3", "managedByKubelet": True}, 2),
        ({"uid": "u", "cpuset": "2-3", "managedByKubelet": False}, 0),
        ({"uid": "u", "cpuset": "2-3"}, 0),
        ({"uid": "", "cpuset": "2-3", "managedByKubelet": True}, 0),
        ({"uid": "u", "cpuset": "", "managedByKubelet": True}, 0),
    ],
    ids=["kubelet", "not-kubelet", "omitted", "no-uid", "no-cpuset"],
)
def test_get_pod_allocs_cpuset_counts_kubelet_pods_only(entry: dict, held: int) -> None:
    # getPodAllocsCPUSet (no upstream test of its own): only managedByKubelet entries with a
    # uid and a cpuset.
    node = build_inventory(koord_objects(8, {ALLOCS: k8s.js([entry])})).nodes[0]
    assert (node.koord_held[0][1] if node.koord_held else 0) == held


@pytest.mark.parametrize(
    ("qos", "held"),
    [({"cpuset": "4-5"}, 2), ({"cpuset": "4-5", "cpusetExclusive": True}, 2),
     ({"cpuset": "4-5", "cpusetExclusive": False}, 0)],
    ids=["default-exclusive", "exclusive", "shared"],
)  # fmt: skip
def test_system_qos_cpus_only_when_exclusive(qos: dict, held: int) -> None:
    # SystemQOSResource.IsCPUSetExclusive: absent means true (from reading system_qos.go).
    node = build_inventory(koord_objects(8, {SYSTEM_QOS: k8s.js(qos)})).nodes[0]
    assert (node.koord_held[0][3] if node.koord_held else 0) == held


def test_node_reservation_reserved_cpus_whatever_the_apply_policy() -> None:
    # GetReservedCPUs reads reservedCPUs only; resources and applyPolicy do not change the
    # CPUs held back (from reading node_reservation.go).
    reservation = {"resources": {"cpu": "4"}, "reservedCPUs": "8-9", "applyPolicy": "Default"}
    node = build_inventory(koord_objects(8, {RESERVATION: k8s.js(reservation)})).nodes[0]
    assert node.koord_held == ((0, 0, 0, 0), (0, 0, 2, 0))
    only_amount = {"resources": {"cpu": "4"}}
    assert (
        not build_inventory(koord_objects(8, {RESERVATION: k8s.js(only_amount)}))
        .nodes[0]
        .koord_held
    )


def test_without_a_cpu_topology_nothing_is_held_back() -> None:
    # CPUDetails.KeepOnly over an empty topology: no CPU maps to a NUMA node; a CPU the
    # topology lacks counts nowhere (from reading NewTopologyOptions).
    objects = koord_objects(8, {KUBELET: k8s.js({"reservedCPUs": "0-1,100"})})
    node = build_inventory(objects).nodes[0]
    assert node.koord_held == ((2, 0, 0, 0), (0, 0, 0, 0))
    del objects[1]["metadata"]["annotations"][TOPOLOGY]
    node = build_inventory(objects).nodes[0]
    assert node.koord_held == ()
    assert node.zones[0].allocatable["cpu"] == 8000


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [
        (ALLOCS, "{not json", f"metadata.annotations[{ALLOCS}]"),
        (ALLOCS, k8s.js([{"uid": "u", "cpuset": "3-1", "managedByKubelet": True}]),
         f"metadata.annotations[{ALLOCS}][0].cpuset"),
        (RESERVATION, k8s.js({"reservedCPUs": "x"}),
         f"metadata.annotations[{RESERVATION}].reservedCPUs"),
        (SYSTEM_QOS, "[]", f"metadata.annotations[{SYSTEM_QOS}]"),
        (KUBELET, k8s.js({"reservedCPUs": "0-"}),
         f"metadata.annotations[{KUBELET}].reservedCPUs"),
    ],
    ids=["allocs-json", "allocs-cpuset", "reservation", "system-qos", "kubelet"],
)  # fmt: skip
def test_an_annotation_that_does_not_parse_holds_nothing_back_and_says_so(
    key: str, value: str, field: str
) -> None:
    # Upstream logs the error and goes on without that part; numagate names the field.
    result = build_inventory(koord_objects(8, {key: value}))
    assert result.nodes[0].koord_held == ()
    assert result.nodes[0].zones[0].allocatable["cpu"] == 8000
    assert any(f"NodeResourceTopology n: {field}:" in e for e in result.errors), result.errors


# convertToNUMATopologyPolicy (no upstream test): the first entry of topologyPolicies that
# koord-scheduler maps, whatever comes before it.
@pytest.mark.parametrize(
    ("policies", "koord", "kubelet"),
    [
        (["SingleNUMANodeContainerLevel", "Restricted"], "restricted", "single-numa-node"),
        (["None", "SingleNUMANodePodLevel"], "single-numa-node", "none"),
        (["RestrictedPodLevel", "BestEffortPodLevel"], "none", "restricted"),
        (["BestEffort", "Restricted"], "best-effort", "best-effort"),
    ],
)
def test_convert_to_numa_topology_policy_takes_the_first_entry_it_maps(
    policies: list[str], koord: str, kubelet: str
) -> None:
    objects = koord_objects(8, {}, label=None, policies=policies)
    del objects[1]["attributes"]
    node = build_inventory(objects).nodes[0]
    assert node.koord_policy == koord
    assert node.tm_policy == kubelet  # the kubelet's reading: the first entry


def test_the_policy_from_a_later_entry_aligns_the_pod() -> None:
    objects = koord_objects(
        8, {}, label=None, policies=["RestrictedPodLevel", "SingleNUMANodePodLevel"]
    )
    del objects[1]["attributes"]
    assert run(koord_pod("10"), objects).verdicts["n"].verdict == "never-fits"


# ------------------------------------------------------------------ pods that bind no CPUs


@pytest.mark.parametrize(
    ("label", "cpu", "verdict", "numa"),
    [
        ("SingleNUMANode", "6", "never-fits", ()),
        ("SingleNUMANode", "3500m", "fits", (0,)),
        ("SingleNUMANode", "4001m", "never-fits", ()),
        ("Restricted", "6", "fits", (0, 1)),
        ("BestEffort", "6", "fits", (0, 1)),
        (None, "6", "fits", ()),
    ],
)
def test_a_burstable_pod_is_aligned_by_its_requests(
    label: str | None, cpu: str, verdict: str, numa: tuple[int, ...]
) -> None:
    # plugin.go Filter -> FilterByNUMANode for Restricted / SingleNUMANode whatever the QoS;
    # resource_manager.go generateResourceHints from the pod's requests (CPU in millicores).
    # BestEffort and no policy: no NUMA filter (BestEffort's hint: every NUMA node). Written from the code (the upstream tests
    # build ResourceOptions by hand).
    outcome = run(koord_pod(cpu, burstable=True), koord_objects(4, {}, label=label))
    assert placed(outcome) == (verdict, numa)


def test_a_burstable_pods_policy_from_its_spec() -> None:
    pod = koord_pod("6", burstable=True, spec={"numaTopologyPolicy": "SingleNUMANode"})
    assert placed(run(pod, koord_objects(4, {}, label=None)))[0] == "never-fits"


def test_a_burstable_pods_memory_is_aligned_without_the_memory_manager() -> None:
    # koord-scheduler checks memory per NUMA node whatever the kubelet's memory manager
    # (here None): 40Gi fits no 32Gi NUMA node under SingleNUMANode.
    objects = koord_objects(4, {}, memory="32Gi")
    assert placed(run(koord_pod("1", "40Gi", burstable=True), objects))[0] == "never-fits"
    assert placed(run(koord_pod("1", "30Gi", burstable=True), objects)) == ("fits", (0,))


def test_cpu_share_with_allocated_numa_resources() -> None:
    # resource_manager_test.go TestResourceManagerGetTopologyHint "failed to allocate with CPU
    # Share and allocated and amplified ratios" (L1532), without the amplification ratio
    # (not modelled): 52 CPUs per NUMA node, 50 of each allocated; an LS pod of 4 CPUs gets
    # the hint {0,1} only: Restricted fits there, SingleNUMANode has no room now.
    status = {
        "cpuset": "0-49,52-101",
        "numaNodeResources": [
            {"node": 0, "resources": {"cpu": "50"}},
            {"node": 1, "resources": {"cpu": "50"}},
        ],
    }
    bound = k8s.pod(
        "test-xxx",
        [k8s.container("c", {"cpu": "100", "memory": "1Gi"})],
        node="n",
        annotations={STATUS: k8s.js(status)},
    )
    for label, want in (("Restricted", ("fits", (0, 1))), ("SingleNUMANode", ("no-room-now", ()))):
        objects = [*koord_objects(52, {}, label=label, memory="128Gi"), bound]
        assert placed(run(koord_pod("4", burstable=True), objects)) == want


def test_reservation_and_system_qos_cpus_make_a_pod_wait_never_denied() -> None:
    # A pod that needs the node reservation's or the system QoS CPUs: koord-scheduler never
    # places it; numagate says no-room-now (the kubelet would give them to another
    # scheduler's pod, judged on the same zones), and places it where they are not.
    annotations = {
        RESERVATION: k8s.js({"reservedCPUs": "0-3"}),
        SYSTEM_QOS: k8s.js({"cpuset": "8-11"}),
    }
    assert placed(run(koord_pod("6"), koord_objects(8, annotations)))[0] == "no-room-now"
    assert placed(run(koord_pod("4"), koord_objects(8, annotations))) == ("fits", (0,))


def test_held_cpus_count_for_a_burstable_pod_too() -> None:
    annotations = {KUBELET: k8s.js({"reservedCPUs": "0-1,4-5"})}
    outcome = run(koord_pod("3500m", burstable=True), koord_objects(4, annotations))
    assert outcome.verdicts["n"].verdict == "never-fits"


# ------------------------------------------------------------------ the reason names the resource


def test_the_reason_names_memory_when_memory_decides() -> None:
    # hugepages fit one NUMA node, memory needs two: the reason names memory (it named the
    # first memory type of the request, hugepages-1Gi).
    zones = [
        k8s.zone(
            i, {"cpu": ("8", "8"), "memory": ("32Gi", "32Gi"), "hugepages-1Gi": ("4Gi", "4Gi")}
        )
        for i in (0, 1)
    ]
    node = k8s.node(
        "n",
        {"cpu": "16", "memory": "64Gi", "hugepages-1Gi": "8Gi", "pods": "110"},
        labels={LABEL: "SingleNUMANode"},
    )
    attributes = {"topologyManagerPolicy": "single-numa-node", "memoryManagerPolicy": "Static"}
    pod = k8s.pod(
        "p",
        [k8s.container("c", {"cpu": "2", "memory": "40Gi", "hugepages-1Gi": "2Gi"})],
    )
    outcome = run(pod, [node, k8s.nrt("n", zones, attributes=attributes)])
    reason = outcome.verdicts["n"].reason
    assert outcome.verdicts["n"].verdict == "never-fits"
    assert "memory 40Gi" in reason and "hugepages" not in reason, reason
