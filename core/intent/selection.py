"""The pod's required node affinity terms."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.model import (
    NodeSelectorRequirement,
    NodeSelectorTerm,
    is_map,
)


def _requirements(items: Any) -> tuple[NodeSelectorRequirement, ...]:
    out = []
    if isinstance(items, list):
        for e in items:
            if not is_map(e):
                continue
            values = e.get("values")
            vals = tuple(str(v) for v in values) if isinstance(values, list) else ()
            out.append(
                NodeSelectorRequirement(str(e.get("key", "")), str(e.get("operator", "")), vals)
            )
    return tuple(out)


def required_terms(spec: Mapping[str, Any]) -> tuple[NodeSelectorTerm, ...]:
    cur: Any = spec.get("affinity")
    for key in (
        "nodeAffinity",
        "requiredDuringSchedulingIgnoredDuringExecution",
        "nodeSelectorTerms",
    ):
        cur = cur.get(key) if is_map(cur) else None
    if not isinstance(cur, list):
        return ()
    return tuple(
        NodeSelectorTerm(
            _requirements(t.get("matchExpressions")), _requirements(t.get("matchFields"))
        )
        for t in cur
        if is_map(t)
    )
