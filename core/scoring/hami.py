"""HAMi's own scoring, for `explain`: the node score and node policy (binpack / spread) and the
GPU cards HAMi would pick on a node (binpack, spread, mutex, numa chains, topology-aware),
following HAMi's code at 4707fb0 (``pkg/scheduler/score.go``, ``policy/node_policy.go``,
``policy/gpu_policy.go``, ``pkg/device/nvidia/device.go``). Device data and the bound pods'
usage are decoded in :mod:`core.scoring.hami_devices`; the inventory puts the usage in
``NodeTopology.gpu_usage``.

Where HAMi's code and its scheduler-policy design doc (seed 003) differ, the code wins:

- Node score: ``10 * (Σused/Σcount + Σusedcores/Σtotalcore + Σusedmem/Σtotalmem)`` over all
  the node's cards, from what bound pods already hold: ``scoreNode`` computes it before it
  places the pod (score_test.go: 15 for a card at 5/10 slots, 50% cores, 4000/8000 MiB). The
  doc's ``((request + used) / allocatable) * 10`` adds the pod and has one term. 0 when any
  total is 0.
- Card score: ``10 * (slot*(req+used)/count + core*(reqcores+usedcores)/totalcore +
  memory*(reqmem+usedmem)/totalmem)``, where the request terms count only when the request's
  type equals the card's registered ``type`` exactly. Every ``nvidia.com/gpu`` request has
  type ``NVIDIA`` while the device plugin registers the model (``NVIDIA A100-SXM4-80GB``), so
  on real nodes the card score is its usage alone. The doc's formula has no slot term and
  always adds the request (its 6.75 / 17.75).
- Card choice: the cards are sorted (spread: higher score first; binpack: lower first; ties by
  NUMA id; comma chains by their keys, then index) and ``Fit`` walks the list from its end, so
  binpack takes the fullest card, spread the emptiest, and among equal cards the one
  registered last (score_test.go: uuid2).

Scores are HAMi's float32 values; callers that need an integer use hundredths.
"""

from __future__ import annotations

import struct
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

__all__ = [
    "GPU",
    "PAIR_SCORE_ANNOTATION",
    "REGISTER_ANNOTATION",
    "Card",
    "GpuRequest",
    "container_gpu_requests",
    "parse_pair_scores",
]

REQUEST_TYPE: Final = "NVIDIA"  # nvidia.NvidiaGPUDevice: the type of every nvidia.com/gpu request

NODE_POLICIES: Final = ("binpack", "spread")
GPU_POLICIES: Final = ("binpack", "spread", "topology-aware", "mutex", "numa")
SORT_KEYS: Final = ("binpack", "spread", "numa")  # gpuSortKeyOrder; the rest are Fit filters
DEFAULT_NODE_POLICY: Final = "binpack"  # HAMi scheduler default (research §3.1)
DEFAULT_GPU_POLICY: Final = "spread"
WEIGHT: Final = 10  # HAMi util.Weight


@dataclass(frozen=True, slots=True)
class ScoringWeights:
    """``hami.io/device-scoring-weights`` (slot, core, memory); HAMi default 1/1/1."""

    slot: float = 1.0
    core: float = 1.0
    memory: float = 1.0


@dataclass(frozen=True, slots=True)
class Choice:
    """Cards chosen for a pod on one node, each with the card score that ranked it
    (``notes``); ``cards`` empty with ``reason`` when none fit."""

    cards: tuple[str, ...]
    reason: str = ""
    notes: tuple[str, ...] = ()


def node_cards(
    annotations: Mapping[str, str], usage: Mapping[str, tuple[int, int, int]]
) -> tuple[Card, ...]:
    """The node's registered cards with the bound pods' usage applied; () when HAMi
    registered nothing. Raises InvalidInput for a register HAMi cannot decode."""
    raw = annotations.get(REGISTER_ANNOTATION)
    if not raw:
        return ()
    return tuple(
        replace(c, used=u[0], usedmem=u[1], usedcores=u[2]) if (u := usage.get(c.id)) else c
        for c in parse_register(raw)
    )


# ---------------------------------------------------------------------------- scores


def _f32(value: float) -> float:
    """Round to float32, as HAMi computes its scores (ties between cards depend on it)."""
    return struct.unpack("f", struct.pack("f", value))[0]


def _div(numerator: int, denominator: int) -> float:
    return _f32(_f32(numerator) / _f32(denominator))


def request_mem(card: Card, request: GpuRequest) -> int:
    if request.mem_percent is not None and request.mem_percent not in (0, 101):
        return card.devmem * request.mem_percent // 100
    return request.mem


def _card_terms(card: Card, request: GpuRequest) -> tuple[int, int, int]:
    # ComputeScore: the request counts only for a card whose type is exactly the request's.
    if card.type == REQUEST_TYPE:
        return 1, request.cores, request_mem(card, request)
    return 0, 0, 0


def card_score(
    card: Card, request: GpuRequest, weights: ScoringWeights = ScoringWeights()
) -> float:
    """HAMi device score (``gpu_policy.go ComputeScore``), 0 for a card with no slots, cores
    or memory registered."""
    if not card.count or not card.devcore or not card.devmem:
        return 0.0
    req, cores, mem = _card_terms(card, request)
    slot = _f32(_f32(weights.slot) * _div(req + card.used, card.count))
    core = _f32(_f32(weights.core) * _div(cores + card.usedcores, card.devcore))
    memory = _f32(_f32(weights.memory) * _div(mem + card.usedmem, card.devmem))
    return _f32(WEIGHT * _f32(_f32(slot + core) + memory))


def card_score_text(card: Card, request: GpuRequest, weights: ScoringWeights) -> str:
    req, cores, mem = _card_terms(card, request)
    w = (
        ""
        if weights == ScoringWeights()
        else f" weights {weights.slot:g}/{weights.core:g}/{weights.memory:g}"
    )
    return (
        f"{card.id} 10*(({req}+{card.used})/{card.count} + ({cores}+{card.usedcores})/"
        f"{card.devcore} + ({mem}+{card.usedmem})/{card.devmem}){w} = "
        f"{card_score(card, request, weights):.2f}{_seed_card_note(card, request, weights)}"
    )


def _seed_card_note(card: Card, request: GpuRequest, weights: ScoringWeights) -> str:
    seed = seed_card_score(card, request)
    if round(seed, 2) == round(card_score(card, request, weights), 2):
        return ""
    return f" (seed 003's formula, without the slot term and always adding the request: {seed:.2f})"


def seed_card_score(card: Card, request: GpuRequest) -> float:
    """Seed 003's card score: ``((req.core+used.core)/alloc.core + (req.mem+used.mem)/
    alloc.mem) * 10`` (no slot term; the request always added)."""
    if not card.devcore or not card.devmem:
        return 0.0
    return WEIGHT * (
        (request.cores + card.usedcores) / card.devcore
        + (request_mem(card, request) + card.usedmem) / card.devmem
    )


def _totals(cards: Sequence[Card]) -> tuple[int, int, int, int, int, int]:
    return (
        sum(c.used for c in cards),
        sum(c.count for c in cards),
        sum(c.usedcores for c in cards),
        sum(c.devcore for c in cards),
        sum(c.usedmem for c in cards),
        sum(c.devmem for c in cards),
    )


def node_score(cards: Sequence[Card]) -> float:
    """HAMi's node score (``node_policy.go ComputeDefaultScore``) from the cards' usage before
    the pod is placed; 0 when the node registers no slots, cores or memory."""
    used, total, cores, total_cores, mem, total_mem = _totals(cards)
    if not total or not total_cores or not total_mem:
        return 0.0
    terms = _f32(_f32(_div(used, total) + _div(cores, total_cores)) + _div(mem, total_mem))
    return _f32(WEIGHT * terms)


def seed_node_score(cards: Sequence[Card], requests: Sequence[GpuRequest]) -> float:
    """Seed 003's node score ``((request + used) / allocatable) * 10`` in vGPU slots."""
    used, total = sum(c.used for c in cards), sum(c.count for c in cards)
    return WEIGHT * (sum(r.nums for r in requests) + used) / total if total else 0.0


def node_score_text(cards: Sequence[Card], requests: Sequence[GpuRequest]) -> str:
    """The node score with its numbers, and seed 003's value when it differs."""
    used, total, cores, total_cores, mem, total_mem = _totals(cards)
    score = node_score(cards)
    text = (
        f"hami node score 10*(used {used}/{total} + cores {cores}/{total_cores} + "
        f"memory {mem}/{total_mem} MiB) = {score:.2f} (what bound pods hold; score.go "
        "scores before placing the pod)"
    )
    seed = seed_node_score(cards, requests)
    if requests and round(seed, 2) != round(score, 2):
        text += (
            f"; seed 003's ((request+used)/allocatable)*10 gives {seed:.2f}: numagate follows "
            "HAMi's code (three terms, pod not added)"
        )
    return text


def node_policy_of(pod_policy: str | None, default: str = DEFAULT_NODE_POLICY) -> str:
    """HAMi treats anything other than ``spread`` as binpack (``node_policy.go Less``)."""
    policy = pod_policy or default
    return "spread" if policy == "spread" else "binpack"


def order_nodes(scores: Mapping[str, float], policy: str) -> list[str]:
    """Best node first: binpack the fullest (highest score), spread the emptiest; ties by name."""
    sign = 1 if policy == "spread" else -1
    return sorted(scores, key=lambda name: (sign * scores[name], name))


def to_hundredths(score: float) -> int:
    return round(score * 100)


# ---------------------------------------------------------------------------- card choice


def card_refusal(card: Card, request: GpuRequest, mutex: bool = False) -> str | None:
    """Why HAMi's ``Fit`` skips ``card`` for one card of ``request`` (None: it fits), in
    Fit's order: health, slots, mutex, memory, cores, exclusive use, full cores."""
    cores = min(request.cores, 100)  # Fit caps a core request at 100
    mem = request.mem if request.mem > 0 else request_mem(card, request)
    if not card.health:
        return "unhealthy"
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
    weights: ScoringWeights = ScoringWeights(),
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
    weights: ScoringWeights = ScoringWeights(),
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
