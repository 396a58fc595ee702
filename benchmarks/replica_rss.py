"""Memory of one replica watching a large cluster (issue 31): ``numagate serve
--kubeconfig --workers N`` against the test API server (the cluster of benchmarks/churn.py,
every NRT with free amounts of its own), ready, then ``--seconds`` of NRT churn at
``--rate``. The serve process, its workers and the inventory process are summed: RSS,
and PSS (the pages forked workers share counted once), at the peak while starting, at
ready and at the peak under churn (sampled every 0.5 s); at ready and at the end also the
resident memory with each page counted once (``once_mib``, ``end_once_mib``: what the
replica's cgroup is charged; needs root). ``ready_processes``: each process's RSS and PSS
at ready; ``--timeline S``: also each process's, every 0.5 s from the start to S seconds
after ready (before the churn), on stderr.

    .venv/bin/python benchmarks/replica_rss.py [--nodes 100000] [--workers 1 2]
        [--rate 1666.67] [--seconds 60] [--timeline 5]

Run with another checkout's .venv/bin/python to measure that checkout's numagate.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

import churn  # noqa: E402
import churn_parts as parts  # noqa: E402

from tests.webhook.fake_apiserver import NRTS  # noqa: E402
from tests.webhook.fake_apiserver_churn import nrt_available  # noqa: E402


def measure(
    nodes: int, workers: int, rate: float, seconds: float, timeline: float = 0.0
) -> dict[str, object]:
    work = Path(tempfile.mkdtemp(prefix="numagate-replica-"))
    fake = churn.fake_cluster(work, nodes, distinct=True)
    try:
        source = ["--kubeconfig", str(fake.write_kubeconfig(work / "kubeconfig"))]
        startup = {"rss_mib": 0.0, "pss_mib": 0.0}
        sampled = [0.0]
        began = time.monotonic()

        def show(pid: int) -> None:
            if timeline:
                at = round(time.monotonic() - began, 1)
                print(json.dumps({"t": at, **parts.processes_mib(pid)}), file=sys.stderr)

        def sample(pid: int) -> None:  # every 0.5 s until ready: the first build's peak
            if time.monotonic() - sampled[0] >= 0.5:
                sampled[0] = time.monotonic()
                now = parts.replica_mib(pid)
                startup.update({k: max(startup[k], now[k]) for k in startup})
                show(pid)

        ng = parts.start_numagate(
            source, work / "certs", work / "serve.log", 900, workers, while_starting=sample
        )
        try:
            ready = parts.replica_mib(ng.proc.pid)
            at_ready = parts.processes_mib(ng.proc.pid)
            peak = dict(ready)
            ready["once_mib"] = parts.resident_once_mib(ng.proc.pid)
            while time.monotonic() - began < ng.ready_s + timeline:
                show(ng.proc.pid)
                time.sleep(0.5)
            fake.churn(NRTS, rate, nrt_available, exclude=(parts.PROBE,))
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                time.sleep(0.5)
                now = parts.replica_mib(ng.proc.pid)
                peak = {k: max(peak[k], now[k]) for k in peak}
            end_once = parts.resident_once_mib(ng.proc.pid)
            fake.churn(NRTS, 0, nrt_available)
            processes = len(parts.replica(ng.proc.pid))
        finally:
            ng.stop()
    finally:
        fake.stop()
        shutil.rmtree(work, ignore_errors=True)
    return {"nodes": nodes, "workers": workers, "processes": processes, "ready_s": ng.ready_s,
            "startup_peak": startup, "ready": ready, "ready_processes": at_ready, "peak": peak, "end_once_mib": end_once, "churn_events_per_s": rate, "churn_s": seconds}  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=100_000)
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--rate", type=float, default=1666.67, help="NRT events/s")
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--timeline", type=float, default=0.0, metavar="S",
                   help="per-process samples on stderr until S s after ready")  # fmt: skip
    args = p.parse_args()
    for workers in args.workers:
        got = measure(args.nodes, workers, args.rate, args.seconds, args.timeline)
        print(json.dumps(got), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
