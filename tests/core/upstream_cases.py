"""The path the cases translated from the upstream schedulers' tests take: raw Kubernetes
objects (tests.builders.objects) through read_intent -> build_inventory -> evaluate ->
rank, nothing mocked."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.feasibility.verdicts import evaluate
from core.intent.read import read_intent
from core.intent.workloads import pod_templates
from core.inventory.build import build_inventory
from core.model import NodeTopology, NodeVerdict, PodIntent
from core.scoring.args import ScoringArgs
from core.scoring.rank import rank
from core.snapshot.snapshot import Snapshot


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
