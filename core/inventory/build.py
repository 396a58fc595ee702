"""The inventory: plain Kubernetes objects -> one NodeTopology per node (docs/contracts.md: Inventory input).

Accepted kinds (others are counted in ``InventoryResult.ignored`` and otherwise skipped):

- ``Node`` (v1): labels, annotations, ``status.allocatable`` / ``status.capacity``, and the
  Koordinator label ``node.koordinator.sh/numa-topology-policy``.
- ``NodeResourceTopology`` (topology.node.k8s.io v1alpha2, v1alpha1): zones and kubelet
  settings (core/inventory/nrt.py).
- ``Numatopology`` (nodeinfo.volcano.sh v1alpha1): CPU zones and Volcano's policies
  (core/inventory/volcano.py).
- ``Pod`` (v1), bound (``spec.nodeName`` set, not Succeeded/Failed): per-NUMA usage,
  Koordinator NUMA node states, the requests kube-scheduler counts (``bound_requests``) and
  HAMi's card usage (``gpu_usage``) (core/inventory/usage.py).

Objects are merged by node name (an NRT and a Numatopology are named after their node):
each object is identified and parsed on its own (``identify``, ``parse``: node.py, nrt.py,
volcano.py, usage.py), then the parts of one name are merged (merge.py). The incremental
inventory (incremental.py) reuses both steps per object.

Rules, each chosen so that bad or partial data never makes a pod look impossible:

- Zones come from the NRT when it is usable, else from the Numatopology, else there are
  none (verdict ``unknown-topology``). A Node whose quantities do not parse is kept but
  loses its zones for the same reason.
- ``available`` per zone and resource: the source's value when it gives one (an NRT
  exporter already accounts for running pods; a Numatopology gives its free cpuset).
  Otherwise ``allocatable`` minus what bound pods hold on that NUMA node according to
  Koordinator's ``scheduling.koordinator.sh/resource-status`` (``numaNodeResources``), never
  below 0. Pods without per-NUMA data cannot be placed on a NUMA node and are not
  subtracted; Volcano's ``volcano.sh/topology-decision`` is not read (Volcano never
  subtracts it).
- ``bound_requests``: the sum of the bound pods' requests as kube-scheduler's NodeInfo
  counts them (100m CPU / 200Mi memory for a container without), None without bound pods.
  ``gpu_usage``: per HAMi card, what pods with ``hami.io/vgpu-node`` hold
  (``hami.io/vgpu-devices-allocated``; core/scoring/hami_devices.py).
- The CPUs koord-scheduler holds back (koordlet's NRT annotations, core/inventory/koord_cpus.py)
  per NUMA node, in ``koord_held`` (aligned with ``zones``): the kubelet's reserved CPUs
  leave the zone's cpu ``allocatable`` and ``available``; the kubelet-managed pods', the node
  reservation's and the exclusive system QoS CPUs leave ``available`` only (a pod that needs
  them is no-room-now, never denied: the pods' CPUs are in use, not gone, and the kubelet
  gives the other two to pods of other schedulers, judged on the same zones).
- Settings: NRT attributes > NRT ``topologyPolicies`` > koordlet NRT annotations >
  Numatopology ``spec.policies`` > the NodeTopology defaults.
- A device-plugin resource (a ``domain/name`` resource) whose count in Node
  ``status.allocatable`` exceeds the sum over the zones has that many devices without
  NUMA affinity (``unaligned_devices``).
- Koordinator NUMA node states (node_allocation.go ``addPodAllocation``,
  ``NUMANodeSharedStatus``): only a pod holding a cpuset counts (an LS pod with a
  SingleNUMANode spec but no cpuset marks nothing; a cpuset that does not parse drops the
  pod's NUMA data); its NUMA nodes are those of its CPUs in koordlet's CPU topology (NRT
  annotation ``node.koordinator.sh/cpu-topology``), else those of its numaNodeResources; on
  one NUMA node it makes that node ``single``, spread over several it makes each ``shared``;
  ``shared`` wins over ``single``; no such pod: ``idle``.
  ``numa_states`` is aligned with ``zones``.
- ``koord_policy`` is what koord-scheduler sees, in kubelet spelling: the label when it is
  non-empty, else koord-scheduler's own narrow reading of the NRT ``topologyPolicies``
  (the first entry that maps: only BestEffort, Restricted, SingleNUMANodePodLevel do;
  none of them, and NRT attributes, give ``"none"``), else ``"none"`` for an empty label, else None (no label,
  no NRT: Koordinator finds no NUMA resources). A label value Koordinator does not define
  is reported and kept as ``"unknown:<value>"``, so it matches no pod policy, as in
  koord-scheduler.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from core.inventory.merge import Parts, add_pod, merge
from core.inventory.node import NodeInfo, parse_node
from core.inventory.nrt import NrtData, parse_nrt
from core.inventory.records import Reporter, Units
from core.inventory.share import Sharer
from core.inventory.usage import PodUsage, parse_pod
from core.inventory.volcano import VolcanoData, parse_numatopology
from core.model import NodeTopology, is_map

API_VERSIONS: Final[Mapping[str, tuple[str, ...]]] = {
    "Node": ("v1",),
    "Pod": ("v1",),
    "NodeResourceTopology": ("topology.node.k8s.io/v1alpha2", "topology.node.k8s.io/v1alpha1"),
    "Numatopology": ("nodeinfo.volcano.sh/v1alpha1",),
}
Parsed = NodeInfo | NrtData | VolcanoData | PodUsage | None


@dataclass(frozen=True, slots=True)
class InventoryResult:
    nodes: tuple[NodeTopology, ...]  # sorted by name
    errors: tuple[str, ...]  # each names kind, name and field
    ignored: Mapping[str, int] = field(default_factory=dict)  # kind -> objects not used


@dataclass(frozen=True, slots=True)
class Identified:
    """An object of a kind the inventory reads, with a usable name."""

    kind: str
    name: str
    report: Reporter


def identify(index: int, obj: object, errors: list[str]) -> Identified | str | None:
    """The object's kind and name (errors reported to ``errors``); a str: an ignored kind
    (the key of ``InventoryResult.ignored``); None: an object in error."""
    if not is_map(obj):
        errors.append(f"objects[{index}]: is a {type(obj).__name__}, not an object")
        return None
    kind = obj.get("kind")
    if kind not in API_VERSIONS:
        return str(kind) if kind else "<no kind>"
    metadata = obj.get("metadata")
    name = metadata.get("name") if is_map(metadata) else None
    report = Reporter(str(kind), _display_name(kind, metadata, index), errors)
    version = obj.get("apiVersion")
    if version is not None and version not in API_VERSIONS[kind]:
        report.error(
            "apiVersion",
            f"{version!r} is not supported (allowed: {', '.join(API_VERSIONS[kind])})",
        )
        return None
    if not isinstance(name, str) or not name:
        report.error("metadata.name", "missing")
        return None
    return Identified(str(kind), name, report)


def parse(found: Identified, obj: Mapping[str, Any], units: Units) -> Parsed:
    """What one object contributes (None: a pod not bound, or finished)."""
    kind, name, report = found.kind, found.name, found.report
    if kind == "Pod":
        return parse_pod(obj, report, units)
    if kind == "Node":
        return parse_node(obj, report, units)
    if kind == "NodeResourceTopology":
        nrt = parse_nrt(obj, name, report, units)
        if nrt.zones is None:
            report.error("zones", "malformed NUMA zones; this object is not used")
        return nrt
    volcano = parse_numatopology(obj, name, report, units)
    if volcano.zones is None:
        report.error("spec", "no usable NUMA data; only the policies are used")
    return volcano


def attach(parts: Parts, kind: str, data: Parsed) -> None:
    """Put ``data`` (of a kind the inventory reads, not None) into its place in ``parts``."""
    if kind == "Pod":
        add_pod(parts, data)  # type: ignore[arg-type]
    else:
        setattr(parts, SLOTS[kind], data)


# Where each kind but Pod goes in a node's Parts (the incremental inventory uses it too).
SLOTS: Final = {"Node": "node", "NodeResourceTopology": "nrt", "Numatopology": "volcano"}


def build_inventory(objects: Iterable[Mapping[str, Any]]) -> InventoryResult:
    """Build the inventory from raw Kubernetes objects. Never raises for bad input:
    each bad object, zone or field becomes an error string and the rest still loads."""
    errors: list[str] = []
    units = Units()
    parts: dict[str, Parts] = {}
    ignored: dict[str, int] = {}
    for index, obj in enumerate(objects):
        found = identify(index, obj, errors)
        if isinstance(found, str):
            ignored[found] = ignored.get(found, 0) + 1
            continue
        if found is None:
            continue
        slot = SLOTS.get(found.kind)
        held = parts.get(found.name)
        if slot is not None and held is not None and getattr(held, slot) is not None:
            found.report.error("metadata.name", "listed twice; the first one is used")
            continue
        data = parse(found, obj, units)
        if data is None:
            continue  # a pod not bound, or finished
        name = data.node if isinstance(data, PodUsage) else found.name
        attach(parts.setdefault(name, Parts()), found.kind, data)
    share = Sharer()
    nodes = tuple(merge(name, parts[name], share) for name in sorted(parts))
    return InventoryResult(nodes, tuple(errors), ignored)


def _display_name(kind: object, metadata: object, index: int) -> str:
    if not is_map(metadata) or not isinstance(metadata.get("name"), str):
        return f"objects[{index}]"
    name = metadata["name"]
    namespace = metadata.get("namespace")
    if kind == "Pod" and isinstance(namespace, str) and namespace:
        return f"{namespace}/{name}"
    return name
