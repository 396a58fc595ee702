"""Koordinator scoring: the pod-level NUMA score (seed 000), NodeResourcesFitPlus and
ScarceResourceAvoidance (seed 004, research upstream-schedulers §1.3 and §1.6)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from core.scoring import koordinator as koord
from core.scoring.args import ScoringArgs
from core.scoring.rank import rank
from tests.builders.model import GI, container, fits, intent, plain_node, zone

SEED_FIT_PLUS = (
    koord.FitPlusResource("nvidia.com/gpu", "MostAllocated", 2),
    koord.FitPlusResource("cpu", "LeastAllocated", 1),
    koord.FitPlusResource("memory", "LeastAllocated", 1),
)


# ------------------------------------------------------------------ NUMA score (seed 000)


def test_numa_score_formula() -> None:
    assert koord.numa_score(1, 0, 32000) == 90
    assert koord.numa_score(1, 16000, 32000) == 95
    assert koord.numa_score(2, 32000, 32000) == 90
    assert koord.numa_score(4, 8000, 32000) == 62  # 60 + 10*0.25 floored
    assert koord.numa_score(1, 64000, 32000) == 100  # utilisation capped at 1
    assert koord.numa_score(1, 5, 0) == 90  # nothing allocatable: no utilisation term


@settings(max_examples=200)
@given(
    n=st.integers(1, 8),
    used_a=st.integers(0, 10**6),
    used_b=st.integers(0, 10**6),
    alloc=st.integers(1, 10**6),
)
def test_more_numa_nodes_never_score_higher(n: int, used_a: int, used_b: int, alloc: int) -> None:
    # The proposal: multi-NUMA placements score below single-NUMA ones; the utilisation term
    # (at most 10) can only reach a tie at the boundary.
    assert koord.numa_score(n + 1, used_a, alloc) <= koord.numa_score(n, used_b, alloc)


def test_cpu_utilisation_sums_zones_and_adds_the_pod() -> None:
    n = plain_node(
        "n",
        {"cpu": 32000},
        [zone(0, {"cpu": 16000}, {"cpu": 8000}), zone(1, {"cpu": 16000}, {"cpu": 12000})],
    )
    assert koord.cpu_utilisation(n, 4000) == (16000, 32000)


# ------------------------------------------------------------------ NodeResourcesFitPlus


def test_fit_plus_upstream_plugin_score_case() -> None:
    """node_resources_fit_plus_test.go TestPlugin_Score: a node already running a 16 CPU /
    32Gi / 4 GPU pod scores above an empty one for a 16 CPU / 32Gi / 2 GPU pod."""
    alloc = {"cpu": 96000, "memory": 512 * GI, "nvidia.com/gpu": 8, "ephemeral-storage": 100 * GI}
    busy = plain_node(
        "testNode1",
        alloc,
        [zone(0, alloc, {**alloc, "cpu": 80000, "memory": 480 * GI, "nvidia.com/gpu": 4})],
    )
    empty = plain_node("testNode2", {**alloc, "xx.xx/xx": 8}, [zone(0, alloc)])
    requests = {
        "cpu": 16000,
        "memory": 32 * GI,
        "nvidia.com/gpu": 2,
        "ephemeral-storage": 10 * GI,
    }
    c = [container(requests=requests)]
    score1 = koord.fitplus_for_node(SEED_FIT_PLUS, c, requests, busy)
    score2 = koord.fitplus_for_node(SEED_FIT_PLUS, c, requests, empty)
    # (75*2 + 66 + 87) // 4 and (25*2 + 83 + 93) // 4
    assert (score1, score2) == (75, 56)
    assert score1 > score2


def _cpu(kind: str, millis: int, name: str = "c") -> object:
    return container(name, kind, {"cpu": millis, "memory": GI})


def test_fit_plus_pod_request_containers_only() -> None:
    cs = [_cpu("app", 1000, "a"), _cpu("app", 2000, "b")]
    assert koord.fitplus_pod_request(cs, "cpu") == 3000  # type: ignore[arg-type]


def test_fit_plus_pod_request_regular_init_container_is_max_based() -> None:
    cs = [_cpu("init", 5000, "i"), _cpu("app", 1000, "a"), _cpu("app", 2000, "b")]
    assert koord.fitplus_pod_request(cs, "cpu") == 5000  # type: ignore[arg-type]
    small = [_cpu("init", 500, "i"), _cpu("app", 1000, "a")]
    assert koord.fitplus_pod_request(small, "cpu") == 1000  # type: ignore[arg-type]


def test_fit_plus_pod_request_sidecar_init_container_is_sum_based() -> None:
    cs = [_cpu("sidecar", 500, "s"), _cpu("app", 1000, "a"), _cpu("app", 2000, "b")]
    assert koord.fitplus_pod_request(cs, "cpu") == 3500  # type: ignore[arg-type]


def test_fit_plus_pod_request_with_both_follows_init_order() -> None:
    sidecar_first = [_cpu("sidecar", 500, "s"), _cpu("init", 5000, "i"), _cpu("app", 3000, "a")]
    init_first = [_cpu("init", 5000, "i"), _cpu("sidecar", 500, "s"), _cpu("app", 3000, "a")]
    assert koord.fitplus_pod_request(sidecar_first, "cpu") == 5000  # type: ignore[arg-type]
    assert koord.fitplus_pod_request(init_first, "cpu") == 5500  # type: ignore[arg-type]


def test_fit_plus_unset_cpu_and_memory_use_scheduler_defaults() -> None:
    cs = [container("a", "app", {"nvidia.com/gpu": 1}), container("b", "app", {"cpu": 0})]
    assert koord.fitplus_pod_request(cs, "cpu") == 100  # 100m for a, explicit 0 for b
    assert koord.fitplus_pod_request(cs, "memory") == 2 * 200 * 1024 * 1024
    assert koord.fitplus_pod_request(cs, "nvidia.com/gpu") == 1


def test_most_and_least_allocated_edges() -> None:
    assert koord.most_allocated(6, 8) == 75
    assert koord.most_allocated(10, 8) == 100  # capped
    assert koord.least_allocated(10, 8) == 0  # over capacity
    assert koord.least_allocated(2, 8) == 75
    assert koord.most_allocated(1, 0) == koord.least_allocated(1, 0) == 0


def test_fit_plus_weights_and_unknown_type_quirk() -> None:
    requested, alloc = {"nvidia.com/gpu": 6, "cpu": 0}, {"nvidia.com/gpu": 8, "cpu": 96000}
    assert koord.fitplus_score(SEED_FIT_PLUS, requested, alloc) == (75 * 2 + 100) // 3
    # An unknown type scores 0 but its weight still counts (resourceScorer has no default).
    odd = (
        koord.FitPlusResource("nvidia.com/gpu", "MostAllocated", 2),
        koord.FitPlusResource("cpu", "Balanced", 2),
    )
    assert koord.fitplus_score(odd, requested, alloc) == (75 * 2 + 0 * 2) // 4
    # Nothing configured is requested, or all weights are 0: the maximum.
    assert koord.fitplus_score(SEED_FIT_PLUS, {"example.com/fpga": 1}, {}) == 100
    zero = (koord.FitPlusResource("cpu", "LeastAllocated", 0),)
    assert koord.fitplus_score(zero, {"cpu": 1}, {"cpu": 2}) == 100


# ------------------------------------------------------------------ ScarceResourceAvoidance


GPU_NODE = plain_node(
    "gpu-node",
    {
        "cpu": 96000,
        "memory": 512 * GI,
        "ephemeral-storage": 100 * GI,
        "nvidia.com/gpu": 8,
        "pods": 110,
    },
)
CPU_NODE = plain_node(
    "cpu-node", {"cpu": 96000, "memory": 512 * GI, "ephemeral-storage": 100 * GI, "pods": 110}
)


def test_scarce_resource_avoidance_gpu_vs_non_gpu_node_for_cpu_only_pod() -> None:
    """scarce_resource_avoidance_test.go: args [nvidia.com/gpu]; a CPU-only pod scores the
    GPU node (8 GPUs) below the node without GPUs."""
    cpu_pod = {"cpu": 4000, "memory": 8 * GI}
    on_gpu = koord.scarce_for_node(["nvidia.com/gpu"], cpu_pod, GPU_NODE)
    on_cpu = koord.scarce_for_node(["nvidia.com/gpu"], cpu_pod, CPU_NODE)
    assert (on_gpu, on_cpu) == (50, 100)  # diff {ephemeral-storage, gpu}, hit {gpu}
    gpu_pod = {**cpu_pod, "nvidia.com/gpu": 1}
    assert koord.scarce_for_node(["nvidia.com/gpu"], gpu_pod, GPU_NODE) == 100


def test_scarce_score_formula() -> None:
    assert koord.scarce_score(["cpu"], ["cpu", "memory", "a/x", "b/y"], ["a/x", "b/y"]) == 33
    assert koord.scarce_score(["cpu"], ["cpu"], ["a/x"]) == 100  # empty diff
    assert koord.scarce_score([], ["cpu", "memory"], ["a/x"]) == 100  # empty hit


def test_rank_koordinator_combines_plugins_with_weights() -> None:
    zones_gpu = [
        zone(0, {"cpu": 48000, "memory": 256 * GI}),
        zone(1, {"cpu": 48000, "memory": 256 * GI}),
    ]
    gpu_node = plain_node("a-gpu", GPU_NODE.allocatable, zones_gpu)
    cpu_node = plain_node("b-cpu", CPU_NODE.allocatable, zones_gpu)
    pod = intent(
        "koordinator",
        policy="single-numa-node",
        containers=[container(requests={"cpu": 4000, "memory": 8 * GI})],
    )
    verdicts = [fits("a-gpu"), fits("b-cpu")]
    # NUMA score only: identical nodes tie, broken by name.
    plain = rank(pod, [gpu_node, cpu_node], verdicts)
    assert [v.name for v in plain] == ["a-gpu", "b-cpu"]
    assert plain[0].score == plain[1].score == 90  # 90 + floor(10*4000/96000)
    args = ScoringArgs(
        fit_plus=SEED_FIT_PLUS,
        fit_plus_weight=2,
        scarce_resources=("nvidia.com/gpu",),
        scarce_weight=2,
    )
    ranked = rank(pod, [gpu_node, cpu_node], verdicts, args)
    assert [v.name for v in ranked] == ["b-cpu", "a-gpu"]
    fit = (95 + 98) // 2  # cpu 4000/96000 least, memory 8Gi/512Gi least
    assert ranked[0].score == 90 + 2 * fit + 2 * 100
    assert ranked[1].score == 90 + 2 * fit + 2 * 50
    assert "ScarceResourceAvoidance (|diff| 2 - |hit| 1 ['nvidia.com/gpu'])*100/2 = 50 x2" in (
        ranked[1].reason
    )
