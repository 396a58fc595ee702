"""``numagate pending [--kubeconfig F] [--context C] [-n NS | -A] [-o table|json|yaml]``:
the Pending pods whose topology policy or NUMA demand is why they wait.

For every pod not bound to a node (phase Pending), the pod's intent is read as the webhook
reads it and evaluated against the cluster's inventory (read as ``explain`` reads it).
Pods that some node fits now are left out (their wait has another cause), unless their DRA
claims fit no node now (``rule: DRA claims``, webhook/dra/report.py; every entry of a pod
with claims carries its ``claims`` section, as explain shows it); the others are
listed with the rule that decides (``koordinator policy single-numa-node``), the outcome
(``impossible``: no node ever fits, ``no-room-now``: a node would once resources free
up), the verdicts per node summarized, and the closest node with its reason: where the
scheduler says "0/500 nodes are available", this says which rule and which node was
nearest. Exit 0 (also when none), 2 when the cluster cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from core.model import VERDICTS, NodeVerdict
from webhook.cli import cluster
from webhook.cli.output import render_yaml

EXIT_OK, EXIT_USAGE = 0, 2
EXPLAINED = ("impossible", "no-room-now")


def closest(verdicts: Sequence[NodeVerdict], near_miss: NodeVerdict | None) -> NodeVerdict | None:
    """The node nearest to taking the pod: the evaluation's near miss, else the best
    verdict (in VERDICTS order), by name within a verdict."""
    if near_miss is not None:
        return near_miss
    ranked = sorted(verdicts, key=lambda v: (VERDICTS.index(v.verdict), v.name))
    return ranked[0] if ranked else None


def summarize(counts: Mapping[str, int]) -> str:
    # NRT verdicts in their order, then DRA node verdicts (never-fits, ...)
    known = [v for v in VERDICTS if counts.get(v)]
    return ", ".join(f"{counts[v]} {v}" for v in [*known, *sorted(set(counts) - set(known))])


def explain_pods(
    pods: Sequence[Mapping[str, Any]], inventory: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """One entry per pod numagate can explain (docs/contracts.md: Verdicts verdicts, core.feasibility)."""
    from core.dra.inventory import read_inventory as read_dra
    from core.feasibility.decision import decide
    from core.feasibility.verdicts import evaluate
    from core.intent.read import read_intent
    from core.intent.workloads import pod_templates
    from core.inventory.build import build_inventory
    from core.snapshot.snapshot import Snapshot
    from webhook.dra.report import claims_report

    nodes = build_inventory(inventory).nodes
    snapshot = Snapshot.build(nodes)
    dra = read_dra(inventory)
    out: list[dict[str, Any]] = []
    for pod in pods:
        templates = pod_templates(pod)
        if not templates:
            continue
        intent = read_intent(templates[0]).intent
        evaluation = evaluate(intent, snapshot)
        decision = decide(evaluation)
        claims = claims_report(pod, intent, nodes, dra)
        if decision.outcome in EXPLAINED:
            near = closest(evaluation.verdicts, evaluation.near_miss)
            entry: dict[str, Any] = {
                "namespace": templates[0].namespace,
                "name": templates[0].name,
                "rule": evaluation.rule,
                "outcome": decision.outcome,
                "message": decision.message or "; ".join(decision.warnings),
                "nodes": {v: n for v in VERDICTS if (n := decision.counts.get(v, 0))},
                "closest": None
                if near is None
                else {"node": near.name, "verdict": near.verdict, "reason": near.reason},
            }
        elif claims is not None and claims["verdict"] in EXPLAINED:
            entry = _dra_entry(templates[0].namespace, templates[0].name, claims)
        else:
            continue
        if claims is not None:
            entry["claims"] = claims
        out.append(entry)
    return out


def _dra_entry(namespace: str, name: str, claims: Mapping[str, Any]) -> dict[str, Any]:
    """A pod that waits on its DRA claims (webhook/dra/report.py): the node verdicts
    counted, the closest node the best one (rows are best first)."""
    counts: dict[str, int] = {}
    for n in claims["nodes"]:
        counts[n["verdict"]] = counts.get(n["verdict"], 0) + 1
    first = claims["nodes"][0] if claims["nodes"] else None
    return {
        "namespace": namespace,
        "name": name,
        "rule": "DRA claims",
        "outcome": claims["verdict"],
        "message": claims["message"],
        "nodes": counts,
        "closest": None
        if first is None
        else {"node": first["name"], "verdict": first["verdict"], "reason": first["reason"]},
    }


def render_table(entries: Sequence[Mapping[str, Any]]) -> str:
    header = ("NAMESPACE", "NAME", "RULE", "OUTCOME", "NODES", "CLOSEST")
    rows = [header]
    for e in entries:
        near = e["closest"]
        where = f"{near['node']} ({near['verdict']}: {near['reason']})" if near else "-"
        rows.append(
            (e["namespace"], e["name"], e["rule"], e["outcome"], summarize(e["nodes"]), where)
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1]
             for r in rows]  # fmt: skip
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from webhook.logs import setup_logging

    setup_logging("error")
    if args.all_namespaces and args.namespace:
        print("numagate pending: -n and -A are mutually exclusive", file=sys.stderr)
        return EXIT_USAGE
    try:
        api = cluster.client(args)
        namespace = None if args.all_namespaces else cluster.namespace(args)
        pods = cluster.pending_pods(api, namespace)
        entries = explain_pods(pods, cluster.read_inventory(api)) if pods else []
    except cluster.ClusterError as exc:
        print(f"numagate pending: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.output == "json":
        sys.stdout.write(json.dumps({"pods": entries}, indent=2) + "\n")
    elif args.output == "yaml":
        sys.stdout.write(render_yaml({"pods": entries}))
    elif entries:
        sys.stdout.write(render_table(entries))
    else:
        where = "any namespace" if namespace is None else f"namespace {namespace}"
        print(f"No Pending pods in {where} wait on a topology rule.", file=sys.stderr)
    return EXIT_OK
