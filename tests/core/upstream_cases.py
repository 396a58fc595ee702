"""Builders for the cases translated from the upstream schedulers' tests: raw Kubernetes
objects (Node, NodeResourceTopology, Numatopology, bound Pods) through the real path,
read_intent -> build_inventory -> evaluate -> rank, nothing mocked."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.feasibility.evaluate import evaluate
from core.feasibility.snapshot import Snapshot
from core.intent.read import read_intent
from core.intent.workloads import pod_templates
from core.inventory.build import build_inventory
from core.model import NodeTopology, NodeVerdict, PodIntent
from core.scoring.args import ScoringArgs
from core.scoring.rank import rank


@dataclass(frozen=True)
class Outcome:
    intent: PodIntent
    nodes: Mapping[str, NodeTopology]
    verdicts: Mapping[str, NodeVerdict]
    ranked: tuple[NodeVerdict, ...]
    errors: tuple[str, ...]


def run(
    pod: Mapping[str, Any], objects: Sequence[Mapping[str, Any]], args: ScoringArgs | None = None
) -> Outcome:
    (template,) = pod_templates(pod)
    intent = read_intent(template).intent
    inventory = build_inventory(objects)
    evaluation = evaluate(intent, Snapshot.build(inventory.nodes))
    ranked = rank(intent, inventory.nodes, evaluation.verdicts, args)
    return Outcome(
        intent,
        {n.name: n for n in inventory.nodes},
        {v.name: v for v in evaluation.verdicts},
        tuple(ranked),
        inventory.errors,
    )


def k8s_node(
    name: str,
    allocatable: Mapping[str, str] | None = None,
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    status = (
        {"allocatable": dict(allocatable), "capacity": dict(allocatable)} if allocatable else {}
    )
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": dict(labels or {}),
            "annotations": dict(annotations or {}),
        },
        "status": status,
    }


def k8s_pod(
    name: str,
    containers: Sequence[Mapping[str, Any]],
    *,
    node: str | None = None,
    annotations: Mapping[str, str] | None = None,
    scheduler: str | None = None,
    init: Sequence[Mapping[str, Any]] = (),
    phase: str | None = "Running",
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [dict(c) for c in containers]}
    if init:
        spec["initContainers"] = [dict(c) for c in init]
    if node:
        spec["nodeName"] = node
    if scheduler:
        spec["schedulerName"] = scheduler
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "annotations": dict(annotations or {})},
        "spec": spec,
    }
    if node and phase:
        pod["status"] = {"phase": phase}
    return pod


def ctr(
    name: str = "c",
    requests: Mapping[str, str] | None = None,
    limits: Mapping[str, str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A container; ``limits`` default to ``requests`` (Guaranteed) unless given."""
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = dict(requests)
    lim = requests if limits is None else limits
    if lim:
        resources["limits"] = dict(lim)
    return {"name": name, "image": "busybox", "resources": resources, **extra}


def js(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))
