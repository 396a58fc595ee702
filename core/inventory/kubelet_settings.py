"""The kubelet settings an NRT reports (``attributes``, and the deprecated
``topologyPolicies`` list of v1alpha1): Topology Manager policy, scope and options, CPU and
memory manager policies. Invalid values are reported and ignored (the default stays), as
scheduler-plugins ``nodeconfig/topologymanager.go`` does."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from core.inventory.records import (
    Reporter,
    Settings,
    parse_bool,
)
from core.model import POLICIES, is_map

MAX_NUMA_NODES_CAP: Final = 1024  # scheduler-plugins caps topologyManagerMaxNUMANodes here


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


def read_choice(value: object, allowed: tuple[str, ...], path: str, report: Reporter) -> str | None:
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
    """NRT v1alpha2 ``attributes`` (and ours, where an exporter knows them: docs/contracts.md: Inventory input)."""
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
        settings.tm_policy = read_choice(v, POLICIES, p, report)
    if "topologyManagerScope" in values:
        p, v = values["topologyManagerScope"]
        settings.tm_scope = read_choice(v, SCOPES, p, report)
    if "topologyManagerMaxNUMANodes" in values:
        # scheduler-plugins v0.34.7 updateFromAttributes: valid above 1, clamped to the cap.
        p, v = values["topologyManagerMaxNUMANodes"]
        digits = v.strip().lstrip("0") if isinstance(v, str) else ""
        if digits.isdigit() and (len(digits) > 4 or int(digits) > MAX_NUMA_NODES_CAP):
            v = str(MAX_NUMA_NODES_CAP)
        settings.max_numa_nodes = _int_attr(v, p, report, 2, MAX_NUMA_NODES_CAP)
    if "topologyManagerPolicyOptions" in values:
        p, v = values["topologyManagerPolicyOptions"]
        _tm_options(v, p, report, settings)
    if "cpuManagerPolicy" in values:
        p, v = values["cpuManagerPolicy"]
        settings.cpu_manager_policy = read_choice(v, CPU_MANAGER_POLICIES, p, report)
    if "cpuManagerPolicyOptions" in values:
        p, v = values["cpuManagerPolicyOptions"]
        _cpu_options(v, p, report, settings)
    if "memoryManagerPolicy" in values:
        p, v = values["memoryManagerPolicy"]
        settings.memory_manager_policy = read_choice(v, MEMORY_MANAGER_POLICIES, p, report)
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
