"""HAMi's card choice, for `explain`: the GPU cards HAMi would pick for a pod on a node
(binpack, spread, mutex, numa chains, topology-aware), following HAMi's code at 4707fb0
(``policy/gpu_policy.go``, ``pkg/device/nvidia/device.go`` ``Fit``). The node and card
scores are in :mod:`core.scoring.hami_scores`, the device annotations and the bound pods'
usage are decoded in :mod:`core.scoring.hami_devices` (the inventory puts the usage in
``NodeTopology.gpu_usage``); this module re-exports both, so callers use ``hami.X``.

The cards are sorted (spread: higher score first; binpack: lower first; ties by NUMA id;
comma chains by their keys, then index) and ``Fit`` walks the list from its end, so binpack
takes the fullest card, spread the emptiest, and among equal cards the one registered last
(score_test.go: uuid2).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import combinations
from typing import Final

from core.scoring.hami_devices import (
    GPU,
    PAIR_SCORE_ANNOTATION,
    REGISTER_ANNOTATION,
    Card,
    GpuRequest,
    container_gpu_requests,
    parse_pair_scores,
    parse_register,
)
from core.scoring.hami_scores import (
    DEFAULT_NODE_POLICY,
    NODE_POLICIES,
    REQUEST_TYPE,
    ScoringWeights,
    card_score,
    card_score_text,
    node_cards,
    node_policy_of,
    node_score,
    node_score_text,
    order_nodes,
    request_mem,
    seed_card_score,
    seed_node_score,
    to_hundredths,
)

__all__ = [
    "DEFAULT_NODE_POLICY",
    "GPU",
    "NODE_POLICIES",
    "PAIR_SCORE_ANNOTATION",
    "REGISTER_ANNOTATION",
    "Card",
    "GpuRequest",
    "ScoringWeights",
    "card_score",
    "container_gpu_requests",
    "node_cards",
    "node_policy_of",
    "node_score",
    "node_score_text",
    "order_nodes",
    "parse_pair_scores",
    "parse_register",
    "request_mem",
    "seed_card_score",
    "seed_node_score",
    "to_hundredths",
]

GPU_POLICIES: Final = ("binpack", "spread", "topology-aware", "mutex", "numa")
SORT_KEYS: Final = ("binpack", "spread", "numa")  # gpuSortKeyOrder; the rest are Fit filters
DEFAULT_GPU_POLICY: Final = "spread"
DEFAULT_WEIGHTS: Final = ScoringWeights()  # HAMi default 1/1/1


@dataclass(frozen=True, slots=True)
class Choice:
    """Cards chosen for a pod on one node, each with the card score that ranked it
    (``notes``); ``cards`` empty with ``reason`` when none fit."""

    cards: tuple[str, ...]
    reason: str = ""
    notes: tuple[str, ...] = ()


def card_refusal(card: Card, request: GpuRequest, mutex: bool = False) -> str | None:
    """Why HAMi's ``Fit`` skips ``card`` for one card of ``request`` (None: it fits), in
    Fit's order: health, cordon, slots, mutex, memory, cores, exclusive use, full cores."""
    cores = min(request.cores, 100)  # Fit caps a core request at 100
    mem = request.mem if request.mem > 0 else request_mem(card, request)
    if not card.health:
        return "unhealthy"
    if card.cordoned:
        return "cordoned (hami.io/device-cordon)"
    if card.count <= card.used:
        return "no free slot"
    if mutex and card.used > 0:
        return "in use (mutex)"
    if card.devmem - card.usedmem < mem:
        return "not enough memory"
    if card.devcore - card.usedcores < cores:
        return "not enough cores"
    if card.devcore == 100 and cores == 100 and card.used > 0:
        return "in use (whole card wanted)"
    if card.devcore and card.usedcores == card.devcore and cores == 0:
        return "all cores used"
    return None


def _is_chain(policy: tuple[str, ...]) -> bool:
    # DeviceUsageList.Less: a comma list, or a bare "numa", is compared key by key.
    return len(policy) > 1 or policy == ("numa",)


def sort_cards(
    cards: Sequence[Card], scores: Mapping[str, float], policy: tuple[str, ...]
) -> list[Card]:
    """``sort.Sort(DeviceUsageList)`` (gpu_policy.go Less); Fit then walks from the end. The
    sort is stable, as Go's is for the 12 or fewer cards of a node (insertion sort)."""
    if _is_chain(policy):
        keys = [k for i, k in enumerate(policy) if k in SORT_KEYS and k not in policy[:i]]
        keys = keys or ["spread"]

        def chained(c: Card) -> tuple[float, ...]:
            parts = {"binpack": scores[c.id], "spread": -scores[c.id], "numa": c.numa}
            return (*(parts[k] for k in keys), c.index)

        return sorted(cards, key=chained)
    single = policy[0] if policy else DEFAULT_GPU_POLICY
    if single == "mutex":
        return sorted(cards, key=lambda c: (-c.used, c.numa))
    sign = 1 if single == "binpack" else -1
    return sorted(cards, key=lambda c: (sign * scores[c.id], c.numa))


def _pair_total(group: Sequence[Card], pairs: Mapping[str, Mapping[str, int]]) -> int:
    return sum(pairs.get(a.id, {}).get(b.id, 0) for a, b in combinations(group, 2))


def worst_single_card(candidates: Sequence[Card], pairs: Mapping[str, Mapping[str, int]]) -> Card:
    """Single-card topology-aware choice: the card with the lowest total link score to the other
    candidates (``computeWorstSingleCard``); the first found wins a tie."""
    best, best_total = candidates[0], None
    for card in candidates:
        total = sum(pairs.get(card.id, {}).get(o.id, 0) for o in candidates if o.id != card.id)
        if best_total is None or total < best_total:
            best, best_total = card, total
    return best


def best_combination(
    candidates: Sequence[Card], nums: int, pairs: Mapping[str, Mapping[str, int]]
) -> tuple[Card, ...]:
    """Multi-card topology-aware choice: the combination with the highest sum of pair scores
    (``computeBestCombination``); combinations are enumerated in candidate order and the first
    found wins a tie."""
    best: tuple[Card, ...] = ()
    best_total = -1
    for group in combinations(candidates, nums):
        total = _pair_total(group, pairs)
        if total > best_total:
            best, best_total = group, total
    return best


def _choose_for_container(
    cards: list[Card],
    request: GpuRequest,
    policy: tuple[str, ...],
    pairs: Mapping[str, Mapping[str, int]],
    weights: ScoringWeights,
) -> tuple[Card, ...] | str:
    # getNodeResources: the cards whose type contains "nvidia" (any case) are candidates.
    candidates = [c for c in cards if REQUEST_TYPE.lower() in c.type.lower()]
    if request.nums > len(candidates):
        return f"{len(candidates)} NVIDIA card(s) registered, {request.nums} requested"
    scores = {c.id: card_score(c, request, weights) for c in candidates}
    mutex = "mutex" in policy
    walk = reversed(sort_cards(candidates, scores, policy))
    fitting = [c for c in walk if card_refusal(c, request, mutex) is None]
    if len(fitting) < request.nums:
        refused = [
            f"{c.id} {card_refusal(c, request, mutex)}" for c in candidates if c not in fitting
        ]
        return f"{len(fitting)} card(s) can take the request, {request.nums} needed ({', '.join(refused)})"
    if "topology-aware" not in policy or len(fitting) == request.nums:
        return tuple(fitting[: request.nums])
    if request.nums == 1:
        return (worst_single_card(fitting, pairs),)
    return best_combination(fitting, request.nums, pairs)


def _take(card: Card, request: GpuRequest) -> Card:
    return replace(
        card,
        used=card.used + 1,
        usedmem=card.usedmem + (request.mem if request.mem > 0 else request_mem(card, request)),
        usedcores=card.usedcores + min(request.cores, 100),
    )


def gpu_policy_of(chain: Sequence[str], default: str = DEFAULT_GPU_POLICY) -> tuple[str, ...]:
    """The pod's GPU policy chain, or the default (HAMi: spread)."""
    return tuple(chain) if chain else (default,)


def choose_gpus(
    cards: Sequence[Card],
    requests: Sequence[GpuRequest],
    policy: Sequence[str] = (DEFAULT_GPU_POLICY,),
    pairs: Mapping[str, Mapping[str, int]] | None = None,
    weights: ScoringWeights = DEFAULT_WEIGHTS,
) -> Choice:
    """The cards HAMi would give the pod's containers, in container order (usage updated after
    each container, as ``fitInDevices`` does on its copy of the node). ``policy`` is the
    ``hami.io/gpu-scheduler-policy`` chain."""
    pool = list(cards)
    chosen: list[str] = []
    notes: list[str] = []
    chain = tuple(policy)
    for i, request in enumerate(requests):
        result = _choose_for_container(pool, request, chain, pairs or {}, weights)
        if isinstance(result, str):
            return Choice((), f"container {i}: {result}")
        notes.extend(card_score_text(c, request, weights) for c in result)
        taken = {c.id for c in result}
        pool = [_take(c, request) if c.id in taken else c for c in pool]
        chosen.extend(c.id for c in result)
    return Choice(tuple(chosen), notes=tuple(notes))


def choose_pod_gpus(
    cards: Sequence[Card],
    init: Sequence[GpuRequest],
    app: Sequence[GpuRequest],
    policy: Sequence[str] = (DEFAULT_GPU_POLICY,),
    pairs: Mapping[str, Mapping[str, int]] | None = None,
    weights: ScoringWeights = DEFAULT_WEIGHTS,
) -> Choice:
    """The cards for the whole pod as ``scoreNode`` gives them: each init container on a copy
    of the node as it is (they run one at a time and release their cards), then the app
    containers on another copy; init cards first in the result."""
    chosen: list[str] = []
    notes: list[str] = []
    chain = tuple(policy)
    for i, request in enumerate(init):
        result = _choose_for_container(list(cards), request, chain, pairs or {}, weights)
        if isinstance(result, str):
            return Choice((), f"init container {i}: {result}")
        chosen.extend(c.id for c in result)
        notes.extend(card_score_text(c, request, weights) for c in result)
    got = choose_gpus(cards, app, policy, pairs, weights)
    if app and not got.cards:
        return got
    return Choice((*chosen, *got.cards), notes=(*notes, *got.notes))
