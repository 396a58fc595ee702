"""webhook.metrics_batch: the per-review updates, counted in process and written in
batches, render exactly as the same updates made one by one; they are written within
FLUSH_SECONDS on a running event loop, before every render, and before a read."""

from __future__ import annotations

import asyncio
import math

import pytest

from tests.webhook.scrape import parse
from webhook.metrics import WebhookMetrics
from webhook.metrics_batch import FLUSH_SECONDS

# (webhook, operation, allowed, code, cache result, seconds): buckets' edges included
REVIEWS = [
    ("mutate", "CREATE", "true", "200", "miss", 0.0001),
    ("mutate", "CREATE", "true", "200", "hit", 0.00009),
    ("mutate", "CREATE", "true", "200", "hit", 0.0004),
    ("validate", "CREATE", "false", "403", "uncacheable", 0.001),
    ("validate", "UPDATE", "true", "200", "resting", 12.0),
    ("validate", "unknown", "", "400", "", 0.0025),
]


def _one_by_one(m: WebhookMetrics) -> None:
    for webhook, operation, allowed, code, found, seconds in REVIEWS:
        m.in_flight.inc(webhook=webhook)
        if found:
            m.decision_cache.inc(result=found)
        m.in_flight.dec(webhook=webhook)
        m.requests.inc(webhook=webhook, operation=operation, allowed=allowed, code=code)
        m.duration.observe(seconds, webhook=webhook)


def _batched(m: WebhookMetrics) -> None:
    for webhook, operation, allowed, code, found, seconds in REVIEWS:
        m.reviews.started(webhook)
        if found:
            m.reviews.cache(found)
        m.reviews.ended(webhook)
        m.reviews.finished(webhook, operation, allowed, code, seconds)


def _review_samples(m: WebhookMetrics) -> dict[str, float]:
    names = ("numagate_admission_", "numagate_decision_cache")
    return {k: v for k, v in parse(m.render().decode()).items() if k.startswith(names)}


def test_batched_updates_render_as_one_by_one() -> None:
    direct, batched = WebhookMetrics(multiprocess=False), WebhookMetrics(multiprocess=False)
    _one_by_one(direct)
    _batched(batched)  # no event loop: written at once
    want, got = _review_samples(direct), _review_samples(batched)
    assert want.keys() == got.keys()
    for key, value in want.items():
        assert math.isclose(got[key], value), key
    assert got['numagate_admission_duration_seconds_bucket{le="0.0001",webhook="mutate"}'] == 2
    assert got['numagate_decision_cache_total{result="hit"}'] == 2


def _written(m: WebhookMetrics) -> float:
    """The requests counter as prometheus-client holds it (no flush first)."""
    child = m.requests.metric.labels(
        webhook="mutate", operation="CREATE", allowed="true", code="200"
    )
    return float(child._value.get())


def test_written_within_flush_seconds_on_a_loop_and_before_a_read() -> None:
    m = WebhookMetrics(multiprocess=False)

    async def reviews() -> tuple[float, float, float]:
        _batched(m)
        pending = _written(m)
        await asyncio.sleep(FLUSH_SECONDS * 3)
        after_timer = _written(m)
        _batched(m)
        return pending, after_timer, _written(m)

    pending, after_timer, pending_again = asyncio.run(reviews())
    assert pending == 0  # held in process ...
    assert after_timer == 3  # ... written by the timer
    assert pending_again == 3  # the loop closed before the second timer fired
    # a read writes what is pending
    labels = {"webhook": "mutate", "operation": "CREATE", "allowed": "true", "code": "200"}
    assert m.requests.value(**labels) == 6
    assert m.duration.count(webhook="validate") == 6


def test_render_writes_pending_counts_first() -> None:
    m = WebhookMetrics(multiprocess=False)

    async def scrape() -> dict[str, float]:
        _batched(m)
        return parse(m.render().decode())

    samples = asyncio.run(scrape())
    key = 'numagate_admission_requests_total{webhook="validate",operation="CREATE",allowed="false",code="403"}'
    assert samples[key] == 1


def test_in_flight_counts_reviews_not_yet_ended() -> None:
    m = WebhookMetrics(multiprocess=False)
    m.reviews.started("validate")
    m.reviews.started("validate")
    assert m.in_flight.value(webhook="validate") == 2
    m.reviews.ended("validate")  # e.g. a cancelled review: ended, never finished
    assert m.in_flight.value(webhook="validate") == 1
    m.reviews.ended("validate")
    assert m.in_flight.value(webhook="validate") == 0


def test_observe_counts_checks_the_bucket_count() -> None:
    m = WebhookMetrics(multiprocess=False)
    with pytest.raises(ValueError, match="counts for"):
        m.duration.observe_counts(1.0, [1, 2], webhook="mutate")


# (check, mode, feasibility seconds): a validating review's extra updates
CHECKS = [
    ("feasibility", "enforce", 0.0004),
    ("feasibility", "dryrun", 0.0001),
    ("noRoomNow", "warn", 0.02),
    ("feasibility", "enforce", 30.0),
]


def _check_samples(m: WebhookMetrics) -> dict[str, float]:
    names = ("numagate_policy_violations", "numagate_feasibility_duration")
    return {k: v for k, v in parse(m.render().decode()).items() if k.startswith(names)}


def test_batched_violations_and_feasibility_render_as_one_by_one() -> None:
    direct, batched = WebhookMetrics(multiprocess=False), WebhookMetrics(multiprocess=False)
    for check, mode, seconds in CHECKS:
        direct.violations.inc(check=check, mode=mode)
        direct.feasibility.observe(seconds)
        batched.reviews.violation(check, mode)
        batched.reviews.feasibility(seconds)
    want, got = _check_samples(direct), _check_samples(batched)
    assert want.keys() == got.keys() and len(want) > 5
    for key, value in want.items():
        assert math.isclose(got[key], value), key
    assert got['numagate_policy_violations_total{check="feasibility",mode="enforce"}'] == 2
    assert got['numagate_feasibility_duration_seconds_bucket{le="0.0001"}'] == 1


def test_an_applied_batch_renders_as_its_events_observed_one_by_one() -> None:
    # received times whose ages land on bucket bounds (0.05, 1.0), between them, past
    # the last (+Inf), and two resource/type pairs
    done = 100.0
    ages = [0.001, 0.05, 0.0500001, 0.3, 1.0, 29.0, 31.0, 0.05]
    drained = [(done - a, "nrt" if i % 3 else "pods", "MODIFIED") for i, a in enumerate(ages)]
    direct, batched = WebhookMetrics(multiprocess=False), WebhookMetrics(multiprocess=False)
    updates = direct.inventory_updates
    updates.apply.observe(0.002)
    for item in drained:
        updates.events.inc(resource=item[1], type=item[2])
        updates.latency.observe(done - item[0])
    batched.inventory_updates.record(drained, done, 0.002)
    names = ("numagate_inventory_update_latency", "numagate_inventory_events")
    want, got = (
        {k: v for k, v in parse(m.render().decode()).items() if k.startswith(names)}
        for m in (direct, batched)
    )
    assert want.keys() == got.keys() and len(want) > 10
    for key, value in want.items():
        assert math.isclose(got[key], value), key
    bucket = "numagate_inventory_update_latency_seconds_bucket"
    assert got[bucket + '{le="0.025"}'] == 1 and got[bucket + '{le="+Inf"}'] == len(ages)


def test_violations_are_held_until_the_timer_or_a_read() -> None:
    m = WebhookMetrics(multiprocess=False)

    async def reviews() -> tuple[float, float]:
        m.reviews.violation("feasibility", "dryrun")
        child = m.violations.metric.labels(check="feasibility", mode="dryrun")
        pending = float(child._value.get())
        await asyncio.sleep(FLUSH_SECONDS * 3)
        return pending, float(child._value.get())

    assert asyncio.run(reviews()) == (0, 1)
    m.reviews.violation("feasibility", "dryrun")  # no loop: written at once
    assert m.violations.value(check="feasibility", mode="dryrun") == 2
