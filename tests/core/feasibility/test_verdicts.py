"""Cluster evaluation and decision (docs/contracts.md: Verdicts), with the seed examples: the CCE Volcano
tables (seed 001) and node selection as Kubernetes evaluates it."""

from __future__ import annotations

from types import ModuleType

import pytest

from core.errors import InvalidInput
from core.feasibility.decision import decide
from core.feasibility.verdicts import evaluate
from core.model import NodeSelectorRequirement as Req
from core.model import NodeSelectorTerm as Term
from core.snapshot.snapshot import Snapshot
from tests.builders.model import GI, container, cpu_node, node, pod, zone


def volcano_node(name: str, policy: str, caps: list[int], free: list[int]) -> object:
    return cpu_node(
        caps,
        free,
        name=name,
        policy=policy,
        volcano_policy=policy,
        volcano_cpu_manager_policy="static",
    )


def cce_cluster(node3_free: list[int]) -> Snapshot:
    # CCE table 1: 4 nodes x 2 NUMA x 16 CPUs; running containers leave 7 free per NUMA
    # node (cpu_manager_state of the seed: CPUs 1-9 and 16-24 taken)
    return Snapshot.build(
        [
            volcano_node("node-1", "best-effort", [16, 16], [7, 7]),
            volcano_node("node-2", "restricted", [16, 16], [7, 7]),
            volcano_node("node-3", "restricted", [16, 16], node3_free),
            volcano_node("node-4", "single-numa-node", [16, 16], [7, 7]),
        ]
    )


def by_name(ev: object) -> dict[str, object]:
    return {v.name: v for v in ev.verdicts}  # type: ignore[attr-defined]


def volcano_pod(cpus: int, policy: str) -> object:
    return pod(container(cpu=cpus, memory=2**30), scheduler="volcano", policy=policy)


def test_cce_9_cpus_best_effort_fits_node1_across_two_numa(impl: ModuleType) -> None:
    ev = evaluate(volcano_pod(9, "best-effort"), cce_cluster([7, 7]), impl=impl)
    v = by_name(ev)
    assert v["node-1"].verdict == "fits" and v["node-1"].numa == (0, 1)
    assert not v["node-1"].preferred
    assert {v[n].verdict for n in ("node-2", "node-3", "node-4")} == {"policy-mismatch"}
    assert decide(ev).allowed


def test_cce_9_cpus_restricted_no_room_now(impl: ModuleType) -> None:
    ev = evaluate(volcano_pod(9, "restricted"), cce_cluster([7, 7]), impl=impl)
    v = by_name(ev)
    assert v["node-2"].verdict == v["node-3"].verdict == "no-room-now"
    assert "restricted: no preferred hint: cpu 9 needs 1 NUMA node" in v["node-2"].reason
    assert "free 7/7" in v["node-2"].reason
    d = decide(ev)
    assert d.allowed and len(d.warnings) == 1 and "has room now" in d.warnings[0]


def test_cce_17_cpus_restricted_fits_across_two_numa(impl: ModuleType) -> None:
    ev = evaluate(volcano_pod(17, "restricted"), cce_cluster([16, 16]), impl=impl)
    v = by_name(ev)
    assert (v["node-3"].verdict, v["node-3"].numa, v["node-3"].preferred) == ("fits", (0, 1), True)
    assert v["node-2"].verdict == "no-room-now"
    assert decide(ev).allowed


def test_cce_17_cpus_single_numa_node_never_fits(impl: ModuleType) -> None:
    ev = evaluate(volcano_pod(17, "single-numa-node"), cce_cluster([16, 16]), impl=impl)
    v = by_name(ev)
    assert v["node-4"].verdict == "never-fits"
    d = decide(ev)
    assert not d.allowed
    assert "volcano policy single-numa-node" in d.message and "node-4" in d.message


def test_cce_second_table(impl: ModuleType) -> None:
    snap = Snapshot.build(
        [
            volcano_node("node-1", "single-numa-node", [16, 16], [16, 16]),
            volcano_node("node-2", "best-effort", [16, 16], [16, 16]),
            volcano_node("node-3", "best-effort", [20, 20], [20, 20]),
        ]
    )
    v = by_name(evaluate(volcano_pod(2, "single-numa-node"), snap, impl=impl))
    assert [n for n, x in v.items() if x.verdict == "fits"] == ["node-1"]
    v = by_name(evaluate(volcano_pod(20, "best-effort"), snap, impl=impl))
    assert v["node-3"].numa == (0,) and v["node-2"].numa == (0, 1)


def test_full_false_stops_at_first_fit(impl: ModuleType) -> None:
    snap = Snapshot.build([cpu_node([4], [4], name=f"n{i}") for i in range(50)])
    ev = evaluate(pod(container(cpu=1)), snap, full=False, impl=impl)
    assert ev.partial and [v.name for v in ev.verdicts] == ["n0"]
    assert snap.packed.n_shapes == 1  # identical nodes share one shape
    full = evaluate(pod(container(cpu=1)), snap, impl=impl)
    assert full.counts["fits"] == 50 and len(full.verdicts) == 50


def test_unknown_topology_never_grounds_for_denial(impl: ModuleType) -> None:
    snap = Snapshot.build(
        [cpu_node([4], [4], name="small", policy="single-numa-node"), node("plain", [])]
    )
    ev = evaluate(pod(container(cpu=8)), snap, impl=impl)
    assert ev.counts["unknown-topology"] == 1 and ev.counts["never-fits"] == 1
    d = decide(ev)
    assert d.allowed and "without NUMA data" in d.warnings[0]


def test_empty_and_stale_inventory_never_deny(impl: ModuleType) -> None:
    d = decide(evaluate(pod(container(cpu=8)), Snapshot.build([]), impl=impl))
    assert d.allowed and "empty" in d.warnings[0]
    snap = Snapshot.build([cpu_node([4], [4], policy="single-numa-node")])
    ev = evaluate(pod(container(cpu=8)), snap, impl=impl)
    assert not decide(ev).allowed
    d = decide(ev, stale=True)
    assert d.allowed and "stale" in d.warnings[0]


def test_warnings_are_short() -> None:
    snap = Snapshot.build([cpu_node([4], [0], name="x" * 200, policy="single-numa-node")])
    for ev in (evaluate(pod(container(cpu=2)), snap),):
        for w in decide(ev).warnings:
            assert len(w) < 120


def test_allocation_failure_under_none_is_never_or_no_room(impl: ModuleType) -> None:
    snap = Snapshot.build(
        [
            cpu_node([4, 4], [1, 1], name="busy", policy="none"),
            cpu_node([2, 2], [2, 2], name="tiny", policy="none"),
        ]
    )
    v = by_name(evaluate(pod(container(cpu=6)), snap, impl=impl))
    assert v["busy"].verdict == "no-room-now" and "not enough exclusive CPUs" in v["busy"].reason
    assert v["tiny"].verdict == "never-fits"


def test_too_many_numa_nodes_never_fits(impl: ModuleType) -> None:
    snap = Snapshot.build([cpu_node([2] * 9, [2] * 9, name="big", policy="restricted")])
    v = by_name(evaluate(pod(container(cpu=1)), snap, impl=impl))
    assert v["big"].verdict == "never-fits" and "max-allowable-numa-nodes 8" in v["big"].reason


# --- node selection ---------------------------------------------------------------------


def labelled() -> Snapshot:
    return Snapshot.build(
        [
            cpu_node([4], [4], name="a", labels={"zone": "x", "gen": "3"}),
            cpu_node([4], [4], name="b", labels={"zone": "y", "gen": "5"}),
            cpu_node([4], [4], name="c", labels={"gen": "x"}),
        ]
    )


def selected(intent: object) -> list[str]:
    ev = evaluate(intent, labelled())  # type: ignore[arg-type]
    return [v.name for v in ev.verdicts if v.verdict != "not-selected"]


@pytest.mark.parametrize(
    ("terms", "want"),
    [
        ([Term((Req("zone", "In", ("x", "y")),))], ["a", "b"]),
        ([Term((Req("zone", "NotIn", ("x",)),))], ["b", "c"]),  # absent label matches NotIn
        ([Term((Req("zone", "Exists"),))], ["a", "b"]),
        ([Term((Req("zone", "DoesNotExist"),))], ["c"]),
        ([Term((Req("gen", "Gt", ("3",)),))], ["b"]),  # "x" is not an integer: no match
        ([Term((Req("gen", "Lt", ("5",)),))], ["a"]),
        ([Term((Req("zone", "In", ("x",)), Req("gen", "In", ("5",))))], []),  # ANDed
        (
            [Term((Req("zone", "In", ("x",)),)), Term((Req("gen", "In", ("5",)),))],
            ["a", "b"],
        ),  # ORed
        ([Term(match_fields=(Req("metadata.name", "In", ("c",)),))], ["c"]),
        ([Term(match_fields=(Req("metadata.name", "NotIn", ("c",)),))], ["a", "b"]),
        ([Term()], []),  # an empty term matches nothing
    ],
)
def test_required_node_affinity(terms: list, want: list) -> None:
    assert selected(pod(container(cpu=1), required_terms=tuple(terms))) == want


def test_node_name_and_selector() -> None:
    assert selected(pod(container(cpu=1), node_name="b")) == ["b"]
    assert selected(pod(container(cpu=1), node_selector={"zone": "x"})) == ["a"]
    ev = evaluate(pod(container(cpu=1), node_selector={"zone": "x"}), labelled())
    reasons = {v.name: v.reason for v in ev.verdicts}
    assert reasons["b"] == "excluded by spec.nodeSelector"


def test_bad_affinity_is_a_clear_error() -> None:
    with pytest.raises(InvalidInput, match="operator 'Near'"):
        evaluate(
            pod(container(cpu=1), required_terms=(Term((Req("k", "Near", ("1",)),)),)), labelled()
        )
    with pytest.raises(InvalidInput, match="not an integer"):
        evaluate(
            pod(container(cpu=1), required_terms=(Term((Req("gen", "Gt", ("x",)),)),)), labelled()
        )


def test_nothing_selected_allows_with_warning() -> None:
    d = decide(evaluate(pod(container(cpu=1), node_name="ghost"), labelled()))
    assert d.allowed and "nodeName" in d.warnings[0]


def test_numa_limit_belongs_to_the_kubelet_policy(impl: ModuleType) -> None:
    # Koordinator simulates its label's policy, but the kubelet (policy none) has no limit
    n = cpu_node([2] * 9, [2] * 9, name="k9", policy="none", koord_policy="single-numa-node")
    ev = evaluate(pod(container(cpu=1), scheduler="koordinator"), Snapshot.build([n]), impl=impl)
    assert ev.verdicts[0].verdict == "fits"


def test_zones_without_cpu_or_memory_leave_those_providers_unknown(impl: ModuleType) -> None:
    from tests.builders.model import zone

    zones = [zone(0, {"nvidia.com/gpu": 2}), zone(1, {"nvidia.com/gpu": 2})]
    n = node("gpu-only", zones, policy="single-numa-node", memory_manager_policy="Static")
    c = container(cpu=4, memory=2**30, nvidia_com__gpu=1)
    ev = evaluate(pod(c), Snapshot.build([n]), impl=impl)
    assert (ev.verdicts[0].verdict, ev.verdicts[0].numa) == ("fits", (0,))


# --- issue 15 ---------------------------------------------------------------------------------


@pytest.mark.parametrize("qos", ["Burstable", "BestEffort"])
def test_volcano_non_guaranteed_pod_is_never_a_policy_mismatch(impl: ModuleType, qos: str) -> None:
    # numaaware.go predicateFn returns nil for a pod that is not Guaranteed before it
    # compares policies: no node is a mismatch, nothing is denied
    snap = Snapshot.build(
        [volcano_node(f"node-{i}", "restricted", [16, 16], [7, 7]) for i in range(3)]
    )
    intent = pod(
        container(cpu=2, exclusive=False), scheduler="volcano", policy="single-numa-node", qos=qos
    )
    ev = evaluate(intent, snap, impl=impl)
    assert ev.counts["fits"] == 3 and ev.counts["policy-mismatch"] == 0
    assert decide(ev).outcome == "fits"
    guaranteed = evaluate(volcano_pod(2, "single-numa-node"), snap, impl=impl)
    assert decide(guaranteed).outcome == "impossible"  # a Guaranteed pod is still compared


def koord_node(
    caps: list[int], free: list[int], *, kubelet: str, name: str = "n", **kw: object
) -> object:
    return cpu_node(caps, free, name=name, policy=kubelet, koord_policy="restricted", **kw)


def koord_pod(*containers: object) -> object:
    return pod(*containers, scheduler="koordinator", policy="restricted")


def test_koordinator_restricted_sizes_hints_from_what_fits_now(impl: ModuleType) -> None:
    # koordinator resource_manager.go generateResourceHints: a mask is a hint only if the
    # pod fits on it now, and under Restricted every such hint is preferred. 2 NUMA x 4
    # CPUs, bound pods hold 3 and 2: only {0,1} holds 3 CPUs -> admitted on {0,1}
    # (issue15-upstream.md KO.3, derived case). Where the kubelet's restricted policy
    # gates admission, its capacity rule makes {0,1} non-preferred: no room now.
    intent = koord_pod(container(cpu=3))
    koord = evaluate(
        intent, Snapshot.build([koord_node([4, 4], [1, 2], kubelet="none")]), impl=impl
    )
    assert (koord.verdicts[0].verdict, koord.verdicts[0].numa) == ("fits", (0, 1))
    assert koord.verdicts[0].preferred
    kubelet = evaluate(
        intent, Snapshot.build([koord_node([4, 4], [1, 2], kubelet="restricted")]), impl=impl
    )
    assert kubelet.verdicts[0].verdict == "no-room-now"


def test_koordinator_restricted_with_memory_hints_is_not_denied(impl: ModuleType) -> None:
    # CPU {0} fits, memory needs {0,1}: under the kubelet's rules the masks differ, so no
    # merged hint is preferred (policy.go mergePermutation, PR #108052) and a kubelet with
    # restricted rejects the pod on every such node; koord-scheduler marks every fitting
    # CPU and memory hint preferred, so {0,1} is preferred for both and admitted
    def mem_cpu_node(kubelet: str) -> object:
        zones = [zone(i, {"cpu": 4000, "memory": 4 * GI}) for i in range(2)]
        return node(
            "n", zones, policy=kubelet, koord_policy="restricted", memory_manager_policy="Static"
        )

    intent = koord_pod(container(cpu=3, memory=6 * GI))
    koord = evaluate(intent, Snapshot.build([mem_cpu_node("none")]), impl=impl)
    assert (koord.verdicts[0].verdict, koord.verdicts[0].numa) == ("fits", (0, 1))
    assert decide(koord).outcome == "fits"
    kubelet = evaluate(intent, Snapshot.build([mem_cpu_node("restricted")]), impl=impl)
    assert kubelet.verdicts[0].verdict == "never-fits"


def test_koordinator_device_hints_keep_the_narrowest_fitting_preferred(impl: ModuleType) -> None:
    # deviceshare topology_hint.go generateTopologyHints: Preferred = (width == the
    # narrowest fitting width), with no Restricted clause. One GPU on NUMA 0 and 6 CPUs
    # that fit only on {0,1}: device {0} preferred, CPU {0,1} preferred, no preferred
    # permutation; koord-scheduler's restricted policy rejects the node even when idle.
    zones = [zone(0, {"cpu": 4000, "nvidia.com/gpu": 1}), zone(1, {"cpu": 4000})]
    n = node("n", zones, policy="none", koord_policy="restricted", allocatable={"cpu": 8000})
    intent = koord_pod(container(cpu=6, nvidia_com__gpu=1))
    assert evaluate(intent, Snapshot.build([n]), impl=impl).verdicts[0].verdict == "never-fits"
    # the same GPU request with 3 CPUs fits on {0}: both preferred there
    small = evaluate(koord_pod(container(cpu=3, nvidia_com__gpu=1)), Snapshot.build([n]), impl=impl)
    assert (small.verdicts[0].verdict, small.verdicts[0].numa) == ("fits", (0,))


def test_koordinator_decides_beyond_the_kubelets_numa_limit(impl: ModuleType) -> None:
    # max-allowable-numa-nodes limits the kubelet's own policy (topology_manager.go
    # NewManager); with kubelet policy none, koord-scheduler's Restricted still applies
    n = koord_node([2] * 9, [2] * 9, kubelet="none")
    ev = evaluate(koord_pod(container(cpu=1)), Snapshot.build([n]), impl=impl)
    assert ev.verdicts[0].verdict == "fits"
    limited = koord_node([2] * 9, [2] * 9, kubelet="restricted")
    ev = evaluate(koord_pod(container(cpu=1)), Snapshot.build([limited]), impl=impl)
    assert ev.verdicts[0].verdict == "never-fits"
