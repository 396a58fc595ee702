"""The metric types behind webhook.metrics: prometheus-client's Counter, Gauge and Histogram
with keyword labels (``inc(webhook="mutate")``), a bounded cache of label sets, values read
from functions at scrape time, and the collector that hides a function gauge with no value.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client import Counter as PromCounter
from prometheus_client import Gauge as PromGauge
from prometheus_client import Histogram as PromHistogram
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

# Sub-millisecond buckets first: the apiserver's own histogram of webhook latency starts at
# 5 ms, so these low buckets are where ours is visible.
LATENCY_BUCKETS: tuple[float, ...] = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
# Label sets remembered per metric (see Family._child); beyond this, children are looked
# up each time, so a label fed from request data cannot grow memory without bound.
KEY_CACHE_LIMIT = 1024


class Family:
    """One prometheus-client metric with keyword labels (``inc(webhook="mutate")``)."""

    def __init__(self, metric: Any, name: str, labelnames: Sequence[str]) -> None:
        self.metric = metric
        self.name = name
        self.labelnames = tuple(labelnames)
        # (name, value) pairs as passed -> the child: the same few label sets recur on
        # every review, and prometheus-client's labels() costs a few microseconds.
        self._children: dict[tuple[tuple[str, str], ...], Any] = {}
        # Writes updates held elsewhere first (webhook.metrics_batch), before a read.
        self.before_read: Callable[[], None] | None = None

    def _pending(self) -> None:
        if self.before_read is not None:
            self.before_read()

    def child(self, **labels: str) -> Any:
        """prometheus-client's child for one label set, checked as ``inc`` checks it: the
        request path binds the few it updates on every review once (webhook.metrics)."""
        return self._child(labels)

    def _child(self, labels: dict[str, str]) -> Any:
        if not self.labelnames:
            if labels:
                raise ValueError(f"{self.name}: labels {sorted(labels)} != []")
            return self.metric
        items = tuple(labels.items())
        child = self._children.get(items)
        if child is None:
            if set(labels) != set(self.labelnames):
                raise ValueError(
                    f"{self.name}: labels {sorted(labels)} != {sorted(self.labelnames)}"
                )
            child = self.metric.labels(**{k: str(v) for k, v in labels.items()})
            if len(self._children) < KEY_CACHE_LIMIT:
                self._children[items] = child
        return child


class Counter(Family):
    """A monotonically increasing count per label set."""

    def __init__(self, metric: Any, name: str, labelnames: Sequence[str]) -> None:
        super().__init__(metric, name, labelnames)
        self._fn: Callable[[], float] | None = None
        self._copied = 0.0
        self._lock = threading.Lock()

    def set_function(self, fn: Callable[[], float]) -> None:
        """Read an (unlabelled) count kept elsewhere, e.g. the cert watcher's reloads."""
        self._fn = fn

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        if amount < 0:
            raise ValueError(f"{self.name}: a counter cannot decrease (inc {amount})")
        self._child(labels).inc(amount)

    def value(self, **labels: str) -> float:
        if self._fn is not None:
            return float(self._fn())
        self._pending()
        return float(self._child(labels)._value.get())

    def refresh(self) -> None:
        if self._fn is None:
            return
        with self._lock:  # scrapes and the refresh timer may overlap
            now = float(self._fn())
            if now > self._copied:
                self.metric.inc(now - self._copied)
                self._copied = now


class Gauge(Family):
    """A value that goes up and down; optionally computed by a function (None: hidden)."""

    def __init__(self, metric: Any, name: str, labelnames: Sequence[str]) -> None:
        super().__init__(metric, name, labelnames)
        self._fn: Callable[[], float | None] | None = None

    def set_function(self, fn: Callable[[], float | None]) -> None:
        """Compute the (unlabelled) value at scrape time; None hides the sample."""
        self._fn = fn

    def set(self, value: float, **labels: str) -> None:
        self._child(labels).set(float(value))

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        self._child(labels).inc(amount)

    def dec(self, amount: float = 1.0, **labels: str) -> None:
        self._child(labels).dec(amount)

    def value(self, **labels: str) -> float:
        if self._fn is not None:
            v = self._fn()
            return math.nan if v is None else float(v)
        self._pending()
        return float(self._child(labels)._value.get())

    def refresh(self) -> bool:
        """Copy the function's value in; False when it hides the sample."""
        if self._fn is None:
            return True
        v = self._fn()
        if v is None:
            return False
        self.metric.set(float(v))
        return True


class Histogram(Family):
    """Cumulative buckets, ``_sum`` and ``_count`` per label set."""

    @functools.cached_property
    def bounds(self) -> list[float]:
        """The buckets' upper bounds, +Inf last: a value goes in the first bucket whose
        bound is >= it (prometheus-client's ``observe``), i.e. ``bisect_left(bounds,
        value)``, which is how callers of ``observe_counts`` count."""
        return list(self.metric._upper_bounds)

    def observe(self, value: float, **labels: str) -> None:
        self._child(labels).observe(value)

    def observe_counts(self, total: float, counts: Sequence[int], **labels: str) -> None:
        """What ``observe`` of several values adds, given their sum and how many fell in
        each bucket (first bound >= the value, +Inf last): prometheus-client's child keeps
        the sum in ``_sum`` and each bucket's own count in ``_buckets``, as ``observe``
        writes them."""
        child = self._child(labels)
        child._raise_if_not_observable()
        if len(counts) != len(child._buckets):
            raise ValueError(f"{self.name}: {len(counts)} counts for {len(child._buckets)} buckets")
        child._sum.inc(total)
        for bucket, n in zip(child._buckets, counts, strict=True):
            if n:
                bucket.inc(n)

    def count(self, **labels: str) -> int:
        """Observations so far in this process (for tests)."""
        self._pending()
        child = self._child(labels)
        return int(sum(b.get() for b in child._buckets))


class Visible(Collector):
    """The collected families minus those hidden at this scrape (a function gauge whose
    function answered None, e.g. the inventory age before any inventory)."""

    def __init__(self, source: Collector, hidden: Callable[[], set[str]]) -> None:
        self._source = source
        self._hidden = hidden

    def collect(self) -> Iterable[Metric]:
        hidden = self._hidden()
        return [m for m in self._source.collect() if m.name not in hidden]


class Families:
    """Creates metrics in one registry; gauges carry their multiprocess merge mode."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.all: list[Family] = []

    def counter(self, name: str, help_: str, labelnames: Sequence[str] = ()) -> Counter:
        c = Counter(PromCounter(name, help_, labelnames, registry=self.registry), name, labelnames)
        self.all.append(c)
        return c

    def gauge(self, name: str, help_: str, labelnames: Sequence[str] = (), *, mode: str) -> Gauge:
        metric = PromGauge(name, help_, labelnames, registry=self.registry, multiprocess_mode=mode)
        g = Gauge(metric, name, labelnames)
        self.all.append(g)
        return g

    def histogram(
        self,
        name: str,
        help_: str,
        labelnames: Sequence[str] = (),
        *,
        buckets: Sequence[float] = LATENCY_BUCKETS,
    ) -> Histogram:
        metric = PromHistogram(name, help_, labelnames, registry=self.registry, buckets=buckets)
        h = Histogram(metric, name, labelnames)
        self.all.append(h)
        return h
