"""A small Prometheus registry in the text exposition format (version 0.0.4).

Our own rather than prometheus_client: we need counters, gauges and histograms with
labels and nothing else, and no new dependency. Names follow controller-runtime and
Kyverno (research/webhook-anchors.md 2.1, 2.2). Each worker process has its own registry;
with ``--workers N`` a scrape sees one worker, as with any pre-fork server.
"""

from __future__ import annotations

import math
import threading
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from typing import Any

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Sub-millisecond first: the handler itself takes well under 1 ms, and the apiserver's own
# histogram starts at 5 ms, so the low buckets are where our latency is visible.
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
LabelValues = tuple[str, ...]
# Label sets remembered per metric (see _Metric._key); beyond this, keys are computed each
# time, so a label fed from request data cannot grow memory without bound.
KEY_CACHE_LIMIT = 1024


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _format_value(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def _labels(names: Sequence[str], values: Sequence[str], extra: str = "") -> str:
    pairs = [f'{n}="{_escape(v)}"' for n, v in zip(names, values, strict=True)]
    if extra:
        pairs.append(extra)
    return "{" + ",".join(pairs) + "}" if pairs else ""


class _Metric:
    kind = ""

    def __init__(self, name: str, help_: str, labelnames: Sequence[str] = ()) -> None:
        self.name = name
        self.help = help_
        self.labelnames = tuple(labelnames)
        self._lock = threading.Lock()
        # (name, value) pairs as passed -> label values in labelnames order: the same few
        # label sets recur on every review, and checking and ordering them cost ~1 us.
        self._keys: dict[tuple[tuple[str, str], ...], LabelValues] = {}

    def _key(self, labels: dict[str, str]) -> LabelValues:
        items = tuple(labels.items())
        key = self._keys.get(items)
        if key is None:
            key = self._make_key(labels)
            if len(self._keys) < KEY_CACHE_LIMIT:
                self._keys[items] = key
        return key

    def _make_key(self, labels: dict[str, str]) -> LabelValues:
        if set(labels) != set(self.labelnames):
            raise ValueError(f"{self.name}: labels {sorted(labels)} != {sorted(self.labelnames)}")
        return tuple(str(labels[n]) for n in self.labelnames)

    def header(self) -> list[str]:
        return [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}"]

    def samples(self) -> list[str]:  # pragma: no cover - overridden
        raise NotImplementedError


class Counter(_Metric):
    """A monotonically increasing count per label set."""

    kind = "counter"

    def __init__(self, name: str, help_: str, labelnames: Sequence[str] = ()) -> None:
        super().__init__(name, help_, labelnames)
        self._values: dict[LabelValues, float] = {}
        self._fn: Callable[[], float] | None = None

    def set_function(self, fn: Callable[[], float]) -> None:
        """Read an (unlabelled) count kept elsewhere, e.g. the cert watcher's reloads."""
        self._fn = fn

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        if amount < 0:
            raise ValueError(f"{self.name}: a counter cannot decrease (inc {amount})")
        key = self._key(labels)
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + amount

    def value(self, **labels: str) -> float:
        if self._fn is not None:
            return float(self._fn())
        return self._values.get(self._key(labels), 0.0)

    def samples(self) -> list[str]:
        if self._fn is not None:
            return [f"{self.name} {_format_value(float(self._fn()))}"]
        with self._lock:
            items = sorted(self._values.items())
        return [f"{self.name}{_labels(self.labelnames, k)} {_format_value(v)}" for k, v in items]


class Gauge(_Metric):
    """A value that goes up and down; optionally computed at scrape time by ``fn``."""

    kind = "gauge"

    def __init__(
        self,
        name: str,
        help_: str,
        labelnames: Sequence[str] = (),
        *,
        fn: Callable[[], float | None] | None = None,
    ) -> None:
        super().__init__(name, help_, labelnames)
        self._values: dict[LabelValues, float] = {}
        self._fn = fn

    def set_function(self, fn: Callable[[], float | None]) -> None:
        """Compute the (unlabelled) value at scrape time; None hides the sample."""
        self._fn = fn

    def set(self, value: float, **labels: str) -> None:
        key = self._key(labels)
        with self._lock:
            self._values[key] = float(value)

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        key = self._key(labels)
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + amount

    def dec(self, amount: float = 1.0, **labels: str) -> None:
        key = self._key(labels)
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) - amount

    def value(self, **labels: str) -> float:
        if self._fn is not None:
            v = self._fn()
            return math.nan if v is None else float(v)
        return self._values.get(self._key(labels), 0.0)

    def samples(self) -> list[str]:
        if self._fn is not None:
            v = self._fn()
            return [] if v is None else [f"{self.name} {_format_value(float(v))}"]
        with self._lock:
            items = sorted(self._values.items())
        return [f"{self.name}{_labels(self.labelnames, k)} {_format_value(v)}" for k, v in items]


class Histogram(_Metric):
    """Cumulative buckets, ``_sum`` and ``_count`` per label set."""

    kind = "histogram"

    def __init__(
        self,
        name: str,
        help_: str,
        labelnames: Sequence[str] = (),
        *,
        buckets: Iterable[float] = LATENCY_BUCKETS,
    ) -> None:
        super().__init__(name, help_, labelnames)
        self.buckets = tuple(sorted(buckets))
        if not self.buckets:
            raise ValueError(f"{self.name}: a histogram needs buckets")
        # per label set: [count per bucket (non-cumulative, + one for +Inf), sum]
        self._data: dict[LabelValues, tuple[list[int], list[float]]] = {}

    def observe(self, value: float, **labels: str) -> None:
        key = self._key(labels)
        index = bisect_left(self.buckets, value)  # le semantics: value <= bound
        with self._lock:
            data = self._data.get(key)
            if data is None:
                data = self._data[key] = ([0] * (len(self.buckets) + 1), [0.0])
            data[0][index] += 1
            data[1][0] += value

    def count(self, **labels: str) -> int:
        data = self._data.get(self._key(labels))
        return sum(data[0]) if data else 0

    def samples(self) -> list[str]:
        out: list[str] = []
        with self._lock:
            items = sorted((k, (list(c), s[0])) for k, (c, s) in self._data.items())
        for key, (counts, total) in items:
            running = 0
            for bound, n in zip((*self.buckets, math.inf), counts, strict=True):
                running += n
                le = f'le="{_format_value(bound)}"'
                out.append(f"{self.name}_bucket{_labels(self.labelnames, key, le)} {running}")
            out.append(f"{self.name}_sum{_labels(self.labelnames, key)} {_format_value(total)}")
            out.append(f"{self.name}_count{_labels(self.labelnames, key)} {running}")
        return out


class Registry:
    """Holds metrics by name and renders them."""

    def __init__(self) -> None:
        self._metrics: dict[str, _Metric] = {}

    def register(self, metric: _Metric) -> _Metric:
        if metric.name in self._metrics:
            raise ValueError(f"metric {metric.name} registered twice")
        self._metrics[metric.name] = metric
        return metric

    def counter(self, name: str, help_: str, labelnames: Sequence[str] = ()) -> Counter:
        m = Counter(name, help_, labelnames)
        self.register(m)
        return m

    def gauge(
        self,
        name: str,
        help_: str,
        labelnames: Sequence[str] = (),
        *,
        fn: Callable[[], float | None] | None = None,
    ) -> Gauge:
        m = Gauge(name, help_, labelnames, fn=fn)
        self.register(m)
        return m

    def histogram(
        self,
        name: str,
        help_: str,
        labelnames: Sequence[str] = (),
        *,
        buckets: Iterable[float] = LATENCY_BUCKETS,
    ) -> Histogram:
        m = Histogram(name, help_, labelnames, buckets=buckets)
        self.register(m)
        return m

    def render(self) -> bytes:
        lines: list[str] = []
        for metric in self._metrics.values():
            lines.extend(metric.header())
            lines.extend(metric.samples())
        return ("\n".join(lines) + "\n").encode()


class WebhookMetrics:
    """Every metric numagate exposes, in one registry."""

    def __init__(self) -> None:
        r = self.registry = Registry()
        self.requests = r.counter(
            "numagate_admission_requests_total",
            "Admission requests answered, by webhook, operation, allowed and code.",
            ("webhook", "operation", "allowed", "code"),
        )
        self.duration = r.histogram(
            "numagate_admission_duration_seconds",
            "Time to answer an admission request, from body read to response built.",
            ("webhook",),
        )
        self.in_flight = r.gauge(
            "numagate_admission_requests_in_flight",
            "Admission requests being answered.",
            ("webhook",),
        )
        self.violations = r.counter(
            "numagate_policy_violations_total",
            "Checks that failed, by check and enforcement mode (dryrun ones are only counted).",
            ("check", "mode"),
        )
        self.errors = r.counter(
            "numagate_admission_errors_total",
            "Unexpected errors while answering (mutate fails open, validate answers 500).",
            ("webhook",),
        )
        self.decision_cache = r.counter(
            "numagate_decision_cache_total",
            "Reviews by decision cache result: hit (answer reused), miss (decided and stored),"
            " resting (not looked up: no hit in a long while), uncacheable (UPDATE, cache off,"
            " inventory missing or stale).",
            ("result",),
        )
        self.timeouts = r.counter(
            "numagate_feasibility_skipped_total",
            "Feasibility checks skipped because the request deadline (?timeout=) was near.",
        )
        self.feasibility = r.histogram(
            "numagate_feasibility_duration_seconds",
            "Time spent evaluating feasibility per request.",
        )
        self.inventory_nodes = r.gauge(
            "numagate_inventory_nodes", "Nodes in the current inventory."
        )
        self.inventory_age = r.gauge(
            "numagate_inventory_age_seconds", "Seconds since the inventory was last synchronized."
        )
        self.inventory_errors = r.gauge(
            "numagate_inventory_errors", "Errors reported while building the current inventory."
        )
        self.inventory_load_failures = r.counter(
            "numagate_inventory_load_failures_total",
            "Inventory loads that failed (the last good inventory was kept).",
        )
        self.config_reloads = r.counter(
            "numagate_config_reloads_total", "Configuration reloads, by result.", ("result",)
        )
        self.cert_expiry = r.gauge(
            "numagate_certificate_expiry_timestamp_seconds",
            "Expiry (notAfter) of the serving certificate, Unix time.",
        )
        self.cert_reads = r.counter(
            "numagate_certwatcher_read_certificate_total", "Serving certificate reloads."
        )
        self.cert_read_errors = r.counter(
            "numagate_certwatcher_read_certificate_errors_total",
            "Serving certificate reloads that failed (the previous certificate stays).",
        )
        self.inventory_updates = InventoryUpdateMetrics(r)

    def render(self) -> bytes:
        return self.registry.render()


# ---------------------------------------------------------------- inventory updates (issue 14)

# Event received -> visible in decisions: tens of milliseconds when healthy, seconds if not.
UPDATE_BUCKETS: tuple[float, ...] = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class InventoryUpdateMetrics:
    """How the live inventory keeps up (webhook/inventory/updates.py)."""

    def __init__(self, r: Registry) -> None:
        self.events = r.counter(
            "numagate_inventory_events_total",
            "Watch events applied to the inventory, by resource and type (a relist counts"
            " what it changed).",
            ("resource", "type"),
        )
        self.latency = r.histogram(
            "numagate_inventory_update_latency_seconds",
            "From a watch event received to the inventory that includes it being served.",
            buckets=UPDATE_BUCKETS,
        )
        self.apply = r.histogram(
            "numagate_inventory_update_apply_seconds",
            "Time one batch of events took to apply on the event loop.",
        )
        self.full_builds = r.counter(
            "numagate_inventory_full_builds_total",
            "Whole-inventory builds (first build, a resource new to the packed table).",
        )
        self.full_build_seconds = r.histogram(
            "numagate_inventory_full_build_seconds",
            "Duration of whole-inventory builds (in a thread, off the event loop).",
            buckets=UPDATE_BUCKETS,
        )
        self.watch_lag = r.gauge(
            "numagate_inventory_watch_lag_seconds",
            "Age of the oldest received watch event not yet applied (0: none waiting).",
        )
        self.sync_age = r.gauge(
            "numagate_inventory_resource_sync_age_seconds",
            "Seconds since each resource type was last known in sync (0 while its watch is open).",
            ("resource",),
        )

    def record(self, drained: Sequence[tuple[Any, ...]], done: float, seconds: float) -> None:
        """One applied batch: items are (received, resource, type, ...)."""
        self.apply.observe(seconds)
        for item in drained:
            self.events.inc(resource=item[1], type=item[2])
            self.latency.observe(done - item[0])

    def rebuilt(self, seconds: float) -> None:
        self.full_builds.inc()
        self.full_build_seconds.observe(seconds)
