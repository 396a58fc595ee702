"""HAMi's own unit tests (Project-HAMi/HAMi at 4707fb0), translated case by case:

- ``pkg/scheduler/score_test.go Test_calcScore``: node score and the cards chosen;
- ``pkg/scheduler/score_test.go Test_fitInCertainDevice``: the per-card checks of ``Fit``;
- ``pkg/device/devices.go`` register decoding (omitempty defaults).

Every card of the upstream fixtures is ``Count 10, Totalmem 8000, Totalcore 100, Numa 0,
Type "NVIDIA"`` (both cards at Index 0), healthy; the request is one card with 1000 MiB and
30% cores; node policy binpack, GPU policy spread. Usage the fixtures set directly
(``Used 5, Usedmem 4000, Usedcores 50``) is what bound pods' allocations sum to; the
end-to-end cases below build it from such pods.
"""

from __future__ import annotations

import pytest

from core.model import NodeVerdict
from core.scoring import hami, hami_devices
from core.scoring.hami_devices import Card, parse_register
from core.scoring.rank import rank
from tests.builders import objects as k8s
from tests.builders.model import fits
from tests.core.upstream_cases import run

REQ = hami.GpuRequest(nums=1, mem=1000, cores=30)
HALF = (5, 4000, 50)  # Used, Usedmem, Usedcores of the "having use 50%" fixtures


def fixture_card(uuid: str, usage: tuple[int, int, int] = (0, 0, 0), **kw: object) -> Card:
    values: dict[str, object] = {
        "index": 0,
        "count": 10,
        "devmem": 8000,
        "devcore": 100,
        "type": "NVIDIA",
        "numa": 0,
        "health": True,
    }
    values.update(kw)
    used, usedmem, usedcores = usage
    return Card(id=uuid, used=used, usedmem=usedmem, usedcores=usedcores, **values)  # type: ignore[arg-type]


# score_test.go Test_calcScore: (line, cards, requests, node score, cards chosen)
CALC_SCORE = [
    (99, [("uuid1", (0, 0, 0))], [REQ], 0.0, ("uuid1",)),
    (196, [("uuid1", HALF)], [REQ], 15.0, ("uuid1",)),
    (293, [("uuid1", (0, 0, 0)), ("uuid2", (0, 0, 0))], [REQ], 0.0, ("uuid2",)),
    (524, [("uuid1", (0, 0, 0)), ("uuid2", HALF)], [REQ], 7.5, ("uuid1",)),
    (
        637,
        [("uuid1", (0, 0, 0)), ("uuid2", (0, 0, 0))],
        [hami.GpuRequest(2, 1000, None, 30)],
        0.0,
        ("uuid2", "uuid1"),
    ),
    (
        757,
        [("uuid1", HALF), ("uuid2", HALF)],
        [hami.GpuRequest(2, 1000, None, 30)],
        15.0,
        ("uuid2", "uuid1"),
    ),
    # "one node two device one pod two container use two device": only the first container
    # asks for a card (the second requests none), one card on the node.
    (1153, [("uuid1", (0, 0, 0))], [REQ], 0.0, ("uuid1",)),
    (1258, [("uuid1", (0, 0, 0))], [REQ], 0.0, ("uuid1",)),
    (1363, [("uuid1", (0, 0, 0))], [REQ], 0.0, ("uuid1",)),
    # "…two containers use two device with spread, should not in same device": 8000 MiB then
    # 1000 MiB; the first takes the last card, the second cannot fit there any more.
    (
        1477,
        [("uuid1", (0, 0, 0)), ("uuid2", (0, 0, 0))],
        [hami.GpuRequest(1, 8000, None, 30), REQ],
        0.0,
        ("uuid2", "uuid1"),
    ),
]


@pytest.mark.parametrize(
    ("line", "cards", "requests", "score", "chosen"),
    CALC_SCORE,
    ids=[f"L{c[0]}" for c in CALC_SCORE],
)
def test_calc_score(
    line: int,
    cards: list[tuple[str, tuple[int, int, int]]],
    requests: list[hami.GpuRequest],
    score: float,
    chosen: tuple[str, ...],
) -> None:
    devices = [fixture_card(uuid, usage) for uuid, usage in cards]
    assert hami.node_score(devices) == pytest.approx(score)
    assert hami.choose_gpus(devices, requests, ("spread",)).cards == chosen


@pytest.mark.parametrize(
    ("line", "node1", "node2", "scores", "first"),
    [
        # "two node per node having one device …": equal scores.
        (877, (0, 0, 0), (0, 0, 0), {"node1": 0.0, "node2": 0.0}, "node1"),
        # "… one device having use 50%": binpack (the default) prefers the fuller node1.
        (1015, HALF, (0, 0, 0), {"node1": 15.0, "node2": 0.0}, "node1"),
    ],
)
def test_calc_score_two_nodes(
    line: int,
    node1: tuple[int, int, int],
    node2: tuple[int, int, int],
    scores: dict[str, float],
    first: str,
) -> None:
    got = {
        "node1": hami.node_score([fixture_card("uuid1", node1)]),
        "node2": hami.node_score([fixture_card("uuid2", node2)]),
    }
    assert got == pytest.approx(scores)
    assert hami.order_nodes(got, "binpack")[0] == first
    assert hami.choose_gpus([fixture_card("uuid2", node2)], [REQ]).cards == ("uuid2",)


def test_calc_score_not_enough_memory_fails_the_node() -> None:
    # L1619 "… not enough resource, node should be failed": Totalmem 50 < 1000 requested.
    choice = hami.choose_gpus([fixture_card("uuid1", devmem=50)], [REQ])
    assert choice.cards == ()
    assert "uuid1 not enough memory" in choice.reason


# score_test.go Test_fitInCertainDevice: card test-0 Numa 1, Type NVIDIA, healthy.
FIT_IN_CERTAIN_DEVICE = [
    # (line, card fields, request (nums, mem, percent, cores), refusal)
    (
        3305,
        {"used": 1, "count": 4, "devmem": 8192, "usedmem": 2048, "usedcores": 1, "devcore": 4},
        (1, 1024, 100, 1),
        None,
    ),
    (
        3399,
        {"used": 5, "count": 4, "devmem": 8192, "usedmem": 2048, "usedcores": 1, "devcore": 4},
        (1, 1024, 100, 1),
        "no free slot",
    ),
    (
        3442,
        {"used": 1, "count": 4, "devmem": 8192, "usedmem": 2048, "usedcores": 1, "devcore": 4},
        (1, 1024, 100, 200),
        "not enough cores",
    ),
    (
        3485,
        {"used": 1, "count": 4, "devmem": 8000, "usedmem": 8000, "usedcores": 1, "devcore": 4},
        (1, 0, 100, 100),
        "not enough memory",
    ),
    (
        3528,
        {"used": 1, "count": 4, "devmem": 8192, "usedmem": 2048, "usedcores": 0, "devcore": 100},
        (1, 100, 100, 100),
        "in use (whole card wanted)",
    ),
    (
        3571,
        {"used": 1, "count": 4, "devmem": 8192, "usedmem": 2048, "usedcores": 1, "devcore": 1},
        (1, 1024, 100, 0),
        "all cores used",
    ),
]


@pytest.mark.parametrize(
    ("line", "fields", "ask", "refusal"),
    FIT_IN_CERTAIN_DEVICE,
    ids=[f"L{c[0]}" for c in FIT_IN_CERTAIN_DEVICE],
)
def test_fit_in_certain_device(
    line: int, fields: dict[str, int], ask: tuple[int, int, int, int], refusal: str | None
) -> None:
    card = Card(id="test-0", index=0, type="NVIDIA", numa=1, health=True, **fields)  # type: ignore[arg-type]
    nums, mem, percent, cores = ask
    req = hami.GpuRequest(nums, mem, percent, cores)
    assert hami.card_refusal(card, req) == refusal
    assert hami.choose_gpus([card], [req]).cards == (() if refusal else ("test-0",))


def test_unhealthy_card_is_skipped() -> None:
    # device.go Fit: !dev.Health -> CardNotHealth, whatever the scores say.
    sick = fixture_card("uuid2", health=False)
    assert hami.card_refusal(sick, REQ) == "unhealthy"
    assert hami.choose_gpus([fixture_card("uuid1"), sick], [REQ]).cards == ("uuid1",)


def test_register_fields_default_as_go_zero_values() -> None:
    # devices.go DeviceInfo: every field omitempty; UnMarshalNodeDevices is json.Unmarshal.
    (card,) = parse_register('[{"id": "GPU-0", "type": "NVIDIA-Tesla T4"}]')
    assert (card.index, card.count, card.devmem, card.devcore, card.numa, card.health) == (
        0,
        0,
        0,
        0,
        0,
        False,
    )
    a, b = parse_register(
        '[{"id":"a","count":10,"devmem":8000,"devcore":100,"type":"NVIDIA","health":true},'
        '{"id":"b","count":10,"devmem":8000,"devcore":100,"type":"NVIDIA"}]'
    )
    assert (a.index, b.index, a.health, b.health) == (0, 0, True, False)
    # The card registered without health is never chosen, although it sorts last.
    assert hami.choose_gpus([a, b], [REQ]).cards == ("a",)


def test_model_named_cards_score_from_usage_only() -> None:
    # gpu_policy.go ComputeScore L203: request terms only when container.Type == Device.Type;
    # real registrations carry the model, requests "NVIDIA" -> usage only.
    real = fixture_card("GPU-0", HALF, type="NVIDIA A100-SXM4-80GB")
    assert hami.card_score(real, REQ) == pytest.approx(15.0)
    assert hami.card_score(fixture_card("uuid1", HALF), REQ) == pytest.approx(
        10 * (6 / 10 + 80 / 100 + 5000 / 8000)
    )


# ------------------------------------------------------------------ end to end: bound pods


def _register(*uuids: str, card_type: str = "NVIDIA") -> str:
    return k8s.js(
        [
            {
                "id": u,
                "count": 10,
                "devmem": 8000,
                "devcore": 100,
                "type": card_type,
                "health": True,
            }
            for u in uuids
        ]
    )


def _holder(name: str, node: str, entries: list[str], **kw: object) -> dict:
    """A bound pod HAMi placed: one container per allocation entry."""
    annotations = {
        hami_devices.VGPU_NODE_ANNOTATION: node,
        hami_devices.ALLOCATED_ANNOTATION: "".join(f"{e}:;" for e in entries),
    }
    containers = [k8s.container(f"c{i}") for i in range(len(entries))]
    return k8s.pod(name, containers, node=node, annotations=annotations, **kw)  # type: ignore[arg-type]


GPU_POD = k8s.pod(
    "test1",
    [
        k8s.container(
            "gpu-burn",
            limits={
                "nvidia.com/gpu": "1",
                "nvidia.com/gpucores": "30",
                "nvidia.com/gpumem": "1000",
            },
        )
    ],
    scheduler="hami-scheduler",
)


def _ranked(objects: list[dict]) -> dict[str, NodeVerdict]:
    outcome = run(GPU_POD, objects)
    nodes = list(outcome.nodes.values())
    return {v.name: v for v in rank(outcome.intent, nodes, [fits(n.name) for n in nodes])}


def test_usage_from_bound_pods_end_to_end() -> None:
    # Test_calcScore L196 and L1015 built from objects: five bound containers of 800 MiB and
    # 10% each on uuid1 are its Used 5, Usedmem 4000, Usedcores 50.
    objects = [
        k8s.node(
            "node1",
            {"nvidia.com/gpu": "10"},
            annotations={hami_devices.REGISTER_ANNOTATION: _register("uuid1")},
        ),
        k8s.node(
            "node2",
            {"nvidia.com/gpu": "10"},
            annotations={hami_devices.REGISTER_ANNOTATION: _register("uuid2")},
        ),
        _holder("busy", "node1", ["uuid1,NVIDIA,800,10"] * 5),
        _holder("done", "node2", ["uuid2,NVIDIA,8000,100"], phase="Succeeded"),
    ]
    got = _ranked(objects)
    assert got["node1"].score == 1500 and got["node2"].score == 0  # hundredths: 15 and 0
    assert "10*(used 5/10 + cores 50/100 + memory 4000/8000 MiB) = 15.00" in got["node1"].reason
    assert "cards uuid1" in got["node1"].reason and "cards uuid2" in got["node2"].reason


def test_usage_picks_the_emptier_card_end_to_end() -> None:
    # Test_calcScore L524: uuid2 at 50% -> node score 7.5, spread takes uuid1; L293: both idle
    # -> uuid2 (the last registered).
    register = {hami_devices.REGISTER_ANNOTATION: _register("uuid1", "uuid2")}
    idle = _ranked([k8s.node("node1", {"nvidia.com/gpu": "20"}, annotations=register)])
    assert "cards uuid2 " in idle["node1"].reason
    busy = _ranked(
        [
            k8s.node("node1", {"nvidia.com/gpu": "20"}, annotations=register),
            _holder(
                "busy",
                "node1",
                ["uuid2,NVIDIA,4000,50", "uuid2,NVIDIA,0,0"] + ["uuid2,NVIDIA,0,0"] * 3,
            ),
        ]
    )
    assert busy["node1"].score == 750
    assert "cards uuid1 " in busy["node1"].reason


def test_unregistered_node_is_filtered_for_gpu_pods() -> None:
    got = _ranked([k8s.node("plain", {"nvidia.com/gpu": "8"})])
    assert "HAMi would filter the node out: node unregistered" in got["plain"].reason


# ------------------------------------------------------------------ gpu_policy_test.go

# TestDeviceUsageList_Less (L125-398), the cases without NumaBind (numa-bind is not
# modelled): policy, (numa, used, index, score) of cards i and j, Less(i, j).
LESS = [
    ("Binpack policy with same Numa", "binpack", (0, 10, 0, 10), (0, 20, 0, 20), True),
    (
        "Binpack: score primary, lower score sorts first across NUMA",
        "binpack",
        (1, 10, 0, 10),
        (0, 20, 0, 20),
        True,
    ),
    (
        "Binpack: score primary, higher score sorts last even on lower NUMA",
        "binpack",
        (0, 10, 0, 10),
        (1, 20, 0, 20),
        True,
    ),
    ("Binpack: NUMA tiebreaker when scores equal", "binpack", (0, 0, 0, 15), (1, 0, 0, 15), True),
    (
        "Binpack: score primary over NUMA, high-NUMA high-score sorts last",
        "binpack",
        (1, 0, 0, 20),
        (0, 0, 0, 10),
        False,
    ),
    (
        "Spread: score primary, higher score sorts first",
        "spread",
        (0, 10, 0, 10),
        (0, 20, 0, 20),
        False,
    ),
    (
        "Spread: score primary, lower score sorts last across NUMA",
        "spread",
        (1, 10, 0, 10),
        (0, 20, 0, 20),
        False,
    ),
    (
        "Spread: score primary over NUMA, high-NUMA high-score sorts first",
        "spread",
        (1, 0, 0, 20),
        (0, 0, 0, 10),
        True,
    ),
    ("Spread: NUMA tiebreaker when scores equal", "spread", (0, 0, 0, 15), (1, 0, 0, 15), True),
    ("Mutex: busy GPU sorts before idle GPU", "mutex", (0, 2, 0, 0), (0, 0, 0, 0), True),
    ("Mutex: idle GPU sorts after busy GPU", "mutex", (0, 0, 0, 0), (0, 1, 0, 0), False),
    ("Mutex: NUMA tiebreaker when both idle", "mutex", (0, 0, 0, 0), (1, 0, 0, 0), True),
    (
        "Bare numa: NUMA is the sort key regardless of score",
        "numa",
        (0, 0, 0, 99),
        (1, 0, 0, 5),
        True,
    ),
    (
        "Bare numa: same NUMA falls to deterministic Index tiebreak",
        "numa",
        (0, 0, 3, 10),
        (0, 0, 1, 20),
        False,
    ),
    (
        "Chain binpack,numa: score primary, numa tiebreak",
        "binpack,numa",
        (0, 0, 0, 15),
        (1, 0, 0, 15),
        True,
    ),
    (
        "Chain spread,numa: score primary, numa tiebreak",
        "spread,numa",
        (0, 0, 0, 15),
        (1, 0, 0, 15),
        True,
    ),
    (
        "Chain numa,spread: numa primary regardless of score",
        "numa,spread",
        (1, 0, 0, 5),
        (0, 0, 0, 99),
        False,
    ),
    (
        "Chain numa,spread: same NUMA falls back to spread",
        "numa,spread",
        (0, 0, 0, 20),
        (0, 0, 0, 10),
        True,
    ),
    (
        "Chain mutex,spread: mutex is a Fit() filter; spread decides",
        "mutex,spread",
        (0, 5, 0, 10),
        (0, 0, 0, 20),
        False,
    ),
    (
        "Chain with only filter tokens falls back to spread",
        "mutex,topology-aware",
        (0, 0, 0, 10),
        (0, 0, 0, 20),
        False,
    ),
    (
        "Chain binpack,numa: deterministic Index tiebreak",
        "binpack,numa",
        (0, 0, 5, 10),
        (0, 0, 2, 10),
        False,
    ),
]


@pytest.mark.parametrize(("name", "policy", "i", "j", "less"), LESS, ids=[c[0] for c in LESS])
def test_device_usage_list_less(
    name: str, policy: str, i: tuple[int, ...], j: tuple[int, ...], less: bool
) -> None:
    a = fixture_card("i", (i[1], 0, 0), numa=i[0], index=i[2])
    b = fixture_card("j", (j[1], 0, 0), numa=j[0], index=j[2])
    scores = {"i": float(i[3]), "j": float(j[3])}
    # Less(i, j) is true iff a stable sort of [j, i] puts i first.
    assert (hami.sort_cards([b, a], scores, tuple(policy.split(",")))[0] is a) == less


# TestComputeScore (L505-): zero capacity -> 0; the request terms per matching request.
def test_compute_score_zero_capacity_and_percentage() -> None:
    assert hami.card_score(fixture_card("z", count=0), REQ) == 0.0
    assert hami.card_score(fixture_card("z", devmem=0, devcore=0), REQ) == 0.0
    # "MemPercentagereq calculation evaluates correctly": 50% of 8000 MiB.
    half = hami.GpuRequest(1, 0, 50, 0)
    assert hami.card_score(fixture_card("p"), half) == pytest.approx(
        10 * (1 / 10 + 0 + 4000 / 8000)
    )


# Test_calcScore's init-container cases: each init container is placed on a copy of the node
# as it is, then the app containers on another copy (score.go scoreNode).
INIT_CASES = [
    # L406: 500 MiB left on each card, the init container wants 4000 -> node filtered.
    (
        "L406",
        [("uuid1", (0, 7500, 0)), ("uuid2", (0, 7500, 0))],
        [hami.GpuRequest(1, 4000, None, 30)],
        [hami.GpuRequest(1, 100, None, 30)],
        (),
    ),
    # L2962: 20 cores left on each card, the init container wants 30 -> node filtered.
    (
        "L2962",
        [("uuid1", (0, 0, 80)), ("uuid2", (0, 0, 80))],
        [hami.GpuRequest(1, 1000, None, 30)],
        [hami.GpuRequest(1, 1000, None, 10)],
        (),
    ),
    # L2704: the app container gets the card the init container used (capacity reset).
    ("L2704", [("uuid1", (0, 0, 0)), ("uuid2", (0, 0, 0))], [REQ], [REQ], ("uuid2", "uuid2")),
    # L2849: init 2 cards, app 1 card.
    (
        "L2849",
        [("uuid1", (0, 0, 0)), ("uuid2", (0, 0, 0))],
        [hami.GpuRequest(2, 1000, None, 30)],
        [REQ],
        ("uuid2", "uuid1", "uuid2"),
    ),
]


@pytest.mark.parametrize(
    ("line", "cards", "init", "app", "chosen"), INIT_CASES, ids=[c[0] for c in INIT_CASES]
)
def test_calc_score_init_containers(
    line: str,
    cards: list[tuple[str, tuple[int, int, int]]],
    init: list[hami.GpuRequest],
    app: list[hami.GpuRequest],
    chosen: tuple[str, ...],
) -> None:
    devices = [fixture_card(uuid, usage) for uuid, usage in cards]
    choice = hami.choose_pod_gpus(devices, init, app)
    assert choice.cards == chosen
    if not chosen:
        assert choice.reason.startswith("init container 0: 0 card(s) can take the request")


def test_init_container_filters_the_node_end_to_end() -> None:
    # L406 from objects: a bound pod holds 7500 MiB of each card; the pod's init container
    # wants 4000 MiB -> HAMi filters the node (its app container alone would fit).
    register = {hami_devices.REGISTER_ANNOTATION: _register("uuid1", "uuid2")}
    gpu = {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "30"}
    pod = k8s.pod(
        "p",
        [k8s.container("app", limits={**gpu, "nvidia.com/gpumem": "100"})],
        init=[k8s.container("init", limits={**gpu, "nvidia.com/gpumem": "4000"})],
        scheduler="hami-scheduler",
    )
    objects = [
        k8s.node("node1", {"nvidia.com/gpu": "20"}, annotations=register),
        _holder("busy", "node1", ["uuid1,NVIDIA,7500,0", "uuid2,NVIDIA,7500,0"]),
    ]
    outcome = run(pod, objects)
    (verdict,) = rank(outcome.intent, list(outcome.nodes.values()), [fits("node1")])
    assert "HAMi would filter the node out: init container 0" in verdict.reason


# score_test.go TestCalcScoreUsesPodDeviceScoringWeights (+ …ForInitContainers) and
# TestCalcScoreUsesDeviceScoringWeightsAsTopologyTieBreaker: two cards, a 40% memory request.
# HAMi v2.10.0 reads the weights from the pod's hami.io/device-scoring-weights (the pod case:
# tests/core/test_upstream_releases.py); here they come from numagate's scheduler args
# (hami.deviceScoringWeights), used when the pod gives none.
WEIGHTED = [
    fixture_card("gpu-a", (1, 10, 90), index=0, devmem=100),
    fixture_card("gpu-b", (7, 20, 10), index=1, devmem=100),
]
FORTY = hami.GpuRequest(1, 0, 40, 0)
MEMORY_3 = hami.ScoringWeights(1, 1, 3)


@pytest.mark.parametrize(
    ("policy", "weights", "card"),
    [
        (("binpack",), hami.ScoringWeights(), "gpu-a"),
        (("binpack",), MEMORY_3, "gpu-b"),
        (("topology-aware",), hami.ScoringWeights(), "gpu-b"),  # equal link scores: tie-break
        (("topology-aware",), MEMORY_3, "gpu-a"),
    ],
)
def test_calc_score_uses_device_scoring_weights(
    policy: tuple[str, ...], weights: hami.ScoringWeights, card: str
) -> None:
    pairs = {"gpu-a": {"gpu-b": 1}, "gpu-b": {"gpu-a": 1}}
    assert hami.choose_gpus(WEIGHTED, [FORTY], policy, pairs, weights).cards == (card,)
    # …ForInitContainers: an init container chooses the same way.
    assert hami.choose_pod_gpus(WEIGHTED, [FORTY], [], policy, pairs, weights).cards == (card,)


def _topology_cards() -> list[Card]:
    # score_test.go makeDevice(id, numa, NVIDIA, used 1, count 4, 8192, 2048, cores 1, 100)
    return [
        fixture_card(uid, (1, 2048, 1), numa=numa, count=4, devmem=8192)
        for uid, numa in zip("abcdef", (0, 0, 1, 1, 1, 1), strict=True)
    ]


@pytest.mark.parametrize(
    ("nums", "pairs", "chosen"),
    [
        # "test nvidia gpu topology-aware": the best 3-card combination, in Fit's walk order
        (
            3,
            {
                "a": {"b": 1, "c": 1, "d": 1, "e": 1, "f": 100},
                "b": {"a": 1, "c": 1, "d": 1, "e": 1, "f": 1},
                "c": {"a": 1, "b": 1, "d": 1, "e": 1, "f": 100},
                "d": {"a": 1, "b": 1, "c": 1, "e": 1, "f": 1},
                "e": {"a": 1, "b": 1, "c": 1, "d": 1, "f": 1},
                "f": {"a": 100, "b": 1, "c": 100, "d": 1, "e": 1},
            },
            ("f", "c", "a"),
        ),
        # "test Single Card Topology": the card with the worst links
        (
            1,
            {
                **{x: {y: 100 for y in "abcde" if y != x} | {"f": 1} for x in "abcde"},
                "f": {y: 1 for y in "abcde"},
            },
            ("f",),
        ),
    ],
    ids=["three-cards", "single-card"],
)
def test_nvidia_gpu_topology(
    nums: int, pairs: dict[str, dict[str, int]], chosen: tuple[str, ...]
) -> None:
    # score_test.go Test_Nvidia_GPU_Topology: 1024 MiB and 20% cores per card.
    request = hami.GpuRequest(nums, 1024, None, 20)
    assert (
        hami.choose_gpus(_topology_cards(), [request], ("topology-aware",), pairs).cards == chosen
    )


@pytest.mark.parametrize(
    ("cards", "nums", "fits_node"),
    [
        (2, 1, True),  # "all device score for one node"
        (1, 2, False),  # "request devices nums cannot exceed the total number of devices"
    ],
)
def test_fit_in_devices(cards: int, nums: int, fits_node: bool) -> None:
    # score_test.go Test_fitInDevices: cards Numa 1, used 1/4 slots, 2048/8192 MiB, 1/4 cores.
    devices = [
        fixture_card(f"test-{i + 1}", (1, 2048, 1), numa=1, count=4, devmem=8192, devcore=4)
        for i in range(cards)
    ]
    choice = hami.choose_gpus(devices, [hami.GpuRequest(nums, 1024, None, 1)])
    assert bool(choice.cards) == fits_node
    if not fits_node:
        assert "1 NVIDIA card(s) registered, 2 requested" in choice.reason  # NodeInsufficientDevice
