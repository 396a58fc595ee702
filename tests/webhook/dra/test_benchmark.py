"""Smoke test of benchmarks/dra.py --live on a small cluster: the churn's events apply to
the live inventory (which then equals the whole build of the final objects), and every
figure the docs quote is printed (docs/dra.md: the DRA inventory)."""

from __future__ import annotations

import sys

import pytest

from core.dra.inventory import IncrementalDra, parse_dra, read_inventory
from tests.paths import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import dra as bench


def test_the_churn_applied_event_by_event_is_the_whole_build() -> None:
    objects = {bench._key(o): o for o in bench.objects(30)}
    live = IncrementalDra()
    for obj in objects.values():
        found = parse_dra(obj)
        assert found is not None
        live.apply(*found)
    live.flush()
    for obj in bench.churn(30, 200):
        key = bench._key(obj)
        if "spec" in obj:
            objects[key] = obj
            found = parse_dra(obj)
            assert found is not None and not isinstance(found[1], str)
            live.apply(*found)
        else:
            del objects[key]
            live.apply(key, None)
        live.flush()
    assert live.view == read_inventory(objects.values())


@pytest.mark.slow  # the latency part waits for the flush thread's window per event
def test_the_live_figures_are_printed() -> None:
    figures = bench.live_figures(20, 40)
    assert figures["whole_build_cpu_s"] > 0 and figures["cpu_us_per_event"] > 0
    assert set(figures["cpu_us_per_event_by_kind"]) <= {
        "DeviceClass", "ResourceClaim", "ResourceClaim (deleted)", "ResourceSlice"
    }  # fmt: skip
    latency = figures["change_visible_ms"]
    assert latency["median"] >= latency["window_ms"] and latency["p99"] >= latency["median"]
