"""Per-scheduler compatibility (docs/contracts.md: Policy semantics): the Koordinator matrix (seed 000 and
Test_mergeTopologyPolicy), Volcano's exact match (CCE tables, seed 001), kubelet-only."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.feasibility.compat import affinity_requirement, compatible, plan_key, simulation
from core.model import NodeSelectorRequirement, NodeTopology, PodIntent
from tests.builders.model import container, cpu_node, intents, pod
from tests.builders.model import topology_nodes as differential_nodes

POLICIES = ["single-numa-node", "restricted", "best-effort", "none"]

# seed 000: rows pod policy, columns node policy (SingleNUMANode, Restricted, BestEffort, none)
KOORD_MATRIX = {
    "single-numa-node": [True, False, False, True],
    "restricted": [False, True, False, True],
    "best-effort": [False, False, True, True],
    "none": [True, True, True, True],
}


@pytest.mark.parametrize("pod_policy", POLICIES)
def test_koordinator_compatibility_matrix(pod_policy: str) -> None:
    intent = pod(container(cpu=1), scheduler="koordinator", policy=pod_policy)
    for node_policy, want in zip(POLICIES, KOORD_MATRIX[pod_policy], strict=True):
        n = cpu_node([4], [4], koord_policy=node_policy, policy="none")
        ok, why = compatible(intent, n)
        assert ok is want, (pod_policy, node_policy)
        assert (why == "") is want
        if not want:
            assert "does not match" in why


def test_koordinator_merge_topology_policy() -> None:
    # Test_mergeTopologyPolicy: (node Restricted, pod "") -> Restricted; (R, R) -> R;
    # (Restricted, BestEffort) -> mismatch
    n = cpu_node([4], [4], koord_policy="restricted", policy="none")
    assert simulation(pod(container(cpu=1), scheduler="koordinator"), n).policy == "restricted"
    same = pod(container(cpu=1), scheduler="koordinator", policy="restricted")
    assert simulation(same, n).policy == "restricted"
    other = pod(container(cpu=1), scheduler="koordinator", policy="best-effort")
    assert compatible(other, n)[0] is False


def test_koordinator_node_policy_falls_back_to_nrt() -> None:
    n = cpu_node([4], [4], policy="single-numa-node")
    intent = pod(container(cpu=1), scheduler="koordinator", policy="restricted")
    assert compatible(intent, n)[0] is False
    assert (
        simulation(pod(container(cpu=1), scheduler="koordinator"), n).policy == "single-numa-node"
    )


def test_koordinator_exclusive_defaults_to_required_only_with_a_pod_policy() -> None:
    n = cpu_node([4], [4], policy="none")
    with_policy = pod(container(cpu=1), scheduler="koordinator", policy="restricted")
    assert simulation(with_policy, n).exclusive is True
    preferred = pod(
        container(cpu=1), scheduler="koordinator", policy="restricted", exclusive="preferred"
    )
    assert simulation(preferred, n).exclusive is False
    assert simulation(pod(container(cpu=1), scheduler="koordinator"), n).exclusive is False


@pytest.mark.parametrize("pod_policy", ["best-effort", "restricted", "single-numa-node"])
def test_volcano_exact_match(pod_policy: str) -> None:
    # CCE table: each pod policy schedules only to nodes with the same policy; none is
    # not a wildcard
    intent = pod(container(cpu=2), scheduler="volcano", policy=pod_policy)
    for node_policy in POLICIES:
        n = cpu_node(
            [16, 16], [16, 16], volcano_policy=node_policy, volcano_cpu_manager_policy="static"
        )
        assert compatible(intent, n)[0] is (node_policy == pod_policy)


def test_volcano_is_case_sensitive_and_needs_static() -> None:
    intent = pod(container(cpu=2), scheduler="volcano", policy="single-numa-node")
    n = cpu_node([4], [4], volcano_policy="SingleNUMANode")
    ok, why = compatible(intent, n)
    assert not ok and "SingleNUMANode" in why
    n = cpu_node([4], [4], volcano_policy="single-numa-node", volcano_cpu_manager_policy="none")
    ok, why = compatible(intent, n)
    assert not ok and "not static" in why


def test_volcano_pod_without_policy() -> None:
    intent = pod(container(cpu=2), scheduler="volcano")
    static = cpu_node([4], [4], volcano_policy="restricted", volcano_cpu_manager_policy="static")
    assert compatible(intent, static)[0]
    sim = simulation(intent, static)
    assert (sim.policy, sim.cpu_only, sim.skip) == ("restricted", True, "")
    none_node = cpu_node([4], [4], volcano_policy="none", volcano_cpu_manager_policy="static")
    assert simulation(intent, none_node).skip


def test_volcano_checks_only_guaranteed_pods() -> None:
    intent = pod(
        container(cpu=2, exclusive=False), scheduler="volcano", policy="restricted", qos="Burstable"
    )
    n = cpu_node([4], [4], volcano_policy="restricted")
    assert simulation(intent, n).skip == "Volcano checks only Guaranteed pods"


@pytest.mark.parametrize("scheduler", ["default", "hami"])
def test_kubelet_only_every_node_compatible(scheduler: str) -> None:
    intent = pod(container(cpu=1), scheduler=scheduler, policy="single-numa-node")
    for node_policy in POLICIES:
        n = cpu_node([4], [4], policy=node_policy)
        assert compatible(intent, n) == (True, "")
        assert simulation(intent, n).policy == node_policy
    assert affinity_requirement(intent, label_key="x", spelling="kubelet") is None


def test_affinity_requirement_koordinator() -> None:
    intent = pod(container(cpu=1), scheduler="koordinator", policy="single-numa-node")
    req = affinity_requirement(
        intent, label_key="node.koordinator.sh/numa-topology-policy", spelling="koordinator"
    )
    assert req == NodeSelectorRequirement(
        "node.koordinator.sh/numa-topology-policy", "NotIn", ("BestEffort", "Restricted")
    )
    kube = affinity_requirement(intent, label_key="k", spelling="kubelet")
    assert kube == NodeSelectorRequirement("k", "NotIn", ("best-effort", "restricted"))
    assert (
        affinity_requirement(
            pod(container(cpu=1), scheduler="koordinator"), label_key="k", spelling="kubelet"
        )
        is None
    )


def test_affinity_requirement_selects_exactly_the_compatible_nodes() -> None:
    from core.feasibility.selection import selection
    from core.model import NodeSelectorTerm
    from core.snapshot.snapshot import Snapshot

    key = "node.koordinator.sh/numa-topology-policy"
    spelled = {
        "single-numa-node": "SingleNUMANode",
        "restricted": "Restricted",
        "best-effort": "BestEffort",
    }
    nodes = [
        cpu_node(
            [4],
            [4],
            name=f"n-{p}",
            koord_policy=p,
            labels={key: spelled[p]} if p in spelled else {},
        )
        for p in POLICIES
    ]
    snap = Snapshot.build(nodes)
    for p in POLICIES[:3]:
        intent = pod(container(cpu=1), scheduler="koordinator", policy=p)
        req = affinity_requirement(intent, label_key=key, spelling="koordinator")
        assert req is not None
        scoped = pod(
            container(cpu=1),
            scheduler="koordinator",
            policy=p,
            required_terms=(NodeSelectorTerm(match_expressions=(req,)),),
        )
        selected = selection(scoped, snap)[2]
        want = {n.name for n in nodes if compatible(intent, n)[0]}
        assert {n.name for i, n in enumerate(nodes) if (selected >> i) & 1} == want


def test_affinity_requirement_volcano() -> None:
    intent = pod(container(cpu=1), scheduler="volcano", policy="restricted")
    assert affinity_requirement(
        intent, label_key="k", spelling="kubelet"
    ) == NodeSelectorRequirement("k", "In", ("restricted",))
    assert (
        affinity_requirement(
            pod(container(cpu=1), scheduler="volcano", policy="none"),
            label_key="k",
            spelling="kubelet",
        )
        is None
    )


# --- issue 15: Volcano skips pods that are not Guaranteed -----------------------------------
# volcano-sh/volcano pkg/scheduler/plugins/numaaware/numaaware.go predicateFn (L123-126 at
# ed72c7c): `if GetPodQOS(pod) != Guaranteed { return nil }` comes before filterNodeByPolicy,
# so the pod's numa-topology-policy is never compared with the node's. Rows: the
# predicate-level cases of that file (/work/notes/issue15-upstream.md V.3).
VOLCANO_PREDICATE = [
    # (qos, pod policy, node TM policy, node CPU manager policy, compatible upstream)
    ("Burstable", "single-numa-node", "restricted", "static", True),
    ("BestEffort", "restricted", "none", "none", True),
    ("Burstable", "restricted", "restricted", "none", True),
    ("Guaranteed", "single-numa-node", "restricted", "static", False),  # policy differs
    ("Guaranteed", "restricted", "restricted", "none", False),  # CPU manager not static
    ("Guaranteed", "restricted", "restricted", "static", True),
]


@pytest.mark.parametrize(
    ("qos", "pod_policy", "node_policy", "cpu_policy", "want"),
    VOLCANO_PREDICATE,
    ids=[f"{r[0]}-{r[1]}-on-{r[2]}-{r[3]}" for r in VOLCANO_PREDICATE],
)
def test_volcano_predicate_checks_qos_before_policy(
    qos: str, pod_policy: str, node_policy: str, cpu_policy: str, want: bool
) -> None:
    intent = pod(container(cpu=2), scheduler="volcano", policy=pod_policy, qos=qos)
    n = cpu_node(
        [4, 4],
        [4, 4],
        policy=node_policy,
        volcano_policy=node_policy,
        volcano_cpu_manager_policy=cpu_policy,
    )
    assert compatible(intent, n)[0] is want
    # the affinity planner restricts nothing for a pod Volcano does not check
    requirement = affinity_requirement(intent, label_key="k", spelling="kubelet")
    assert (requirement is None) is (qos != "Guaranteed")
    if qos != "Guaranteed":
        assert simulation(intent, n).skip == "Volcano checks only Guaranteed pods"


def test_compat_key_separates_what_compatible_reads() -> None:
    from core.feasibility.compat import compat_key

    g = pod(container(cpu=2), scheduler="volcano", policy="restricted")
    b = pod(container(cpu=2), scheduler="volcano", policy="restricted", qos="Burstable")
    k = pod(container(cpu=2), scheduler="koordinator", policy="restricted", qos="Burstable")
    assert compat_key(g) != compat_key(b)
    assert compat_key(k) == compat_key(
        pod(container(cpu=2), scheduler="koordinator", policy="restricted")
    )


# --- issue 15: Koordinator Restricted where koord-scheduler, not the kubelet, decides -------


@pytest.mark.parametrize(
    ("kubelet_policy", "koord_decides"),
    [("none", True), ("best-effort", True), ("restricted", False), ("single-numa-node", False)],
)
def test_koordinator_hint_rules_where_the_kubelet_does_not_gate(
    kubelet_policy: str, koord_decides: bool
) -> None:
    intent = pod(container(cpu=2), scheduler="koordinator", policy="restricted")
    n = cpu_node([4, 4], [4, 4], policy=kubelet_policy, koord_policy="restricted")
    assert simulation(intent, n).koord_hints is koord_decides


@pytest.mark.parametrize("scheduler", ["koordinator", "volcano", "default", "hami"])
@pytest.mark.parametrize("kubelet_policy", ["none", "single-numa-node"])
def test_only_koordinator_aligns_the_requests_of_pods_binding_no_cpus(
    scheduler: str, kubelet_policy: str
) -> None:
    # issue 30: koord-scheduler's requests filter whatever the kubelet's policy; the kernel
    # runs it under Restricted / SingleNUMANode for a pod that binds no CPUs
    intent = pod(container(cpu=2), scheduler=scheduler, policy="restricted", qos="Burstable")
    n = cpu_node([4, 4], [4, 4], policy=kubelet_policy, koord_policy="restricted")
    assert simulation(intent, n).koord_requests is (scheduler == "koordinator")


@settings(max_examples=150, deadline=None)
@given(a=intents(), b=intents(), nodes=st.tuples(*(differential_nodes(f"n{i}") for i in range(3))))
def test_plan_key_holds_every_intent_field_compatible_and_simulation_read(
    a: PodIntent, b: PodIntent, nodes: tuple[NodeTopology, ...]
) -> None:
    """Evaluations share the plans of equal keys (core.feasibility.classes): an intent
    that differs from another only outside the key gets the same answers on every node."""
    fields = ("scheduler", "policy", "qos", "scope", "exclusive")
    b = dataclasses.replace(b, **{f: getattr(a, f) for f in fields})
    assert plan_key(a) == plan_key(b)
    for node in nodes:
        assert compatible(a, node) == compatible(b, node)
        assert simulation(a, node) == simulation(b, node)
