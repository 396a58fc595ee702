"""What ``explain`` and ``pending`` show of a pod's DRA claims: the verdict over the nodes it
may go to and, per node and request, which devices could serve it, grouped by their NUMA
node / PCIe root attributes (core.dra.topology.placements), with how many are free."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from core.dra.evaluate import DraInventory
from core.dra.extended import node_claims
from core.dra.objects import DraError
from core.dra.pod import (
    alignment,
    candidate_nodes,
    cpu_driver_findings,
    judge_pod,
    node_ref,
    uses_dra,
)
from core.dra.topology import placements
from core.model import NodeTopology, PodIntent

# node verdicts best first, for the rows
ORDER = ("fits", "no-room-now", "unchecked", "never-fits")


def _requests(
    pod: Mapping[str, Any], node: NodeTopology, inv: DraInventory
) -> list[dict[str, Any]]:
    ref = node_ref(node)
    out = []
    for r in placements(node_claims(pod, inv, ref), ref, inv):
        groups: dict[str, dict[str, int]] = {}
        for label, n in r.groups().items():
            groups[label] = {"matching": n, "free": r.groups(free_only=True).get(label, 0)}
        out.append(
            {
                "request": r.request,
                "count": r.count,
                "devices": [
                    {
                        "device": "/".join(p.device),
                        "free": p.free,
                        "sure": p.sure,
                        "topology": {k: str(v) for k, v in sorted(p.topology.items())},
                    }
                    for p in r.devices
                ],
                "groups": groups,
            }
        )
    return out


def claims_report(
    pod: Mapping[str, Any],
    intent: PodIntent,
    nodes: Sequence[NodeTopology],
    inv: DraInventory,
    *,
    replicas: int = 1,
) -> dict[str, Any] | None:
    """explain's ``claims`` section (docs/dra.md), or None for a pod without DRA claims;
    ``replicas``: the pods of the template that run at once (a Deployment's replicas)."""
    if not uses_dra(pod, inv):
        return None
    try:
        verdict = judge_pod(pod, intent, nodes, inv)
        # the DRA CPU driver's rules, as /validate gives them (webhook/dra/admission.py)
        cpu = [
            {"code": f.code, "severity": f.severity, "message": f.message}
            for f in cpu_driver_findings(pod, intent, verdict, nodes, inv, replicas)
        ]
    except DraError as exc:
        return {
            "verdict": "unchecked",
            "message": str(exc),
            "nodes": [],
            "alignment": None,
            "cpuDriver": [],
        }
    if verdict is None:
        return {
            "verdict": "unchecked",
            "message": "no node the pod may go to",
            "nodes": [],
            "alignment": None,
            "cpuDriver": cpu,
        }
    allowed = {n.name: n for n in candidate_nodes(intent, nodes)}
    rows = sorted(verdict.nodes.values(), key=lambda v: (ORDER.index(v.verdict), v.node))
    found = alignment(pod, intent, verdict, nodes, inv)
    return {
        "verdict": verdict.verdict,
        "message": verdict.message,
        "nodes": [
            {
                "name": v.node,
                "verdict": v.verdict,
                "reason": v.message,
                "requests": _requests(pod, allowed[v.node], inv),
            }
            for v in rows
        ],
        "alignment": None if found is None else found.message,
        "cpuDriver": cpu,
    }


def _groups(groups: Mapping[str, Mapping[str, int]]) -> str:
    return ", ".join(f"{k}: {g['free']}/{g['matching']} free" for k, g in groups.items()) or "-"


def render_claims(section: Mapping[str, Any] | None, *, limit: int | None = None) -> list[str]:
    """The claims section as table lines (``limit``: at most that many nodes)."""
    if section is None:
        return []
    lines = [
        f"DRA claims: {section['verdict']}"
        + (f": {section['message']}" if section["message"] else "")
    ]
    nodes = section["nodes"]
    shown = nodes if limit is None else nodes[:limit]
    header = ("NODE", "VERDICT", "REQUEST", "NEEDS", "DEVICES BY NUMA NODE / PCIE ROOT")
    rows = [header]
    for n in shown:
        reqs = n["requests"] or [{"request": "-", "count": "-", "groups": {}}]
        for i, r in enumerate(reqs):
            rows.append(
                (
                    n["name"] if i == 0 else "",
                    n["verdict"] if i == 0 else "",
                    r["request"],
                    str(r["count"]),
                    _groups(r["groups"]),
                )
            )
        if n["reason"] and n["verdict"] != "fits":
            rows.append(("", "", "", "", f"why: {n['reason']}"))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r[:4], widths, strict=True)) + "  " + r[4]
              for r in rows]  # fmt: skip
    if len(shown) < len(nodes):
        lines.append(f"... {len(nodes) - len(shown)} more nodes with DRA devices")
    if section["alignment"]:
        lines.append(f"DRA and the Topology Manager: {section['alignment']}")
    lines += [
        f"DRA CPU driver ({f['severity']}, {f['code']}): {f['message']}"
        for f in section.get("cpuDriver") or ()
    ]
    return lines
