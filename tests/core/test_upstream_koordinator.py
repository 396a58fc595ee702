"""Koordinator's tests and code paths (koordinator-sh/koordinator at a7a1b76) translated into
inventories: Node (+ the policy label), NodeResourceTopology zones, bound pods with
``scheduling.koordinator.sh/resource-status``.

- NUMA node states: ``pkg/scheduler/plugins/nodenumaresource/node_allocation.go
  addPodAllocation`` marks a NUMA node single/shared only from a bound pod's cpuset;
  ``frameworkext/topologymanager/policy_test.go Test_checkExclusivePolicy`` gives the table.
- ``plugin_test.go TestFilterWithNUMANodeScoring``: the LeastAllocated (default) cases.
- ``noderesourcefitplus/node_resources_fit_plus_test.go``: TestPlugin_Score with the bound pod
  of testNode1, and Test_calculatePodResourceRequest_WithSidecar.
"""

from __future__ import annotations

from typing import Any

import pytest

from core.intent.read import read_intent
from core.intent.workloads import pod_templates
from core.model import ContainerDemand
from core.scoring import koordinator as koord
from core.scoring.args import ScoringArgs
from core.scoring.rank import rank
from tests.builders import objects as k8s
from tests.builders.model import fits
from tests.core.upstream_cases import Outcome, run

STATUS = "scheduling.koordinator.sh/resource-status"
SPEC = "scheduling.koordinator.sh/numa-topology-spec"
LABEL = "node.koordinator.sh/numa-topology-policy"


def nrt(
    name: str, zones: list[dict[str, str]], policy: str = "restricted", memory: str = "None"
) -> dict[str, Any]:
    """An NRT whose zones give allocatable only (usage comes from the bound pods)."""
    attributes = {
        "topologyManagerPolicy": policy,
        "cpuManagerPolicy": "static",
        "memoryManagerPolicy": memory,
    }
    zone_objects = [k8s.zone(i, {r: (v, v) for r, v in z.items()}) for i, z in enumerate(zones)]
    return k8s.nrt(name, zone_objects, attributes=attributes)


def koord_node(
    name: str, zones: list[dict[str, str]], *, label: str | None = None
) -> list[dict[str, Any]]:
    total: dict[str, int] = {}
    for z in zones:
        for r, v in z.items():
            total[r] = total.get(r, 0) + int(v.removesuffix("Gi"))
    alloc = {r: f"{v}Gi" if r == "memory" else str(v) for r, v in total.items()}
    labels = {LABEL: label} if label is not None else {}
    return [k8s.node(name, {**alloc, "pods": "110"}, labels=labels), nrt(name, zones)]


def bound(
    name: str,
    node: str,
    numa: dict[int, dict[str, str]],
    cpuset: str | None = None,
    spec: dict | None = None,
) -> dict[str, Any]:
    status: dict[str, Any] = {
        "numaNodeResources": [{"node": n, "resources": r} for n, r in numa.items()]
    }
    if cpuset is not None:
        status["cpuset"] = cpuset
    annotations = {STATUS: k8s.js(status)}
    if spec is not None:
        annotations[SPEC] = k8s.js(spec)
    cpu = sum(int(r.get("cpu", "0")) for r in numa.values())
    return k8s.pod(
        name,
        [k8s.container("c", {"cpu": str(cpu), "memory": "1Gi"})],
        node=node,
        annotations=annotations,
        scheduler="koord-scheduler",
    )


def koord_pod(cpu: str, memory: str = "1Gi", spec: dict | None = None) -> dict[str, Any]:
    annotations = {SPEC: k8s.js(spec)} if spec is not None else {}
    return k8s.pod(
        "p",
        [k8s.container("c", {"cpu": cpu, "memory": memory})],
        annotations=annotations,
        scheduler="koord-scheduler",
    )


def placed(outcome: Outcome, name: str = "n") -> tuple[str, tuple[int, ...]]:
    v = outcome.verdicts[name]
    return v.verdict, tuple(v.numa) if v.verdict == "fits" else ()


TWO = [{"cpu": "4", "memory": "16Gi"}] * 2
FOUR = [{"cpu": "4", "memory": "16Gi"}] * 4


# ------------------------------------------------------------------ NUMA node states


@pytest.mark.parametrize(
    ("pods", "states"),
    [
        # cpuset on one NUMA node -> single
        ([bound("a", "n", {0: {"cpu": "2"}}, cpuset="0-1")], ("single", "idle")),
        # cpuset over two -> both shared; shared wins over single
        (
            [
                bound("a", "n", {0: {"cpu": "2"}}, cpuset="0-1"),
                bound("b", "n", {0: {"cpu": "2"}, 1: {"cpu": "2"}}, cpuset="2-5"),
            ],
            ("shared", "shared"),
        ),
        # an LS pod: SingleNUMANode spec, numaNodeResources, no cpuset -> marks nothing
        (
            [bound("c", "n", {1: {"cpu": "1"}}, spec={"numaTopologyPolicy": "SingleNUMANode"})],
            ("idle", "idle"),
        ),
        # a cpuset that does not parse: koord-scheduler ignores the whole pod
        ([bound("d", "n", {1: {"cpu": "2"}}, cpuset="x-y")], ("idle", "idle")),
    ],
    ids=["single", "shared-wins", "ls-pod-no-cpuset", "bad-cpuset"],
)
def test_add_pod_allocation_states(pods: list[dict[str, Any]], states: tuple[str, ...]) -> None:
    outcome = run(koord_pod("1"), [*koord_node("n", TWO), *pods])
    assert outcome.nodes["n"].numa_states == states


def test_bad_cpuset_pod_holds_nothing() -> None:
    pod = bound("d", "n", {1: {"cpu": "2"}}, cpuset="x-y")
    outcome = run(koord_pod("1"), [*koord_node("n", TWO), pod])
    assert [z.available["cpu"] for z in outcome.nodes["n"].zones] == [4000, 4000]
    assert any("cpuset" in e for e in outcome.errors)


def test_required_multi_numa_pod_fits_beside_an_ls_pod() -> None:
    # The case: an LS pod (SingleNUMANode spec, no cpuset) on NUMA 1 leaves it idle,
    # so a Required pod that needs both NUMA nodes is placed on {0,1}.
    ls = bound("ls", "n", {1: {"cpu": "1"}}, spec={"numaTopologyPolicy": "SingleNUMANode"})
    pod = koord_pod(
        "6", spec={"numaTopologyPolicy": "Restricted", "singleNUMANodeExclusive": "Required"}
    )
    assert placed(run(pod, [*koord_node("n", TWO), ls])) == ("fits", (0, 1))


# Test_checkExclusivePolicy (policy_test.go): one 4-NUMA node whose states are
# [shared, single, shared, idle]: pod S pinned on NUMA 0 and 2, pod T on NUMA 1.
STATES_PODS = [
    bound("s", "n", {0: {"cpu": "1"}, 2: {"cpu": "1"}}, cpuset="0,8"),
    bound("t", "n", {1: {"cpu": "1"}}, cpuset="4"),
]


def test_check_exclusive_policy_states() -> None:
    outcome = run(koord_pod("1"), [*koord_node("n", FOUR), *STATES_PODS])
    assert outcome.nodes["n"].numa_states == ("shared", "single", "shared", "idle")


def test_check_exclusive_required_single_numa_hint_avoids_shared() -> None:
    # Required, 1-NUMA hint: fails on a shared node ({0}, {2}), passes on single or idle.
    pod = koord_pod(
        "2", spec={"numaTopologyPolicy": "SingleNUMANode", "singleNUMANodeExclusive": "Required"}
    )
    verdict, numa = placed(run(pod, [*koord_node("n", FOUR), *STATES_PODS]))
    assert verdict == "fits"
    assert numa in ((1,), (3,))


def test_check_exclusive_required_multi_numa_hint_avoids_single() -> None:
    # Required, multi-NUMA hint: fails when any of its nodes is single ({0,1}); shared+idle
    # and shared+shared pass.
    pod = koord_pod(
        "6", spec={"numaTopologyPolicy": "Restricted", "singleNUMANodeExclusive": "Required"}
    )
    verdict, numa = placed(run(pod, [*koord_node("n", FOUR), *STATES_PODS]))
    assert verdict == "fits"
    assert 1 not in numa


def test_check_exclusive_preferred_checks_nothing() -> None:
    pod = koord_pod(
        "2", spec={"numaTopologyPolicy": "SingleNUMANode", "singleNUMANodeExclusive": "Preferred"}
    )
    assert placed(run(pod, [*koord_node("n", FOUR), *STATES_PODS]))[0] == "fits"


# ------------------------------------------------------------------ TestFilterWithNUMANodeScoring

BIG = [{"cpu": "52", "memory": "128Gi"}] * 2
WIDE = [{"cpu": "26", "memory": "64Gi"}] * 4


@pytest.mark.parametrize(
    ("line", "zones", "label", "held", "numa"),
    [
        # "single numa nodes and select least allocated" (L2673)
        (2673, BIG, "SingleNUMANode", {0: "4", 1: "40"}, (0,)),
        # "single numa nodes and only one node can be used" (L2695)
        (2695, BIG, "SingleNUMANode", {0: "4", 1: "52"}, (0,)),
        # "restricted numa nodes and select least allocated and preferred" (L2745)
        (2745, WIDE, "Restricted", {0: "24", 1: "23", 2: "4", 3: "8"}, (2,)),
    ],
)
def test_filter_with_numa_node_scoring(
    line: int, zones: list[dict[str, str]], label: str, held: dict[int, str], numa: tuple[int, ...]
) -> None:
    pods = [bound(f"b{n}", "n", {n: {"cpu": cpu, "memory": "8Gi"}}) for n, cpu in held.items()]
    outcome = run(koord_pod("4", "40Gi"), [*koord_node("n", zones, label=label), *pods])
    assert placed(outcome) == ("fits", numa)


# ------------------------------------------------------------------ NodeResourcesFitPlus

FIT_ARGS = ScoringArgs(
    fit_plus=(
        koord.FitPlusResource("nvidia.com/gpu", koord.MOST_ALLOCATED, 2),
        koord.FitPlusResource("cpu", koord.LEAST_ALLOCATED, 1),
        koord.FitPlusResource("memory", koord.LEAST_ALLOCATED, 1),
    )
)


def test_fit_plus_score_counts_bound_pods() -> None:
    # TestPlugin_Score (L124-298): testNode1 holds test-pod-0 (16 cpu, 32Gi, 4 gpu); the pod
    # asks 16 cpu, 32Gi, 2 gpu, 10Gi ephemeral. The test asserts node1 > node2; the numbers are
    # node_resource_fit_plus_utils.go's: node1 (75*2 + 66 + 87) / 4 = 75, node2 56.
    alloc = {"cpu": "96", "memory": "512Gi", "nvidia.com/gpu": "8", "ephemeral-storage": "100Gi"}
    full = {"cpu": "16", "memory": "32Gi", "nvidia.com/gpu": "4"}
    objects = [
        k8s.node("testNode1", alloc),
        k8s.node("testNode2", {**alloc, "xx.xx/xx": "8"}),
        k8s.pod("test-pod-0", [k8s.container("test-container", full)], node="testNode1"),
    ]
    pod = k8s.pod(
        "test-pod-1",
        [
            k8s.container(
                "test-container",
                {"cpu": "16", "memory": "32Gi", "nvidia.com/gpu": "2", "ephemeral-storage": "10Gi"},
            )
        ],
        scheduler="koord-scheduler",
    )
    # No NUMA data: numagate's verdict is unknown-topology; score them as the `fits` nodes
    # koord-scheduler would see.
    outcome = run(pod, objects)
    ranked = rank(
        outcome.intent,
        list(outcome.nodes.values()),
        [fits("testNode2"), fits("testNode1")],
        FIT_ARGS,
    )
    scores = {v.name: v for v in ranked}
    assert [v.name for v in ranked] == ["testNode1", "testNode2"]
    assert "nvidia.com/gpu MostAllocated 6/8=75x2" in scores["testNode1"].reason
    assert "= 75" in scores["testNode1"].reason
    assert "= 56" in scores["testNode2"].reason


def test_bound_pods_count_default_requests() -> None:
    # NodeInfo.NonZeroRequested: a container without requests counts 100m cpu / 200Mi.
    objects = [
        k8s.node("n", {"cpu": "4", "memory": "8Gi"}),
        k8s.pod("be", [k8s.container("c")], node="n"),
    ]
    outcome = run(koord_pod("1"), objects)
    assert outcome.nodes["n"].bound_requests == {"cpu": 100, "memory": 200 * 1024 * 1024}


def _demand(kind: str, cpu: int, name: str = "c") -> ContainerDemand:
    return ContainerDemand(name, kind, {"cpu": cpu}, {"cpu": cpu})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("containers", "milli"),
    [
        ([_demand("app", 2000), _demand("app", 3000)], 5000),  # containers only
        ([_demand("init", 10000), _demand("app", 2000)], 10000),  # regular init (max-based)
        ([_demand("sidecar", 1000), _demand("app", 2000)], 3000),  # sidecar (sum-based)
        ([_demand("sidecar", 1000), _demand("init", 5000), _demand("app", 2000)], 5000),
    ],
    ids=["containers-only", "regular-init", "sidecar", "sidecar-and-init"],
)
def test_calculate_pod_resource_request_with_sidecar(
    containers: list[ContainerDemand], milli: int
) -> None:
    # Test_calculatePodResourceRequest_WithSidecar (node_resources_fit_plus_test.go L328-).
    assert koord.fitplus_pod_request(containers, "cpu") == milli


# ------------------------------------------------------------------ items of other helpers


def test_empty_exclusive_means_required() -> None:
    # plugin.go Filter L451-454: an empty singleNUMANodeExclusive with a pod policy is Required.
    # NUMA 1 and 3 are full, 0 and 2 shared: Required leaves no NUMA node now.
    pods = [
        *STATES_PODS,
        bound("full1", "n", {1: {"cpu": "3"}}),
        bound("full3", "n", {3: {"cpu": "4"}}),
    ]
    pod = koord_pod(
        "2", spec={"numaTopologyPolicy": "SingleNUMANode", "singleNUMANodeExclusive": ""}
    )
    (template,) = pod_templates(pod)
    findings = read_intent(template).findings
    assert not [f for f in findings if f.severity == "error"]
    assert placed(run(pod, [*koord_node("n", FOUR), *pods]))[0] == "no-room-now"


def test_restricted_on_a_none_kubelet_fits_what_fits_now() -> None:
    # resource_manager.go generateResourceHints: under Restricted every fitting hint is
    # preferred; NRT policy none, node label Restricted, 3 CPUs with n0 3/4 and n1 2/4 held.
    objects = [
        k8s.node("n", {"cpu": "8", "memory": "32Gi", "pods": "110"}, labels={LABEL: "Restricted"}),
        nrt("n", TWO, policy="none"),
        bound("a", "n", {0: {"cpu": "3"}}),
        bound("b", "n", {1: {"cpu": "2"}}),
    ]
    assert placed(run(koord_pod("3"), objects)) == ("fits", (0, 1))


@pytest.mark.parametrize("label", ["Restricted", "SingleNUMANode"])
def test_get_topology_hint_insufficient_memory_and_hugepages(label: str) -> None:
    # resource_manager_test.go TestResourceManagerGetTopologyHint "failed to generate hints
    # with insufficient memory and hugepages" (L1581): every hint list empty -> Restricted and
    # SingleNUMANode reject; on the empty node the pod fits one NUMA node. koord-scheduler
    # checks memory and hugepages per NUMA node whatever the kubelet does; numagate does when
    # the kubelet's memory manager is Static, as here.
    zones = [{"cpu": "52", "memory": "128Gi", "hugepages-1Gi": "4Gi"}] * 2
    held = {"cpu": "4", "memory": "120Gi", "hugepages-1Gi": "4Gi"}
    node = k8s.node(
        "n",
        {"cpu": "104", "memory": "256Gi", "hugepages-1Gi": "8Gi", "pods": "110"},
        labels={LABEL: label},
    )
    pod = k8s.pod(
        "p",
        [k8s.container("c", {"cpu": "4", "memory": "4Gi", "hugepages-1Gi": "4Gi"})],
        scheduler="koord-scheduler",
    )
    topology = nrt("n", zones, memory="Static")
    busy = run(pod, [node, topology, bound("a", "n", {0: held, 1: held})])
    assert placed(busy)[0] == "no-room-now"
    assert placed(run(pod, [node, topology]))[0] == "fits"


CPU_TOPOLOGY = "node.koordinator.sh/cpu-topology"


@pytest.mark.parametrize(
    ("cpuset", "numa", "states"),
    [
        # the cpuset's CPUs decide, not numaNodeResources (node_allocation.go L118-127)
        ("4-5", {0: {"cpu": "2"}}, ("idle", "single")),
        ("2-5", {0: {"cpu": "4"}}, ("shared", "shared")),
        # a cpuset without numaNodeResources still marks its NUMA node
        ("0-1", None, ("single", "idle")),
    ],
    ids=["cpuset-on-numa-1", "cpuset-over-both", "no-numa-resources"],
)
def test_states_follow_the_cpuset_through_koordlet_cpu_topology(
    cpuset: str, numa: dict[int, dict[str, str]] | None, states: tuple[str, ...]
) -> None:
    topology = nrt("n", TWO)
    detail = [{"id": c, "core": c // 2, "socket": c // 4, "node": c // 4} for c in range(8)]
    topology["metadata"]["annotations"] = {CPU_TOPOLOGY: k8s.js({"detail": detail})}
    status: dict[str, Any] = {"cpuset": cpuset}
    if numa is not None:
        status["numaNodeResources"] = [{"node": n, "resources": r} for n, r in numa.items()]
    pod = k8s.pod(
        "a",
        [k8s.container("c", {"cpu": "2", "memory": "1Gi"})],
        node="n",
        annotations={STATUS: k8s.js(status)},
    )
    outcome = run(koord_pod("1"), [*koord_node("n", TWO)[:1], topology, pod])
    assert outcome.nodes["n"].numa_states == states
