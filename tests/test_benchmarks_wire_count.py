"""benchmarks/wire_count.py: its arithmetic, its inputs and (slow) a real counted run of
numagate and the bare server under callgrind over TLS."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.paths import ROOT

BENCH = ROOT / "benchmarks"
sys.path.insert(0, str(BENCH))

import wire_count  # noqa: E402


def test_figures_take_the_quiet_workers_timers_off_every_worker() -> None:
    # worker 1 answered 10 requests; worker 2 only ran its timers (500 instructions)
    got = wire_count.figures({1: 10_500, 2: 500}, requests=10, window=2.0)
    assert got == {
        "per_review": 1000,
        "per_review_raw": 1100,
        "periodic_per_second": 250,
        "window_s": 2.0,
    }
    # one worker: nothing to tell its timers from its requests by
    assert wire_count.figures({1: 10_500}, requests=10, window=2.0)["per_review"] == 1050


def test_dumped_reads_the_workers_callgrind_totals(tmp_path: Path) -> None:
    (tmp_path / "cg.42.out.1").write_text("events: Ir\nsummary: 123456\n")
    assert wire_count._dumped(tmp_path, 42) == 123456
    with pytest.raises(wire_count.bench.BenchError, match="no dump"):
        wire_count._dumped(tmp_path, 43)


@pytest.mark.parametrize("stream", wire_count.STREAMS)
def test_streams_give_every_request_its_own_uid(stream: str) -> None:
    body = wire_count.bodies_for(stream, "mutate")
    reviews = [orjson.loads(body(k)) for k in range(30)]
    assert len({r["request"]["uid"] for r in reviews}) == 30
    if stream != "unique":  # replicas: the same pod every len(templates) requests
        first, again = body(0), body(12 if stream == "replicas" else 1)
        assert len(first) == len(again) or stream == "apiserver-replicas"


@pytest.mark.slow
def test_counts_numagate_and_the_bare_servers_on_the_wire(tmp_path: Path) -> None:
    cmd = [sys.executable, str(BENCH / "wire_count.py"), "--nodes", "20", "--requests", "20",
           "--warmup", "30", "--keep", str(tmp_path)]  # fmt: skip
    done = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    ours, bare, valid = result["this"], result["bare aiohttp"], result["bare valid"]
    # numagate reads the body and answers too, and does more: never fewer instructions
    assert ours["per_review"] > bare["per_review"] > 10_000
    assert valid["per_review"] > bare["per_review"]  # it parses what the other ignores
    assert ours["efficiency"] == round(bare["per_review"] / ours["per_review"], 3)
    assert ours["efficiency_valid"] == round(valid["per_review"] / ours["per_review"], 3)
