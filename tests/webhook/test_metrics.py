"""webhook.metrics: prometheus-client behind numagate's metric names, rendered in the
Prometheus text format and parsed back by a strict line grammar."""

from __future__ import annotations

import math

import pytest

from tests.webhook.scrape import parse
from webhook.metrics import WebhookMetrics


def test_counter_gauge_histogram_render() -> None:
    m = WebhookMetrics(multiprocess=False)
    c, g, h = m.requests, m.in_flight, m.duration
    c.inc(webhook="mutate", operation="CREATE", allowed="true", code="200")
    c.inc(2, webhook="mutate", operation="CREATE", allowed="true", code="200")
    c.inc(webhook='va"l\nx', operation="CREATE", allowed="", code="500")
    g.inc(webhook="mutate")
    g.dec(webhook="mutate")
    for v in (0.0005, 0.001, 0.005, 3.0):
        h.observe(v, webhook="mutate")
    samples = parse(m.render().decode())
    ok = 'webhook="mutate",operation="CREATE",allowed="true",code="200"'
    assert samples[f"numagate_admission_requests_total{{{ok}}}"] == 3
    bad = 'webhook="va\\"l\\nx",operation="CREATE",allowed="",code="500"'
    assert samples[f"numagate_admission_requests_total{{{bad}}}"] == 1
    assert samples['numagate_admission_requests_in_flight{webhook="mutate"}'] == 0
    name = "numagate_admission_duration_seconds"
    assert samples[f'{name}_bucket{{webhook="mutate",le="0.001"}}'] == 2  # le is inclusive
    assert samples[f'{name}_bucket{{webhook="mutate",le="0.01"}}'] == 3
    assert samples[f'{name}_bucket{{webhook="mutate",le="+Inf"}}'] == 4
    assert samples[f'{name}_count{{webhook="mutate"}}'] == 4
    assert math.isclose(samples[f'{name}_sum{{webhook="mutate"}}'], 3.0065)


def test_label_and_value_errors() -> None:
    m = WebhookMetrics(multiprocess=False)
    with pytest.raises(ValueError, match="labels"):
        m.errors.inc(hook="mutate")
    with pytest.raises(ValueError, match="labels"):
        m.timeouts.inc(webhook="mutate")
    with pytest.raises(ValueError, match="decrease"):
        m.errors.inc(-1, webhook="mutate")


def test_build_info_and_process_metrics() -> None:
    from core.feasibility.kernel import IMPLEMENTATION
    from webhook.version import __version__

    text = WebhookMetrics(multiprocess=False).render().decode()
    samples = parse(text)
    info = [k for k in samples if k.startswith("numagate_build_info{")]
    assert len(info) == 1 and samples[info[0]] == 1
    assert f'version="{__version__}"' in info[0]
    assert f'implementation="{IMPLEMENTATION}"' in info[0] and 'python="3.' in info[0]
    assert samples["process_resident_memory_bytes{}"] > 0
    assert "# TYPE process_cpu_seconds_total counter" in text
    assert "_created" not in text  # no _created series next to counters


def test_function_gauges_and_full_registry_parse() -> None:
    m = WebhookMetrics(multiprocess=False)
    m.inventory_age.set_function(lambda: None)
    assert "\nnumagate_inventory_age_seconds " not in m.render().decode()
    m.inventory_age.set_function(lambda: 12.5)
    m.cert_reads.set_function(lambda: 3)
    m.requests.inc(webhook="validate", operation="CREATE", allowed="false", code="403")
    m.duration.observe(0.0002, webhook="validate")
    samples = parse(m.render().decode())
    assert samples["numagate_inventory_age_seconds{}"] == 12.5
    assert samples["numagate_certwatcher_read_certificate_total{}"] == 3
    assert (
        samples[
            'numagate_admission_requests_total{webhook="validate",operation="CREATE",allowed="false",code="403"}'
        ]
        == 1
    )
    # sub-millisecond buckets exist
    assert (
        samples['numagate_admission_duration_seconds_bucket{webhook="validate",le="0.00025"}'] == 1
    )
    assert (
        samples['numagate_admission_duration_seconds_bucket{webhook="validate",le="0.0001"}'] == 0
    )


def test_label_keys_cached_in_any_order_and_still_checked() -> None:
    c = WebhookMetrics(multiprocess=False).violations
    c.inc(check="feasibility", mode="enforce")
    c.inc(mode="enforce", check="feasibility")  # same label set, other keyword order
    c.inc(check="feasibility", mode=1)  # type: ignore[arg-type]  # str() as before
    assert c.value(check="feasibility", mode="enforce") == 2.0
    assert c.value(check="feasibility", mode="1") == 1.0
    for _ in range(2):  # a bad label set is rejected every time, never cached
        with pytest.raises(ValueError, match="labels"):
            c.inc(check="feasibility")
        with pytest.raises(ValueError, match="labels"):
            c.inc(check="feasibility", mode="enforce", extra="x")


def test_label_key_cache_is_bounded() -> None:
    from webhook.metrics import KEY_CACHE_LIMIT

    m = WebhookMetrics(multiprocess=False)
    g = m.in_flight
    for i in range(KEY_CACHE_LIMIT + 50):
        g.inc(webhook=f"n{i}")
        g.dec(0.5, webhook=f"n{i}")
    assert len(g._children) == KEY_CACHE_LIMIT
    assert g.value(webhook=f"n{KEY_CACHE_LIMIT + 10}") == 0.5
    text = m.render().decode()
    assert f'numagate_admission_requests_in_flight{{webhook="n{KEY_CACHE_LIMIT + 49}"}} 0.5' in text


def test_histogram_bucket_edges() -> None:
    m = WebhookMetrics(multiprocess=False)
    for v in (0.1, 0.5, 1.0, 2.0, 0.0):
        m.feasibility.observe(v)
    samples = parse(m.render().decode())
    name = "numagate_feasibility_duration_seconds"
    assert samples[f'{name}_bucket{{le="0.1"}}'] == 2  # le: 0.1 itself counts
    assert samples[f'{name}_bucket{{le="1.0"}}'] == 4
    assert samples[f'{name}_bucket{{le="+Inf"}}'] == 5
    assert samples[f"{name}_count{{}}"] == 5 and samples[f"{name}_sum{{}}"] == 3.6


def test_function_counter_copies_only_increases() -> None:
    m = WebhookMetrics(multiprocess=False)
    reads = [2.0]
    m.cert_reads.set_function(lambda: reads[0])
    assert parse(m.render().decode())["numagate_certwatcher_read_certificate_total{}"] == 2
    reads[0] = 5.0
    m.refresh()
    assert parse(m.render().decode())["numagate_certwatcher_read_certificate_total{}"] == 5
