"""`numagate explain`: the report (docs/contracts.md: explain -o json JSON shape) and its table rendering.

The ``decision`` is what the webhooks would answer: the handlers the endpoints use
(webhook.review.handlers.HANDLERS) decide on the request the apiserver would send for the
object (a dry-run CREATE), offline, with the warnings shortened as on the wire. For a Pod:
``patch`` is the mutating webhook's JSONPatch and ``allowed`` / ``message`` the validating
webhook's answer for the patched pod (the apiserver calls the validating webhooks after
the mutating ones). For a workload the mutating webhook changes only the Pods its
controller creates: ``patch`` is the mutation of a pod made from the template, re-rooted
under the template's path, and ``allowed`` / ``message`` the validating webhook's answer
for the workload as written.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from core.feasibility.verdicts import evaluate
from core.intent.workloads import PodTemplate
from core.model import VERDICTS, NodeTopology, NodeVerdict, PodIntent
from core.mutation.patch import PatchOp, annotation_ops, apply_ops, escape_pointer_token
from core.quantity import format_quantity
from core.scoring.args import ScoringArgs
from core.scoring.rank import rank
from core.snapshot.snapshot import Snapshot
from webhook.dra.report import render_claims
from webhook.review.pipeline import HANDLERS, Runtime, deadline_for, decide_review
from webhook.review.response import Outcome, clean_warnings
from webhook.review.wire import AdmissionRequest, GroupVersionKind, GroupVersionResource, UserInfo

SUMMARY_THRESHOLD = 40  # above this many nodes the table shows a summary and the first rows
FIRST_ROWS = 20
EXPLAIN_UID = "numagate-explain"


class ExplainError(Exception):
    """The webhook code failed on the object (the message says why)."""


# ----------------------------------------------------------------------------- decision


def template_pointer(path: str) -> str:
    """JSON pointer of a template field path: ``spec.tasks[0].template`` ->
    ``/spec/tasks/0/template`` (``""`` for a Pod)."""
    tokens: list[str] = []
    for part in path.split(".") if path else []:
        name, _, rest = part.partition("[")
        if name:
            tokens.append(escape_pointer_token(name))
        tokens.extend(index for index in rest.replace("]", "").split("[") if index)
    return "".join(f"/{t}" for t in tokens)


def _resolve(doc: Any, pointer: str) -> Any:
    node = doc
    for token in pointer.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        node = node[int(token)] if isinstance(node, list) else node[token]
    return node


def explain_request(
    obj: Mapping[str, Any], *, kind: str, namespace: str, name: str
) -> AdmissionRequest:
    """The dry-run CREATE request for ``obj``, as the apiserver would send it."""
    api_version = str(obj.get("apiVersion") or "v1")
    group, _, version = api_version.rpartition("/")
    return AdmissionRequest(
        uid=EXPLAIN_UID,
        kind=GroupVersionKind(version, kind, group),
        resource=GroupVersionResource(version, kind.lower() + "s", group),
        operation="CREATE",
        name=name,
        namespace=namespace,
        user_info=UserInfo("numagate-explain", "", []),
        object=dict(obj),
        dry_run=True,
    )


def pod_for_template(template: PodTemplate) -> dict[str, Any]:
    """The pod a controller would create from ``template`` (with the annotations the
    controller adds, such as a Volcano task's topologyPolicy)."""
    metadata = copy.deepcopy(dict(template.metadata))
    annotations = metadata.get("annotations")
    if isinstance(annotations, Mapping | None):
        # the controller's annotations win (Volcano's job controller overwrites them)
        merged = {**(annotations or {}), **template.extra_annotations}
        if merged:
            metadata["annotations"] = merged
    metadata["namespace"] = template.namespace
    metadata.setdefault("name", template.name)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": copy.deepcopy(dict(template.spec)),
    }


def _as_sent(ops: Sequence[PatchOp]) -> list[PatchOp]:
    """The operations as the apiserver decodes them: apply_ops inserts the values
    themselves, which must share nothing with each other or with the printed patch."""
    decoded: list[PatchOp] = orjson.loads(orjson.dumps(list(ops)))
    return decoded


def _rebase(op: PatchOp, base: str) -> PatchOp:
    moved = {**op, "path": base + str(op["path"])}
    if "from" in op:
        moved["from"] = base + str(op["from"])
    return moved


def template_patch(
    obj: Mapping[str, Any],
    template: PodTemplate,
    pod: Mapping[str, Any],
    pod_ops: Sequence[PatchOp],
) -> list[PatchOp]:
    """``pod_ops`` (the mutation of :func:`pod_for_template`'s pod) as operations on the
    workload: spec operations re-rooted under the template, annotation changes recomputed
    against the template's own annotations (the controller-added ones stay with the
    controller's field)."""
    base = template_pointer(template.path)
    mutated = copy.deepcopy(dict(pod))
    apply_ops(mutated, _as_sent(pod_ops))
    node = _resolve(obj, base)
    metadata = node.get("metadata") if isinstance(node, Mapping) else None
    metadata = metadata if isinstance(metadata, Mapping) else None
    own = (metadata or {}).get("annotations") or {}
    ops: list[PatchOp] = []
    after = mutated["metadata"].get("annotations") or {}
    if isinstance(own, Mapping) and isinstance(after, Mapping):  # else validation denies
        desired = {
            k: v for k, v in after.items() if k in own or k not in template.extra_annotations
        }
        if desired != dict(own):
            ops = annotation_ops(metadata, desired, base=base)
    return ops + [_rebase(op, base) for op in pod_ops if str(op["path"]).startswith("/spec")]


async def _call(request: AdmissionRequest, webhook: str, runtime: Runtime) -> Outcome:
    config = runtime.config()
    try:
        return await decide_review(
            request,
            handler=HANDLERS[webhook],  # type: ignore[index]  # "mutate" or "validate"
            runtime=runtime,
            deadline=deadline_for(config, runtime.clock(), None),
            config=config,
        )
    except Exception as exc:  # a bug in a handler: say so instead of a traceback
        raise ExplainError(f"the {webhook} webhook failed: {exc!r}") from exc


async def webhook_decision(
    obj: Mapping[str, Any], template: PodTemplate, runtime: Runtime
) -> dict[str, Any]:
    """The docs/contracts.md: explain -o json ``decision`` for ``obj``: the mutating webhook's patch and the
    validating webhook's answer, both from the endpoints' handlers (see the module docstring)."""
    ident = {"kind": template.kind, "namespace": template.namespace, "name": template.name}
    if template.path:
        pod = pod_for_template(template)
        request = explain_request(pod, kind="Pod", namespace=template.namespace, name=template.name)
        mutate = await _call(request, "mutate", runtime)
        patch = template_patch(obj, template, pod, list(mutate.patch))
        validated: Mapping[str, Any] = obj  # the workload itself is never mutated
    else:
        mutate = await _call(explain_request(obj, **ident), "mutate", runtime)
        patch = list(mutate.patch)
        validated = copy.deepcopy(dict(obj))
        apply_ops(validated, _as_sent(patch))
    validate = await _call(explain_request(validated, **ident), "validate", runtime)
    warnings: list[str] = []
    for w in [*clean_warnings(mutate.warnings), *clean_warnings(validate.warnings)]:
        if w not in warnings:
            warnings.append(w)
    return {
        "allowed": validate.allowed,
        "message": "" if validate.allowed else validate.message,
        "warnings": warnings,
        "patch": patch,
    }


def decide_offline(
    obj: Mapping[str, Any], template: PodTemplate, runtime: Runtime
) -> dict[str, Any]:
    """:func:`webhook_decision` from synchronous code (the CLI)."""
    return asyncio.run(webhook_decision(obj, template, runtime))


# ----------------------------------------------------------------------------- report


def ranking(
    intent: PodIntent,
    nodes: Sequence[NodeTopology],
    verdicts: Sequence[NodeVerdict],
    args: ScoringArgs | None = None,
) -> list[NodeVerdict]:
    """The `fits` verdicts best first: the scheduler's scoring (core.scoring.rank.rank)."""
    return rank(intent, nodes, verdicts, args)


def _placement(v: NodeVerdict) -> str:
    if not v.numa:
        return "fits (no NUMA alignment on this node)"
    zones = ",".join(map(str, v.numa))
    hint = "preferred" if v.preferred else "not preferred"
    return f"fits on NUMA node{'s' if len(v.numa) > 1 else ''} {zones} ({hint} hint)"


def _fits_reason(v: NodeVerdict) -> str:
    """The placement, then the feasibility note and the scoring note (core.scoring.rank.rank
    appends its explanation to the verdict's reason)."""
    return f"{_placement(v)}; {v.reason}" if v.reason else _placement(v)


def _useful_order(v: NodeVerdict, pos: Mapping[str, int]) -> tuple[Any, ...]:
    # fits first (ranked), then the near misses, then the rest; by name within a verdict
    return (VERDICTS.index(v.verdict), pos.get(v.name, len(pos)), v.name)


def build_report(
    *,
    kind: str,
    namespace: str,
    name: str,
    intent: PodIntent,
    snapshot: Snapshot,
    decision: Mapping[str, Any],
    scoring: ScoringArgs | None = None,
) -> dict[str, Any]:
    """Everything explain prints, as the docs/contracts.md: explain -o json JSON document. ``decision`` comes from
    :func:`webhook_decision`; ``scoring`` is the configuration's ``scoring`` section."""
    evaluation = evaluate(intent, snapshot, full=True)
    ranked = ranking(intent, snapshot.nodes, evaluation.verdicts, scoring)
    pos = {v.name: i for i, v in enumerate(ranked)}
    # the ranked verdicts carry the score and the scoring explanation: they replace the
    # plain `fits` verdicts in the rows
    by_name = {v.name: v for v in ranked}
    verdicts = [by_name.get(v.name, v) if v.verdict == "fits" else v for v in evaluation.verdicts]
    rows = sorted(verdicts, key=lambda v: _useful_order(v, pos))
    nodes = {n.name: n for n in snapshot.nodes}
    held = {n.name for n in snapshot.nodes if n.koord_held}
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
                "score": v.score if v.verdict == "fits" else None,
                "reason": _with_held(
                    _fits_reason(v) if v.verdict == "fits" else v.reason, nodes.get(v.name)
                ),
                **({"cpus_held": held_cpus(nodes[v.name])} if v.name in held else {}),
            }
            for v in rows
        ],
        "ranking": [v.name for v in ranked],
        "decision": {
            "allowed": bool(decision["allowed"]),
            "message": str(decision.get("message", "")),
            "warnings": list(decision.get("warnings", [])),
            "patch": [dict(op) for op in decision.get("patch", [])],
        },
    }


_HELD_WORDS = (
    "reserved by the kubelet",
    "held by kubelet-managed pods",
    "reserved by the node reservation",
    "reserved for system QoS",
)


def held_cpus(node: NodeTopology) -> list[dict[str, int]]:
    """Per NUMA node, the CPUs koord-scheduler holds back (NodeTopology.koord_held): the
    zone's CPUs, then each category (explain's JSON ``cpus_held``)."""
    out = []
    for zone, held in zip(node.zones, node.koord_held, strict=False):
        entry = {"numa": zone.id, "cpus": zone.capacity.get("cpu", 0) // 1000}
        entry.update(zip(("kubelet", "pods", "reservation", "system-qos"), held, strict=True))
        out.append(entry)
    return out


def _with_held(reason: str, node: NodeTopology | None) -> str:
    """The reason, then what koord-scheduler holds back per NUMA node, e.g. "NUMA 0: 16
    CPUs, 2 reserved by the kubelet, 8 held by kubelet-managed pods"."""
    if node is None or not node.koord_held:
        return reason
    parts = []
    for zone, held in zip(node.zones, node.koord_held, strict=False):
        if any(held):
            words = [f"{n} {w}" for n, w in zip(held, _HELD_WORDS, strict=True) if n]
            cpus = zone.capacity.get("cpu", 0) // 1000
            parts.append(f"NUMA {zone.id}: {cpus} CPUs, " + ", ".join(words))
    note = "; ".join(parts)
    return f"{reason}; {note}" if reason else note


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
    lines += render_claims(report.get("claims"), limit=None if all_rows else FIRST_ROWS)
    decision = report["decision"]
    verdict = "ALLOW" if decision["allowed"] else "DENY"
    lines.append(
        f"decision: {verdict}" + (f": {decision['message']}" if decision["message"] else "")
    )
    lines.extend(f"warning: {w}" for w in decision["warnings"])
    if report["ranking"]:
        lines.append("ranking: " + ", ".join(report["ranking"]))
    return "\n".join(lines)
