"""The CPUs koord-scheduler holds back on each NUMA node, from koordlet's NRT annotations
(koordinator-sh/koordinator ``pkg/scheduler/plugins/nodenumaresource/topology_options.go
NewTopologyOptions``). Since v1.7.0 (#2355) they come off each NUMA node's CPU amount, which
decides the NUMA hints; v1.4 to v1.6 only kept cpuset pods off them. Unchanged to a7a1b76:

- ``kubelet.koordinator.sh/cpu-manager-policy`` ``reservedCPUs``: the kubelet's reserved CPUs
  (whatever the policy says);
- ``node.koordinator.sh/pod-cpu-allocs``: the cpusets of kubelet-managed pods (an entry counts
  only with ``managedByKubelet``, a ``uid`` and a non-empty ``cpuset``: getPodAllocsCPUSet);
- ``node.koordinator.sh/reservation`` ``reservedCPUs`` (GetReservedCPUs; its ``resources``
  and ``applyPolicy`` do not change the CPUs held back here);
- ``node.koordinator.sh/system-qos-resource`` ``cpuset`` when ``cpusetExclusive`` is absent or
  true (SystemQOSResource.IsCPUSetExclusive).

Upstream takes their union and counts, per NUMA node, the CPUs of the union that koordlet's
``node.koordinator.sh/cpu-topology`` places there (a CPU the topology lacks counts nowhere;
no topology: nothing is held back). An annotation that does not parse holds nothing back
(upstream logs it and goes on); numagate reports it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from core.errors import InvalidInput
from core.inventory.cpuset import parse_cpuset
from core.inventory.records import Reporter, json_object
from core.model import is_map

POD_CPU_ALLOCS: Final = "node.koordinator.sh/pod-cpu-allocs"
NODE_RESERVATION: Final = "node.koordinator.sh/reservation"
SYSTEM_QOS: Final = "node.koordinator.sh/system-qos-resource"
KUBELET_PATH: Final = "metadata.annotations[kubelet.koordinator.sh/cpu-manager-policy]"

# The categories in the order a CPU listed twice is attributed (each CPU counts once).
KUBELET, PODS, RESERVATION, SYSTEM_QOS_CPUS = 0, 1, 2, 3
CATEGORIES: Final = ("kubelet", "pods", "reservation", "system-qos")

Held = tuple[int, int, int, int]  # CPUs per category on one NUMA node


def _cpus(text: object, path: str, report: Reporter) -> frozenset[int]:
    if text is None or text == "":
        return frozenset()
    try:
        return parse_cpuset(text)  # type: ignore[arg-type]
    except InvalidInput as exc:
        report.error(path, f"{exc}; koord-scheduler holds none of these CPUs back")
        return frozenset()


def _field(annotations: Mapping[str, Any], key: str, name: str, report: Reporter) -> object:
    path = f"metadata.annotations[{key}]"
    data = json_object(annotations[key], path, report) if key in annotations else None
    return None if data is None else data.get(name)


def _pod_allocs(annotations: Mapping[str, Any], report: Reporter) -> frozenset[int]:
    if POD_CPU_ALLOCS not in annotations:
        return frozenset()
    path = f"metadata.annotations[{POD_CPU_ALLOCS}]"
    raw = annotations[POD_CPU_ALLOCS]
    try:
        allocs = json.loads(raw) if isinstance(raw, str) else None
    except ValueError as exc:
        report.error(path, f"not valid JSON: {exc}")
        return frozenset()
    if allocs is None:  # JSON null: no pods (upstream unmarshals it to an empty list)
        return frozenset()
    if not isinstance(allocs, list):
        report.error(path, f"{raw!r} is not a JSON list of {{uid, cpuset, managedByKubelet}}")
        return frozenset()
    out: set[int] = set()
    for i, entry in enumerate(allocs):
        if not is_map(entry):
            report.error(f"{path}[{i}]", "must be an object {uid, cpuset, managedByKubelet}")
            continue
        if entry.get("managedByKubelet") is not True or not entry.get("uid"):
            continue
        cpuset = entry.get("cpuset")
        if cpuset:
            out |= _cpus(cpuset, f"{path}[{i}].cpuset", report)
    return frozenset(out)


def _system_qos(annotations: Mapping[str, Any], report: Reporter) -> frozenset[int]:
    if SYSTEM_QOS not in annotations:
        return frozenset()
    path = f"metadata.annotations[{SYSTEM_QOS}]"
    data = json_object(annotations[SYSTEM_QOS], path, report)
    if data is None or data.get("cpusetExclusive", True) is False:
        return frozenset()  # not exclusive: other pods may use these CPUs
    return _cpus(data.get("cpuset"), f"{path}.cpuset", report)


def held_cpus(
    annotations: object, kubelet_reserved: object, cpu_numa: Mapping[int, int], report: Reporter
) -> dict[int, Held]:
    """NUMA id -> CPUs held back per category (KUBELET, PODS, RESERVATION, SYSTEM_QOS_CPUS);
    only NUMA nodes that hold some back. ``kubelet_reserved``: the ``reservedCPUs`` of
    ``kubelet.koordinator.sh/cpu-manager-policy`` (core/inventory/nrt.py reads that JSON)."""
    if not is_map(annotations):
        return {}
    sets = (
        _cpus(kubelet_reserved, f"{KUBELET_PATH}.reservedCPUs", report),
        _pod_allocs(annotations, report),
        _cpus(
            _field(annotations, NODE_RESERVATION, "reservedCPUs", report),
            f"metadata.annotations[{NODE_RESERVATION}].reservedCPUs",
            report,
        ),
        _system_qos(annotations, report),
    )
    if not cpu_numa or not any(sets):
        return {}
    counts: dict[int, list[int]] = {}
    seen: set[int] = set()
    for category, cpus in enumerate(sets):
        for cpu in sorted(cpus - seen):
            numa = cpu_numa.get(cpu)
            if numa is not None:  # CPUDetails.KeepOnly: unknown CPUs count nowhere
                counts.setdefault(numa, [0, 0, 0, 0])[category] += 1
        seen |= cpus
    return {numa: (c[0], c[1], c[2], c[3]) for numa, c in sorted(counts.items())}
