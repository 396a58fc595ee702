"""The inventory: plain Kubernetes objects -> one NodeTopology per node (DESIGN 4.2).

Accepted kinds (others are counted in ``InventoryResult.ignored`` and otherwise skipped):

- ``Node`` (v1): labels, annotations, ``status.allocatable`` / ``status.capacity``, and the
  Koordinator label ``node.koordinator.sh/numa-topology-policy``.
- ``NodeResourceTopology`` (topology.node.k8s.io v1alpha2, v1alpha1): zones and kubelet
  settings (core/inventory/nrt.py).
- ``Numatopology`` (nodeinfo.volcano.sh v1alpha1): CPU zones and Volcano's policies
  (core/inventory/volcano.py).
- ``Pod`` (v1), bound (``spec.nodeName`` set, not Succeeded/Failed): per-NUMA usage and
  Koordinator NUMA node states.

Objects are merged by node name (an NRT and a Numatopology are named after their node).

Rules, each chosen so that bad or partial data never makes a pod look impossible:

- Zones come from the NRT when it is usable, else from the Numatopology, else there are
  none (verdict ``unknown-topology``). A Node whose quantities do not parse is kept but
  loses its zones for the same reason.
- ``available`` per zone and resource: the source's value when it gives one (an NRT
  exporter already accounts for running pods). Otherwise ``allocatable`` minus what bound
  pods hold on that NUMA node according to Koordinator's
  ``scheduling.koordinator.sh/resource-status`` (``numaNodeResources``) or Volcano's
  ``volcano.sh/topology-decision``, never below 0. Pods without per-NUMA data cannot be
  placed on a NUMA node and are not subtracted.
- Settings: NRT attributes > NRT ``topologyPolicies`` > koordlet NRT annotations >
  Numatopology ``spec.policies`` > the NodeTopology defaults.
- A device-plugin resource (a ``domain/name`` resource) whose count in Node
  ``status.allocatable`` exceeds the sum over the zones has that many devices without
  NUMA affinity (``unaligned_devices``).
- Koordinator NUMA node states (nodeallocation.go ``NUMANodeSharedStatus``): a pod with an
  exclusive cpuset or a ``SingleNUMANode`` numa-topology-spec counts; on one NUMA node it
  makes that node ``single``, spread over several it makes each ``shared``; ``shared``
  wins over ``single``; no such pod: ``idle``. ``numa_states`` is aligned with ``zones``.
- ``koord_policy`` is what koord-scheduler sees, in kubelet spelling: the label when it is
  non-empty, else koord-scheduler's own narrow reading of the NRT ``topologyPolicies``
  (only BestEffort, Restricted, SingleNUMANodePodLevel map; anything else, and NRT
  attributes, give ``"none"``), else ``"none"`` for an empty label, else None (no label,
  no NRT: Koordinator finds no NUMA resources). A label value Koordinator does not define
  is reported and kept as ``"unknown:<value>"``, so it matches no pod policy, as in
  koord-scheduler.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from core.errors import InvalidInput
from core.inventory.cpuset import parse_cpuset
from core.inventory.nrt import (
    NrtData,
    Reporter,
    Settings,
    Units,
    ZoneRecord,
    is_map,
    json_object,
    parse_nrt,
)
from core.inventory.volcano import VolcanoData, parse_numatopology
from core.model import POLICY_NONE, NodeTopology, NumaZone

KOORD_NODE_LABEL: Final = "node.koordinator.sh/numa-topology-policy"
KOORD_LABEL_POLICIES: Final[Mapping[str, str | None]] = {
    "": None,
    "BestEffort": "best-effort",
    "Restricted": "restricted",
    "SingleNUMANode": "single-numa-node",
}
KOORD_RESOURCE_STATUS: Final = "scheduling.koordinator.sh/resource-status"
KOORD_NUMA_SPEC: Final = "scheduling.koordinator.sh/numa-topology-spec"
VOLCANO_DECISION: Final = "volcano.sh/topology-decision"
API_VERSIONS: Final[Mapping[str, tuple[str, ...]]] = {
    "Node": ("v1",),
    "Pod": ("v1",),
    "NodeResourceTopology": ("topology.node.k8s.io/v1alpha2", "topology.node.k8s.io/v1alpha1"),
    "Numatopology": ("nodeinfo.volcano.sh/v1alpha1",),
}
_FINISHED_PHASES: Final = ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class InventoryResult:
    nodes: tuple[NodeTopology, ...]  # sorted by name
    errors: tuple[str, ...]  # each names kind, name and field
    ignored: Mapping[str, int] = field(default_factory=dict)  # kind -> objects not used


@dataclass(slots=True)
class _NodeInfo:
    labels: dict[str, str]
    annotations: dict[str, str]
    allocatable: dict[str, int]
    capacity: dict[str, int]
    trusted: bool  # every quantity parsed
    koord_policy: str | None
    has_koord_label: bool


@dataclass(slots=True)
class _Parts:
    """Everything known about one node name while objects are read."""

    node: _NodeInfo | None = None
    nrt: NrtData | None = None
    volcano: VolcanoData | None = None
    usage: dict[int, dict[str, int]] = field(default_factory=dict)
    single: set[int] = field(default_factory=set)
    shared: set[int] = field(default_factory=set)
    pods: list[tuple[Reporter, str, tuple[int, ...]]] = field(default_factory=list)


class _Sharer:
    """Shares equal per-node values between nodes: label keys and values, resource maps,
    NUMA zones. A 10,000-node cluster has a few hundred distinct zone tables, and YAML and
    JSON parsers return a new string object for every occurrence of a key ("cpu",
    "kubernetes.io/hostname"); sharing them roughly halves the inventory's memory in
    every server worker. Safe because nothing mutates a NodeTopology's mappings."""

    def __init__(self) -> None:
        self._strings: dict[str, str] = {}
        self._maps: dict[tuple[Any, ...], dict[Any, Any]] = {}
        self._zones: dict[tuple[Any, ...], NumaZone] = {}
        self._tuples: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self._zone_tuples: dict[tuple[int, ...], tuple[NumaZone, ...]] = {}

    def text(self, value: str) -> str:
        return self._strings.setdefault(value, value)

    def mapping(self, raw: Mapping[Any, Any]) -> dict[Any, Any]:
        # Types are part of the key: True == 1, and a map holding True must stay distinct.
        key = tuple((k, type(v), v) for k, v in raw.items())
        got = self._maps.get(key)
        if got is None:
            text = self.text
            got = self._maps[key] = {
                text(k) if type(k) is str else k: text(v) if type(v) is str else v
                for k, v in raw.items()
            }
        return got

    def zone(self, zone: NumaZone) -> NumaZone:
        maps = [
            self.mapping(m) for m in (zone.capacity, zone.allocatable, zone.available, zone.costs)
        ]
        # Shared maps are unique per content, so their identities are a content key.
        key = (zone.id, *map(id, maps))
        got = self._zones.get(key)
        if got is None:
            got = self._zones[key] = NumaZone(zone.id, *maps)
        return got

    def items(self, values: tuple[Any, ...]) -> tuple[Any, ...]:
        return self._tuples.setdefault(values, values)

    def zones(self, zones: tuple[NumaZone, ...]) -> tuple[NumaZone, ...]:
        shared = tuple(self.zone(z) for z in zones)
        # Shared zones are unique per content, so their identities are a content key.
        return self._zone_tuples.setdefault(tuple(map(id, shared)), shared)


class _Builder:
    def __init__(self) -> None:
        self.errors: list[str] = []
        self.units = Units()
        self.parts: dict[str, _Parts] = {}
        self.ignored: dict[str, int] = {}
        self.share = _Sharer()

    def part(self, name: str) -> _Parts:
        got = self.parts.get(name)
        if got is None:
            got = self.parts[name] = _Parts()
        return got

    # -- dispatch ---------------------------------------------------------------------

    def add(self, index: int, obj: object) -> None:
        if not is_map(obj):
            self.errors.append(f"objects[{index}]: is a {type(obj).__name__}, not an object")
            return
        kind = obj.get("kind")
        if kind not in API_VERSIONS:
            key = str(kind) if kind else "<no kind>"
            self.ignored[key] = self.ignored.get(key, 0) + 1
            return
        metadata = obj.get("metadata")
        name = metadata.get("name") if is_map(metadata) else None
        label = _display_name(kind, metadata, index)
        report = Reporter(str(kind), label, self.errors)
        version = obj.get("apiVersion")
        if version is not None and version not in API_VERSIONS[kind]:
            report.error(
                "apiVersion",
                f"{version!r} is not supported (allowed: {', '.join(API_VERSIONS[kind])})",
            )
            return
        if not isinstance(name, str) or not name:
            report.error("metadata.name", "missing")
            return
        if kind == "Pod":
            self.add_pod(obj, report)
        elif kind == "Node":
            self.add_node(obj, name, report)
        elif kind == "NodeResourceTopology":
            self.add_nrt(obj, name, report)
        else:
            self.add_volcano(obj, name, report)

    def _duplicate(self, existing: object, report: Reporter) -> bool:
        if existing is not None:
            report.error("metadata.name", "listed twice; the first one is used")
            return True
        return False

    # -- kinds ------------------------------------------------------------------------

    def add_node(self, obj: Mapping[str, Any], name: str, report: Reporter) -> None:
        parts = self.part(name)
        if self._duplicate(parts.node, report):
            return
        metadata = obj["metadata"]
        labels = _string_map(metadata.get("labels"), "metadata.labels", report)
        annotations = _string_map(metadata.get("annotations"), "metadata.annotations", report)
        status = obj.get("status") if is_map(obj.get("status")) else {}
        trusted = True
        quantities: dict[str, dict[str, int]] = {}
        for key in ("allocatable", "capacity"):
            quantities[key], ok = self.resource_list(status.get(key), f"status.{key}", report)
            trusted = trusted and ok
        if not trusted:
            report.error("status", "quantities do not parse; the node's NUMA data is not used")
        has_label = KOORD_NODE_LABEL in labels
        koord = _koord_label(labels[KOORD_NODE_LABEL], report) if has_label else None
        parts.node = _NodeInfo(
            labels,
            annotations,
            quantities["allocatable"] or quantities["capacity"],
            quantities["capacity"] or quantities["allocatable"],
            trusted,
            koord,
            has_label,
        )

    def add_nrt(self, obj: Mapping[str, Any], name: str, report: Reporter) -> None:
        parts = self.part(name)
        if self._duplicate(parts.nrt, report):
            return
        data = parse_nrt(obj, name, report, self.units)
        if data.zones is None:
            report.error("zones", "malformed NUMA zones; this object is not used")
        parts.nrt = data

    def add_volcano(self, obj: Mapping[str, Any], name: str, report: Reporter) -> None:
        parts = self.part(name)
        if self._duplicate(parts.volcano, report):
            return
        data = parse_numatopology(obj, name, report, self.units)
        if data.zones is None:
            report.error("spec", "no usable NUMA data; only the policies are used")
        parts.volcano = data

    def add_pod(self, obj: Mapping[str, Any], report: Reporter) -> None:
        spec = obj.get("spec") if is_map(obj.get("spec")) else {}
        status = obj.get("status") if is_map(obj.get("status")) else {}
        node = spec.get("nodeName")
        if not isinstance(node, str) or not node or status.get("phase") in _FINISHED_PHASES:
            return  # not holding node resources
        annotations = obj["metadata"].get("annotations")
        if not is_map(annotations):
            return
        usage, exclusive = self.pod_usage(annotations, report)
        if usage is None:
            return
        parts = self.part(node)
        for numa, resources in usage.items():
            held = parts.usage.setdefault(numa, {})
            for resource, amount in resources.items():
                held[resource] = held.get(resource, 0) + amount
        numas = tuple(sorted(usage))
        parts.pods.append((report, node, numas))
        if exclusive or _single_numa_spec(annotations.get(KOORD_NUMA_SPEC)):
            if len(numas) == 1:
                parts.single.add(numas[0])
            else:
                parts.shared.update(numas)

    # -- helpers ------------------------------------------------------------------------

    def resource_list(
        self, raw: object, path: str, report: Reporter
    ) -> tuple[dict[str, int], bool]:
        if raw is None:
            return {}, True
        if not is_map(raw):
            report.error(path, "must be a map of resource -> quantity")
            return {}, False
        out: dict[str, int] = {}
        ok = True
        for resource, value in raw.items():
            try:
                out[str(resource)] = self.units.convert(str(resource), value)
            except InvalidInput as exc:
                report.error(f"{path}[{resource}]", str(exc))
                ok = False
        return out, ok

    def pod_usage(
        self, annotations: Mapping[str, Any], report: Reporter
    ) -> tuple[dict[int, dict[str, int]] | None, bool]:
        """Per-NUMA usage of one pod, and whether it holds an exclusive cpuset."""
        if KOORD_RESOURCE_STATUS in annotations:
            path = f"metadata.annotations[{KOORD_RESOURCE_STATUS}]"
            data = json_object(annotations[KOORD_RESOURCE_STATUS], path, report)
            if data is None:
                return None, False
            usage = self.numa_list(data.get("numaNodeResources"), path, report)
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
            return self.numa_map(data.get("numa"), f"{path}.numa", report), False
        return None, False

    def numa_list(
        self, entries: object, path: str, report: Reporter
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
            resources, ok = self.resource_list(entry.get("resources"), f"{here}.resources", report)
            if not ok:
                return None
            out[int(numa)] = resources  # type: ignore[arg-type]
        return out

    def numa_map(
        self, raw: object, path: str, report: Reporter
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
            got, ok = self.resource_list(resources, f"{path}[{key}]", report)
            if not ok:
                return None
            out[int(numa)] = got  # type: ignore[arg-type]
        return out

    # -- merge --------------------------------------------------------------------------

    def build(self) -> InventoryResult:
        nodes = [self.merge(name, self.parts[name]) for name in sorted(self.parts)]
        return InventoryResult(tuple(nodes), tuple(self.errors), dict(self.ignored))

    def merge(self, name: str, parts: _Parts) -> NodeTopology:
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
        self.check_pod_numas(parts, records)
        zones = tuple(_freeze_zone(i, records[i], parts.usage.get(i, {})) for i in sorted(records))
        if node is not None:
            allocatable, capacity = node.allocatable, node.capacity
        else:
            allocatable = _sum_zones(zones, "allocatable")
            capacity = _sum_zones(zones, "capacity")
        koord = _koord_view(node, nrt)
        states = tuple(_state(z.id, parts) for z in zones)
        kwargs = {k: v for k, v in _settings_items(settings) if v is not None}
        share = self.share
        return NodeTopology(
            name=name,
            labels=share.mapping(node.labels if node else {}),
            allocatable=share.mapping(allocatable),
            capacity=share.mapping(capacity),
            zones=share.zones(zones),
            annotations=share.mapping(node.annotations if node else {}),
            koord_policy=koord,
            volcano_policy=volcano.topology_policy if volcano else None,
            volcano_cpu_manager_policy=volcano.cpu_manager_policy if volcano else None,
            unaligned_devices=share.mapping(
                _unaligned(allocatable, zones) if zones and node else {}
            ),
            numa_states=share.items(states),
            sources=share.items(tuple(sources)),
            **kwargs,
        )

    def check_pod_numas(self, parts: _Parts, records: Mapping[int, ZoneRecord]) -> None:
        if not records:
            return
        for report, node, numas in parts.pods:
            missing = [n for n in numas if n not in records]
            if missing:
                report.error(
                    "metadata.annotations",
                    f"uses NUMA node(s) {missing} that node {node} does not report",
                )


def build_inventory(objects: Iterable[Mapping[str, Any]]) -> InventoryResult:
    """Build the inventory from raw Kubernetes objects. Never raises for bad input:
    each bad object, zone or field becomes an error string and the rest still loads."""
    builder = _Builder()
    for index, obj in enumerate(objects):
        builder.add(index, obj)
    return builder.build()


# -- small pure helpers --------------------------------------------------------------------


def _display_name(kind: object, metadata: object, index: int) -> str:
    if not is_map(metadata) or not isinstance(metadata.get("name"), str):
        return f"objects[{index}]"
    name = metadata["name"]
    namespace = metadata.get("namespace")
    if kind == "Pod" and isinstance(namespace, str) and namespace:
        return f"{namespace}/{name}"
    return name


def _string_map(raw: object, path: str, report: Reporter) -> dict[str, str]:
    if raw is None:
        return {}
    if not is_map(raw):
        report.error(path, "must be a map of string -> string")
        return {}
    out: dict[str, str] = {}
    for key, value in raw.items():
        if isinstance(value, str):
            out[str(key)] = value
        else:
            report.error(f"{path}[{key}]", f"{value!r} is not a string")
    return out


def _koord_view(node: _NodeInfo | None, nrt: NrtData | None) -> str | None:
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


def _koord_label(value: str, report: Reporter) -> str | None:
    if value in KOORD_LABEL_POLICIES:
        return KOORD_LABEL_POLICIES[value]
    allowed = ", ".join(repr(v) for v in KOORD_LABEL_POLICIES)
    report.error(
        f"metadata.labels[{KOORD_NODE_LABEL}]",
        f"unknown policy {value!r} (allowed: {allowed}); koord-scheduler matches no pod "
        "policy to it",
    )
    return f"unknown:{value}"


def _single_numa_spec(text: object) -> bool:
    # Malformed specs are the dialect reader's business (lint); here they just don't count.
    try:
        data = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return False
    return isinstance(data, dict) and data.get("numaTopologyPolicy") == "SingleNUMANode"


def _numa_id(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 63


def _freeze_zone(numa: int, record: ZoneRecord, used: Mapping[str, int]) -> NumaZone:
    available = {
        resource: record.available.get(resource, max(0, amount - used.get(resource, 0)))
        for resource, amount in record.allocatable.items()
    }
    return NumaZone(
        id=numa,
        capacity=dict(record.capacity),
        allocatable=dict(record.allocatable),
        available=available,
        costs=dict(record.costs),
    )


def _sum_zones(zones: tuple[NumaZone, ...], attr: str) -> dict[str, int]:
    total: dict[str, int] = {}
    for zone in zones:
        for resource, amount in getattr(zone, attr).items():
            total[resource] = total.get(resource, 0) + amount
    return total


def _is_device(resource: str) -> bool:
    # Device plugins register domain-qualified names (nvidia.com/gpu); hugepages and the
    # native resources never carry a slash.
    return "/" in resource


def _unaligned(allocatable: Mapping[str, int], zones: tuple[NumaZone, ...]) -> dict[str, int]:
    in_zones = _sum_zones(zones, "allocatable")
    return {
        resource: count - in_zones.get(resource, 0)
        for resource, count in allocatable.items()
        if _is_device(resource) and count > in_zones.get(resource, 0)
    }


def _state(numa: int, parts: _Parts) -> str:
    if numa in parts.shared:
        return "shared"
    if numa in parts.single:
        return "single"
    return "idle"


def _settings_items(settings: Settings) -> Iterable[tuple[str, object]]:
    for name in Settings.__slots__:
        yield name, getattr(settings, name)
