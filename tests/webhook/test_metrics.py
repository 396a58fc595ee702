"""webhook.metrics: the Prometheus text format (parsed back by a strict line grammar)."""

from __future__ import annotations

import math
import re

import pytest

from webhook.metrics import Registry, WebhookMetrics

SAMPLE = re.compile(
    r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*"'
    r'(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*")*)\})? (?P<value>[-+]?(?:\d+(?:\.\d*)?(?:e[-+]?\d+)?|Inf|NaN))$'
)


def parse(text: str) -> dict[str, float]:
    """Every sample as 'name{labels}' -> value; fails on any malformed line."""
    out: dict[str, float] = {}
    types: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in {"counter", "gauge", "histogram"}
            types[name] = kind
            continue
        if line.startswith("# HELP "):
            continue
        m = SAMPLE.match(line)
        assert m, f"malformed sample line: {line!r}"
        base = re.sub(r"_(bucket|sum|count)$", "", m["name"])
        assert m["name"] in types or base in types, f"sample without TYPE: {line!r}"
        out[f"{m['name']}{{{m['labels'] or ''}}}"] = float(m["value"])
    return out


def test_counter_gauge_histogram_render() -> None:
    r = Registry()
    c = r.counter("t_requests_total", "help", ("webhook", "code"))
    g = r.gauge("t_in_flight", "help", ("webhook",))
    h = r.histogram("t_seconds", "help", ("webhook",), buckets=(0.001, 0.01))
    c.inc(webhook="mutate", code="200")
    c.inc(2, webhook="mutate", code="200")
    c.inc(webhook='va"l\nx', code="500")
    g.inc(webhook="mutate")
    g.dec(webhook="mutate")
    for v in (0.0005, 0.001, 0.005, 3.0):
        h.observe(v, webhook="mutate")
    samples = parse(r.render().decode())
    assert samples['t_requests_total{webhook="mutate",code="200"}'] == 3
    assert samples['t_requests_total{webhook="va\\"l\\nx",code="500"}'] == 1
    assert samples['t_in_flight{webhook="mutate"}'] == 0
    assert samples['t_seconds_bucket{webhook="mutate",le="0.001"}'] == 2  # le is inclusive
    assert samples['t_seconds_bucket{webhook="mutate",le="0.01"}'] == 3
    assert samples['t_seconds_bucket{webhook="mutate",le="+Inf"}'] == 4
    assert samples['t_seconds_count{webhook="mutate"}'] == 4
    assert math.isclose(samples['t_seconds_sum{webhook="mutate"}'], 3.0065)


def test_label_and_value_errors() -> None:
    r = Registry()
    c = r.counter("x_total", "h", ("a",))
    with pytest.raises(ValueError, match="labels"):
        c.inc(b="1")
    with pytest.raises(ValueError, match="decrease"):
        c.inc(-1, a="1")
    with pytest.raises(ValueError, match="twice"):
        r.counter("x_total", "h")


def test_function_gauges_and_full_registry_parse() -> None:
    m = WebhookMetrics()
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
    r = Registry()
    c = r.counter("t_total", "help", ("webhook", "code"))
    c.inc(webhook="mutate", code="200")
    c.inc(code="200", webhook="mutate")  # same label set, other keyword order
    c.inc(webhook="mutate", code=200)  # type: ignore[arg-type]  # str() as before
    assert c.value(webhook="mutate", code="200") == 3.0
    for _ in range(2):  # a bad label set is rejected every time, never cached
        with pytest.raises(ValueError, match="labels"):
            c.inc(webhook="mutate")
        with pytest.raises(ValueError, match="labels"):
            c.inc(webhook="mutate", code="200", extra="x")


def test_label_key_cache_is_bounded() -> None:
    from webhook.metrics import KEY_CACHE_LIMIT

    r = Registry()
    g = r.gauge("t_gauge", "help", ("name",))
    for i in range(KEY_CACHE_LIMIT + 50):
        g.inc(name=f"n{i}")
        g.dec(0.5, name=f"n{i}")
    assert len(g._keys) == KEY_CACHE_LIMIT
    assert g.value(name=f"n{KEY_CACHE_LIMIT + 10}") == 0.5
    text = r.render().decode()
    assert f't_gauge{{name="n{KEY_CACHE_LIMIT + 49}"}} 0.5' in text


def test_histogram_bucket_edges() -> None:
    r = Registry()
    h = r.histogram("t_seconds", "help", buckets=(0.1, 1.0))
    for v in (0.1, 0.5, 1.0, 2.0, 0.0):
        h.observe(v)
    samples = parse(r.render().decode())
    assert samples['t_seconds_bucket{le="0.1"}'] == 2  # le: 0.1 itself counts
    assert samples['t_seconds_bucket{le="1"}'] == 4
    assert samples['t_seconds_bucket{le="+Inf"}'] == 5
    assert samples["t_seconds_count{}"] == 5 and samples["t_seconds_sum{}"] == 3.6
