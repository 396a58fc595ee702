"""The ``Node`` object: labels, annotations, node-level quantities and the Koordinator
node label (core/inventory/build.py describes the rules)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from core.errors import InvalidInput
from core.inventory.records import Reporter, Units
from core.model import is_map

KOORD_NODE_LABEL: Final = "node.koordinator.sh/numa-topology-policy"
KOORD_LABEL_POLICIES: Final[Mapping[str, str | None]] = {
    "": None,
    "BestEffort": "best-effort",
    "Restricted": "restricted",
    "SingleNUMANode": "single-numa-node",
}


@dataclass(slots=True)
class NodeInfo:
    labels: dict[str, str]
    annotations: dict[str, str]
    allocatable: dict[str, int]
    capacity: dict[str, int]
    trusted: bool  # every quantity parsed
    koord_policy: str | None
    has_koord_label: bool


def parse_node(obj: Mapping[str, Any], report: Reporter, units: Units) -> NodeInfo:
    metadata = obj["metadata"]
    labels = string_map(metadata.get("labels"), "metadata.labels", report)
    annotations = string_map(metadata.get("annotations"), "metadata.annotations", report)
    status = obj.get("status") if is_map(obj.get("status")) else {}
    trusted = True
    quantities: dict[str, dict[str, int]] = {}
    for key in ("allocatable", "capacity"):
        quantities[key], ok = resource_list(units, status.get(key), f"status.{key}", report)
        trusted = trusted and ok
    if not trusted:
        report.error("status", "quantities do not parse; the node's NUMA data is not used")
    has_label = KOORD_NODE_LABEL in labels
    koord = _koord_label(labels[KOORD_NODE_LABEL], report) if has_label else None
    return NodeInfo(
        labels,
        annotations,
        quantities["allocatable"] or quantities["capacity"],
        quantities["capacity"] or quantities["allocatable"],
        trusted,
        koord,
        has_label,
    )


def resource_list(
    units: Units, raw: object, path: str, report: Reporter
) -> tuple[dict[str, int], bool]:
    """A ``ResourceList`` in core units, and whether every quantity parsed."""
    if raw is None:
        return {}, True
    if not is_map(raw):
        report.error(path, "must be a map of resource -> quantity")
        return {}, False
    out: dict[str, int] = {}
    ok = True
    for resource, value in raw.items():
        try:
            out[str(resource)] = units.convert(str(resource), value)
        except InvalidInput as exc:
            report.error(f"{path}[{resource}]", str(exc))
            ok = False
    return out, ok


def string_map(raw: object, path: str, report: Reporter) -> dict[str, str]:
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
