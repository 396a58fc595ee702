"""From request bytes to the HTTP answer: :func:`answer`. The aiohttp endpoints and
``numagate review`` both call it, so the CLI shows exactly what the server would send. It
parses the review (webhook.review.wire), reuses a cached answer or asks the endpoint's
handler (webhook.review.handlers) for the decision, puts it on the wire
(webhook.review.response), and maps every error (webhook.review.errors).

validate (Pods and workload templates, CREATE and UPDATE of the template): annotation
errors, impossible pods, pods with no room now, each under its own enforcement mode
(enforce / warn / dryrun, as Gatekeeper's enforcementAction).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from core.errors import CoreError
from core.feasibility.decision import decide, unchecked
from core.feasibility.verdicts import Evaluation, evaluate
from core.intent.read import read_intent
from core.intent.workloads import PodTemplate, structure_findings
from core.model import Decision, PodIntent
from webhook.config import Config
from webhook.inventory.state import EVALUATION_COST, InventoryView
from webhook.logs import get_logger
from webhook.metrics import WebhookMetrics
from webhook.review.decision_cache import Entry, raw_key, review_key, split_body
from webhook.review.errors import answer_for_error, reject
from webhook.review.handlers import (
    MUTATE,
    Handler,
    Runtime,
    _is_pod,
    changed_templates,
    exclusion_reason,
    judged_intent,
)
from webhook.review.response import (
    JSON,
    HttpAnswer,
    Outcome,
    allowed,
    denied,
    finalize,
    review_answer,
)
from webhook.review.wire import AdmissionRequest, RequestError, WebhookName, parse_review

__all__ = ["HANDLERS", "Runtime", "answer", "deadline_for", "decide_review"]

log = get_logger("admission")
# The kernel runs on the event loop (no thread hop: ~0.15 ms of CPU per review and a
# malloc arena per pool thread) when the slowest evaluation seen on this inventory, times
# INLINE_SAFETY, fits both the time left before the deadline and INLINE_BUDGET_SECONDS
# (an inline evaluation holds up every other request of the worker). Otherwise it runs in
# a thread under the deadline, as for the first evaluation of a new inventory (which
# calibrates the estimate). A full 10,000-node scan takes ~1 ms in the compiled kernel.
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

    def fail(self, check: str, message: str) -> None:
        self.failures.append((check, message))


# ----------------------------------------------------------------------------- validate


def _at(template: PodTemplate, message: str) -> str:
    return f"{template.path}: {message}" if template.path else message


def _finding_message(path: str, message: str, code: str) -> str:
    return f"{path}: {message} (rule {code})" if path else f"{message} (rule {code})"


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
    runtime.metrics.feasibility.observe(runtime.clock() - start)
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
    *,
    runtime: Runtime,
    config: Config,
    deadline: float,
) -> None:
    view = runtime.inventory.view
    if view is None:
        checks.volatile = True
        checks.warnings += unchecked("no-inventory").warnings
        return
    stale = runtime.inventory.is_stale(config.inventory.stale_after_seconds)
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
    if denials:
        outcome = denied("; ".join(denials), warnings=warnings)
    else:
        outcome = allowed(warnings=warnings)
    if violations or checks.volatile:
        outcome = dataclasses.replace(
            outcome, violations=tuple(violations), volatile=checks.volatile
        )
    return outcome


def _record_violations(
    request: AdmissionRequest, outcome: Outcome, metrics: WebhookMetrics
) -> None:
    """Count every failed check; log the dryrun ones (they leave no other trace)."""
    for check, mode, message in outcome.violations:
        metrics.violations.inc(check=check, mode=mode)
        if mode == "dryrun":
            log.info(
                "dryrun violation",
                extra={"uid": request.uid, "check": check, "violation": message},
            )


async def validate(
    request: AdmissionRequest, runtime: Runtime, config: Config, deadline: float
) -> Outcome:
    """The validating webhook for Pods and the pod templates of workloads."""
    if request.operation not in ("CREATE", "UPDATE") or not isinstance(request.object, dict):
        return allowed()
    if request.sub_resource or exclusion_reason(request, config) is not None:
        return allowed()
    if request.operation == "UPDATE" and _is_pod(request):
        # A pod's placement is decided at CREATE; its spec is immutable apart from a few
        # fields, and schedulers write status annotations on running pods (Koordinator's
        # resource-status): re-checking them could block the scheduler itself.
        return allowed()
    malformed = [f for f in structure_findings(request.object) if f.severity == "error"]
    if malformed:
        message = "; ".join(_finding_message(f.path, f.message, f.code) for f in malformed)
        return denied(message, code=400, reason="BadRequest")
    try:
        templates = changed_templates(request)
    except CoreError as exc:
        return denied(str(exc), code=400, reason="BadRequest")
    checks = _Checks()
    pairs: list[tuple[PodTemplate, PodIntent]] = []
    for template in templates:
        try:
            result = read_intent(template)
        except CoreError as exc:
            return denied(_at(template, str(exc)), code=400, reason="BadRequest")
        errors = [f for f in result.findings if f.severity == "error"]
        for f in errors:
            checks.fail("annotations", _finding_message(f.path, f.message, f.code))
        checks.warnings += [f.message for f in result.findings if f.severity == "warning"]
        if not errors:
            pairs.append(
                (template, judged_intent(request, template, result.intent, runtime, config))
            )
    if pairs:
        try:
            await _feasibility(checks, pairs, runtime=runtime, config=config, deadline=deadline)
        except CoreError as exc:  # e.g. an affinity operator the API would have rejected
            return denied(str(exc), code=400, reason="BadRequest")
    return _apply_modes(checks, config)


# ----------------------------------------------------------------------------- entry


VALIDATE = Handler("validate", mutating=False, decide=validate)
HANDLERS: dict[WebhookName, Handler] = {"mutate": MUTATE, "validate": VALIDATE}


async def decide_review(
    request: AdmissionRequest,
    *,
    handler: Handler,
    runtime: Runtime,
    deadline: float,
    config: Config | None = None,
) -> Outcome:
    """The handler's decision for a parsed review (no cache, nothing put on the wire)."""
    config = runtime.config() if config is None else config
    return await handler.decide(request, runtime, config, deadline)


def _log_answer(
    request: AdmissionRequest, webhook: str, outcome: Outcome, elapsed: float, *, cached: bool
) -> None:
    # Denials, error answers and answers with warnings at info, keyed by uid; routine
    # admissions (allowed, possibly patched, nothing to say) at debug: they are counted
    # in numagate_admission_requests_total, and at thousands of reviews per second a JSON
    # line each (~13-19 us) is a noticeable share of a review's CPU. An allowed answer
    # reused from the decision cache repeats warnings logged at info, with the first
    # review's uid, when the answer was decided: at debug too (a denial always at info).
    warned = bool(outcome.warnings) and not cached
    notable = not outcome.allowed or outcome.code != 200 or warned
    level = logging.INFO if notable else logging.DEBUG
    if not log.isEnabledFor(level):
        return
    log.log(
        level,
        "admission",
        extra={
            "uid": request.uid,
            "webhook": webhook,
            "operation": request.operation,
            "kind": request.kind.kind,
            "namespace": request.namespace,
            "objectName": request.name,
            "dryRun": request.dry_run,
            "allowed": outcome.allowed,
            "code": outcome.code,
            "denyMessage": outcome.message,
            "patchOps": len(outcome.patch),
            "warnings": len(outcome.warnings),
            "cached": cached,
            "durationMs": round(elapsed * 1000, 3),
        },
    )


def _cache_usable(runtime: Runtime, config: Config, view: InventoryView | None) -> bool:
    """Whether the decision cache may be used now: turned on, an inventory loaded and not
    stale (a stale inventory's answers warn and never deny)."""
    if not config.decision_cache.entries or view is None:
        return False
    return not runtime.inventory.is_stale(config.inventory.stale_after_seconds)


async def _decide_parsed(
    request: AdmissionRequest,
    *,
    handler: Handler,
    runtime: Runtime,
    config: Config,
    view: InventoryView | None,
    use_cache: bool,
    deadline: float,
) -> tuple[Outcome, HttpAnswer, Entry | None, str]:
    """The answer for a parsed review, from the decision cache or decided now: (outcome,
    answer, the cache entry that holds it or None, the cache result for the metric).
    ``view`` is the inventory the decision reads (captured once per review)."""
    key = review_key(request, handler.name) if use_cache else None
    if key is None:
        found = "uncacheable"
        entry = None
    else:
        entry = runtime.decisions.get(key, view, config)
        found = "miss" if entry is None else "hit"
    if entry is not None:
        outcome = entry.outcome
        result = HttpAnswer(200, JSON, entry.body(request.uid), outcome.allowed, outcome.code)
        return outcome, result, entry, found
    outcome = await decide_review(
        request, handler=handler, runtime=runtime, deadline=deadline, config=config
    )
    review = finalize(outcome, request.uid, mutating=handler.mutating)
    result = review_answer(review, allowed_=outcome.allowed, code=outcome.code)
    if key is not None and not outcome.volatile:
        parts = split_body(result.body, request.uid)
        if parts is not None:
            entry = Entry(outcome, *parts)
            runtime.decisions.put(key, entry, view, config, config.decision_cache.entries)
    return outcome, result, entry, found


def _uid_or_none(raw: bytes) -> str | None:
    try:
        return parse_review(raw).uid
    except Exception:  # the answer to a bad body is the error being reported already
        return None


def deadline_for(config: Config, start: float, timeout: float | None) -> float:
    """When the decision must be made: the apiserver's ``?timeout=`` (else the configured
    default) after ``start``, less the configured margin."""
    budget = timeout if timeout is not None else config.timeouts.default_seconds
    return start + budget - config.timeouts.margin_seconds


@dataclass
class _Seen:
    """What is known of the review when an exception interrupts it (for the error answer)."""

    uid: str | None = None
    operation: str = "unknown"


async def _respond(
    raw: bytes,
    handler: Handler,
    runtime: Runtime,
    seen: _Seen,
    timeout: float | None,
    start: float,
) -> HttpAnswer:
    """The answer for a body: a verified replica's cached answer without parsing it (see
    webhook.review.decision_cache), else parsed and decided (or found in the cache)."""
    config = runtime.config()
    view = runtime.inventory.view
    usable = _cache_usable(runtime, config, view)
    use_cache = usable and runtime.decisions.wants_key()
    raw_k = raw_key(raw, handler.name) if use_cache else None
    known = None if raw_k is None else runtime.decisions.get_raw(raw_k, view, config)
    if raw_k is not None and known is not None:
        request = known.request._replace(uid=raw_k.uid)
        seen.uid, seen.operation = request.uid, request.operation
        outcome = known.entry.outcome
        result = HttpAnswer(200, JSON, known.entry.body(request.uid), outcome.allowed, outcome.code)
        found = "hit"
    else:
        request = parse_review(raw)
        seen.uid, seen.operation = request.uid, request.operation
        deadline = deadline_for(config, start, timeout)
        outcome, result, entry, found = await _decide_parsed(
            request,
            handler=handler,
            runtime=runtime,
            config=config,
            view=view,
            use_cache=use_cache,
            deadline=deadline,
        )
        if raw_k is not None and entry is not None:
            limit = config.decision_cache.entries
            runtime.decisions.learn_raw(raw_k, request, entry, view, config, limit)
        if usable and not use_cache:
            found = "resting"
    if found in ("hit", "miss"):
        runtime.decisions.looked_up(found == "hit")
    runtime.metrics.decision_cache.inc(result=found)
    _record_violations(request, outcome, runtime.metrics)
    elapsed = runtime.clock() - start
    _log_answer(request, handler.name, outcome, elapsed, cached=found == "hit")
    return result


async def answer(
    raw: bytes,
    *,
    webhook: WebhookName,
    runtime: Runtime,
    timeout: float | None = None,
    start: float | None = None,
) -> HttpAnswer:
    """Request body -> HTTP answer. ``timeout`` is the apiserver's ``?timeout=`` in seconds."""
    start = runtime.clock() if start is None else start
    handler = HANDLERS[webhook]
    metrics = runtime.metrics
    metrics.in_flight.inc(webhook=webhook)
    seen = _Seen()
    try:
        result = await _respond(raw, handler, runtime, seen, timeout, start)
    except RequestError as exc:
        result = reject(exc, webhook=webhook, log=log)
    except Exception as exc:
        metrics.errors.inc(webhook=webhook)
        # failed before the review was parsed: mutate still fails open
        uid = seen.uid if seen.uid is not None else _uid_or_none(raw)
        log.exception("internal error", extra={"uid": uid, "webhook": webhook})
        result = answer_for_error(exc, fail_open=handler.mutating, uid=uid)
    finally:
        metrics.in_flight.dec(webhook=webhook)
    metrics.requests.inc(
        webhook=webhook,
        operation=seen.operation,
        allowed=str(result.allowed).lower() if result.allowed is not None else "",
        code=str(result.code),
    )
    metrics.duration.observe(runtime.clock() - start, webhook=webhook)
    return result
