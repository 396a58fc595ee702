"""Bound pods: what they hold per NUMA node, Koordinator's NUMA node states, the requests
kube-scheduler's NodeInfo counts, and HAMi's card usage (core/inventory/build.py describes the
rules)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from core.errors import InvalidInput
from core.inventory.cpuset import parse_cpuset
from core.inventory.node import resource_list
from core.inventory.records import Reporter, Units, json_object
from core.model import ContainerDemand, is_map
from core.scoring.hami_devices import Usage, add_usage, pod_gpu_usage
from core.scoring.koordinator import pod_nonzero_requests

KOORD_RESOURCE_STATUS: Final = "scheduling.koordinator.sh/resource-status"
_FINISHED_PHASES: Final = ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class PodUsage:
    """One bound pod's holding on ``node``."""

    report: Reporter
    node: str
    usage: Mapping[int, Mapping[str, int]]  # per NUMA node (Koordinator resource-status)
    numas: tuple[int, ...]  # sorted NUMA ids it uses
    exclusive: bool  # holds a cpuset (Koordinator NUMA node states)
    cpus: frozenset[int] = frozenset()  # that cpuset
    requests: Mapping[str, int] = field(default_factory=dict)  # NodeInfo.NonZeroRequested
    gpu: Mapping[str, tuple[int, int, int]] = field(default_factory=dict)  # HAMi cards


@dataclass(slots=True)
class NodeUsage:
    """What the bound pods of one node hold, summed."""

    held: dict[int, dict[str, int]]
    single: set[int]
    shared: set[int]
    requests: dict[str, int] | None  # None: no bound pod
    gpu: Usage

    @classmethod
    def of(cls, pods: Iterable[PodUsage], cpu_numa: Mapping[int, int] | None = None) -> NodeUsage:
        """``cpu_numa``: koordlet's CPU topology (CPU id -> NUMA id), to place cpusets."""
        out = cls({}, set(), set(), None, {})
        for pod in pods:
            for numa, resources in pod.usage.items():
                _add(out.held.setdefault(numa, {}), resources)
            if pod.exclusive:
                # node_allocation.go addPodAllocation: one NUMA node -> single, several ->
                # shared, from the NUMA nodes of the cpuset's CPUs (a CPU the topology lacks
                # counts as NUMA 0); a pod without a cpuset marks nothing. Without a CPU
                # topology, the NUMA nodes of its numaNodeResources.
                numas = sorted({cpu_numa.get(c, 0) for c in pod.cpus}) if cpu_numa else pod.numas
                if len(numas) == 1:
                    out.single.add(numas[0])
                else:
                    out.shared.update(numas)
            out.requests = _add(out.requests if out.requests is not None else {}, pod.requests)
            add_usage(out.gpu, pod.gpu)
        return out

    def state(self, numa: int) -> str:
        """Koordinator's NUMANodeSharedStatus: shared wins over single."""
        if numa in self.shared:
            return "shared"
        if numa in self.single:
            return "single"
        return "idle"


def _add(into: dict[str, int], amounts: Mapping[str, int]) -> dict[str, int]:
    for resource, amount in amounts.items():
        into[resource] = into.get(resource, 0) + amount
    return into


def parse_pod(obj: Mapping[str, Any], report: Reporter, units: Units) -> PodUsage | None:
    """The pod's holding, or None when it holds nothing (not bound, or finished)."""
    spec = obj.get("spec") if is_map(obj.get("spec")) else {}
    status = obj.get("status") if is_map(obj.get("status")) else {}
    node = spec.get("nodeName")
    if not isinstance(node, str) or not node or status.get("phase") in _FINISHED_PHASES:
        return None  # not holding node resources
    annotations = obj["metadata"].get("annotations")
    usage: dict[int, dict[str, int]] | None = None
    cpus: frozenset[int] = frozenset()
    if is_map(annotations):
        usage, cpus = _pod_usage(annotations, report, units)
    usage = usage or {}
    requests = pod_nonzero_requests(_containers(spec, report, units))
    gpu = _gpu(obj, node, report)
    return PodUsage(report, node, usage, tuple(sorted(usage)), bool(cpus), cpus, requests, gpu)


def _containers(
    spec: Mapping[str, Any], report: Reporter, units: Units
) -> Sequence[ContainerDemand]:
    """The pod's containers with their requests (init containers with restartPolicy Always
    are sidecars), plus the pod overhead as one more app container."""
    out: list[ContainerDemand] = []
    for key, default in (("initContainers", "init"), ("containers", "app")):
        items = spec.get(key)
        for i, c in enumerate(items if isinstance(items, list) else []):
            if not is_map(c):
                continue
            resources = c.get("resources") if is_map(c.get("resources")) else {}
            path = f"spec.{key}[{i}].resources.requests"
            requests, _ = resource_list(units, resources.get("requests"), path, report)
            kind = (
                "sidecar" if default == "init" and c.get("restartPolicy") == "Always" else default
            )
            out.append(ContainerDemand(str(c.get("name", i)), kind, requests, {}))  # type: ignore[arg-type]
    overhead, _ = resource_list(units, spec.get("overhead"), "spec.overhead", report)
    if overhead:
        # Zero-default for what the overhead does not name: only its own amounts count.
        out.append(ContainerDemand("overhead", "app", {"cpu": 0, "memory": 0, **overhead}, {}))
    return out


def _gpu(obj: Mapping[str, Any], node: str, report: Reporter) -> Usage:
    try:
        found = pod_gpu_usage(obj)
    except InvalidInput as exc:
        report.error("metadata.annotations", f"{exc}; HAMi ignores this pod")
        return {}
    if found is None:
        return {}
    if found[0] != node:
        report.error(
            "metadata.annotations[hami.io/vgpu-node]",
            f"{found[0]!r} differs from spec.nodeName {node!r}; its GPU usage is not counted",
        )
        return {}
    return found[1]


def _pod_usage(
    annotations: Mapping[str, Any], report: Reporter, units: Units
) -> tuple[dict[int, dict[str, int]] | None, frozenset[int]]:
    """Per-NUMA usage of one pod, and the cpuset it holds (Koordinator). A
    ``volcano.sh/topology-decision`` is not read: Volcano writes it and never subtracts it
    (its exporter's free cpuset already excludes pinned CPUs)."""
    if KOORD_RESOURCE_STATUS not in annotations:
        return None, frozenset()
    path = f"metadata.annotations[{KOORD_RESOURCE_STATUS}]"
    data = json_object(annotations[KOORD_RESOURCE_STATUS], path, report)
    if data is None:
        return None, frozenset()
    cpuset = data.get("cpuset")
    cpus: frozenset[int] = frozenset()
    if cpuset:
        try:
            cpus = frozenset(parse_cpuset(cpuset))
        except InvalidInput as exc:
            # pod_eventhandler.go: a cpuset that does not parse drops the whole pod.
            report.error(f"{path}.cpuset", f"{exc}; koord-scheduler ignores this pod")
            return None, frozenset()
    entries = data.get("numaNodeResources")
    usage = {} if entries is None else _numa_list(units, entries, path, report)
    if usage is None:  # reported: the pod's NUMA data is not used
        return None, frozenset()
    return usage, cpus


def _numa_list(
    units: Units, entries: object, path: str, report: Reporter
) -> dict[int, dict[str, int]] | None:
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


def _numa_id(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 63
