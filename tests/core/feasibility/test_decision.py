"""One decision value (issue 13): decide returns the outcome with its messages and the
counts, and the webhook and lint read it instead of recounting verdicts."""

from __future__ import annotations

import dataclasses
from types import ModuleType

import pytest

from core.feasibility.decision import decide, unchecked
from core.feasibility.verdicts import evaluate
from core.model import Decision
from core.snapshot.snapshot import Snapshot
from tests.builders.model import container, cpu_node, node, pod


def _decide(nodes: list, cpus: int, *, stale: bool = False, impl: ModuleType) -> Decision:
    return decide(evaluate(pod(container(cpu=cpus)), Snapshot.build(nodes), impl=impl), stale=stale)


RESTRICTED = {"policy": "single-numa-node"}


@pytest.mark.parametrize(
    ("nodes", "cpus", "stale", "outcome", "why"),
    [
        ([cpu_node([4, 4], [4, 4], **RESTRICTED)], 2, False, "fits", ""),
        ([cpu_node([4, 4], [1, 1], **RESTRICTED)], 2, False, "no-room-now", ""),
        ([cpu_node([4, 4], [4, 4], **RESTRICTED)], 6, False, "impossible", ""),
        ([cpu_node([4, 4], [4, 4], **RESTRICTED)], 6, True, "unchecked", "stale-inventory"),
        ([], 6, False, "unchecked", "empty-inventory"),
        (
            [cpu_node([4], [4], name="a", **RESTRICTED), node("plain", [])],
            6,
            False,
            "unchecked",
            "no-numa-data",
        ),
    ],
    ids=["fits", "no-room-now", "impossible", "stale", "empty", "no-numa-data"],
)
def test_outcomes(
    impl: ModuleType, nodes: list, cpus: int, stale: bool, outcome: str, why: str
) -> None:
    d = _decide(nodes, cpus, stale=stale, impl=impl)
    assert (d.outcome, d.unchecked) == (outcome, why)
    assert d.allowed == (outcome != "impossible")
    assert bool(d.message) == (outcome == "impossible")
    assert bool(d.warnings) == (outcome in ("no-room-now", "unchecked"))
    assert all(len(w) < 120 for w in d.warnings)


def test_counts_are_the_evaluations(impl: ModuleType) -> None:
    nodes = [cpu_node([4, 4], [1, 1], name=f"n{i}", **RESTRICTED) for i in range(3)]
    d = _decide(nodes, 2, impl=impl)
    assert d.outcome == "no-room-now" and d.counts["no-room-now"] == 3
    assert "3 node(s) could run this pod" in d.warnings[0]


def test_nothing_selected_is_unchecked(impl: ModuleType) -> None:
    snap = Snapshot.build([cpu_node([4], [4], name="a")])
    d = decide(evaluate(pod(container(cpu=1), node_name="ghost"), snap, impl=impl))
    assert (d.outcome, d.unchecked) == ("unchecked", "not-selected")


@pytest.mark.parametrize(
    ("why", "text"),
    [
        ("no-inventory", "feasibility not checked: no inventory loaded yet"),
        ("deadline", "feasibility not checked: the admission deadline (?timeout=) was too near"),
    ],
)
def test_reviews_the_webhook_cannot_evaluate(why: str, text: str) -> None:
    d = unchecked(why)  # type: ignore[arg-type]
    assert (d.outcome, d.allowed, d.warnings, d.unchecked) == ("unchecked", True, (text,), why)


def test_decision_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Decision("fits").outcome = "impossible"  # type: ignore[misc]
