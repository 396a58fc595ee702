"""Smoke test of the churn benchmark (benchmarks/churn.py --quick): the whole chain runs
(test API server over TLS, numagate serve --kubeconfig, wrk, the probe, the outage, and as
root the capture of --wire) and the report has the issue-14 shape. Speed is not checked
here: the benchmark prints it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT

pytestmark = pytest.mark.slow


def test_quick_churn_benchmark_reports_every_figure(tmp_path: Path) -> None:
    if shutil.which("wrk") is None:
        pytest.skip("wrk is not installed (apt-get install -y wrk)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # --wire captures packets: as root, with tcpdump or apt-get to install it
    wired = os.geteuid() == 0 and bool(shutil.which("tcpdump") or shutil.which("apt-get"))
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "churn.py"), "--quick", "--pin", "--out", str(tmp_path),
         *(["--wire"] if wired else [])],
        capture_output=True, text=True, timeout=300, env=env, check=False, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((tmp_path / "churn-quick.json").read_text())
    points = result["api"]["points"]
    assert [p["rate"] for p in points] == [0.0, 20.0]
    for p in points:
        assert p["reviews"]["requests"] > 0
        assert p["reviews"]["non_2xx"] == 0 and p["reviews"]["socket_errors"] == 0
        assert p["healthz"]["requests"] > 0
    assert points[1]["observed_rate"] > 0
    if wired:  # the server's side of every review, beside wrk's figure
        for p in points:
            on_wire = p["reviews"]["wire"]
            assert on_wire["exchanges"] >= p["reviews"]["requests"] * 0.9, on_wire
            assert 0 < on_wire["p50_ms"] <= on_wire["p99_ms"] <= on_wire["max_ms"]
            # wrk's correction adds samples, each shorter than the one it comes from
            assert 0 < on_wire["p99_as_wrk_ms"] <= on_wire["max_ms"]
            assert "\n0 packets dropped by kernel" in "\n" + on_wire["tcpdump"]
        assert result["figures"]["wire_p99_ratio"] > 0
    assert len(result["api"]["visible_idle_s"]) == len(result["api"]["visible_churn_s"]) == 2
    recovery = result["api"]["recovery"]
    assert recovery["watches_resumed_s"] is not None and recovery["change_visible_s"] > 0
    assert result["file"]["200"]["ready_s"] > 0
    pairs = result["api"]["pairs"]  # the headline ratios are the medians of the pairs
    assert len(pairs) == 2 and all(r > 0 and p > 0 for r, p, *_ in pairs)
    figures = result["figures"]
    assert min(r for r, *_ in pairs) <= figures["rps_ratio"] <= max(r for r, *_ in pairs)
    assert figures["large_rps_ratio"] is None  # --quick never runs the 100k case
    assert all(figures[k] is not None for k in ("rps_ratio", "p99_ratio", "ready_api_s"))
    text = (tmp_path / "churn-quick.md").read_text()
    assert "| NRT events/s (observed) | reviews/s |" in text
    assert "| reviews/s under the highest rate / no churn |" in text
    assert "back to back, 2 times" in text
    assert ("(--pin)" in text) == ((os.cpu_count() or 1) > 1)
    assert text in done.stdout
