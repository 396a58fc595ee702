"""HAMi's scores, for `explain`'s ranking: the node score, the card score, the node policy
(binpack / spread), following HAMi's code at 4707fb0 (``pkg/scheduler/score.go``,
``policy/node_policy.go``, ``policy/gpu_policy.go``), and beside them the formulas of its
scheduler-policy design doc (seed 003) where they differ, for the reason texts. Which cards
HAMi picks is :mod:`core.scoring.hami`.

Where HAMi's code and the design doc differ, the code wins:

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

Scores are HAMi's float32 values; callers that need an integer use hundredths.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from core.scoring.hami_devices import (
    CORDON_ANNOTATION,
    REGISTER_ANNOTATION,
    Card,
    GpuRequest,
    cordoned_ids,
    parse_register,
)

REQUEST_TYPE: Final = "NVIDIA"  # nvidia.NvidiaGPUDevice: the type of every nvidia.com/gpu request

NODE_POLICIES: Final = ("binpack", "spread")
DEFAULT_NODE_POLICY: Final = "binpack"  # HAMi scheduler default (research §3.1)
WEIGHT: Final = 10  # HAMi util.Weight


@dataclass(frozen=True, slots=True)
class ScoringWeights:
    """``hami.io/device-scoring-weights`` (slot, core, memory); HAMi default 1/1/1."""

    slot: float = 1.0
    core: float = 1.0
    memory: float = 1.0


def node_cards(
    annotations: Mapping[str, str], usage: Mapping[str, tuple[int, int, int]]
) -> tuple[Card, ...]:
    """The node's registered cards with the bound pods' usage applied; () when HAMi
    registered nothing. Raises InvalidInput for a register HAMi cannot decode."""
    raw = annotations.get(REGISTER_ANNOTATION)
    if not raw:
        return ()
    cards = tuple(
        replace(c, used=u[0], usedmem=u[1], usedcores=u[2]) if (u := usage.get(c.id)) else c
        for c in parse_register(raw)
    )
    cordon = cordoned_ids(annotations.get(CORDON_ANNOTATION))
    if not cordon:
        return cards
    return tuple(replace(c, cordoned=True) if c.id in cordon else c for c in cards)


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
