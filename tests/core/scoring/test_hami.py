"""HAMi node and GPU policies: the worked examples of the scheduler-policy design doc (seed 003)
and the upstream test facts (research upstream-schedulers §3.4-3.5)."""

from __future__ import annotations

import json
from dataclasses import replace
from itertools import combinations

import pytest

from core.errors import InvalidInput
from core.scoring import hami, hami_devices
from core.scoring.args import ScoringArgs
from core.scoring.rank import choose_gpus_for, rank
from tests.builders.model import container, fits, intent, plain_node
from tests.paths import FIXTURES as _FIXTURES

FIXTURES = _FIXTURES / "scoring"
PAIRS_TEXT = (FIXTURES / "hami-pair-scores.json").read_text()
REGISTER_TEXT = (FIXTURES / "hami-register.json").read_text()


def card(cid: str, index: int, **kw: object) -> hami.Card:
    values: dict[object, object] = {
        "count": 10,
        "devmem": 8000,
        "devcore": 100,
        "numa": 0,
        "type": "NVIDIA",  # as HAMi's own fixtures register it: the request terms apply
        "health": True,
    }
    values.update(kw)
    return hami.Card(id=cid, index=index, **values)  # type: ignore[arg-type]


def idle_cards(n: int = 4) -> list[hami.Card]:
    return [card(f"gpu{i}", i) for i in range(n)]


# ------------------------------------------------------------------ node policy


def _whole_cards(node_name: str, used: int, total: int = 4) -> object:
    """A node of ``total`` whole cards (count 1), ``used`` of them held by bound pods."""
    register = [
        {
            "id": f"{node_name}-g{i}",
            "index": i,
            "count": 1,
            "devmem": 8000,
            "devcore": 100,
            "type": "NVIDIA-Tesla T4",
            "health": True,
        }
        for i in range(total)
    ]
    usage = {f"{node_name}-g{i}": (1, 8000, 100) for i in range(used)}
    return replace(
        plain_node(
            node_name,
            {"nvidia.com/gpu": total},
            annotations={hami.REGISTER_ANNOTATION: json.dumps(register)},
        ),
        gpu_usage=usage,
    )


def test_seed_node_scores_10_and_7_5_are_the_one_term_formula_with_the_request() -> None:
    cards1 = hami.node_cards(
        _whole_cards("node1", 3).annotations, _whole_cards("node1", 3).gpu_usage
    )
    cards2 = hami.node_cards(
        _whole_cards("node2", 2).annotations, _whole_cards("node2", 2).gpu_usage
    )
    one = [hami.GpuRequest(nums=1)]
    assert hami.seed_node_score(cards1, one) == 10.0
    assert hami.seed_node_score(cards2, one) == 7.5
    # HAMi's code: three terms of what is held, the pod not added (3/4 each: 22.5; 2/4: 15).
    assert hami.node_score(cards1) == 22.5
    assert hami.node_score(cards2) == 15.0


@pytest.mark.parametrize(("policy", "first"), [("binpack", "node1"), ("spread", "node2")])
def test_seed_node_policy_picks(policy: str, first: str) -> None:
    scores = {"node1": 22.5, "node2": 15.0}
    assert hami.order_nodes(scores, policy)[0] == first


@pytest.mark.parametrize(
    ("policy", "order"), [("binpack", ["node1", "node2"]), ("spread", ["node2", "node1"])]
)
def test_rank_reproduces_seed_node_example_in_order(policy: str, order: list[str]) -> None:
    nodes = [_whole_cards("node1", used=3), _whole_cards("node2", used=2)]
    pod = intent(
        "hami", containers=[container(requests={"nvidia.com/gpu": 1})], hami_node_policy=policy
    )
    ranked = rank(pod, nodes, [fits("node2"), fits("node1")])  # type: ignore[list-item]
    assert [v.name for v in ranked] == order
    assert {v.name: v.score for v in ranked} == {"node1": 2250, "node2": 1500}  # hundredths
    assert f"node policy {policy}" in ranked[0].reason
    node1 = next(v for v in ranked if v.name == "node1")
    assert "10*(used 3/4 + cores 300/400 + memory 24000/32000 MiB) = 22.50" in node1.reason
    assert "seed 003's ((request+used)/allocatable)*10 gives 10.00" in node1.reason


@pytest.mark.parametrize(("policy", "second_pod_node"), [("binpack", "node1"), ("spread", "node2")])
def test_seed_stories_1_and_2_two_single_gpu_pods(policy: str, second_pod_node: str) -> None:
    pod = intent(
        "hami", containers=[container(requests={"nvidia.com/gpu": 1})], hami_node_policy=policy
    )
    verdicts = [fits("node1"), fits("node2")]
    first = rank(pod, [_whole_cards("node1", 0), _whole_cards("node2", 0)], verdicts)[0].name  # type: ignore[list-item]
    assert first == "node1"  # equal scores: by name
    after = [_whole_cards("node1", 1 if first == "node1" else 0), _whole_cards("node2", 0)]
    assert rank(pod, after, verdicts)[0].name == second_pod_node  # type: ignore[arg-type]


def test_node_policy_default_and_upstream_quirk() -> None:
    assert hami.node_policy_of(None) == "binpack"
    assert hami.node_policy_of("spread") == "spread"
    assert hami.node_policy_of(None, "spread") == "spread"
    # node_policy.go Less: anything that is not exactly "spread" is binpack.
    assert hami.node_policy_of("Spread") == "binpack"


def test_zero_totals_score_zero() -> None:
    # ComputeDefaultScore: any of the three totals 0 -> the whole score is 0.
    assert hami.node_score([card("gpu0", 0, count=0, devmem=0, devcore=0)]) == 0.0
    assert hami.node_score([card("gpu0", 0, devcore=0, used=5, usedmem=4000)]) == 0.0
    assert hami.card_score(card("gpu0", 0, devcore=0), hami.GpuRequest(1)) == 0.0


# ------------------------------------------------------------------ GPU policy (seed 003)

GPU1 = card("GPU1", 0, usedcores=10, usedmem=2000, used=1)
GPU2 = card("GPU2", 1, usedcores=70, usedmem=6000, used=1)
REQ = hami.GpuRequest(nums=1, mem=1000, cores=20)


def test_seed_gpu_scores_6_75_and_17_75() -> None:
    assert hami.seed_card_score(GPU1, REQ) == pytest.approx(6.75)
    assert hami.seed_card_score(GPU2, REQ) == pytest.approx(17.75)
    # HAMi's ComputeScore is the same with slot weight 0; with the default weights the slot
    # term (1+1)/10 adds 2.
    core_and_memory = hami.ScoringWeights(slot=0, core=1, memory=1)
    assert hami.card_score(GPU1, REQ, core_and_memory) == pytest.approx(6.75)
    assert hami.card_score(GPU2, REQ) == pytest.approx(19.75)
    # A card registered under its model name never matches the request type "NVIDIA":
    # the request terms drop out (gpu_policy.go L203).
    t4 = replace(GPU1, type="NVIDIA-Tesla T4")
    assert hami.card_score(t4, REQ) == pytest.approx(10 * (1 / 10 + 10 / 100 + 2000 / 8000))


@pytest.mark.parametrize(
    ("policy", "expected"), [(("binpack",), ("GPU2",)), (("spread",), ("GPU1",))]
)
@pytest.mark.parametrize("weights", [hami.ScoringWeights(), hami.ScoringWeights(slot=0)])
def test_seed_gpu_policy_picks(
    policy: tuple[str, ...], expected: tuple[str, ...], weights: hami.ScoringWeights
) -> None:
    assert hami.choose_gpus([GPU1, GPU2], [REQ], policy, weights=weights).cards == expected


@pytest.mark.parametrize(
    ("policy", "picks"), [("binpack", ["gpu3", "gpu3"]), ("spread", ["gpu3", "gpu2"])]
)
def test_seed_stories_3_and_4_two_pods_of_20_percent(policy: str, picks: list[str]) -> None:
    # The seed's GPU1/GPU2 are "some card, then the same / another one": HAMi's Fit walks the
    # sorted cards from the end, so among idle cards it starts with the last registered.
    request = hami.GpuRequest(nums=1, mem_percent=20, cores=20)
    cards = idle_cards()
    chosen = []
    for _ in range(2):
        pick = hami.choose_gpus(cards, [request], (policy,)).cards
        chosen.extend(pick)
        cards = [
            replace(c, used=c.used + 1, usedcores=c.usedcores + 20, usedmem=c.usedmem + 1600)
            if c.id in pick
            else c
            for c in cards
        ]
    assert chosen == picks


def test_numa_is_a_tiebreak_for_binpack_and_a_key_where_a_chain_writes_it() -> None:
    # gpu_policy.go Less: single binpack -> score, then NUMA; lessByChain -> keys in the order
    # written, then index. NUMA sorts ascending and Fit walks from the end: highest NUMA id.
    busy = card("a", 0, numa=0, usedcores=50, usedmem=4000, used=1)
    idle = card("b", 1, numa=1)
    req = hami.GpuRequest(nums=1, mem=100, cores=10)
    assert hami.choose_gpus([busy, idle], [req], ("binpack",)).cards == ("a",)
    assert hami.choose_gpus([busy, idle], [req], ("binpack", "numa")).cards == ("a",)
    assert hami.choose_gpus([busy, idle], [req], ("numa", "binpack")).cards == ("b",)
    assert hami.choose_gpus([busy, idle], [req], ("numa",)).cards == ("b",)


def test_mutex_prefers_idle_cards() -> None:
    busy = card("busy", 0, used=1, usedcores=10, usedmem=100)
    idle = card("idle", 1)
    req = hami.GpuRequest(nums=1, mem=100, cores=10)
    assert hami.choose_gpus([busy, idle], [req], ("mutex",)).cards == ("idle",)
    assert hami.choose_gpus([busy, idle], [req], ("binpack",)).cards == ("busy",)


def test_cards_that_cannot_take_the_request_are_skipped() -> None:
    sick = card("sick", 0, health=False)
    full = card("full", 1, used=10)
    shared = card("shared", 2, used=1, usedcores=10, usedmem=100)
    ok = card("ok", 3)
    whole = hami.GpuRequest(nums=1, mem_percent=100, cores=100)
    assert hami.choose_gpus([sick, full, shared, ok], [whole], ("binpack",)).cards == ("ok",)
    none = hami.choose_gpus([sick, full], [whole])
    assert none.cards == ()
    assert "0 card(s) can take the request, 1 needed" in none.reason


# ------------------------------------------------------------------ topology-aware


def test_seed_pair_sums_single_gpu_goes_to_gpu0_or_gpu1() -> None:
    pairs = hami.parse_pair_scores(PAIRS_TEXT)
    sums = {g: sum(pairs[g].values()) for g in sorted(pairs)}
    assert sums == {"gpu0": 400, "gpu1": 400, "gpu2": 500, "gpu3": 500}
    chosen = hami.choose_gpus(
        idle_cards(),
        [hami.GpuRequest(nums=1, mem_percent=100, cores=100)],
        ("topology-aware",),
        pairs,
    )
    assert chosen.cards[0] in {"gpu0", "gpu1"}
    assert chosen.cards == ("gpu1",)  # deterministic: HAMi walks candidates from the tail


def test_seed_three_gpus_go_to_gpu1_gpu2_gpu3() -> None:
    pairs = hami.parse_pair_scores(PAIRS_TEXT)
    totals = {
        group: sum(pairs[a][b] for a, b in combinations(group, 2))
        for group in combinations(["gpu0", "gpu1", "gpu2", "gpu3"], 3)
    }
    assert totals[("gpu0", "gpu1", "gpu2")] == 400
    assert totals[("gpu0", "gpu1", "gpu3")] == 400
    assert totals[("gpu1", "gpu2", "gpu3")] == 500
    chosen = hami.choose_gpus(
        idle_cards(),
        [hami.GpuRequest(nums=3, mem_percent=100, cores=100)],
        ("topology-aware",),
        pairs,
    )
    assert sorted(chosen.cards) == ["gpu1", "gpu2", "gpu3"]


def test_upstream_compute_best_combination() -> None:
    # HAMi device_test.go TestComputeBestCombination.
    pairs = {
        "gpu0": {"gpu1": 100, "gpu2": 200},
        "gpu1": {"gpu0": 100, "gpu2": 150},
        "gpu2": {"gpu0": 200, "gpu1": 150},
    }
    best = hami.best_combination(idle_cards(3), 2, pairs)
    assert {c.id for c in best} == {"gpu0", "gpu2"}


def test_topology_aware_only_considers_cards_that_fit() -> None:
    pairs = hami.parse_pair_scores(PAIRS_TEXT)
    cards = idle_cards()
    cards[2] = replace(cards[2], health=False)
    chosen = hami.choose_gpus(
        cards, [hami.GpuRequest(nums=3, mem_percent=100, cores=100)], ("topology-aware",), pairs
    )
    assert sorted(chosen.cards) == ["gpu0", "gpu1", "gpu3"]


def test_rank_reports_chosen_cards_in_reason() -> None:
    annotations = {hami.REGISTER_ANNOTATION: REGISTER_TEXT, hami.PAIR_SCORE_ANNOTATION: PAIRS_TEXT}
    gpu_node = plain_node("g1", {"nvidia.com/gpu": 40}, annotations=annotations)
    pod = intent(
        "hami",
        containers=[container(requests={"nvidia.com/gpu": 3})],
        hami_gpu_policy=("topology-aware",),
    )
    (verdict,) = rank(pod, [gpu_node], [fits("g1")])
    assert "cards gpu3,gpu2,gpu1" in verdict.reason
    assert sorted(choose_gpus_for(pod, gpu_node).cards) == ["gpu1", "gpu2", "gpu3"]
    # The configured default policy applies when the pod sets none.
    plain = intent("hami", containers=[container(requests={"nvidia.com/gpu": 1})])
    args = ScoringArgs(hami_gpu_policy=("topology-aware",))
    assert choose_gpus_for(plain, gpu_node, args).cards == ("gpu1",)
    # spread, equal cards: Fit walks the sorted list from its end -> the last registered.
    assert choose_gpus_for(plain, gpu_node).cards == ("gpu3",)


def test_rank_puts_nodes_hami_would_filter_last() -> None:
    sick = json.loads(REGISTER_TEXT)
    for entry in sick:
        entry["health"] = False
    bad = plain_node(
        "a-sick", {"nvidia.com/gpu": 40}, annotations={hami.REGISTER_ANNOTATION: json.dumps(sick)}
    )
    good = plain_node(
        "b-good", {"nvidia.com/gpu": 40}, annotations={hami.REGISTER_ANNOTATION: REGISTER_TEXT}
    )
    pod = intent("hami", containers=[container(requests={"nvidia.com/gpu": 1})])
    ranked = rank(pod, [bad, good], [fits("a-sick"), fits("b-good")])
    assert [v.name for v in ranked] == ["b-good", "a-sick"]
    assert "HAMi would filter the node out" in ranked[1].reason


# ------------------------------------------------------------------ annotations


def test_parse_register_json_and_legacy_forms_agree() -> None:
    from_json = hami.parse_register(REGISTER_TEXT)
    legacy = "".join(
        f"{c.id},{c.count},{c.devmem},{c.devcore},{c.type},{c.numa},true:" for c in from_json
    )
    assert hami.parse_register(legacy) == from_json
    nine = "gpu9,10,16000,100,A100,1,false,7,hami-core:"
    (only,) = hami.parse_register(nine)
    assert (only.index, only.numa, only.health, only.devmem) == (7, 1, False, 16000)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('[{"id": "g", "count": "x", "devmem": 1}]', "field 'count' is 'x'"),
        ('[{"count": 1, "devmem": 1}]', "field 'id' is None"),
        ('[{"id": "g", "count": 1, "devmem": 1, "health": "yes"}]', "field 'health' is 'yes'"),
        ("[not json", "not valid JSON"),
        ("g,1,2,3:", "has 4 fields, expected 7"),
        ("", "no devices"),
    ],
)
def test_parse_register_errors_name_the_field(value: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=message.replace("(", r"\(").replace("[", r"\[")):
        hami.parse_register(value)


def test_pair_scores_accept_numbers_and_strings_and_reject_garbage() -> None:
    assert hami.parse_pair_scores('[{"uuid": "a", "score": {"b": 10}}]') == {"a": {"b": 10}}
    assert hami.parse_pair_scores('[{"uuid": "a", "score": {"b": "10"}}]') == {"a": {"b": 10}}
    with pytest.raises(InvalidInput, match=r"score: field 'b' is 'ten'"):
        hami.parse_pair_scores('[{"uuid": "a", "score": {"b": "ten"}}]')


def _hami_pod(allocated: str, *, node: str | None = "n1", **extra: object) -> dict[str, object]:
    annotations = {hami_devices.ALLOCATED_ANNOTATION: allocated}
    if node:
        annotations[hami_devices.VGPU_NODE_ANNOTATION] = node
    return {"metadata": {"name": "p", "annotations": annotations}, **extra}


def test_pod_usage_sums_app_containers_per_card() -> None:
    pod = _hami_pod("gpu1,NVIDIA,2000,10:;gpu1,NVIDIA,1000,5:gpu2,NVIDIA,500,5:;")
    assert hami_devices.pod_gpu_usage(pod) == ("n1", {"gpu1": (2, 3000, 15), "gpu2": (1, 500, 5)})


@pytest.mark.parametrize(
    "pod",
    [
        _hami_pod("gpu3,NVIDIA,1,1:;", status={"phase": "Succeeded"}),
        _hami_pod("gpu3,NVIDIA,1,1:;", status={"phase": "Failed"}),
        # onAddPod: only hami.io/vgpu-node places a pod in HAMi's books, not spec.nodeName.
        _hami_pod("gpu3,NVIDIA,1,1:;", node=None, spec={"nodeName": "n1"}),
        {"metadata": {"name": "cpu"}, "spec": {"nodeName": "n1"}},
    ],
)
def test_pods_hami_does_not_count(pod: dict[str, object]) -> None:
    assert hami_devices.pod_gpu_usage(pod) is None


def test_init_containers_collapse_to_their_peak() -> None:
    # initContainer.go CollapseInitContainerUsage: init peak (1 slot) vs app sum, per card.
    pod = _hami_pod(
        "gpu1,NVIDIA,3000,50:;gpu1,NVIDIA,1000,80:;gpu1,NVIDIA,1000,10:;gpu1,NVIDIA,500,10:;",
        spec={"initContainers": [{"name": "a"}, {"name": "b"}]},
    )
    assert hami_devices.pod_gpu_usage(pod) == ("n1", {"gpu1": (2, 3000, 80)})


@pytest.mark.parametrize(
    ("allocated", "message"),
    [("gpu1,NVIDIA,10:;", "has 3 fields"), ("gpu1,NVIDIA,ten,5:;", "must be integers")],
)
def test_allocations_hami_cannot_decode_are_named(allocated: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        hami_devices.pod_gpu_usage(_hami_pod(allocated))


def test_usage_totals_add_and_take_back() -> None:
    totals: hami_devices.Usage = {}
    hami_devices.add_usage(totals, {"g": (1, 100, 10)})
    hami_devices.add_usage(totals, {"g": (2, 50, 5), "h": (1, 1, 1)})
    assert totals == {"g": (3, 150, 15), "h": (1, 1, 1)}
    hami_devices.add_usage(totals, {"h": (1, 1, 1)}, -1)
    assert totals == {"g": (3, 150, 15)}
    cards = {
        c.id: c
        for c in hami.node_cards({hami.REGISTER_ANNOTATION: REGISTER_TEXT}, {"gpu1": (2, 3000, 15)})
    }
    assert (cards["gpu1"].used, cards["gpu1"].usedmem, cards["gpu1"].usedcores) == (2, 3000, 15)
    assert cards["gpu0"].used == 0


def test_container_requests_follow_hami_defaults() -> None:
    reqs = hami.container_gpu_requests(
        [
            ({}, {"nvidia.com/gpu": 2}),  # whole cards
            ({"nvidia.com/gpumem": 3000}, {}),  # memory only: 1 card, 0 cores
            (
                {},
                {
                    "nvidia.com/gpu": 1,
                    "nvidia.com/gpumem-percentage": 50,
                    "nvidia.com/gpucores": 30,
                },
            ),
            ({"cpu": 1000}, {"cpu": 1000}),  # no GPU
        ]
    )
    assert reqs == [
        hami.GpuRequest(nums=2, mem=0, mem_percent=100, cores=100),
        hami.GpuRequest(nums=1, mem=3000, mem_percent=None, cores=0),
        hami.GpuRequest(nums=1, mem=0, mem_percent=50, cores=30),
    ]
    assert hami.request_mem(card("x", 0), reqs[2]) == 4000


def test_malformed_annotations_are_named_and_only_filter_gpu_pods() -> None:
    broken = plain_node(
        "a-broken", {"nvidia.com/gpu": 4}, annotations={hami.REGISTER_ANNOTATION: "[oops"}
    )
    good = plain_node(
        "b-good", {"nvidia.com/gpu": 40}, annotations={hami.REGISTER_ANNOTATION: REGISTER_TEXT}
    )
    verdicts = [fits("a-broken"), fits("b-good")]
    cpu_pod = intent(
        "hami", containers=[container(requests={"cpu": 1000})], hami_node_policy="spread"
    )
    ranked = rank(cpu_pod, [broken, good], verdicts)
    assert [v.name for v in ranked] == ["a-broken", "b-good"]  # both 0 used; by name
    assert "ignored: hami.io/node-nvidia-register is not valid JSON" in ranked[0].reason
    gpu_pod = intent("hami", containers=[container(requests={"nvidia.com/gpu": 1})])
    ranked = rank(gpu_pod, [broken, good], verdicts)
    assert [v.name for v in ranked] == ["b-good", "a-broken"]
    assert "HAMi would filter the node out" in ranked[1].reason
    bad_pairs = plain_node(
        "c",
        {"nvidia.com/gpu": 40},
        annotations={hami.REGISTER_ANNOTATION: REGISTER_TEXT, hami.PAIR_SCORE_ANNOTATION: "{}"},
    )
    (verdict,) = rank(gpu_pod, [bad_pairs], [fits("c")])
    assert "hami.io/node-nvidia-score is {}, expected a list" in verdict.reason
