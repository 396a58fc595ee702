"""HAMi's device data as HAMi itself decodes it (Project-HAMi/HAMi at 4707fb0):

- ``hami.io/node-nvidia-register`` on the Node: the cards. Current HAMi writes a JSON list of
  ``{"id", "index", "count", "devmem", "devcore", "type", "numa", "mode", "health"}``
  (``pkg/device/devices.go DeviceInfo``, ``MarshalNodeDevices``). Every field is
  ``omitempty`` and ``UnMarshalNodeDevices`` is a plain ``json.Unmarshal``, so an absent
  field is Go's zero value: a card without ``health`` is **unhealthy** (the device plugin
  writes false as nothing) and is skipped by ``Fit``; absent ``index``, ``numa``,
  ``count``, ``devmem``, ``devcore`` are 0. Older releases wrote
  ``id,count,devmem,devcore,type,numa,health[,index,mode]`` entries ended by ``:``
  (``EncodeNodeDevices``); numagate still reads that form, with its explicit health.
- ``hami.io/node-nvidia-score`` on the Node: pairwise link scores
  ``[{"uuid": "gpu0", "score": {"gpu1": 100}}]`` (numbers or numeric strings).
- ``hami.io/vgpu-devices-allocated`` on a pod HAMi placed: per container (``;``-separated,
  empty entries kept for index alignment) the cards it holds, ``uuid,type,usedmem,usedcores``
  each ended by ``:`` (``EncodePodSingleDevice``). The scheduler counts a pod on the node named
  by its ``hami.io/vgpu-node`` annotation (not ``spec.nodeName``) until it is Succeeded or
  Failed (``scheduler.go onAddPod``); ``CollapseInitContainerUsage`` takes, per card, the larger
  of the init containers' peak (one slot) and the app containers' sum (one slot each);
  ``getNodesUsage`` adds ``max(slots, 1)`` to the card's ``Used``. A pod whose allocation does
  not decode is ignored by HAMi (``DecodePodDevices`` error): :func:`pod_gpu_usage` raises so
  the inventory can report it, and the pod is then not counted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from core.errors import InvalidInput
from core.model import is_map

REGISTER_ANNOTATION: Final = "hami.io/node-nvidia-register"
# Node annotation, HAMi v2.10.0 nvidia/device.go DeviceCordonAnnotation: card UUIDs taken out
# of new allocations (running pods keep theirs).
CORDON_ANNOTATION: Final = "hami.io/device-cordon"
PAIR_SCORE_ANNOTATION: Final = "hami.io/node-nvidia-score"
ALLOCATED_ANNOTATION: Final = "hami.io/vgpu-devices-allocated"
VGPU_NODE_ANNOTATION: Final = "hami.io/vgpu-node"
GPU: Final = "nvidia.com/gpu"
GPUMEM: Final = "nvidia.com/gpumem"
GPUMEM_PERCENTAGE: Final = "nvidia.com/gpumem-percentage"
GPUCORES: Final = "nvidia.com/gpucores"
_FINISHED: Final = ("Succeeded", "Failed")
_GO_INT: Final = re.compile(r"[+-]?[0-9]+")  # strconv.ParseInt base 10


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
    health: bool = False  # omitempty: absent is false
    used: int = 0
    usedmem: int = 0
    usedcores: int = 0
    cordoned: bool = False  # listed in the node's hami.io/device-cordon (v2.10.0+)


@dataclass(frozen=True, slots=True)
class GpuRequest:
    """One container's HAMi GPU request: ``nums`` cards, each ``mem`` MiB (or
    ``mem_percent`` of the card) and ``cores`` percent."""

    nums: int
    mem: int = 0
    mem_percent: int | None = None
    cores: int = 0


# card id -> (slots, memory MiB, cores percent); the shape of NodeTopology.gpu_usage
Usage = dict[str, tuple[int, int, int]]


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
    if not is_map(entry):
        raise InvalidInput(f"{where} is {entry!r}, expected an object with id, count, devmem")
    card_id = entry.get("id")
    if not isinstance(card_id, str) or not card_id:
        raise InvalidInput(f"{where}: field 'id' is {card_id!r}, expected a non-empty string")
    health = entry.get("health", False)
    if not isinstance(health, bool):
        raise InvalidInput(f"{where}: field 'health' is {health!r}, expected true or false")
    card_type = entry.get("type", "")
    if not isinstance(card_type, str):
        raise InvalidInput(f"{where}: field 'type' is {card_type!r}, expected a string")
    return Card(
        id=card_id,
        index=_int_field(entry, "index", where, 0),
        count=_int_field(entry, "count", where, 0),
        devmem=_int_field(entry, "devmem", where, 0),
        devcore=_int_field(entry, "devcore", where, 0),
        type=card_type,
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


def cordoned_ids(value: str | None) -> frozenset[str]:
    """nvidia/device.go cordonedDevices: comma-separated UUIDs, each trimmed, empties skipped."""
    return frozenset(filter(None, (u.strip() for u in (value or "").split(","))))


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
        if not is_map(entry) or not isinstance(entry.get("uuid"), str):
            raise InvalidInput(f"{where} is {entry!r}, expected {{'uuid': str, 'score': {{}}}}")
        raw = entry.get("score") or {}
        if not is_map(raw):
            raise InvalidInput(f"{where}.score is {raw!r}, expected an object")
        scores[entry["uuid"]] = {str(k): _int_field(raw, k, f"{where}.score") for k in raw}
    return scores


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


# ---------------------------------------------------------------------------- pod usage


def _container_devices(text: str, where: str) -> list[tuple[str, int, int]]:
    """DecodeContainerDevices: ``:``-separated entries; only entries with a comma count."""
    devices = []
    for entry in text.split(":"):
        if "," not in entry:
            continue
        items = entry.split(",")
        if len(items) < 4:
            raise InvalidInput(
                f"{where}: entry {entry!r} has {len(items)} fields, expected "
                "uuid,type,usedmem,usedcores"
            )
        numbers = [items[2], items[3]]
        if not all(_GO_INT.fullmatch(n) for n in numbers):
            raise InvalidInput(f"{where}: entry {entry!r}: usedmem and usedcores must be integers")
        devices.append((items[0], int(items[2]), int(items[3])))
    return devices


def pod_gpu_usage(pod: Mapping[str, Any]) -> tuple[str, Usage] | None:
    """``(node, per-card usage)`` HAMi counts for ``pod``, or None when it counts nothing (no
    ``hami.io/vgpu-node``, Succeeded/Failed, no allocation). Raises InvalidInput, naming the
    annotation, when the allocation does not decode (HAMi then ignores the pod)."""
    meta = pod.get("metadata")
    annotations = meta.get("annotations") if is_map(meta) else None
    if not is_map(annotations):
        return None
    node, allocated = annotations.get(VGPU_NODE_ANNOTATION), annotations.get(ALLOCATED_ANNOTATION)
    status = pod.get("status")
    if is_map(status) and status.get("phase") in _FINISHED:
        return None
    if not isinstance(node, str) or not node or not isinstance(allocated, str):
        return None
    spec = pod.get("spec")
    inits = spec.get("initContainers") if is_map(spec) else None
    n_init = len(inits) if isinstance(inits, list) else 0
    where = f"metadata.annotations[{ALLOCATED_ANNOTATION}]"
    peak: dict[str, list[int]] = {}  # init containers: max mem, max cores, 1 slot
    total: dict[str, list[int]] = {}  # app containers: summed, one slot per entry
    for index, text in enumerate(allocated.split(";")):
        for uuid, mem, cores in _container_devices(text, where):
            if index < n_init:
                got = peak.setdefault(uuid, [1, 0, 0])
                got[1], got[2] = max(got[1], mem), max(got[2], cores)
            else:
                got = total.setdefault(uuid, [0, 0, 0])
                got[0], got[1], got[2] = got[0] + 1, got[1] + mem, got[2] + cores
    usage: Usage = {}
    for uuid in sorted(peak.keys() | total.keys()):
        a, b = peak.get(uuid, [0, 0, 0]), total.get(uuid, [0, 0, 0])
        usage[uuid] = (max(a[0], b[0], 1), max(a[1], b[1]), max(a[2], b[2]))
    return node, usage


def add_usage(into: Usage, usage: Mapping[str, tuple[int, int, int]], sign: int = 1) -> None:
    """Add (``sign`` 1) or take back (-1) one pod's usage in a node's per-card totals."""
    for uuid, (slots, mem, cores) in usage.items():
        old = into.get(uuid, (0, 0, 0))
        new = (old[0] + sign * slots, old[1] + sign * mem, old[2] + sign * cores)
        if new == (0, 0, 0):
            into.pop(uuid, None)
        else:
            into[uuid] = new
