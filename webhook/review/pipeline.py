"""From request bytes to the HTTP answer: :func:`answer`. The aiohttp endpoints and
``numagate review`` both call it, so the CLI shows exactly what the server would send. It
parses the review (webhook.review.wire), reuses a cached answer or asks the endpoint's
handler (webhook.review.handlers) for the decision, puts it on the wire
(webhook.review.response), and maps every error (webhook.review.errors).
"""

from __future__ import annotations

import logging

from webhook.config import MAX_TIMEOUT_SECONDS, Config
from webhook.logs import get_logger, log_fields
from webhook.metrics import WebhookMetrics
from webhook.review.decision_cache import Entry, raw_key, review_key, split_body
from webhook.review.errors import answer_for_error, reject
from webhook.review.handlers import HANDLERS, Handler
from webhook.review.response import (
    JSON,
    HttpAnswer,
    Outcome,
    allowed,
    finalize,
    review_answer,
)
from webhook.review.runtime import InventoryRead, Runtime
from webhook.review.wire import (
    AdmissionRequest,
    RequestError,
    TooLargeToCheck,
    WebhookName,
    parse_review,
)

__all__ = ["HANDLERS", "Runtime", "answer", "deadline_for", "decide_review"]

log = get_logger("admission")
_new_tuple = tuple.__new__  # a named tuple without its Python __new__ (the hit path)


def _record_violations(uid: str, outcome: Outcome, metrics: WebhookMetrics) -> None:
    """Count every failed check; log the dryrun ones (they leave no other trace)."""
    for check, mode, message in outcome.violations:
        metrics.reviews.violation(check, mode)  # batched
        if mode == "dryrun":
            log.info("dryrun violation", extra={"uid": uid, "check": check, "violation": message})


# ----------------------------------------------------------------------------- entry


async def decide_review(
    request: AdmissionRequest,
    *,
    handler: Handler,
    runtime: Runtime,
    deadline: float,
    config: Config | None = None,
    inventory: InventoryRead | None = None,
) -> Outcome:
    """The handler's decision for a parsed review (no cache, nothing put on the wire).
    ``inventory``: what the review reads (default: the runtime's inventory now)."""
    config = runtime.config() if config is None else config
    inventory = runtime.read(config) if inventory is None else inventory
    return await handler.decide(request, runtime, config, deadline, inventory)


def _log_answer(
    request: AdmissionRequest,
    uid: str,
    webhook: str,
    outcome: Outcome,
    elapsed: float,
    *,
    cached: bool,
) -> None:
    # Denials, error answers and answers with warnings at info, keyed by uid; routine
    # admissions (allowed, possibly patched, nothing to say) at debug: they are counted
    # in numagate_admission_requests_total, and at thousands of reviews per second a JSON
    # line each is a noticeable share of a review's CPU. An allowed answer
    # reused from the decision cache repeats warnings logged at info, with the first
    # review's uid, when the answer was decided: at debug too (a denial always at info).
    warned = bool(outcome.warnings) and not cached
    notable = not outcome.allowed or outcome.code != 200 or warned
    level = logging.INFO if notable else logging.DEBUG
    if not log.isEnabledFor(level):
        return
    log_fields(
        log,
        level,
        "admission",
        {
            "uid": uid,  # the review's (a raw hit's ``request`` is the first replica's)
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


def _cache_usable(config: Config, inventory: InventoryRead) -> bool:
    """Whether the decision cache may be used now: turned on, an inventory loaded and not
    stale (a stale inventory's answers warn and never deny)."""
    return (
        bool(config.decision_cache.entries) and inventory.view is not None and not inventory.stale
    )


async def _decide_parsed(
    request: AdmissionRequest,
    *,
    handler: Handler,
    runtime: Runtime,
    config: Config,
    inventory: InventoryRead,
    use_cache: bool,
    deadline: float,
) -> tuple[Outcome, HttpAnswer, Entry | None, str]:
    """The answer for a parsed review, from the decision cache or decided now: (outcome,
    answer, the cache entry that holds it or None, the cache result for the metric).
    ``inventory`` is what the decision reads (taken once per review)."""
    view = inventory.view
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
        request,
        handler=handler,
        runtime=runtime,
        deadline=deadline,
        config=config,
        inventory=inventory,
    )
    review = finalize(outcome, request.uid, mutating=handler.mutating)
    result = review_answer(review, allowed_=outcome.allowed, code=outcome.code)
    if key is not None and not outcome.volatile:
        parts = split_body(result.body, request.uid)
        if parts is not None:
            entry = Entry(outcome, *parts)
            runtime.decisions.put(key, entry, view, config, config.decision_cache.entries)
    return outcome, result, entry, found


def _unchecked(exc: TooLargeToCheck, handler: Handler, runtime: Runtime) -> HttpAnswer:
    """A review too large to decode within the CPU budget: allowed, unchanged, with a
    warning saying numagate did not check it, and counted. Kubernetes accepts such objects
    (a pod of 20,000 environment entries), so an HTTP error here, which the validating
    webhook's failurePolicy: Fail turns into a denial, would refuse a legitimate pod."""
    warning = (
        f"numagate: not checked: the review holds {exc.commas:,} JSON values, over numagate's "
        f"limit of {exc.limit:,} (limits.reviewValues)"
    )
    runtime.metrics.unchecked.inc(webhook=handler.name, reason="review-values")
    log.warning(
        "review too large to check: allowed unchecked",
        extra={
            "uid": exc.uid,
            "webhook": handler.name,
            "operation": exc.operation,
            "commas": exc.commas,
            "limit": exc.limit,
        },
    )
    review = finalize(allowed(warnings=(warning,)), exc.uid, mutating=handler.mutating)
    return review_answer(review, allowed_=True, code=200)


def _uid_or_none(raw: bytes) -> str | None:
    try:
        return parse_review(raw).uid
    except Exception:  # the answer to a bad body is the error being reported already
        return None


def deadline_for(config: Config, start: float, timeout: float | None) -> float:
    """When the decision must be made: the apiserver's ``?timeout=`` (else the configured
    default, and never over the apiserver's maximum) after ``start``, less the margin."""
    budget = timeout if timeout is not None else config.timeouts.default_seconds
    budget = min(budget, MAX_TIMEOUT_SECONDS)
    return start + budget - config.timeouts.margin_seconds


class _Seen:
    """What is known of the review when an exception interrupts it (for the error answer).
    A plain class with class-level defaults: made per review, without an ``__init__``."""

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
    inventory = runtime.read(config)  # the one read of the inventory in this review
    view = inventory.view
    usable = _cache_usable(config, inventory)
    use_cache = usable and runtime.decisions.wants_key()
    raw_k = raw_key(raw, handler.name) if use_cache else None
    known = None if raw_k is None else runtime.decisions.get_raw(raw_k, view, config)
    if raw_k is not None and known is not None:
        # the first replica's envelope: the log reads its fields, with this review's uid
        request, uid = known.request, raw_k.uid
        seen.uid, seen.operation = uid, request.operation
        outcome = known.entry.outcome
        body = known.entry.body(uid)
        result = _new_tuple(HttpAnswer, (200, JSON, body, outcome.allowed, outcome.code))
        found = "hit"
    else:
        request = parse_review(raw, config.limits.review_values)
        uid = request.uid
        seen.uid, seen.operation = uid, request.operation
        deadline = deadline_for(config, start, timeout)
        outcome, result, entry, found = await _decide_parsed(
            request,
            handler=handler,
            runtime=runtime,
            config=config,
            inventory=inventory,
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
    runtime.metrics.reviews.cache(found)
    if outcome.violations:
        _record_violations(uid, outcome, runtime.metrics)
    elapsed = runtime.clock() - start
    _log_answer(request, uid, handler.name, outcome, elapsed, cached=found == "hit")
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
    counts = metrics.reviews  # batched: webhook.metrics_batch
    counts.started(webhook)
    seen = _Seen()
    try:
        result = await _respond(raw, handler, runtime, seen, timeout, start)
    except TooLargeToCheck as exc:
        seen.uid, seen.operation = exc.uid, exc.operation
        result = _unchecked(exc, handler, runtime)
    except RequestError as exc:
        result = reject(exc, webhook=webhook, log=log)
    except Exception as exc:
        metrics.errors.inc(webhook=webhook)
        # failed before the review was parsed: mutate still fails open
        uid = seen.uid if seen.uid is not None else _uid_or_none(raw)
        log.exception("internal error", extra={"uid": uid, "webhook": webhook})
        result = answer_for_error(exc, fail_open=handler.mutating, uid=uid)
    finally:
        counts.ended(webhook)  # also when the review was cancelled
    allowed_ = result.allowed
    counts.finished(
        webhook,
        seen.operation,
        ("true" if allowed_ else "false") if allowed_ is not None else "",
        str(result.code),
        runtime.clock() - start,
    )
    return result
