"""Where the CPU of watch events goes in the server (issue 14): ``numagate serve
--kubeconfig`` (one worker) against the test API server rewriting NRTs at ``--rate``
events/s, no review traffic; the CPU time of the worker's event loop (the main thread:
merge, snapshot patch, installing the view) and of its other threads (the watches: TLS
read, HTTP chunking, JSON, ``parse_object``), from ``/proc/<pid>/task/<tid>/stat``,
per event, over ``--seconds`` after ``--warmup`` seconds of churn.

    .venv/bin/python benchmarks/thread_cpu.py [--nodes 10000] [--rate 1666.67]
        [--seconds 10] [--warmup 3]

Prints one JSON line. Figures: docs/benchmarks.md ("Inventory under churn").
"""

from __future__ import annotations

import argparse
import json
import os
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

TICK = os.sysconf("SC_CLK_TCK")


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds (user + system) of each thread of ``pid``."""
    out: dict[int, float] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the thread ended meanwhile
        out[int(tid)] = (int(fields[11]) + int(fields[12])) / TICK
    return out


def measure(nodes: int, rate: float, seconds: float, warmup: float) -> dict[str, float]:
    work = Path(tempfile.mkdtemp(prefix="numagate-threads-"))
    fake = churn.fake_cluster(work, nodes)
    try:
        kubeconfig = fake.write_kubeconfig(work / "kubeconfig")
        ng = parts.start_numagate(
            ["--kubeconfig", str(kubeconfig)], work / "certs", work / "api.log", 900
        )
        try:
            fake.churn(NRTS, rate, nrt_available, exclude=(parts.PROBE,))
            time.sleep(warmup)
            before, events0 = thread_cpu(ng.worker), fake.churned(NRTS)
            time.sleep(seconds)
            after, events1 = thread_cpu(ng.worker), fake.churned(NRTS)
            fake.churn(NRTS, 0, nrt_available)
        finally:
            ng.stop()
    finally:
        fake.stop()
        shutil.rmtree(work, ignore_errors=True)
    events = max(1, events1 - events0)
    spent = {tid: cpu - before.get(tid, 0.0) for tid, cpu in after.items()}
    loop = spent.pop(ng.worker, 0.0)  # the main thread's id is the process id
    others = sum(spent.values())
    return {
        "nodes": nodes,
        "events_per_s": round(events / seconds, 1),
        "loop_us_per_event": round(loop / events * 1e6, 1),
        "other_threads_us_per_event": round(others / events * 1e6, 1),
        "cores_at_this_rate": round((loop + others) / seconds, 3),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=10_000)
    p.add_argument("--rate", type=float, default=1666.67, help="NRT events/s")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--warmup", type=float, default=3.0)
    args = p.parse_args()
    print(json.dumps(measure(args.nodes, args.rate, args.seconds, args.warmup)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
