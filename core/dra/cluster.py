"""A pod's DRA claims over the nodes it may go to: ``fits`` when one node fits now,
``unchecked`` when none does but one is not known exactly, ``no-room-now`` when the rest
would fit once devices free up, ``impossible`` when every node never fits (the message gives
the commonest reason and how many nodes it holds for). No DRA claim at all: ``None``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from core.dra.evaluate import DraInventory, NodeVerdict, evaluate_node
from core.dra.extended import node_claims
from core.dra.pools import NodeRef
from core.dra.verdict import FITS, NO_ROOM_NOW, UNCHECKED

IMPOSSIBLE: Final = "impossible"


@dataclass(frozen=True, slots=True)
class ClusterVerdict:
    verdict: str  # fits | unchecked | no-room-now | impossible
    message: str
    nodes: Mapping[str, NodeVerdict]


def evaluate_cluster(
    pod: Mapping[str, Any], nodes: Sequence[NodeRef], inv: DraInventory
) -> ClusterVerdict | None:
    per_node: dict[str, NodeVerdict] = {}
    for node in nodes:
        claims = node_claims(pod, inv, node)
        if claims:
            per_node[node.name] = evaluate_node(claims, node, inv)
    if not per_node:
        return None
    found = Counter(v.verdict for v in per_node.values())
    for verdict in (FITS, UNCHECKED, NO_ROOM_NOW):
        if found[verdict]:
            first = next(v for v in per_node.values() if v.verdict == verdict)
            return ClusterVerdict(verdict, first.message, per_node)
    reasons = Counter(v.message for v in per_node.values())
    reason, count = reasons.most_common(1)[0]
    message = f"on {count} of {len(per_node)} nodes: {reason}"
    return ClusterVerdict(IMPOSSIBLE, message, per_node)
