"""NodeResourceTopology (``topology.node.k8s.io`` v1alpha2 and v1alpha1) -> per-node NUMA
zones and kubelet settings. Also the pieces the other inventory readers share: the error
reporter, the caching quantity converter, the zone record and the settings record.

Rules (research/upstream-schedulers.md §4):
- NUMA zones are ``type: Node`` zones named ``node-<id>`` (noderesourcetopology-api
  ``helper/numanode``: ``node-0`` valid; ``numa-node-0``, ``Node-1``, ``node-5-1``,
  ``node_3``, ``node6`` rejected). Zones of other types (Socket, Core, ...) are skipped.
- The compiled kernel packs NUMA ids into a 64-bit mask, so ids above 63 are rejected
  (scheduler-plugins skips ids above 64 too).
- An NRT with any malformed NUMA zone is rejected as a whole: a partial NUMA picture
  could make a pod look impossible, while a node without NUMA data is never grounds for
  a denial (DESIGN 4.2).
- Policy: ``topologyPolicies[0]`` (deprecated v1alpha1 list) first, then ``attributes``
  override it, as scheduler-plugins ``nodeconfig/topologymanager.go`` does. Invalid
  attribute values are reported and ignored (the default stays), like upstream.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from core.errors import InvalidInput
from core.model import POLICIES, is_map
from core.quantity import to_core_units

GROUP: Final = "topology.node.k8s.io"
VERSIONS: Final = ("v1alpha2", "v1alpha1")
MAX_NUMA_ID: Final = 63  # bit width of the kernel's NUMA masks
MAX_NUMA_NODES_CAP: Final = 1024  # scheduler-plugins caps topologyManagerMaxNUMANodes here
_ZONE_NAME: Final = re.compile(r"^node-(0|[1-9][0-9]*)$")

# Deprecated v1alpha1 topologyPolicies -> (kubelet policy, scope or None for the default).
# The API defines the *Level spellings and the plain ones; its own example manifest uses
# the plain "SingleNUMANode", which is not a constant but means the same.
TOPOLOGY_POLICIES: Final[Mapping[str, tuple[str, str | None]]] = {
    "None": ("none", None),
    "BestEffort": ("best-effort", None),
    "BestEffortContainerLevel": ("best-effort", "container"),
    "BestEffortPodLevel": ("best-effort", "pod"),
    "Restricted": ("restricted", None),
    "RestrictedContainerLevel": ("restricted", "container"),
    "RestrictedPodLevel": ("restricted", "pod"),
    "SingleNUMANode": ("single-numa-node", None),
    "SingleNUMANodeContainerLevel": ("single-numa-node", "container"),
    "SingleNUMANodePodLevel": ("single-numa-node", "pod"),
}
# What koord-scheduler itself maps from topologyPolicies when the node has no label
# (topology_options.go convertToNUMATopologyPolicy): only these three.
KOORD_NRT_POLICIES: Final[Mapping[str, str]] = {
    "BestEffort": "best-effort",
    "Restricted": "restricted",
    "SingleNUMANodePodLevel": "single-numa-node",
}
SCOPES: Final = ("container", "pod")
CPU_MANAGER_POLICIES: Final = ("static", "none")
MEMORY_MANAGER_POLICIES: Final = ("Static", "None")  # kubelet spelling, case-sensitive
TM_OPTIONS: Final = ("prefer-closest-numa-nodes", "max-allowable-numa-nodes")
# cpuManagerPolicyOptions the kubelet knows; only full-pcpus-only changes admission
# (policy_options.go), the others change which CPUs are picked.
CPU_OPTIONS: Final = (
    "full-pcpus-only",
    "distribute-cpus-across-numa",
    "align-by-socket",
    "distribute-cpus-across-cores",
    "strict-cpu-reservation",
    "prefer-align-cpus-by-uncorecache",
)
_TRUE: Final = ("1", "t", "T", "TRUE", "true", "True")  # Go strconv.ParseBool
_FALSE: Final = ("0", "f", "F", "FALSE", "false", "False")
# koordlet writes these on the NRT it reports (apis/extension).
KOORD_CPU_MANAGER_ANNOTATION: Final = "kubelet.koordinator.sh/cpu-manager-policy"
KOORD_CPU_TOPOLOGY_ANNOTATION: Final = "node.koordinator.sh/cpu-topology"


class Reporter:
    """Collects error strings that name the object and the field."""

    __slots__ = ("kind", "name", "sink")

    def __init__(self, kind: str, name: str, sink: list[str]) -> None:
        self.kind = kind
        self.name = name
        self.sink = sink

    def error(self, path: str, message: str) -> None:
        self.sink.append(f"{self.kind} {self.name}: {path}: {message}")


class Units:
    """to_core_units with a cache: clusters repeat the same few quantity strings, and
    exact Fraction parsing is the cost that dominates building 100,000 nodes."""

    __slots__ = ("_cpu", "_other")

    def __init__(self) -> None:
        # cpu has its own unit (millicores); every other resource rounds the same way
        self._cpu: dict[str | int, int] = {}
        self._other: dict[str | int, int] = {}

    def convert(self, resource: str, value: Any) -> int:
        """Raises InvalidInput for a value that does not parse."""
        kind = type(value)
        if kind is not str and kind is not int:
            return to_core_units(resource, value)
        cache = self._cpu if resource == "cpu" else self._other
        hit = cache.get(value)
        if hit is None:
            hit = cache[value] = to_core_units(resource, value)
        return hit


@dataclass(slots=True)
class ZoneRecord:
    """One NUMA zone while the inventory is being built (mutable; frozen later)."""

    capacity: dict[str, int] = field(default_factory=dict)
    allocatable: dict[str, int] = field(default_factory=dict)
    available: dict[str, int] = field(default_factory=dict)  # only what the source gave
    costs: dict[int, int] = field(default_factory=dict)


@dataclass(slots=True)
class Settings:
    """Kubelet settings one source reports; None means the source does not say."""

    tm_policy: str | None = None
    tm_scope: str | None = None
    max_numa_nodes: int | None = None
    prefer_closest: bool | None = None
    cpu_manager_policy: str | None = None
    full_pcpus_only: bool | None = None
    threads_per_core: int | None = None
    memory_manager_policy: str | None = None

    def fill_from(self, other: Settings) -> None:
        """Take every value this record lacks from ``other`` (lower precedence)."""
        for name in self.__slots__:
            if getattr(self, name) is None:
                setattr(self, name, getattr(other, name))


@dataclass(slots=True)
class NrtData:
    name: str
    zones: dict[int, ZoneRecord] | None  # None: no usable NUMA data (rejected)
    settings: Settings
    koord_policy: str | None  # koord-scheduler's own reading of topologyPolicies
    # CPU id -> NUMA id from koordlet's node.koordinator.sh/cpu-topology (may be empty)
    cpu_numa: dict[int, int] = field(default_factory=dict)


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


def parse_bool(text: object) -> bool | None:
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    return None


def _allowed(values: tuple[str, ...]) -> str:
    return ", ".join(values)


def parse_options(
    text: object, known: tuple[str, ...], path: str, report: Reporter
) -> dict[str, str]:
    """``k=v,k=v`` option lists (kubelet --topology-manager-policy-options style)."""
    if not isinstance(text, str):
        report.error(path, f"{text!r} is not a string of key=value pairs")
        return {}
    out: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq:
            report.error(path, f"option {item!r} is not key=value")
        elif key not in known:
            report.error(path, f"unknown option {key!r} (allowed: {_allowed(known)})")
        else:
            out[key] = value.strip()
    return out


def _int_attr(value: object, path: str, report: Reporter, low: int, high: int) -> int | None:
    text = value if isinstance(value, str) else str(value)
    if not text.strip().isdigit() or not low <= int(text) <= high:
        report.error(path, f"{value!r} is not an integer between {low} and {high}")
        return None
    return int(text)


def _choice(value: object, allowed: tuple[str, ...], path: str, report: Reporter) -> str | None:
    if value in allowed:
        return str(value)
    report.error(path, f"unknown value {value!r} (allowed: {_allowed(allowed)})")
    return None


def _tm_options(value: object, path: str, report: Reporter, settings: Settings) -> None:
    opts = parse_options(value, TM_OPTIONS, path, report)
    if "prefer-closest-numa-nodes" in opts:
        flag = parse_bool(opts["prefer-closest-numa-nodes"])
        if flag is None:
            report.error(path, "prefer-closest-numa-nodes must be true or false")
        settings.prefer_closest = flag
    if "max-allowable-numa-nodes" in opts:
        limit = _int_attr(opts["max-allowable-numa-nodes"], path, report, 1, MAX_NUMA_NODES_CAP)
        if limit is not None and settings.max_numa_nodes not in (None, limit):
            report.error(
                path,
                f"max-allowable-numa-nodes={limit} disagrees with topologyManagerMaxNUMANodes="
                f"{settings.max_numa_nodes}; using {settings.max_numa_nodes}",
            )
        elif limit is not None:
            settings.max_numa_nodes = limit


def _cpu_options(value: object, path: str, report: Reporter, settings: Settings) -> None:
    opts = parse_options(value, CPU_OPTIONS, path, report)
    if "full-pcpus-only" in opts:
        flag = parse_bool(opts["full-pcpus-only"])
        if flag is None:
            report.error(path, "full-pcpus-only must be true or false")
        settings.full_pcpus_only = flag


def read_attributes(attrs: object, path: str, report: Reporter) -> Settings:
    """NRT v1alpha2 ``attributes`` (and ours, where an exporter knows them: DESIGN 4.2)."""
    settings = Settings()
    if attrs is None:
        return settings
    if not isinstance(attrs, list):
        report.error(path, "must be a list of {name, value}")
        return settings
    values: dict[str, tuple[str, object]] = {}
    for i, attr in enumerate(attrs):
        if not is_map(attr) or not isinstance(attr.get("name"), str):
            report.error(f"{path}[{i}]", "must be {name, value}")
            continue
        values[attr["name"]] = (f"{path}[{i}].value", attr.get("value"))
    if "topologyManagerPolicy" in values:
        p, v = values["topologyManagerPolicy"]
        settings.tm_policy = _choice(v, POLICIES, p, report)
    if "topologyManagerScope" in values:
        p, v = values["topologyManagerScope"]
        settings.tm_scope = _choice(v, SCOPES, p, report)
    if "topologyManagerMaxNUMANodes" in values:
        p, v = values["topologyManagerMaxNUMANodes"]
        settings.max_numa_nodes = _int_attr(v, p, report, 1, MAX_NUMA_NODES_CAP)
    if "topologyManagerPolicyOptions" in values:
        p, v = values["topologyManagerPolicyOptions"]
        _tm_options(v, p, report, settings)
    if "cpuManagerPolicy" in values:
        p, v = values["cpuManagerPolicy"]
        settings.cpu_manager_policy = _choice(v, CPU_MANAGER_POLICIES, p, report)
    if "cpuManagerPolicyOptions" in values:
        p, v = values["cpuManagerPolicyOptions"]
        _cpu_options(v, p, report, settings)
    if "memoryManagerPolicy" in values:
        p, v = values["memoryManagerPolicy"]
        settings.memory_manager_policy = _choice(v, MEMORY_MANAGER_POLICIES, p, report)
    if "cpuThreadsPerCore" in values:
        p, v = values["cpuThreadsPerCore"]
        settings.threads_per_core = _int_attr(v, p, report, 1, 64)
    return settings


def read_topology_policies(policies: object, path: str, report: Reporter) -> Settings:
    """The deprecated v1alpha1 list: the first entry decides (scheduler-plugins)."""
    settings = Settings()
    if policies is None or policies == []:
        return settings
    if not isinstance(policies, list):
        report.error(path, "must be a list of policy names")
        return settings
    first = policies[0]
    if not isinstance(first, str) or first not in TOPOLOGY_POLICIES:
        report.error(
            f"{path}[0]",
            f"unknown policy {first!r} (allowed: {_allowed(tuple(TOPOLOGY_POLICIES))})",
        )
        return settings
    settings.tm_policy, settings.tm_scope = TOPOLOGY_POLICIES[first]
    return settings


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
        got = _read_zone(raw, path, report, units)
        if got is None:
            ok = False
        elif got[0] in out:
            report.error(f"{path}.name", f"NUMA zone {raw.get('name')!r} listed twice")
            ok = False
        else:
            out[got[0]] = got[1]
    return out if ok else None


def _koordlet_annotations(
    annotations: object, report: Reporter, cpu_numa: dict[int, int]
) -> Settings:
    """koordlet reports the kubelet CPU manager and the CPU topology as NRT annotations
    (the CPU topology's NUMA ids go to ``cpu_numa``)."""
    settings = Settings()
    if not is_map(annotations):
        return settings
    key = KOORD_CPU_MANAGER_ANNOTATION
    if key in annotations:
        path = f"metadata.annotations[{key}]"
        data = json_object(annotations[key], path, report)
        if data is not None:
            policy = data.get("policy")
            if policy is not None:
                settings.cpu_manager_policy = _choice(policy, CPU_MANAGER_POLICIES, path, report)
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


def json_object(text: object, path: str, report: Reporter) -> dict[str, Any] | None:
    """Parse an annotation holding a JSON object; report and return None otherwise."""
    try:
        data = json.loads(text) if isinstance(text, str) else None
    except ValueError as exc:
        report.error(path, f"not valid JSON: {exc}")
        return None
    if not isinstance(data, dict):
        report.error(path, f"{text!r} is not a JSON object")
        return None
    return data


def parse_nrt(obj: Mapping[str, Any], name: str, report: Reporter, units: Units) -> NrtData:
    """One NodeResourceTopology object (either version) -> NrtData."""
    policies = obj.get("topologyPolicies")
    settings = read_attributes(obj.get("attributes"), "attributes", report)
    settings.fill_from(read_topology_policies(policies, "topologyPolicies", report))
    metadata = obj.get("metadata")
    annotations = metadata.get("annotations") if is_map(metadata) else None
    cpu_numa: dict[int, int] = {}
    settings.fill_from(_koordlet_annotations(annotations, report, cpu_numa))
    koord = None
    if isinstance(policies, list) and policies:
        koord = KOORD_NRT_POLICIES.get(policies[0]) if isinstance(policies[0], str) else None
    zones = read_zones(obj.get("zones"), report, units)
    return NrtData(name, zones, settings, koord, cpu_numa)
