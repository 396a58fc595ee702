"""HAMi's own scoring, for `explain`: node policy (binpack / spread) and the GPU cards HAMi
would pick on a node (binpack, spread, mutex, numa, topology-aware).

Inputs are HAMi's own node annotations (research upstream-schedulers §3.1, §3.4):

- ``hami.io/node-nvidia-register``: the cards of the node. Current HAMi writes a JSON list
  of ``{"id", "index", "count", "devmem", "devcore", "type", "numa", "mode", "health"}``
  (``MarshalNodeDevices``); older releases wrote ``id,count,devmem,devcore,type,numa,health``
  (optionally ``,index,mode``) entries each ended by ``:`` (``EncodeNodeDevices``). Both are read.
  ``count`` is the card's vGPU slots, ``devmem`` MiB, ``devcore`` percent (100).
- ``hami.io/node-nvidia-score``: pairwise link scores, a JSON list of
  ``{"uuid": "gpu0", "score": {"gpu1": 100, ...}}`` (``DeviceScore``; values may be numbers
  or numeric strings, as the design doc prints them).

Per-card usage is not on the node in HAMi (the scheduler sums its pods'
``hami.io/vgpu-devices-allocated``). numagate reads it from :data:`USAGE_ANNOTATION`, which the
inventory fills from bound pods with :func:`usage_from_pods` and :func:`encode_usage`.

Scores are HAMi's floats; callers that need an integer use hundredths (:func:`to_hundredths`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import combinations
from typing import Any, Final

from core.errors import InvalidInput

REGISTER_ANNOTATION: Final = "hami.io/node-nvidia-register"
PAIR_SCORE_ANNOTATION: Final = "hami.io/node-nvidia-score"
ALLOCATED_ANNOTATION: Final = "hami.io/vgpu-devices-allocated"
VGPU_NODE_ANNOTATION: Final = "hami.io/vgpu-node"
# numagate's own node annotation carrying per-card usage (JSON list of CardUsage fields).
USAGE_ANNOTATION: Final = "numagate.io/hami-gpu-usage"

GPU: Final = "nvidia.com/gpu"
GPUMEM: Final = "nvidia.com/gpumem"
GPUMEM_PERCENTAGE: Final = "nvidia.com/gpumem-percentage"
GPUCORES: Final = "nvidia.com/gpucores"

NODE_POLICIES: Final = ("binpack", "spread")
GPU_POLICIES: Final = ("binpack", "spread", "topology-aware", "mutex", "numa")
DEFAULT_NODE_POLICY: Final = "binpack"  # HAMi scheduler default (research §3.1)
DEFAULT_GPU_POLICY: Final = "spread"
WEIGHT: Final = 10  # HAMi util.Weight


@dataclass(frozen=True, slots=True)
class Card:
    """One physical GPU from the register annotation, with its current usage."""

    id: str
    index: int
    count: int  # vGPU slots
    devmem: int  # MiB
    devcore: int  # percent
    type: str = ""
    numa: int = 0
    health: bool = True
    used: int = 0
    usedmem: int = 0
    usedcores: int = 0


@dataclass(frozen=True, slots=True)
class CardUsage:
    used: int = 0
    usedmem: int = 0
    usedcores: int = 0


@dataclass(frozen=True, slots=True)
class GpuRequest:
    """One container's HAMi GPU request: ``nums`` cards, each ``mem`` MiB (or
    ``mem_percent`` of the card) and ``cores`` percent."""

    nums: int
    mem: int = 0
    mem_percent: int | None = None
    cores: int = 0


@dataclass(frozen=True, slots=True)
class ScoringWeights:
    """``hami.io/device-scoring-weights`` (slot, core, memory); HAMi default 1/1/1."""

    slot: float = 1.0
    core: float = 1.0
    memory: float = 1.0


@dataclass(frozen=True, slots=True)
class Choice:
    """Cards chosen for a pod on one node; ``cards`` empty with ``reason`` when none fit."""

    cards: tuple[str, ...]
    reason: str = ""


# ---------------------------------------------------------------------------- parsing


def _int_field(entry: Mapping[str, Any], key: str, where: str, default: int | None = None) -> int:
    value = entry.get(key, default)
    if isinstance(value, bool) or value is None:
        raise InvalidInput(f"{where}: field {key!r} is {value!r}, expected an integer")
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            raise InvalidInput(
                f"{where}: field {key!r} is {value!r}, expected an integer"
            ) from None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise InvalidInput(f"{where}: field {key!r} is {value!r}, expected an integer")


def _card_from_json(entry: object, position: int) -> Card:
    where = f"{REGISTER_ANNOTATION}[{position}]"
    if not isinstance(entry, Mapping):
        raise InvalidInput(f"{where} is {entry!r}, expected an object with id, count, devmem")
    card_id = entry.get("id")
    if not isinstance(card_id, str) or not card_id:
        raise InvalidInput(f"{where}: field 'id' is {card_id!r}, expected a non-empty string")
    health = entry.get("health", True)
    if not isinstance(health, bool):
        raise InvalidInput(f"{where}: field 'health' is {health!r}, expected true or false")
    return Card(
        id=card_id,
        index=_int_field(entry, "index", where, position),
        count=_int_field(entry, "count", where),
        devmem=_int_field(entry, "devmem", where),
        devcore=_int_field(entry, "devcore", where, 100),
        type=str(entry.get("type", "")),
        numa=_int_field(entry, "numa", where, 0),
        health=health,
    )


def _card_from_legacy(segment: str, position: int) -> Card:
    # EncodeNodeDevices: id,count,devmem,devcore,type,numa,health[,index,mode]
    where = f"{REGISTER_ANNOTATION} entry {position} ({segment!r})"
    items = segment.split(",")
    if len(items) not in (7, 9):
        raise InvalidInput(
            f"{where} has {len(items)} fields, expected 7 (id,count,devmem,devcore,type,numa,"
            "health) or 9 (… ,index,mode)"
        )
    fields = dict(zip(("id", "count", "devmem", "devcore", "type", "numa"), items, strict=False))
    health_text = items[6].strip().lower()
    if health_text not in ("true", "false", "1", "0", "t", "f"):
        raise InvalidInput(f"{where}: health {items[6]!r} is not a boolean")
    return Card(
        id=items[0],
        index=_int_field({"i": items[7]}, "i", where) if len(items) == 9 else position,
        count=_int_field(fields, "count", where),
        devmem=_int_field(fields, "devmem", where),
        devcore=_int_field(fields, "devcore", where),
        type=items[4],
        numa=_int_field(fields, "numa", where),
        health=health_text in ("true", "1", "t"),
    )


def parse_register(value: str) -> tuple[Card, ...]:
    """Parse ``hami.io/node-nvidia-register`` (JSON list, or the older ``:``-separated form)."""
    text = value.strip()
    if text.startswith("["):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise InvalidInput(f"{REGISTER_ANNOTATION} is not valid JSON: {exc}") from None
        return tuple(_card_from_json(entry, i) for i, entry in enumerate(data))
    segments = [s for s in text.split(":") if s.strip()]
    if not segments:
        raise InvalidInput(f"{REGISTER_ANNOTATION} is {value!r}: no devices")
    return tuple(_card_from_legacy(s.strip(), i) for i, s in enumerate(segments))


def parse_pair_scores(value: str) -> dict[str, dict[str, int]]:
    """Parse ``hami.io/node-nvidia-score`` into ``{uuid: {other_uuid: score}}``."""
    try:
        data = json.loads(value)
    except ValueError as exc:
        raise InvalidInput(f"{PAIR_SCORE_ANNOTATION} is not valid JSON: {exc}") from None
    if not isinstance(data, list):
        raise InvalidInput(f"{PAIR_SCORE_ANNOTATION} is {data!r}, expected a list")
    scores: dict[str, dict[str, int]] = {}
    for i, entry in enumerate(data):
        where = f"{PAIR_SCORE_ANNOTATION}[{i}]"
        if not isinstance(entry, Mapping) or not isinstance(entry.get("uuid"), str):
            raise InvalidInput(f"{where} is {entry!r}, expected {{'uuid': str, 'score': {{}}}}")
        raw = entry.get("score") or {}
        if not isinstance(raw, Mapping):
            raise InvalidInput(f"{where}.score is {raw!r}, expected an object")
        scores[entry["uuid"]] = {str(k): _int_field(raw, k, f"{where}.score") for k in raw}
    return scores


def parse_usage(value: str) -> dict[str, CardUsage]:
    """Parse :data:`USAGE_ANNOTATION`: ``[{"id", "used", "usedmem", "usedcores"}]``."""
    try:
        data = json.loads(value)
    except ValueError as exc:
        raise InvalidInput(f"{USAGE_ANNOTATION} is not valid JSON: {exc}") from None
    if not isinstance(data, list):
        raise InvalidInput(f"{USAGE_ANNOTATION} is {data!r}, expected a list")
    usage: dict[str, CardUsage] = {}
    for i, entry in enumerate(data):
        where = f"{USAGE_ANNOTATION}[{i}]"
        if not isinstance(entry, Mapping) or not isinstance(entry.get("id"), str):
            raise InvalidInput(f"{where} is {entry!r}, expected an object with an 'id'")
        usage[entry["id"]] = CardUsage(
            used=_int_field(entry, "used", where, 0),
            usedmem=_int_field(entry, "usedmem", where, 0),
            usedcores=_int_field(entry, "usedcores", where, 0),
        )
    return usage


def encode_usage(usage: Mapping[str, CardUsage]) -> str:
    """The value of :data:`USAGE_ANNOTATION` for ``usage`` (sorted by card id)."""
    return json.dumps(
        [
            {"id": k, "used": u.used, "usedmem": u.usedmem, "usedcores": u.usedcores}
            for k, u in sorted(usage.items())
        ],
        separators=(",", ":"),
    )


def usage_from_pods(pods: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, CardUsage]]:
    """Per node, per card usage from bound pods' ``hami.io/vgpu-devices-allocated``
    (containers separated by ``;``, cards by ``:``, each ``uuid,type,usedmem,usedcores``).
    Pods that finished (Succeeded/Failed) hold nothing."""
    result: dict[str, dict[str, CardUsage]] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        allocated = annotations.get(ALLOCATED_ANNOTATION)
        if not isinstance(allocated, str) or not allocated.strip():
            continue
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        node = (pod.get("spec") or {}).get("nodeName") or annotations.get(VGPU_NODE_ANNOTATION)
        if not node:
            continue
        per_node = result.setdefault(str(node), {})
        for container in allocated.split(";"):
            for device in container.split(":"):
                if device.strip():
                    _add_allocation(per_node, device.strip(), str(meta.get("name", "?")))
    return result


def _add_allocation(per_node: dict[str, CardUsage], device: str, pod_name: str) -> None:
    items = device.split(",")
    where = f"pod {pod_name}: {ALLOCATED_ANNOTATION} entry {device!r}"
    if len(items) < 4:
        raise InvalidInput(f"{where} has {len(items)} fields, expected uuid,type,usedmem,usedcores")
    mem = _int_field({"m": items[2]}, "m", where)
    cores = _int_field({"c": items[3]}, "c", where)
    old = per_node.get(items[0], CardUsage())
    per_node[items[0]] = CardUsage(old.used + 1, old.usedmem + mem, old.usedcores + cores)


def node_cards(annotations: Mapping[str, str]) -> tuple[Card, ...]:
    """The node's cards with their usage applied; () when HAMi registered nothing."""
    raw = annotations.get(REGISTER_ANNOTATION)
    if not raw:
        return ()
    cards = parse_register(raw)
    usage_raw = annotations.get(USAGE_ANNOTATION)
    usage = parse_usage(usage_raw) if usage_raw else {}
    return tuple(
        replace(c, used=u.used, usedmem=u.usedmem, usedcores=u.usedcores)
        if (u := usage.get(c.id))
        else c
        for c in cards
    )


# ---------------------------------------------------------------------------- requests


def container_gpu_requests(
    containers: Sequence[tuple[Mapping[str, int], Mapping[str, int]]],
) -> list[GpuRequest]:
    """HAMi requests of each container from ``(requests, limits)``: limits first, requests as
    fallback (research §3.2). A container with gpumem/gpucores but no count gets 1 card and a
    whole-card request (no gpumem, no percentage) gets 100% memory and 100 cores, as HAMi's
    webhook adds them (PR #1354)."""
    result = []
    for requests, limits in containers:
        nums, mem, pct, cores = (
            limits.get(name, requests.get(name))
            for name in (GPU, GPUMEM, GPUMEM_PERCENTAGE, GPUCORES)
        )
        if not nums and not (mem or pct or cores):
            continue
        whole = not mem and not pct
        result.append(
            GpuRequest(
                nums=nums or 1,
                mem=mem or 0,
                mem_percent=100 if whole else pct,
                cores=(100 if whole else 0) if cores is None else cores,
            )
        )
    return result


# ---------------------------------------------------------------------------- scores


def _ratio(numerator: float, denominator: float) -> float:
    # HAMi divides by zero-capacity devices as 0 contribution (node_policy_test "zero capacity").
    return numerator / denominator if denominator > 0 else 0.0


def request_mem(card: Card, request: GpuRequest) -> int:
    if request.mem_percent is not None and request.mem_percent not in (0, 101):
        return card.devmem * request.mem_percent // 100
    return request.mem


def card_score(
    card: Card, request: GpuRequest, weights: ScoringWeights = ScoringWeights()
) -> float:
    """HAMi device score (``gpu_policy.go ComputeScore``): ``10 * (slot*(1+used)/count +
    core*(cores+usedcores)/devcore + memory*(mem+usedmem)/devmem)`` for one card of the request.
    The seed's worked example (6.75 / 17.75) is the core and memory terms: slot weight 0."""
    return WEIGHT * (
        weights.slot * _ratio(1 + card.used, card.count)
        + weights.core * _ratio(request.cores + card.usedcores, card.devcore)
        + weights.memory * _ratio(request_mem(card, request) + card.usedmem, card.devmem)
    )


def node_score(cards: Sequence[Card], requests: Sequence[GpuRequest]) -> float:
    """HAMi node score after placing the pod: ``10 * ((req+used)/total + (reqCores+usedCores)/
    totalCores + (reqMem+usedMem)/totalMem)`` over the node's cards (``node_policy.go``,
    seed: ``((request + used) / allocatable) * 10``). A term whose total is 0 contributes 0."""
    total = sum(c.count for c in cards)
    total_cores = sum(c.devcore for c in cards)
    total_mem = sum(c.devmem for c in cards)
    req = sum(r.nums for r in requests)
    req_cores = sum(r.nums * r.cores for r in requests)
    # Memory requested as a percentage is taken of the first card (cards are alike on a node).
    req_mem = sum(r.nums * request_mem(cards[0], r) for r in requests) if cards else 0
    return WEIGHT * (
        _ratio(req + sum(c.used for c in cards), total)
        + _ratio(req_cores + sum(c.usedcores for c in cards), total_cores)
        + _ratio(req_mem + sum(c.usedmem for c in cards), total_mem)
    )


def count_score(request: int, used: int, allocatable: int) -> float:
    """The seed's node score when only counts are known: ``((request + used) / allocatable) * 10``."""
    return WEIGHT * _ratio(request + used, allocatable)


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


def fits_card(card: Card, request: GpuRequest) -> bool:
    """HAMi's per-card checks: healthy, a free slot, memory and cores left, and a card held
    exclusively (all cores used) or a whole-card request only on an untouched card."""
    if not card.health or card.used + 1 > card.count:
        return False
    if request_mem(card, request) + card.usedmem > card.devmem:
        return False
    if request.cores + card.usedcores > card.devcore:
        return False
    if card.devcore and card.usedcores >= card.devcore:
        return False
    return not (request.cores >= card.devcore and card.used > 0)


def _preference(policy: tuple[str, ...], card: Card, score: float) -> tuple[float, ...]:
    """Sort key, smallest preferred. ``numa`` in the chain makes the NUMA id the primary key;
    binpack prefers the highest score, spread (HAMi's default) the lowest; mutex prefers idle
    cards; index breaks ties (research §3.5 TestDeviceUsageList_Less)."""
    key: list[float] = []
    if "numa" in policy:
        key.append(card.numa)
    if "mutex" in policy:
        key.append(1 if card.used else 0)
    if "binpack" in policy:
        key.append(-score)
    elif "spread" in policy or "mutex" in policy or "numa" not in policy:
        key.append(score)
    key.extend((card.numa, card.index))
    return tuple(key)


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
    fitting = [c for c in cards if fits_card(c, request)]
    if len(fitting) < request.nums:
        return f"{len(fitting)} card(s) can take the request, {request.nums} needed"
    if "topology-aware" in policy:
        # HAMi's Fit walks its device list from the tail, so candidates come in descending
        # index order; this is what makes the seed's 3-GPU example pick gpu1,gpu2,gpu3.
        ordered = sorted(fitting, key=lambda c: c.index, reverse=True)
        if request.nums == 1:
            return (worst_single_card(ordered, pairs),)
        return best_combination(ordered, request.nums, pairs)
    ranked = sorted(fitting, key=lambda c: _preference(policy, c, card_score(c, request, weights)))
    return tuple(ranked[: request.nums])


def _take(card: Card, request: GpuRequest) -> Card:
    return replace(
        card,
        used=card.used + 1,
        usedmem=card.usedmem + request_mem(card, request),
        usedcores=card.usedcores + request.cores,
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
    each container). ``policy`` is the ``hami.io/gpu-scheduler-policy`` chain."""
    pool = list(cards)
    chosen: list[str] = []
    chain = tuple(policy)
    for i, request in enumerate(requests):
        result = _choose_for_container(pool, request, chain, pairs or {}, weights)
        if isinstance(result, str):
            return Choice((), f"container {i}: {result}")
        taken = {c.id for c in result}
        pool = [_take(c, request) if c.id in taken else c for c in pool]
        chosen.extend(c.id for c in result)
    return Choice(tuple(chosen))
