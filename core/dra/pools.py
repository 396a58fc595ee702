"""The resource pools a node can use (structured/internal/stable/pools_stable.go at v0.36.3,
GatherPools and NodeMatches): a slice reaches a node by ``nodeName``, ``allNodes`` or
``nodeSelector`` (or per device with ``perDeviceNodeSelection``); a pool is the newest
generation of a driver's pool; it is complete when all ``resourceSliceCount`` slices of that
generation exist, incomplete otherwise, and invalid when two of its devices share a name."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from core.dra.objects import Device, NodeSelectorTerm, Requirement, ResourceSlice


@dataclass(frozen=True, slots=True)
class NodeRef:
    """What DRA reads of a Node: its name, labels and the extended resources it advertises
    (status.allocatable, counts)."""

    name: str
    labels: Mapping[str, str]
    allocatable: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PoolDevice:
    driver: str
    pool: str
    device: Device
    slice: ResourceSlice

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.device.name)


@dataclass(frozen=True, slots=True)
class Pool:
    driver: str
    name: str
    devices: tuple[PoolDevice, ...]  # those reaching the node
    incomplete: bool = False
    invalid: str = ""


def _requirement(req: Requirement, value: str | None) -> bool:
    op = req.operator
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op == "In":
        return value is not None and value in req.values
    if op == "NotIn":
        return value is None or value not in req.values
    # Gt / Lt: one integer value on both sides, else no match (nodeaffinity)
    if value is None or len(req.values) != 1:
        return False
    try:
        have, bound = int(value), int(req.values[0])
    except ValueError:
        return False
    return have > bound if op == "Gt" else have < bound


def selector_matches(terms: tuple[NodeSelectorTerm, ...], node: NodeRef) -> bool:
    """core/v1 NodeSelector: any term whose requirements all hold; a term with no
    requirement matches nothing; matchFields knows only ``metadata.name``."""
    for term in terms:
        if not term.expressions and not term.fields:
            continue
        if all(_requirement(r, node.labels.get(r.key)) for r in term.expressions) and all(
            _requirement(r, node.name if r.key == "metadata.name" else None) for r in term.fields
        ):
            return True
    return False


def node_matches(
    node: NodeRef, name: str, all_nodes: bool, terms: tuple[NodeSelectorTerm, ...] | None
) -> bool:
    if name:
        return node.name == name
    if all_nodes:
        return True
    if terms is not None:
        return selector_matches(terms, node)
    return False


def _reaches(s: ResourceSlice, node: NodeRef) -> bool:
    if s.shared_counters:
        return True  # counter sets belong to every node of their pool
    if s.node_name or s.all_nodes or s.node_selector is not None:
        return node_matches(node, s.node_name, s.all_nodes, s.node_selector)
    if s.per_device_node_selection:
        return any(node_matches(node, d.node_name, d.all_nodes, d.node_selector) for d in s.devices)
    return False


def gather_pools(
    candidates: Iterable[ResourceSlice],
    node: NodeRef,
    pools: Mapping[tuple[str, str], Sequence[ResourceSlice]],
) -> list[Pool]:
    """The pools reaching ``node``, with the devices it may use. ``candidates``: the slices
    that may reach the node; ``pools``: every slice of each pool, wherever published. Per
    pool the newest generation among the slices reaching the node counts; if those are not
    all of its slices, a newer generation elsewhere makes the pool obsolete (skipped), else
    the pool is complete when the generation's slices published everywhere add up (as
    upstream)."""
    reaching: dict[tuple[str, str], list[ResourceSlice]] = {}
    for s in candidates:
        if not _reaches(s, node):
            continue
        found = reaching.setdefault((s.driver, s.pool), [])
        if found and s.generation < found[0].generation:
            continue
        if found and s.generation > found[0].generation:
            found.clear()
        found.append(s)
    out = []
    for (driver, name), found in sorted(reaching.items()):
        generation = found[0].generation
        if len(found) != found[0].slice_count:
            same = pools.get((driver, name), ())
            if any(s.generation > generation for s in same):
                continue  # obsolete: a newer generation is being published
            if sum(1 for s in same if s.generation == generation) != found[0].slice_count:
                out.append(Pool(driver, name, (), incomplete=True))
                continue
        names = [d.name for s in found if not s.shared_counters for d in s.devices]
        if len(names) != len(set(names)):
            dup = next(n for n in names if names.count(n) > 1)
            out.append(Pool(driver, name, (), invalid=f"duplicate device name {dup}"))
            continue
        devices = tuple(
            PoolDevice(driver, name, d, s)
            for s in found
            for d in s.devices
            if not s.per_device_node_selection
            or node_matches(node, d.node_name, d.all_nodes, d.node_selector)
        )
        out.append(Pool(driver, name, devices))
    return out
