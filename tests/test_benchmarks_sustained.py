"""benchmarks/sustained.py runs end to end on a small cluster and reports what grows under
sustained churn (issue 14): per window the CPU per event and the shape counts, with the
dead shapes a review walks bounded and freed slots reused."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.paths import ROOT


def test_sustained_churn_reports_every_window_and_bounds_the_dead_shapes() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "sustained.py"), "--nodes", "400",
         "--rate", "100", "--windows", "4", "--seconds", "3"],
        capture_output=True, text=True, timeout=300, env=env, check=False, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [line["window"] for line in lines] == [-1, 0, 1, 2, 3]
    assert lines[-1]["churn_s"] == 12.0
    for line in lines[1:]:
        assert line["merge_us_per_event"] > 0 and line["patch_us_per_event"] > 0
        assert line["evaluation_ms_per_pod"] > 0 and line["rss_mib"] > 0
        assert line["dead_in_it"] <= 17 + line["longest_class"] // 8
    last = lines[-1]
    # 1,200 events over ~330 NRTs: each made a shape, yet freed slots were reused
    assert last["live"] > lines[0]["live"]
    assert last["slots"] < lines[0]["slots"] + 900
