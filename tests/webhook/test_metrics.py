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
