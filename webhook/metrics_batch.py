"""The metric updates every review makes, counted in plain Python numbers and written to
prometheus-client in batches (issue 27).

A review updates four metrics: the in-flight gauge (up and down), the decision cache
counter, the requests counter and the duration histogram (its sum and one bucket); a
validating review also the feasibility duration histogram and, for each failed check, the
violations counter (an impossible pod: three more value updates). With
``serve --workers N`` (prometheus-client's multiprocess mode) each of those six value
updates takes a lock, calls ``os.getpid()`` and packs two doubles into a memory-mapped
file, four or five Python calls deep: a noticeable share of a cheap review's CPU
(docs/benchmarks.md, "The request path"). Here a review adds to a few dicts, and
:meth:`ReviewCounts.flush` writes the sums: at most :data:`FLUSH_SECONDS` after the first
update it holds (a timer on the event loop), before every scrape this worker answers
(``WebhookMetrics.render``) and whenever a value is read in process (``Family.value``).

The guarantee a scrape gives: every review the answering worker has finished, and every
review another worker finished up to :data:`FLUSH_SECONDS` before the scrape. Prometheus
scrapes every few seconds (1 s at the least), so a review answered within that window of
a scrape could as well have landed just after it. Updated and flushed on one thread (the
event loop's; tests read on the thread that ran the reviews).
"""

from __future__ import annotations

import asyncio
from bisect import bisect_left
from typing import Any

from webhook.metric_families import Counter, Gauge, Histogram

_running_loop = asyncio.get_running_loop

# 0.1 s: ten flushes a second at most per worker, each a few label sets (a few dozen
# value writes), against thousands of reviews a second that no longer write.
FLUSH_SECONDS = 0.1


class ReviewCounts:
    """Pending per-review updates of one worker; see the module docstring."""

    def __init__(
        self,
        requests: Counter,
        decision_cache: Counter,
        duration: Histogram,
        in_flight: Gauge,
        violations: Counter,
        feasibility: Histogram,
    ) -> None:
        self._requests_family = requests
        self._cache_family = decision_cache
        self._duration_family = duration
        self._in_flight_family = in_flight
        self._violations_family = violations
        self._feasibility_family = feasibility
        # Histogram.bounds: each observation is counted at bisect_left of them.
        self._bounds = duration.bounds
        self._feasibility_bounds = feasibility.bounds
        self._requests: dict[tuple[str, str, str, str], int] = {}
        self._cache: dict[str, int] = {}
        self._durations: dict[str, list[Any]] = {}  # webhook -> [sum, count per bucket]
        self._feasibility: list[Any] | None = None  # [sum, count per bucket]
        self._violations: dict[tuple[str, str], int] = {}  # (check, mode) -> count
        self._in_flight: dict[str, int] = {}  # webhook -> reviews being answered now
        self._in_flight_written: dict[str, int] = {}
        self._timer_loop: asyncio.AbstractEventLoop | None = None
        for family in (requests, decision_cache, duration, in_flight, violations, feasibility):
            family.before_read = self.flush

    def started(self, webhook: str) -> None:
        self._in_flight[webhook] = self._in_flight.get(webhook, 0) + 1

    def ended(self, webhook: str) -> None:
        """Out of flight: answered, failed or cancelled."""
        self._in_flight[webhook] -= 1

    def cache(self, result: str) -> None:
        """A decision cache result: hit, miss, resting or uncacheable."""
        self._cache[result] = self._cache.get(result, 0) + 1

    def violation(self, check: str, mode: str) -> None:
        """A failed check, by its enforcement mode."""
        key = (check, mode)
        self._violations[key] = self._violations.get(key, 0) + 1
        self._timer()

    def feasibility(self, seconds: float) -> None:
        """One review's feasibility evaluation time."""
        sums = self._feasibility
        if sums is None:
            sums = self._feasibility = [0.0] + [0] * len(self._feasibility_bounds)
        sums[0] += seconds
        sums[1 + bisect_left(self._feasibility_bounds, seconds)] += 1
        self._timer()

    def finished(
        self, webhook: str, operation: str, allowed: str, code: str, seconds: float
    ) -> None:
        """One review answered (with its requests-counter labels and its duration)."""
        key = (webhook, operation, allowed, code)
        self._requests[key] = self._requests.get(key, 0) + 1
        sums = self._durations.get(webhook)
        if sums is None:
            sums = self._durations[webhook] = [0.0] + [0] * len(self._bounds)
        sums[0] += seconds
        sums[1 + bisect_left(self._bounds, seconds)] += 1
        # _timer inlined: once per review (issue 27)
        try:
            loop = _running_loop()
        except RuntimeError:
            loop = None
        if loop is None or loop is not self._timer_loop:
            self._timer()

    def _timer(self) -> None:
        """A flush timer pending on the running loop (or the updates written now). The
        loop's identity, not ``is_closed()``: a C call against a Python method call on
        every review (issue 27); a timer left on a loop that no longer runs (a closed
        one, or another one's in a test) is replaced by one on the running loop."""
        try:
            loop = _running_loop()
        except RuntimeError:  # no event loop (a synchronous caller): write now
            self.flush()
            return
        if loop is not self._timer_loop:
            self._timer_loop = loop
            loop.call_later(FLUSH_SECONDS, self.flush)

    def flush(self) -> None:
        """Write the pending updates to prometheus-client (in multiprocess mode, the file)."""
        self._timer_loop = None
        requests, self._requests = self._requests, {}
        cache, self._cache = self._cache, {}
        durations, self._durations = self._durations, {}
        violations, self._violations = self._violations, {}
        feasibility, self._feasibility = self._feasibility, None
        names = self._requests_family.labelnames
        for values, n in requests.items():
            self._requests_family.inc(n, **dict(zip(names, values, strict=True)))
        for result, n in cache.items():
            self._cache_family.inc(n, result=result)
        for webhook, sums in durations.items():
            self._duration_family.observe_counts(sums[0], sums[1:], webhook=webhook)
        for (check, mode), n in violations.items():
            self._violations_family.inc(n, check=check, mode=mode)
        if feasibility is not None:
            self._feasibility_family.observe_counts(feasibility[0], feasibility[1:])
        for webhook, n in self._in_flight.items():
            if self._in_flight_written.get(webhook) != n:
                self._in_flight_family.set(n, webhook=webhook)
                self._in_flight_written[webhook] = n
