"""numagate's Prometheus metrics, on prometheus-client.

Names follow controller-runtime and Kyverno (research/webhook-anchors.md 2.1, 2.2). With
``serve --workers N`` the server sets ``PROMETHEUS_MULTIPROC_DIR`` (a private directory)
before the workers start: each worker writes its values to memory-mapped files there and
a scrape, whichever worker answers it, reads all of them (prometheus-client's
MultiProcessCollector), so one scrape sees every worker. Gauges say how to merge the
workers' values (``livesum``, ``livemin``, ``livemax``: dead workers are left out).

Values kept elsewhere (the certificate watcher's reload counts, the inventory's age) are
read by functions: copied into the real metrics before each scrape and, with several
workers, every few seconds by each worker (see :meth:`WebhookMetrics.refresh`). The
updates every review makes are counted in the worker and written in batches
(webhook.metrics_batch: at most FLUSH_SECONDS late, and before every render).
"""

from __future__ import annotations

import os
import platform
from bisect import bisect_left
from collections.abc import Sequence
from typing import Any

import prometheus_client
from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from webhook.metric_families import KEY_CACHE_LIMIT as KEY_CACHE_LIMIT
from webhook.metric_families import Counter, Families, Gauge, Visible
from webhook.metrics_batch import ReviewCounts
from webhook.version import __version__

# The text format version 0.0.4 that generate_latest writes.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
# _created series double every counter and histogram and say nothing an admin needs.
prometheus_client.disable_created_metrics()


def build_labels() -> dict[str, str]:
    """The numagate_build_info labels: version, Python version, feasibility kernel."""
    from core.feasibility.kernel import IMPLEMENTATION

    return {
        "version": __version__,
        "python": platform.python_version(),
        "implementation": IMPLEMENTATION,
    }


class WebhookMetrics:
    """Every metric numagate exposes. ``multiprocess`` (default: PROMETHEUS_MULTIPROC_DIR
    is set) renders the merged view of every worker's files instead of this process's."""

    def __init__(self, *, multiprocess: bool | None = None) -> None:
        if multiprocess is None:
            multiprocess = bool(os.environ.get(MULTIPROC_ENV))
        self.multiprocess = multiprocess
        self._own = CollectorRegistry(auto_describe=True)
        f = self._families = Families(self._own)
        self._define_admission(f)
        self._define_state(f)
        # What every review updates, batched (webhook.metrics_batch).
        self.reviews = ReviewCounts(
            self.requests,
            self.decision_cache,
            self.duration,
            self.in_flight,
            self.violations,
            self.feasibility,
        )
        self.inventory_updates = InventoryUpdateMetrics(f)
        self.build_info = f.gauge(
            "numagate_build_info",
            "numagate's version, Python version and feasibility kernel (cython or python); 1.",
            ("version", "python", "implementation"),
            mode="max",
        )
        self.build_info.set(1, **build_labels())
        self.exposed = CollectorRegistry(auto_describe=False)
        source: Collector = MultiProcessCollector(None) if multiprocess else self._own
        self.exposed.register(Visible(source, self.refresh))
        # process_*: this process (with several workers, the one answering the scrape).
        ProcessCollector(registry=self.exposed)

    def _define_admission(self, f: Families) -> None:
        """What the admission reviews do."""
        self.requests = f.counter(
            "numagate_admission_requests_total",
            "Admission requests answered, by webhook, operation, allowed and code.",
            ("webhook", "operation", "allowed", "code"),
        )
        self.duration = f.histogram(
            "numagate_admission_duration_seconds",
            "Time to answer an admission request, from body read to response built.",
            ("webhook",),
        )
        self.in_flight = f.gauge(
            "numagate_admission_requests_in_flight",
            "Admission requests being answered.",
            ("webhook",),
            mode="livesum",
        )
        self.violations = f.counter(
            "numagate_policy_violations_total",
            "Checks that failed, by check and enforcement mode (dryrun ones are only counted).",
            ("check", "mode"),
        )
        self.unchecked = f.counter(
            "numagate_admission_unchecked_total",
            "Reviews allowed without being checked, by webhook and reason (review-values: the"
            " body holds more JSON values than limits.reviewValues; it is not decoded;"
            " too-large: a pod template over a limit on its structure, e.g. limits.containers).",
            ("webhook", "reason"),
        )
        self.errors = f.counter(
            "numagate_admission_errors_total",
            "Unexpected errors while answering (mutate fails open, validate answers 500).",
            ("webhook",),
        )
        self.decision_cache = f.counter(
            "numagate_decision_cache_total",
            "Reviews by decision cache result: hit (answer reused), miss (decided and stored),"
            " resting (not looked up: no hit in a long while), uncacheable (UPDATE, cache off,"
            " inventory missing or stale).",
            ("result",),
        )
        self.timeouts = f.counter(
            "numagate_feasibility_skipped_total",
            "Feasibility checks skipped because the request deadline (?timeout=) was near.",
        )
        self.feasibility = f.histogram(
            "numagate_feasibility_duration_seconds",
            "Time spent evaluating feasibility per request.",
        )

    def _define_state(self, f: Families) -> None:
        """The state a review reads: inventory, configuration, serving certificate."""
        # Several workers: the fewest nodes, the oldest inventory, the most errors and the
        # earliest certificate expiry, so an alert fires when any worker lags.
        self.inventory_nodes = f.gauge(
            "numagate_inventory_nodes", "Nodes in the current inventory.", mode="livemin"
        )
        self.inventory_age = f.gauge(
            "numagate_inventory_age_seconds",
            "Seconds since the inventory was last synchronized.",
            mode="livemax",
        )
        self.inventory_errors = f.gauge(
            "numagate_inventory_errors",
            "Errors reported while building the current inventory.",
            mode="livemax",
        )
        self.inventory_load_failures = f.counter(
            "numagate_inventory_load_failures_total",
            "Inventory loads that failed (the last good inventory was kept).",
        )
        self.config_reloads = f.counter(
            "numagate_config_reloads_total", "Configuration reloads, by result.", ("result",)
        )
        self.cert_expiry = f.gauge(
            "numagate_certificate_expiry_timestamp_seconds",
            "Expiry (notAfter) of the serving certificate, Unix time.",
            mode="livemin",
        )
        self.cert_reads = f.counter(
            "numagate_certwatcher_read_certificate_total", "Serving certificate reloads."
        )
        self.cert_read_errors = f.counter(
            "numagate_certwatcher_read_certificate_errors_total",
            "Serving certificate reloads that failed (the previous certificate stays).",
        )

    def refresh(self) -> set[str]:
        """Copy function-backed values into their metrics; the names to hide."""
        hidden: set[str] = set()
        for family in self._families.all:
            if isinstance(family, Gauge):
                if not family.refresh():
                    hidden.add(family.name)
            elif isinstance(family, Counter):
                family.refresh()
        return hidden

    def render(self) -> bytes:
        self.reviews.flush()  # this worker's reviews so far; the others' within FLUSH_SECONDS
        return generate_latest(self.exposed)


# ---------------------------------------------------------------- inventory updates (issue 14)

# Event received -> visible in decisions: tens of milliseconds when healthy, seconds if not.
UPDATE_BUCKETS: tuple[float, ...] = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class InventoryUpdateMetrics:
    """How the live inventory keeps up (webhook/inventory/fed.py)."""

    def __init__(self, f: Families) -> None:
        self.events = f.counter(
            "numagate_inventory_events_total",
            "Watch events applied to the inventory, by resource and type (a relist counts"
            " what it changed).",
            ("resource", "type"),
        )
        self.latency = f.histogram(
            "numagate_inventory_update_latency_seconds",
            "From a watch event received to the inventory that includes it being served.",
            buckets=UPDATE_BUCKETS,
        )
        self.apply = f.histogram(
            "numagate_inventory_update_apply_seconds",
            "Time one batch of events took to apply on the event loop.",
        )
        self.full_builds = f.counter(
            "numagate_inventory_full_builds_total",
            "Whole-inventory builds (first build, a resource new to the packed table).",
        )
        self.full_build_seconds = f.histogram(
            "numagate_inventory_full_build_seconds",
            "Duration of whole-inventory builds (in a thread, off the event loop).",
            buckets=UPDATE_BUCKETS,
        )
        self.process_restarts = f.counter(
            "numagate_inventory_process_restarts_total",
            "Connections to the replica's inventory process this worker lost: it exited"
            " (its parent restarts it), or sent a change the worker could not apply.",
        )
        # Several workers: the worst one, so a lagging worker shows.
        self.watch_lag = f.gauge(
            "numagate_inventory_watch_lag_seconds",
            "Age of the oldest received watch event not yet applied (0: none waiting).",
            mode="livemax",
        )
        self.sync_age = f.gauge(
            "numagate_inventory_resource_sync_age_seconds",
            "Seconds since each resource type was last known in sync (0 while its watch is open).",
            ("resource",),
            mode="livemax",
        )

    def record(self, drained: Sequence[tuple[Any, ...]], done: float, seconds: float) -> None:
        """One applied batch: items are (received, resource, type, ...)."""
        self.apply.observe(seconds)
        # Counted and observed per batch (a hundred events each under churn): one observe
        # per event, each a lock and a label lookup (with several workers a write into a
        # mapped file too), cost 120 us a batch of 113 events (271 us with several
        # workers), against 30 (34) so.
        counts: dict[tuple[str, str], int] = {}
        for item in drained:
            key = (item[1], item[2])
            counts[key] = counts.get(key, 0) + 1
        for (resource, kind), n in counts.items():
            self.events.inc(n, resource=resource, type=kind)
        if drained:
            bounds, total = self.latency.bounds, 0.0
            buckets = [0] * len(bounds)
            for item in drained:
                age = done - item[0]
                total += age
                buckets[bisect_left(bounds, age)] += 1
            self.latency.observe_counts(total, buckets)

    def rebuilt(self, seconds: float) -> None:
        self.full_builds.inc()
        self.full_build_seconds.observe(seconds)
