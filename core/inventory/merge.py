"""Everything known about one node name, merged into its NodeTopology
(core/inventory/build.py describes the rules)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from core.inventory.node import NodeInfo
from core.inventory.nrt import NrtData
from core.inventory.records import Settings, ZoneRecord
from core.inventory.share import Sharer
from core.inventory.usage import NodeUsage, PodUsage
from core.inventory.volcano import VolcanoData
from core.model import POLICY_NONE, NodeTopology, NumaZone


@dataclass(slots=True)
class Parts:
    """The objects read for one node name."""

    node: NodeInfo | None = None
    nrt: NrtData | None = None
    volcano: VolcanoData | None = None
    pods: Sequence[PodUsage] = ()  # a list once it has one (most nodes: no list at all)


def add_pod(parts: Parts, pod: PodUsage) -> None:
    if type(parts.pods) is list:
        parts.pods.append(pod)
    else:
        parts.pods = [pod]


def merge(name: str, parts: Parts, share: Sharer) -> NodeTopology:
    """The node's record. Errors about pods using NUMA nodes the node does not report go
    to each pod's reporter."""
    nrt = parts.nrt if parts.nrt is not None and parts.nrt.zones is not None else None
    volcano = parts.volcano
    sources = [
        kind
        for kind, present in (
            ("Node", parts.node is not None),
            ("NodeResourceTopology", nrt is not None),
            ("Numatopology", volcano is not None),
            ("Pod", bool(parts.pods)),
        )
        if present
    ]
    settings = Settings()
    if nrt is not None:
        settings.fill_from(nrt.settings)
    if volcano is not None:
        settings.fill_from(volcano.settings)
    records: dict[int, ZoneRecord] = {}
    if nrt is not None:
        records = nrt.zones or {}
    elif volcano is not None and volcano.zones is not None:
        records = volcano.zones
    node = parts.node
    if node is not None and not node.trusted:
        records = {}
    check_pod_numas(parts.pods, records)
    usage = NodeUsage.of(parts.pods, nrt.cpu_numa if nrt is not None else None)
    held = nrt.koord_held if nrt is not None and records is nrt.zones else {}
    zones = tuple(
        _freeze_zone(i, records[i], usage.held.get(i, {}), held.get(i, _NONE_HELD))
        for i in sorted(records)
    )
    if node is not None:
        allocatable, capacity = node.allocatable, node.capacity
    else:
        allocatable = _sum_zones(zones, "allocatable")
        capacity = _sum_zones(zones, "capacity")
    states = tuple(usage.state(z.id) for z in zones)
    given = ((k, getattr(settings, k)) for k in Settings.__slots__)
    kwargs = {k: v for k, v in given if v is not None}
    return NodeTopology(
        name=name,
        labels=share.mapping(node.labels if node else {}),
        allocatable=share.mapping(allocatable),
        capacity=share.mapping(capacity),
        zones=share.zones(zones),
        annotations=share.mapping(node.annotations if node else {}),
        koord_policy=_koord_view(node, nrt),
        volcano_policy=volcano.topology_policy if volcano else None,
        volcano_cpu_manager_policy=volcano.cpu_manager_policy if volcano else None,
        unaligned_devices=share.mapping(_unaligned(allocatable, zones) if zones and node else {}),
        numa_states=share.items(states),
        koord_held=tuple(held.get(z.id, _NONE_HELD) for z in zones) if held else (),
        sources=share.items(tuple(sources)),
        bound_requests=None if usage.requests is None else share.mapping(usage.requests),
        gpu_usage=share.mapping(usage.gpu),
        **kwargs,
    )


def check_pod_numas(pods: Iterable[PodUsage], records: Mapping[int, ZoneRecord]) -> None:
    if not records:
        return
    for pod in pods:
        missing = [n for n in pod.numas if n not in records]
        if missing:
            pod.report.error(
                "metadata.annotations",
                f"uses NUMA node(s) {missing} that node {pod.node} does not report",
            )


def _koord_view(node: NodeInfo | None, nrt: NrtData | None) -> str | None:
    """koord-scheduler's node policy (util.go getNUMATopologyPolicy): a non-empty label,
    else its reading of the NRT's topologyPolicies ("none" when that gives nothing).
    None only when Koordinator has neither (it then finds no NUMA resources)."""
    if node is not None and node.koord_policy is not None:
        return node.koord_policy
    if nrt is not None:
        return nrt.koord_policy or POLICY_NONE
    if node is not None and node.has_koord_label:
        return POLICY_NONE
    return None


_NONE_HELD: Final = (0, 0, 0, 0)


def _freeze_zone(
    numa: int, record: ZoneRecord, used: Mapping[str, int], held: tuple[int, int, int, int]
) -> NumaZone:
    allocatable: Mapping[str, int] = record.allocatable
    cpu = allocatable.get("cpu", 0)
    kept = held[0]  # the kubelet's reserved CPUs: no pod of any scheduler gets them
    if held != _NONE_HELD and cpu:
        # topology_options.go NewTopologyOptions: a NUMA node's CPU amount less the CPUs held
        # back there (a zone without CPUs is left alone). The rest come off the free amount
        # only, so a pod that needs them is no-room-now, not never-fits: kubelet-managed
        # pods' CPUs are in use, not gone, and the node reservation's and system QoS CPUs
        # are koord-scheduler's alone (the kubelet hands them out to other schedulers' pods,
        # whose verdicts read the same zones: no denial on them).
        allocatable = {**allocatable, "cpu": max(0, cpu - 1000 * kept)}
    source = record.available
    if not used and held == _NONE_HELD and tuple(source) == tuple(allocatable):
        # The source gave every free amount (an NRT): its own map, shared already, not
        # a copy for the sharer to hash again (the first build's most common zone).
        available = source
    else:
        available = {
            resource: source.get(resource, max(0, amount - used.get(resource, 0)))
            for resource, amount in allocatable.items()
        }
    if held != _NONE_HELD and cpu:
        given = record.available.get("cpu")
        free = allocatable["cpu"] - used.get("cpu", 0) if given is None else given - 1000 * kept
        busy = held[1] + held[2] + held[3]
        available["cpu"] = max(0, min(free, allocatable["cpu"]) - 1000 * busy)
    # The record's own maps, not copies: nothing mutates a record once parsed (nor a
    # NodeTopology's maps), and the incremental inventory's records hold shared maps that
    # the sharer then recognises at once.
    return NumaZone(
        id=numa,
        capacity=record.capacity,
        allocatable=allocatable,
        available=available,
        costs=record.costs,
    )


def _sum_zones(zones: tuple[NumaZone, ...], attr: str) -> dict[str, int]:
    total: dict[str, int] = {}
    for zone in zones:
        for resource, amount in getattr(zone, attr).items():
            total[resource] = total.get(resource, 0) + amount
    return total


def _unaligned(allocatable: Mapping[str, int], zones: tuple[NumaZone, ...]) -> dict[str, int]:
    in_zones = _sum_zones(zones, "allocatable")
    return {
        resource: count - in_zones.get(resource, 0)
        for resource, count in allocatable.items()
        # a device: plugins register domain-qualified names (nvidia.com/gpu); hugepages
        # and the native resources never carry a slash
        if "/" in resource and count > in_zones.get(resource, 0)
    }
