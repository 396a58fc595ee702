"""The pod's node selection: ``nodeSelector`` and the required node affinity terms, each
walked only within the limits of core.intent.limits."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from core.intent.findings import Ctx
from core.intent.limits import Limits, over
from core.model import NodeSelectorRequirement, NodeSelectorTerm, is_map

_TERMS: Final = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
_FIELDS: Final = ("matchExpressions", "matchFields")


def node_selector(spec: Mapping[str, Any], ctx: Ctx) -> dict[str, str]:
    selector = spec.get("nodeSelector")
    if not is_map(selector):
        return {}
    cap = ctx.limits.selector_labels
    if len(selector) > cap:
        found = f"{len(selector):,} labels"
        ctx.too_large(ctx.path("spec.nodeSelector"), over("spec.nodeSelector", found, cap))
        return {}
    return {str(k): str(v) for k, v in selector.items()}


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


def _over(terms: list[Any], limits: Limits) -> str | None:
    """Why ``terms`` are over the limits, or None; counts with len() only, and stops at
    the first excess."""
    if len(terms) > limits.terms:
        return over("nodeSelectorTerms", f"{len(terms):,} terms", limits.terms)
    requirements = values = 0
    for term in terms:
        for items in (term.get(f) for f in _FIELDS) if is_map(term) else ():
            if not isinstance(items, list):
                continue
            requirements += len(items)
            if requirements > limits.requirements:
                found = f"{requirements:,}+ requirements"
                return over("nodeSelectorTerms", found, limits.requirements, " over all terms")
            for e in items:
                vals = e.get("values") if is_map(e) else None
                values += len(vals) if isinstance(vals, list) else 0
                if values > limits.values:
                    found = f"{values:,}+ values"
                    return over("nodeSelectorTerms", found, limits.values, " over all terms")
    return None


def required_terms(spec: Mapping[str, Any], ctx: Ctx) -> tuple[NodeSelectorTerm, ...]:
    cur: Any = spec.get("affinity")
    for key in (
        "nodeAffinity",
        "requiredDuringSchedulingIgnoredDuringExecution",
        "nodeSelectorTerms",
    ):
        cur = cur.get(key) if is_map(cur) else None
    if not isinstance(cur, list):
        return ()
    why = _over(cur, ctx.limits)
    if why is not None:
        ctx.too_large(ctx.path(f"{_TERMS}.nodeSelectorTerms"), why)
        return ()
    return tuple(
        NodeSelectorTerm(
            _requirements(t.get("matchExpressions")), _requirements(t.get("matchFields"))
        )
        for t in cur
        if is_map(t)
    )
