"""Bound pods: what they hold per NUMA node, and Koordinator's NUMA node states
(core/inventory/build.py describes the rules)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from core.errors import InvalidInput
from core.inventory.cpuset import parse_cpuset
from core.inventory.node import resource_list
from core.inventory.nrt import Reporter, Units, is_map, json_object

KOORD_RESOURCE_STATUS: Final = "scheduling.koordinator.sh/resource-status"
KOORD_NUMA_SPEC: Final = "scheduling.koordinator.sh/numa-topology-spec"
VOLCANO_DECISION: Final = "volcano.sh/topology-decision"
_FINISHED_PHASES: Final = ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class PodUsage:
    """One bound pod's per-NUMA holding on ``node``."""

    report: Reporter
    node: str
    usage: Mapping[int, Mapping[str, int]]
    numas: tuple[int, ...]  # sorted NUMA ids it uses
    exclusive: bool  # exclusive cpuset or SingleNUMANode spec (Koordinator states)


@dataclass(slots=True)
class NodeUsage:
    """What the bound pods of one node hold, summed."""

    held: dict[int, dict[str, int]]
    single: set[int]
    shared: set[int]

    @classmethod
    def of(cls, pods: Iterable[PodUsage]) -> NodeUsage:
        out = cls({}, set(), set())
        for pod in pods:
            for numa, resources in pod.usage.items():
                held = out.held.setdefault(numa, {})
                for resource, amount in resources.items():
                    held[resource] = held.get(resource, 0) + amount
            if pod.exclusive:
                if len(pod.numas) == 1:
                    out.single.add(pod.numas[0])
                else:
                    out.shared.update(pod.numas)
        return out

    def state(self, numa: int) -> str:
        """Koordinator's NUMANodeSharedStatus: shared wins over single."""
        if numa in self.shared:
            return "shared"
        if numa in self.single:
            return "single"
        return "idle"


def parse_pod(obj: Mapping[str, Any], report: Reporter, units: Units) -> PodUsage | None:
    """The pod's holding, or None when it holds nothing placeable (not bound, finished,
    no per-NUMA data)."""
    spec = obj.get("spec") if is_map(obj.get("spec")) else {}
    status = obj.get("status") if is_map(obj.get("status")) else {}
    node = spec.get("nodeName")
    if not isinstance(node, str) or not node or status.get("phase") in _FINISHED_PHASES:
        return None  # not holding node resources
    annotations = obj["metadata"].get("annotations")
    if not is_map(annotations):
        return None
    usage, exclusive = _pod_usage(annotations, report, units)
    if usage is None:
        return None
    exclusive = exclusive or _single_numa_spec(annotations.get(KOORD_NUMA_SPEC))
    return PodUsage(report, node, usage, tuple(sorted(usage)), exclusive)


def _pod_usage(
    annotations: Mapping[str, Any], report: Reporter, units: Units
) -> tuple[dict[int, dict[str, int]] | None, bool]:
    """Per-NUMA usage of one pod, and whether it holds an exclusive cpuset."""
    if KOORD_RESOURCE_STATUS in annotations:
        path = f"metadata.annotations[{KOORD_RESOURCE_STATUS}]"
        data = json_object(annotations[KOORD_RESOURCE_STATUS], path, report)
        if data is None:
            return None, False
        usage = _numa_list(units, data.get("numaNodeResources"), path, report)
        cpuset = data.get("cpuset")
        exclusive = False
        if cpuset:
            try:
                exclusive = bool(parse_cpuset(cpuset))
            except InvalidInput as exc:
                report.error(f"{path}.cpuset", str(exc))
        return usage, exclusive
    if VOLCANO_DECISION in annotations:
        path = f"metadata.annotations[{VOLCANO_DECISION}]"
        data = json_object(annotations[VOLCANO_DECISION], path, report)
        if data is None:
            return None, False
        return _numa_map(units, data.get("numa"), f"{path}.numa", report), False
    return None, False


def _numa_list(
    units: Units, entries: object, path: str, report: Reporter
) -> dict[int, dict[str, int]] | None:
    if entries is None:
        return None
    if not isinstance(entries, list):
        report.error(f"{path}.numaNodeResources", "must be a list of {node, resources}")
        return None
    out: dict[int, dict[str, int]] = {}
    for i, entry in enumerate(entries):
        here = f"{path}.numaNodeResources[{i}]"
        numa = entry.get("node", 0) if is_map(entry) else None
        if not _numa_id(numa):
            report.error(f"{here}.node", f"{numa!r} is not a NUMA id between 0 and 63")
            return None
        resources, ok = resource_list(units, entry.get("resources"), f"{here}.resources", report)
        if not ok:
            return None
        out[int(numa)] = resources  # type: ignore[arg-type]
    return out


def _numa_map(
    units: Units, raw: object, path: str, report: Reporter
) -> dict[int, dict[str, int]] | None:
    if not is_map(raw):
        report.error(path, "must be a map of NUMA id -> resources")
        return None
    out: dict[int, dict[str, int]] = {}
    for key, resources in raw.items():
        numa = int(key) if isinstance(key, str) and key.isdigit() else key
        if not _numa_id(numa):
            report.error(f"{path}[{key}]", f"{key!r} is not a NUMA id between 0 and 63")
            return None
        got, ok = resource_list(units, resources, f"{path}[{key}]", report)
        if not ok:
            return None
        out[int(numa)] = got  # type: ignore[arg-type]
    return out


def _single_numa_spec(text: object) -> bool:
    # Malformed specs are the dialect reader's business (lint); here they just don't count.
    try:
        data = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return False
    return isinstance(data, dict) and data.get("numaTopologyPolicy") == "SingleNUMANode"


def _numa_id(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 63
