"""Volcano's numa-aware tests (volcano-sh/volcano at ed72c7c) translated into inventories, with
the resource exporter's meaning of the Numatopology (volcano-sh/resource-exporter
pkg/numatopo/cpunumainfo.go): ``numares.cpu.allocatable`` is the node's FREE cpuset now (the
CPU manager's default set), ``cpuDetail`` the whole machine; Volcano's
``GenerateNodeResNumaSets`` (pkg/scheduler/api/numa_info.go) uses the free set as is and never
subtracts a bound pod's ``volcano.sh/topology-decision``.

Geometry G8 of ``provider/cpumanager/cpu_mng_test.go`` (L33-44): CPUs 0-3 on NUMA 0 / socket 0
(cores 0,0,1,1), CPUs 4-7 on NUMA 1 / socket 1 (cores 2,2,3,3); static CPU manager.
"""

from __future__ import annotations

import pytest

from core.inventory.volcano import CpuInfo
from core.inventory.volcano_cpus import reserved_cpus
from tests.builders import objects as k8s
from tests.core.upstream_cases import Outcome, run

G8 = {str(cpu): {"numa": cpu // 4, "socket": cpu // 4, "core": cpu // 2} for cpu in range(8)}


def numatopology(name: str, free: str, policy: str, *, cpu_manager: str = "static") -> dict:
    return {
        "apiVersion": "nodeinfo.volcano.sh/v1alpha1",
        "kind": "Numatopology",
        "metadata": {"name": name},
        "spec": {
            "policies": {"CPUManagerPolicy": cpu_manager, "TopologyManagerPolicy": policy},
            "numares": {"cpu": {"allocatable": free, "capacity": 8}},
            "cpuDetail": G8,
        },
    }


def g8_node(name: str, free: str, policy: str, **kw: str) -> list[dict]:
    return [
        k8s.node(name, {"cpu": "8", "memory": "16Gi", "pods": "110"}),
        numatopology(name, free, policy, **kw),
    ]


def volcano_pod(
    cpu: str, policy: str | None, *, memory: str = "1Gi", qos: str = "Guaranteed"
) -> dict:
    requests = {"cpu": cpu, "memory": memory}
    limits = requests if qos == "Guaranteed" else {"cpu": str(int(cpu) * 2), "memory": memory}
    annotations = {"volcano.sh/numa-topology-policy": policy} if policy else {}
    return k8s.pod(
        "p", [k8s.container("c", requests, limits)], annotations=annotations, scheduler="volcano"
    )


def verdict(outcome: Outcome, name: str = "n") -> tuple[str, tuple[int, ...]]:
    v = outcome.verdicts[name]
    return v.verdict, tuple(v.numa) if v.verdict == "fits" else ()


# cpu_mng_test.go Test_GetTopologyHints (L46-208): free set, request, and what Volcano's
# predicate does with the hints under each node policy (policy/*.go), as the research note
# derives it; the last column is the same pod on an empty node (free 0-7).
HINTS = [
    (
        "test-1",
        "0-7",
        "4",
        {
            "restricted": ("fits", (0,)),
            "single-numa-node": ("fits", (0,)),
            "best-effort": ("fits", (0,)),
        },
    ),
    (
        "test-2",
        "1-7",
        "4",
        {
            "restricted": ("fits", (1,)),
            "single-numa-node": ("fits", (1,)),
            "best-effort": ("fits", (1,)),
        },
    ),
    (
        "test-3",
        "0-7",
        "5",
        {
            "restricted": ("fits", (0, 1)),
            "single-numa-node": ("never-fits", ()),
            "best-effort": ("fits", (0, 1)),
        },
    ),
    (
        "test-4",
        "0-7",
        "8",
        {
            "restricted": ("fits", (0, 1)),
            "single-numa-node": ("never-fits", ()),
            "best-effort": ("fits", (0, 1)),
        },
    ),
    (
        "test-5",
        "0-7",
        "9",
        {
            "restricted": ("never-fits", ()),
            "single-numa-node": ("never-fits", ()),
            "best-effort": ("never-fits", ()),
        },
    ),
    # The false denial: only {0,1} has 4 free CPUs and it is not preferred (NUMA 0
    # alone has 4 CPUs in cpuDetail), so restricted and single-numa-node reject now, but an
    # empty node would take the pod on {0}: no room now, never "never fits".
    (
        "test-6",
        "2-5",
        "4",
        {
            "restricted": ("no-room-now", ()),
            "single-numa-node": ("no-room-now", ()),
            "best-effort": ("fits", (0, 1)),
        },
    ),
]
CASES = [
    (name, free, cpu, policy, want)
    for name, free, cpu, wants in HINTS
    for policy, want in wants.items()
]


@pytest.mark.parametrize(
    ("case", "free", "cpu", "policy", "want"), CASES, ids=[f"{c[0]}-{c[3]}" for c in CASES]
)
def test_get_topology_hints(
    case: str, free: str, cpu: str, policy: str, want: tuple[str, tuple[int, ...]]
) -> None:
    outcome = run(volcano_pod(cpu, policy), g8_node("n", free, policy))
    assert not outcome.errors
    assert verdict(outcome) == want


@pytest.mark.parametrize("case", ["test-2", "test-6"])
@pytest.mark.parametrize("policy", ["restricted", "single-numa-node", "best-effort"])
def test_the_same_pod_fits_an_empty_node_on_numa_0(case: str, policy: str) -> None:
    cpu = "4"
    assert verdict(run(volcano_pod(cpu, policy), g8_node("n", "0-7", policy))) == ("fits", (0,))


def test_busy_node_capacity_comes_from_cpu_detail_not_the_free_set() -> None:
    outcome = run(volcano_pod("4", "restricted"), g8_node("n", "2-5", "restricted"))
    node = outcome.nodes["n"]
    assert [z.allocatable["cpu"] for z in node.zones] == [4000, 4000]
    assert [z.available["cpu"] for z in node.zones] == [2000, 2000]


# cpu_mng_test.go Test_Allocate (L210-332): the NUMA count of the CPUs Volcano assigns, which
# is the numa-aware score's input (test-5 is a synthetic hint: see docs/upstream-fidelity.md).
ALLOCATE = [
    ("test-1", "0-7", "4", (0,)),
    ("test-2", "1-7", "4", (1,)),
    ("test-3", "0-7", "5", (0, 1)),
    ("test-4", "1-7", "5", (0, 1)),
]


@pytest.mark.parametrize(("case", "free", "cpu", "numa"), ALLOCATE, ids=[c[0] for c in ALLOCATE])
def test_allocate_numa_nodes(case: str, free: str, cpu: str, numa: tuple[int, ...]) -> None:
    assert verdict(run(volcano_pod(cpu, "restricted"), g8_node("n", free, "restricted"))) == (
        "fits",
        numa,
    )


def test_score_normalizes_numa_counts() -> None:
    # numaaware.go batchNodeOrderFn L175-193: 100 - 100*n/max, times the weight (1).
    objects = g8_node("a", "0-7", "best-effort") + g8_node("b", "2-5", "best-effort")
    outcome = run(volcano_pod("4", "best-effort"), objects)
    assert [(v.name, v.score) for v in outcome.ranked] == [("a", 50), ("b", 0)]
    assert "100 - 100*1/2" in outcome.ranked[0].reason


def test_topology_decision_of_a_bound_pod_is_never_subtracted() -> None:
    # job_info.go SetPodResourceDecision writes it; nothing in the scheduler reads it for
    # capacity (the exporter's free set already excludes the pinned CPUs).
    bound = k8s.pod(
        "running",
        [k8s.container("c", {"cpu": "4", "memory": "1Gi"})],
        node="n",
        annotations={"volcano.sh/topology-decision": k8s.js({"numa": {"0": {"cpu": "4"}}})},
        scheduler="volcano",
    )
    outcome = run(volcano_pod("4", "restricted"), [*g8_node("n", "0-7", "restricted"), bound])
    assert verdict(outcome) == ("fits", (0,))
    assert [z.available["cpu"] for z in outcome.nodes["n"].zones] == [4000, 4000]


# numaaware.go predicateFn / filterNodeByPolicy (L120-236).
def test_policy_must_equal_the_node_policy() -> None:
    outcome = run(volcano_pod("4", "single-numa-node"), g8_node("n", "0-7", "restricted"))
    assert outcome.verdicts["n"].verdict == "policy-mismatch"


def test_cpu_manager_must_be_static() -> None:
    outcome = run(
        volcano_pod("4", "restricted"), g8_node("n", "0-7", "restricted", cpu_manager="none")
    )
    assert outcome.verdicts["n"].verdict == "policy-mismatch"


def test_burstable_pod_passes_before_any_policy_check() -> None:
    # predicateFn L123-126: a pod that is not Guaranteed returns nil first.
    outcome = run(
        volcano_pod("2", "single-numa-node", qos="Burstable"), g8_node("n", "0-7", "restricted")
    )
    assert outcome.verdicts["n"].verdict == "fits"


@pytest.mark.parametrize(
    ("node_policy", "cpu", "want"),
    [
        # no pod policy: filterNodeByPolicy falls through on a node with a policy and Volcano
        # simulates the node's own policy (5 CPUs cannot be on one NUMA node of G8)
        ("single-numa-node", "5", "never-fits"),
        ("single-numa-node", "4", "fits"),
        # node policy none: no NUMA check at all
        ("none", "5", "fits"),
    ],
)
def test_pod_without_policy_gets_the_node_policy(node_policy: str, cpu: str, want: str) -> None:
    outcome = run(volcano_pod(cpu, None), g8_node("n", "0-7", node_policy))
    assert outcome.verdicts["n"].verdict == want


def test_fractional_cpu_has_no_hints_and_passes() -> None:
    # cpu_mng.go guaranteedCPUs: a non-integer request gives no hints -> admitted by every
    # policy (the shared pool serves it), even where only 2 CPUs are free on each NUMA node.
    outcome = run(volcano_pod("1500m", "single-numa-node"), g8_node("n", "2-5", "single-numa-node"))
    assert outcome.verdicts["n"].verdict == "fits"


# cpu_mng.go GetTopologyHints L138-147: reserved = takeByTopology(the whole machine,
# ceil(resReserved.cpu)) (cpu_assignment.go), removed from the free set. cpuDetail core ids are
# sysfs's, unique per socket only, and CPUsInCores selects by core id: "core 0" is core 0 of
# every socket (getPhysicalCoresNum in cpu_mng.go says the ids repeat).
def two_sockets(cores: int, threads: int) -> dict[int, CpuInfo]:
    """Linux numbering: the first thread of every core, then the siblings; socket = NUMA."""
    out: dict[int, CpuInfo] = {}
    cpu = 0
    for _ in range(threads):
        for socket in range(2):
            for core in range(cores):
                out[cpu] = CpuInfo(socket, socket, core)
                cpu += 1
    return out


@pytest.mark.parametrize(
    ("cores", "threads", "count", "reserved"),
    [
        (16, 2, 1, {0}),  # one CPU: the single-CPU step, lowest core id
        (16, 2, 2, {0, 16, 32, 48}),  # a "core" of 2 threads: core 0 of both sockets
        (16, 2, 3, {0, 16, 32, 48}),
        (16, 2, 5, {0, 16, 32, 48, 1}),
        (16, 1, 2, {0, 16}),  # no SMT: one CPU of each socket
        (4, 2, 8, set(range(4)) | set(range(8, 12))),  # a whole socket first
        (4, 2, 17, set()),  # more than the machine: takeByTopology fails, nothing reserved
    ],
)
def test_reserved_cpus_take_by_topology(
    cores: int, threads: int, count: int, reserved: set[int]
) -> None:
    assert reserved_cpus(two_sockets(cores, threads), count) == reserved


def test_reserved_cpus_leave_both_numa_nodes() -> None:
    topo = numatopology("n", "0-7", "restricted")
    topo["spec"]["resReserved"] = {"cpu": "2"}
    outcome = run(
        volcano_pod("4", "restricted"), [k8s.node("n", {"cpu": "8", "memory": "16Gi"}), topo]
    )
    # G8: cores 0,0,1,1 | 2,2,3,3 (unique ids): core 0 is CPUs 0-1 of NUMA 0 only.
    assert [z.allocatable["cpu"] for z in outcome.nodes["n"].zones] == [2000, 4000]
    assert verdict(outcome) == ("fits", (1,))
