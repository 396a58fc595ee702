"""NodeResourceTopology (``topology.node.k8s.io`` v1alpha2 and v1alpha1) -> per-node NUMA
zones and kubelet settings (read by core/inventory/kubelet_settings.py; the records and the
error reporter every reader shares are in core/inventory/records.py).

Rules (research/upstream-schedulers.md §4):
- NUMA zones are ``type: Node`` zones named ``node-<id>`` (noderesourcetopology-api
  ``helper/numanode``: ``node-0`` valid; ``numa-node-0``, ``Node-1``, ``node-5-1``,
  ``node_3``, ``node6`` rejected). Zones of other types (Socket, Core, ...) are skipped.
- The compiled kernel packs NUMA ids into a 64-bit mask, so ids above 63 are rejected
  (scheduler-plugins skips ids above 64 too).
- An NRT with any malformed NUMA zone is rejected as a whole: a partial NUMA picture
  could make a pod look impossible, while a node without NUMA data is never grounds for
  a denial (docs/contracts.md: Inventory input).
- Policy: ``topologyPolicies[0]`` (deprecated v1alpha1 list) first, then ``attributes``
  override it, as scheduler-plugins ``nodeconfig/topologymanager.go`` does. Invalid
  attribute values are reported and ignored (the default stays), like upstream.
- koord-scheduler's own policy (``koord_policy``): the first ``topologyPolicies`` entry it
  maps, whatever comes before it (topology_options.go convertToNUMATopologyPolicy).
- The CPUs koord-scheduler holds back per NUMA node (``koord_held``): core/inventory/koord_cpus.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from core.errors import InvalidInput
from core.inventory.koord_cpus import Held, held_cpus
from core.inventory.kubelet_settings import (
    CPU_MANAGER_POLICIES,
    KOORD_NRT_POLICIES,
    read_attributes,
    read_choice,
    read_topology_policies,
)
from core.inventory.records import (
    Reporter,
    Settings,
    Units,
    ZoneRecord,
    json_object,
    parse_bool,
)
from core.model import is_map

GROUP: Final = "topology.node.k8s.io"
VERSIONS: Final = ("v1alpha2", "v1alpha1")
MAX_NUMA_ID: Final = 63  # bit width of the kernel's NUMA masks
_ZONE_NAME: Final = re.compile(r"^node-(0|[1-9][0-9]*)$")

# koordlet writes these on the NRT it reports (apis/extension).
KOORD_CPU_MANAGER_ANNOTATION: Final = "kubelet.koordinator.sh/cpu-manager-policy"
KOORD_CPU_TOPOLOGY_ANNOTATION: Final = "node.koordinator.sh/cpu-topology"


@dataclass(slots=True)
class NrtData:
    name: str
    zones: dict[int, ZoneRecord] | None  # None: no usable NUMA data (rejected)
    settings: Settings
    koord_policy: str | None  # koord-scheduler's own reading of topologyPolicies
    # CPU id -> NUMA id from koordlet's node.koordinator.sh/cpu-topology (may be empty)
    cpu_numa: dict[int, int] = field(default_factory=dict)
    # NUMA id -> CPUs koord-scheduler holds back there (kubelet, pods, reservation, system)
    koord_held: dict[int, Held] = field(default_factory=dict)


_COMMON_ZONE_IDS: Final = {f"node-{i}": i for i in range(MAX_NUMA_ID + 1)}


def zone_id(name: object) -> int | None:
    """The NUMA id of a canonical zone name ``node-<id>``, else None."""
    if type(name) is not str:
        return None
    common = _COMMON_ZONE_IDS.get(name)  # type: ignore[call-overload]
    if common is not None:
        return common
    m = _ZONE_NAME.match(name)  # type: ignore[arg-type]
    return int(m.group(1)) if m else None


def _quantities(
    entry: Mapping[str, Any], name: str, path: str, report: Reporter, units: Units
) -> tuple[int | None, int | None, int | None] | None:
    out: list[int | None] = []
    ok = True
    for key in ("capacity", "allocatable", "available"):
        raw = entry.get(key)
        if raw is None:
            out.append(None)
            continue
        try:
            out.append(units.convert(name, raw))
        except InvalidInput as exc:
            report.error(f"{path}.{key}", str(exc))
            ok = False
    return (out[0], out[1], out[2]) if ok else None


def _read_resource(
    entry: object, path: str, report: Reporter, units: Units, zone: ZoneRecord
) -> bool:
    if not is_map(entry) or type(entry.get("name")) is not str:
        report.error(path, "must be {name, capacity, allocatable, available}")
        return False
    name: str = entry["name"]  # type: ignore[index]
    if name in zone.capacity:
        report.error(f"{path}.name", f"resource {name!r} listed twice in the zone")
        return False
    got = _quantities(entry, name, path, report, units)  # type: ignore[arg-type]
    if got is None:
        return False
    capacity, allocatable, available = got
    if capacity is None and allocatable is None:
        report.error(path, f"resource {name!r} has neither capacity nor allocatable")
        return False
    # The CRD requires all of them; a hand-written file may omit one. Capacity and
    # allocatable stand in for each other; a missing available is computed later.
    zone.capacity[name] = capacity if capacity is not None else allocatable  # type: ignore[assignment]
    zone.allocatable[name] = allocatable if allocatable is not None else capacity  # type: ignore[assignment]
    if available is not None:
        zone.available[name] = available
    return True


def _read_costs(costs: object, path: str, report: Reporter, zone: ZoneRecord) -> bool:
    if costs is None:
        return True
    if type(costs) is not list:
        report.error(path, "must be a list of {name, value}")
        return False
    ok = True
    out = zone.costs
    for i, cost in enumerate(costs):
        is_dict = is_map(cost)
        target = zone_id(cost.get("name")) if is_dict else None
        value = cost.get("value") if is_dict else None
        if target is not None and target <= MAX_NUMA_ID and type(value) is int and value >= 0:
            out[target] = value
        elif target is None or target > MAX_NUMA_ID:
            name = cost.get("name") if is_dict else cost
            report.error(f"{path}[{i}].name", f"{name!r} is not a NUMA zone name node-<id>")
            ok = False
        else:
            report.error(f"{path}[{i}].value", f"{value!r} is not a non-negative integer distance")
            ok = False
    return ok


def _read_zone(
    raw: Mapping[str, Any], path: str, report: Reporter, units: Units
) -> tuple[int, ZoneRecord] | None:
    name = raw.get("name")
    numa = zone_id(name)
    if numa is None:
        report.error(
            f"{path}.name",
            f"{name!r} is not a NUMA zone name (expected node-<id>, e.g. node-0; "
            "spellings such as numa-node-0, Node-1 or node-5-1 are not accepted)",
        )
        return None
    if numa > MAX_NUMA_ID:
        report.error(f"{path}.name", f"NUMA id {numa} is larger than {MAX_NUMA_ID}")
        return None
    zone = ZoneRecord()
    resources = raw.get("resources") or []
    ok = isinstance(resources, list)
    if not ok:
        report.error(f"{path}.resources", "must be a list")
    else:
        for j, entry in enumerate(resources):
            ok = _read_resource(entry, f"{path}.resources[{j}]", report, units, zone) and ok
    ok = _read_costs(raw.get("costs"), f"{path}.costs", report, zone) and ok
    return (numa, zone) if ok else None


def _plain_zone(raw: Mapping[str, Any], units: Units) -> tuple[int, ZoneRecord] | None:
    """The usual zone (every resource with its amounts, distances to canonical zones),
    read without building paths or messages: an NRT has a few and a list has thousands of
    NRTs. None when anything is unusual: :func:`_read_zone` then reads it with every check
    and message (the same result for a zone this accepts: tests/core/inventory)."""
    numa = zone_id(raw.get("name"))
    resources, costs = raw.get("resources"), raw.get("costs")
    if numa is None or numa > MAX_NUMA_ID or type(resources) is not list:
        return None
    convert = units.convert
    zone = ZoneRecord()
    capacity, allocatable, available = zone.capacity, zone.allocatable, zone.available
    try:
        for entry in resources:
            if type(entry) is not dict:
                return None
            name, total, usable = entry.get("name"), entry.get("capacity"), entry.get("allocatable")
            if type(name) is not str or name in capacity or total is None or usable is None:
                return None
            capacity[name] = convert(name, total)
            allocatable[name] = convert(name, usable)
            free = entry.get("available")
            if free is not None:
                available[name] = convert(name, free)
    except InvalidInput:
        return None
    if costs is not None:
        if type(costs) is not list:
            return None
        distances = zone.costs
        for cost in costs:
            if type(cost) is not dict:
                return None
            target, value = zone_id(cost.get("name")), cost.get("value")
            if target is None or target > MAX_NUMA_ID or type(value) is not int or value < 0:
                return None
            distances[target] = value
    return numa, zone


def read_zones(zones: object, report: Reporter, units: Units) -> dict[int, ZoneRecord] | None:
    """NUMA zones by id, or None when any NUMA zone is malformed (all errors reported)."""
    if not isinstance(zones, list):
        report.error("zones", "must be a list (required by the CRD)")
        return None
    out: dict[int, ZoneRecord] = {}
    ok = True
    for i, raw in enumerate(zones):
        path = f"zones[{i}]"
        if not is_map(raw):
            report.error(path, "must be an object")
            ok = False
            continue
        if raw.get("type") != "Node":
            continue  # Socket, Core, cache zones: not NUMA nodes (helper.go)
        got = _plain_zone(raw, units) or _read_zone(raw, path, report, units)
        if got is None:
            ok = False
        elif got[0] in out:
            report.error(f"{path}.name", f"NUMA zone {raw.get('name')!r} listed twice")
            ok = False
        else:
            out[got[0]] = got[1]
    return out if ok else None


def _koordlet_annotations(
    annotations: object, report: Reporter, cpu_numa: dict[int, int], kubelet: dict[str, Any]
) -> Settings:
    """koordlet reports the kubelet CPU manager and the CPU topology as NRT annotations
    (the CPU topology's NUMA ids go to ``cpu_numa``, the CPU manager's JSON to ``kubelet``)."""
    settings = Settings()
    if not is_map(annotations):
        return settings
    key = KOORD_CPU_MANAGER_ANNOTATION
    if key in annotations:
        path = f"metadata.annotations[{key}]"
        data = json_object(annotations[key], path, report)
        if data is not None:
            kubelet.update(data)
            policy = data.get("policy")
            if policy is not None:
                settings.cpu_manager_policy = read_choice(
                    policy, CPU_MANAGER_POLICIES, path, report
                )
            options = data.get("options")
            if is_map(options) and "full-pcpus-only" in options:
                settings.full_pcpus_only = parse_bool(options["full-pcpus-only"])
    key = KOORD_CPU_TOPOLOGY_ANNOTATION
    if key in annotations:
        path = f"metadata.annotations[{key}]"
        data = json_object(annotations[key], path, report)
        detail = data.get("detail") if data is not None else None
        if isinstance(detail, list):
            cores: dict[tuple[object, object], int] = {}
            for cpu in detail:
                if is_map(cpu):
                    core = (cpu.get("socket", 0), cpu.get("core", 0))
                    cores[core] = cores.get(core, 0) + 1
                    cpu_id, numa = cpu.get("id"), cpu.get("node", 0)
                    if type(cpu_id) is int and type(numa) is int:
                        cpu_numa[cpu_id] = numa
            if cores:
                settings.threads_per_core = max(cores.values())
    return settings


def parse_nrt(obj: Mapping[str, Any], name: str, report: Reporter, units: Units) -> NrtData:
    """One NodeResourceTopology object (either version) -> NrtData."""
    policies = obj.get("topologyPolicies")
    settings = read_attributes(obj.get("attributes"), "attributes", report)
    settings.fill_from(read_topology_policies(policies, "topologyPolicies", report))
    metadata = obj.get("metadata")
    annotations = metadata.get("annotations") if is_map(metadata) else None
    cpu_numa: dict[int, int] = {}
    kubelet: dict[str, Any] = {}
    settings.fill_from(_koordlet_annotations(annotations, report, cpu_numa, kubelet))
    held = held_cpus(annotations, kubelet.get("reservedCPUs"), cpu_numa, report)
    zones = read_zones(obj.get("zones"), report, units)
    return NrtData(name, zones, settings, koord_nrt_policy(policies), cpu_numa, held)


def koord_nrt_policy(policies: object) -> str | None:
    """convertToNUMATopologyPolicy: the first entry of ``topologyPolicies`` koord-scheduler
    maps (BestEffort, Restricted, SingleNUMANodePodLevel), None when none maps (v1.4+; the
    kubelet's own reading, read_topology_policies, takes the first entry only)."""
    if not isinstance(policies, list):
        return None
    for policy in policies:
        mapped = KOORD_NRT_POLICIES.get(policy) if isinstance(policy, str) else None
        if mapped is not None:
            return mapped
    return None
