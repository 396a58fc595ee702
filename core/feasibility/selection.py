"""Which nodes a pod may land on by its spec alone: spec.nodeName, spec.nodeSelector and
required node affinity, as big-int bitsets over the snapshot's nodes (labels.Selector and
nodeaffinity semantics)."""

from __future__ import annotations

from core.errors import InvalidInput
from core.model import NodeSelectorRequirement, NodeSelectorTerm, PodIntent
from core.snapshot.snapshot import Snapshot


def _requirement_bits(req: NodeSelectorRequirement, snap: Snapshot, *, field: bool) -> int:
    op = req.operator
    if field:
        if req.key != "metadata.name" or op not in ("In", "NotIn"):
            raise InvalidInput(
                f"matchFields {req.key} {op}: only metadata.name with In or NotIn is allowed"
            )
        named = 0
        for v in req.values:
            i = snap.name_index.get(v)
            if i is not None:
                named |= 1 << i
        return named if op == "In" else snap.all_bits & ~named
    if op in ("In", "NotIn"):
        bits = 0
        for v in req.values:
            bits |= snap.label_bits.get((req.key, v), 0)
        # NotIn also matches nodes without the label (labels.Selector semantics)
        return bits if op == "In" else snap.all_bits & ~bits
    if op == "Exists":
        return snap.key_bits.get(req.key, 0)
    if op == "DoesNotExist":
        return snap.all_bits & ~snap.key_bits.get(req.key, 0)
    if op in ("Gt", "Lt"):
        return _compare_bits(req, snap)
    raise InvalidInput(
        f"node affinity operator {op!r} for {req.key}: allowed In, NotIn, Exists, "
        "DoesNotExist, Gt, Lt"
    )


def _compare_bits(req: NodeSelectorRequirement, snap: Snapshot) -> int:
    if len(req.values) != 1:
        raise InvalidInput(f"node affinity {req.key} {req.operator} needs exactly one value")
    try:
        bound = int(req.values[0])
    except ValueError:
        raise InvalidInput(
            f"node affinity {req.key} {req.operator} value {req.values[0]!r} is not an integer"
        ) from None
    bits = 0
    for value, b in snap.values_of.get(req.key, ()):
        try:
            number = int(value)
        except ValueError:
            continue  # a label that is not an integer never matches Gt/Lt
        if (number > bound) if req.operator == "Gt" else (number < bound):
            bits |= b
    return bits


def _term_bits(term: NodeSelectorTerm, snap: Snapshot) -> int:
    if not term.match_expressions and not term.match_fields:
        return 0  # an empty term selects no node
    bits = snap.all_bits
    for req in term.match_expressions:
        bits &= _requirement_bits(req, snap, field=False)
    for req in term.match_fields:
        bits &= _requirement_bits(req, snap, field=True)
    return bits


def selection(intent: PodIntent, snap: Snapshot) -> tuple[int, int, int]:
    """Bitsets of the nodes allowed by nodeName, by nodeSelector, by required affinity."""
    by_name = snap.all_bits
    if intent.node_name:
        i = snap.name_index.get(intent.node_name)
        by_name = 0 if i is None else 1 << i
    by_selector = snap.all_bits
    for k, v in intent.node_selector.items():
        by_selector &= snap.label_bits.get((k, v), 0)
    by_affinity = snap.all_bits
    if intent.required_terms:
        by_affinity = 0
        for term in intent.required_terms:  # terms are ORed, expressions ANDed
            by_affinity |= _term_bits(term, snap)
    return by_name, by_selector, by_affinity
