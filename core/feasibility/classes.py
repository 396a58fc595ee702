"""What evaluating a pod against a snapshot keeps per snapshot, on its kernel (built once
per snapshot and implementation, so dropped with it): the topology classes counted with
every node selected, their node policy groups and the groups' plans per pod policy key
(core.feasibility.verdicts reads them; docs/benchmarks.md, issue 27's second round)."""

from __future__ import annotations

from array import array
from types import ModuleType
from typing import Any, NamedTuple

from core.feasibility import compat
from core.model import NodeTopology, PodIntent
from core.snapshot.snapshot import Snapshot

# Kernel.scan's group codes: a policy code, or a group whose plan is a verdict / not made.
VERDICT, UNPLANNED = -1, -2


class Plans(NamedTuple):
    """Per node policy group, what compatibility and the simulation decide for one
    ``compat.plan_key`` (None: not asked yet), and the same as Kernel.scan reads it."""

    plans: list[Any]  # verdicts._Plan, None: not made yet
    codes: array[int]
    flags: array[int]


class Classes(NamedTuple):
    """Per snapshot (kept on its kernel, built by the first evaluation): class_selection
    with every node selected, each class's node policy group (``compat.node_key``, equal
    for all nodes of a class) and a node of each group, the classes' monotone flags, and
    the groups' plans by ``compat.plan_key`` (at most MAX_PLAN_KEYS, then started over).
    The counting pass over 10,000 nodes was ~17% of an impossible pod's decision, the
    plans and the scan's stops to make them ~35% after that (docs/benchmarks.md)."""

    inside: array[int]
    outside: array[int]
    firsts: array[int]
    group_of: array[int]  # -1: a class without nodes
    group_nodes: tuple[NodeTopology, ...]
    monotone: array[int]
    plans: dict[tuple[object, ...], Plans]

    def plans_for(self, intent: PodIntent) -> Plans:
        key = compat.plan_key(intent)
        got = self.plans.get(key)
        if got is None:
            if len(self.plans) >= MAX_PLAN_KEYS:
                self.plans.clear()
            ng = len(self.group_nodes)
            got = Plans([None] * ng, array("q", [UNPLANNED]) * ng, array("q", bytes(8 * ng)))
            self.plans[key] = got
        return got


# Distinct (scheduler, policy, qos, scope, exclusive) kept per snapshot: a handful in a
# real cluster; the bound only stops a stream of made-up policy names from growing it.
MAX_PLAN_KEYS = 64


def classes_of(snap: Snapshot, module: ModuleType, kernel: Any) -> Classes:
    """``snap``'s Classes, kept on ``kernel`` (its kernel of ``module``): built on first use."""
    got: Classes | None = kernel.classes
    if got is None:
        inside, outside, firsts = module.class_selection(
            snap.all_bits, snap.topo_bits, snap.shape_of, snap.topo_of
        )
        groups: dict[tuple[object, ...], int] = {}
        group_of = array("q")
        for i in firsts:
            g = -1 if i < 0 else groups.setdefault(compat.node_key(snap.nodes.base[i]), len(groups))
            group_of.append(g)
        nodes = {g: snap.nodes.base[i] for g, i in zip(group_of, firsts, strict=True) if g >= 0}
        got = kernel.classes = Classes(
            inside,
            outside,
            firsts,
            group_of,
            tuple(nodes[g] for g in range(len(groups))),
            array("q", snap.topo_monotone),
            {},
        )
    return got
