"""The feasibility step of the validating handler: every template's intent evaluated
against the inventory (on the event loop when known to be short, else in a thread under
the admission deadline), classified by core.feasibility.decision, and the enforcement
modes applied to the failed checks.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from core.feasibility.decision import decide, unchecked
from core.feasibility.verdicts import Evaluation, evaluate
from core.intent.workloads import PodTemplate
from core.model import Decision, PodIntent
from webhook.config import Config
from webhook.inventory.state import EVALUATION_COST, InventoryView
from webhook.review.response import Outcome, allowed, denied
from webhook.review.runtime import InventoryRead, Runtime

# The kernel runs on the event loop (no thread hop, which costs CPU per review and a
# malloc arena per pool thread) when the slowest evaluation seen on this inventory, times
# INLINE_SAFETY, fits both the time left before the deadline and INLINE_BUDGET_SECONDS
# (an inline evaluation holds up every other request of the worker). Otherwise it runs in
# a thread under the deadline, as for the first evaluation of a new inventory (which
# calibrates the estimate). docs/benchmarks.md has the measured costs.
INLINE_SAFETY = 4.0
INLINE_BUDGET_SECONDS = 0.02
# The estimate decays towards recent costs, so one slow outlier (preemption on a loaded
# machine) does not keep an inventory on the thread path for good.
COST_DECAY = 0.95


@dataclass
class _Checks:
    """Failed checks of one review, before the enforcement modes are applied."""

    failures: list[tuple[str, str]] = field(default_factory=list)  # (check, message)
    warnings: list[str] = field(default_factory=list)
    volatile: bool = False  # see Outcome.volatile
    usage: set[int] = field(default_factory=set)  # see Outcome.usage

    def fail(self, check: str, message: str) -> None:
        self.failures.append((check, message))


def _at(template: PodTemplate, message: str) -> str:
    return f"{template.path}: {message}" if template.path else message


def _inline(cost: float | None, count: int, remaining: float, config: Config, nodes: int) -> bool:
    """Whether to evaluate on the event loop (see INLINE_SAFETY)."""
    limit = config.timeouts.inline_nodes
    if nodes <= limit:
        return True
    if limit == 0 or cost is None:  # 0: every evaluation in a thread, under the deadline
        return False
    return cost * count * INLINE_SAFETY <= min(remaining, INLINE_BUDGET_SECONDS)


async def _evaluate_all(
    intents: Sequence[PodIntent],
    view: InventoryView,
    *,
    runtime: Runtime,
    config: Config,
    deadline: float,
) -> list[Evaluation] | None:
    """Evaluate every intent before ``deadline``; None when there is not enough time.

    Inline when the evaluation is known to be short (see INLINE_SAFETY), else in a thread
    so that the deadline can be enforced while the kernel runs.
    """
    snapshot = view.snapshot
    costs: list[float] = []

    def work() -> list[Evaluation]:
        # CPU time of this thread: waiting for the GIL is not the kernel's cost.
        t0 = time.thread_time()
        out = [evaluate(i, snapshot, full=False) for i in intents]
        costs.append((time.thread_time() - t0) / max(1, len(intents)))
        return out

    start = runtime.clock()
    remaining = deadline - start
    if remaining <= 0:
        return None
    cost = view.memo.get(EVALUATION_COST)
    if _inline(cost, len(intents), remaining, config, len(snapshot.nodes)):
        results = work()
    else:
        try:
            results = await asyncio.wait_for(asyncio.to_thread(work), remaining)
        except TimeoutError:
            return None
    if costs:
        decayed = 0.0 if cost is None else cost * COST_DECAY
        view.memo[EVALUATION_COST] = max(costs[0], decayed)
    runtime.metrics.reviews.feasibility(runtime.clock() - start)  # batched
    return results


def _classify(checks: _Checks, template: PodTemplate, decision: Decision) -> None:
    if decision.outcome == "impossible":
        checks.fail("feasibility", _at(template, decision.message))
    elif decision.outcome == "no-room-now":
        for text in decision.warnings:
            checks.fail("noRoomNow", _at(template, text))
    else:
        checks.warnings += [_at(template, w) for w in decision.warnings]


async def _feasibility(
    checks: _Checks,
    pairs: Sequence[tuple[PodTemplate, PodIntent]],
    inventory: InventoryRead,
    *,
    runtime: Runtime,
    config: Config,
    deadline: float,
) -> None:
    view, stale = inventory.view, inventory.stale
    if view is None:
        checks.volatile = True
        checks.warnings += unchecked("no-inventory").warnings
        return
    checks.volatile = checks.volatile or stale
    results = await _evaluate_all(
        [i for _, i in pairs], view, runtime=runtime, config=config, deadline=deadline
    )
    if results is None:
        checks.volatile = True
        runtime.metrics.timeouts.inc()
        checks.warnings += unchecked("deadline").warnings
        return
    for (template, _), evaluation in zip(pairs, results, strict=True):
        _classify(checks, template, decide(evaluation, stale=stale))
        checks.usage.update(evaluation.usage_classes)


def _apply_modes(checks: _Checks, config: Config) -> Outcome:
    denials: list[str] = []
    warnings = list(checks.warnings)
    modes = {
        "annotations": config.modes.annotations,
        "feasibility": config.modes.feasibility,
        "noRoomNow": config.modes.no_room_now,
    }
    violations: list[tuple[str, str, str]] = []
    for check, message in checks.failures:
        mode = modes[check]
        violations.append((check, mode, message))
        if mode == "enforce":
            denials.append(message)
        elif mode == "warn":
            warnings.append(message)
    outcome = (
        denied("; ".join(denials), warnings=warnings) if denials else allowed(warnings=warnings)
    )
    if violations or checks.volatile or checks.usage:
        # every field given: cheaper than dataclasses.replace's walk of the fields
        outcome = Outcome(
            outcome.allowed,
            outcome.code,
            outcome.message,
            outcome.reason,
            outcome.warnings,
            outcome.patch,
            outcome.audit,
            tuple(violations),
            checks.volatile,
            frozenset(checks.usage),
        )
    return outcome
