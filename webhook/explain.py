"""`numagate explain`: the report (DESIGN 4.4 JSON shape) and its table rendering."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from core.evaluate import decide, evaluate
from core.model import VERDICTS, NodeTopology, NodeVerdict, PodIntent
from core.quantity import format_quantity
from core.snapshot import Snapshot

SUMMARY_THRESHOLD = 40  # above this many nodes the table shows a summary and the first rows
FIRST_ROWS = 20


def ranking(
    intent: PodIntent, nodes: Sequence[NodeTopology], verdicts: Sequence[NodeVerdict]
) -> list[NodeVerdict]:
    """The `fits` verdicts best first: the scheduler's scoring (core.scoring.rank)."""
    from core.scoring import rank

    return rank(intent, nodes, verdicts)


def _useful_order(
    v: NodeVerdict, scores: Mapping[str, int | None], pos: Mapping[str, int]
) -> tuple[Any, ...]:
    # fits first (ranked), then the near misses, then the rest; by name within a verdict
    return (VERDICTS.index(v.verdict), pos.get(v.name, len(pos)), v.name)


def build_report(
    *,
    kind: str,
    namespace: str,
    name: str,
    intent: PodIntent,
    snapshot: Snapshot,
    stale: bool = False,
) -> dict[str, Any]:
    """Everything explain prints, as the DESIGN 4.4 JSON document."""
    evaluation = evaluate(intent, snapshot, full=True)
    ranked = ranking(intent, snapshot.nodes, evaluation.verdicts)
    scores = {v.name: v.score for v in ranked}
    pos = {v.name: i for i, v in enumerate(ranked)}
    rows = sorted(evaluation.verdicts, key=lambda v: _useful_order(v, scores, pos))
    decision = decide(evaluation, stale=stale)
    return {
        "object": {"kind": kind, "namespace": namespace, "name": name},
        "intent": {
            "scheduler": intent.scheduler,
            "policy": intent.policy,
            "exclusive": intent.exclusive,
            "scope": intent.scope,
            "qos": intent.qos,
            "requests": {
                k: format_quantity(k, v) for k, v in sorted(intent.pod_requests.items()) if v
            },
        },
        "nodes": [
            {
                "name": v.name,
                "verdict": v.verdict,
                "numa": list(v.numa),
                "preferred": v.preferred,
                "score": scores.get(v.name),
                "reason": v.reason,
            }
            for v in rows
        ],
        "ranking": [v.name for v in ranked],
        "decision": {
            "allowed": decision.allowed,
            "message": decision.message,
            "warnings": list(decision.warnings),
            "patch": [dict(op) for op in decision.patch],
        },
    }


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ",".join(map(str, value)) if value else "-"
    return str(value)


def render_table(report: Mapping[str, Any], *, all_rows: bool = False) -> str:
    """A table for people: the intent, the decision, then one row per node (useful rows
    first); large clusters get a count per verdict and the first rows unless ``all_rows``."""
    obj = report["object"]
    intent = report["intent"]
    lines = [
        f"{obj['kind']} {obj['namespace']}/{obj['name']}: scheduler {intent['scheduler']}, "
        f"policy {intent['policy'] or '-'}, QoS {intent['qos']}, requests "
        + (", ".join(f"{k}={v}" for k, v in intent["requests"].items()) or "-"),
    ]
    nodes = report["nodes"]
    counts: dict[str, int] = {}
    for n in nodes:
        counts[n["verdict"]] = counts.get(n["verdict"], 0) + 1
    lines.append(
        f"{len(nodes)} nodes: " + ", ".join(f"{counts[v]} {v}" for v in VERDICTS if v in counts)
    )
    shown = nodes if all_rows or len(nodes) <= SUMMARY_THRESHOLD else nodes[:FIRST_ROWS]
    header = ("NODE", "VERDICT", "NUMA", "PREFERRED", "SCORE", "REASON")
    rows = [
        (
            n["name"],
            n["verdict"],
            _cell(n["numa"]),
            _cell(n["preferred"]),
            _cell(n["score"]),
            n["reason"],
        )
        for n in shown
    ]
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(5)]
    for r in (header, *rows):
        lines.append(
            "  ".join(c.ljust(w) for c, w in zip(r[:5], widths, strict=True)) + "  " + r[5]
        )
    if len(shown) < len(nodes):
        lines.append(f"... {len(nodes) - len(shown)} more nodes (use --all to list every node)")
    decision = report["decision"]
    verdict = "ALLOW" if decision["allowed"] else "DENY"
    lines.append(
        f"decision: {verdict}" + (f": {decision['message']}" if decision["message"] else "")
    )
    lines.extend(f"warning: {w}" for w in decision["warnings"])
    if report["ranking"]:
        lines.append("ranking: " + ", ".join(report["ranking"]))
    return "\n".join(lines)
