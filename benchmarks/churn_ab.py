"""The worker's GIL switch interval under churn, A/B (issue 14): one test API server
holding ``--nodes`` generated nodes; per round and per interval, ``numagate serve
--kubeconfig --inventory-process=never`` (one worker, watching in itself) is started with
its switch interval forced to that value (a ``sitecustomize`` on PYTHONPATH; numagate
keeps Python's default, 5 ms), then wrk drives
/validate without churn and at ``--rate`` NRT events/s, as benchmarks/churn.py does. The order of the intervals is reversed every
round: runs of one process differ by +-0.1 in the reviews/s ratio, so one run per
value says little.

    .venv/bin/python benchmarks/churn_ab.py [--nodes 100000] [--rate 1666.67]
        [--intervals 0.005,0.001] [--rounds 2] [--duration 10]

Prints one line per run and a summary per interval (median ratios).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

import churn  # noqa: E402
import churn_parts as parts  # noqa: E402
import churn_report as report  # noqa: E402
import gen  # noqa: E402

from tests.webhook.fake_apiserver import NRTS, FakeApiServer  # noqa: E402
from tests.webhook.fake_apiserver_churn import nrt_available  # noqa: E402

# Forces the interval in the numagate processes only (they alone get the variable); a
# later sys.setswitchinterval call there is turned into this value too.
SITECUSTOMIZE = """\
import os, sys
_forced = os.environ.get("NUMAGATE_AB_SWITCH_INTERVAL")
if _forced:
    _set = sys.setswitchinterval
    _set(float(_forced))
    sys.setswitchinterval = lambda _value: _set(float(_forced))
"""


def one_run(fake: FakeApiServer, work: Path, load: parts.Load, rate: float) -> dict[str, Any]:
    """A worker started afresh; wrk without churn, then at ``rate`` (churn.churn_points)."""
    kubeconfig = fake.write_kubeconfig(work / "kubeconfig")
    ng = parts.start_numagate(["--kubeconfig", str(kubeconfig), "--inventory-process=never"], work / "certs",
                              work / "api.log", 900)  # fmt: skip
    try:
        base, last = churn.churn_points(fake, ng, load, [0.0, rate], warmup=3.0)
        fake.churn(NRTS, 0, nrt_available)
    finally:
        ng.stop()
    ratio, p99_ratio, _ = report.pair_ratios(base, last)
    return {"reviews_per_s": (base["reviews"]["reviews_per_s"], last["reviews"]["reviews_per_s"]),
            "ratio": ratio, "p99_ms": (base["reviews"]["p99_ms"], last["reviews"]["p99_ms"]),
            "p99_ratio": p99_ratio, "observed_rate": last["observed_rate"]}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=100_000)
    p.add_argument("--rate", type=float, default=1666.67, help="NRT events/s under churn")
    p.add_argument("--intervals", default="0.005,0.001", help="switch intervals, seconds")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--duration", type=int, default=10, help="seconds of wrk per point")
    args = p.parse_args(argv)
    intervals = [float(v) for v in args.intervals.split(",")]
    wrk = churn.find_wrk()
    runs: dict[float, list[dict[str, Any]]] = {v: [] for v in intervals}
    with tempfile.TemporaryDirectory(prefix="numagate-ab-") as tmp:
        work = Path(tmp)
        (work / "hook").mkdir()
        (work / "hook" / "sitecustomize.py").write_text(SITECUSTOMIZE)
        bodies = []
        for k, body in enumerate(gen.review_bodies(gen.realistic_pods(12), prefix="c")):
            bodies.append(work / f"review-{k:02d}.json")
            bodies[-1].write_bytes(body)
        load = parts.Load(wrk, bodies, args.duration, 16, 2)
        print(f"loading {args.nodes} nodes into the test API server...", file=sys.stderr)
        fake = churn.fake_cluster(work, args.nodes)
        saved = dict(os.environ)
        try:
            for n in range(args.rounds):
                for interval in intervals if n % 2 == 0 else intervals[::-1]:
                    os.environ["PYTHONPATH"] = os.pathsep.join(
                        filter(None, [str(work / "hook"), saved.get("PYTHONPATH")]))  # fmt: skip
                    os.environ["NUMAGATE_AB_SWITCH_INTERVAL"] = str(interval)
                    try:
                        run = one_run(fake, work, load, args.rate)
                    finally:
                        os.environ.clear()
                        os.environ.update(saved)
                    runs[interval].append(run)
                    print(f"round {n + 1}, switch interval {interval * 1000:g} ms: {run}",
                          flush=True)  # fmt: skip
        finally:
            fake.stop()
    print(f"\n{args.nodes} nodes, {args.rate:g} NRT events/s, {args.rounds} runs each:")
    print("| switch interval | reviews/s ratio, median (runs) | p99 ratio, median (runs) |")
    print("|---:|---:|---:|")
    for interval, got in runs.items():
        ratios = [r["ratio"] for r in got]
        p99s = [r["p99_ratio"] for r in got]
        print(f"| {interval * 1000:g} ms | {statistics.median(ratios):.2f} ({ratios}) | "
              f"{statistics.median(p99s):.1f}x ({p99s}) |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
