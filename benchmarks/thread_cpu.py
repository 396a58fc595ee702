"""Where the CPU of watch events goes in the server (issue 14): ``numagate serve
--kubeconfig`` (one worker) against the test API server rewriting NRTs at ``--rate``
events/s, no review traffic; the CPU time of the worker's event loop (the main thread:
merge, snapshot patch, installing the view) and of its other threads (the watches: TLS
read, HTTP chunking, JSON, ``parse_object``), from ``/proc/<pid>/task/<tid>/stat``,
per event, over ``--seconds`` after ``--warmup`` seconds of churn.

    .venv/bin/python benchmarks/thread_cpu.py [--nodes 10000] [--rate 1666.67]
        [--seconds 10] [--warmup 3] [--windows 1]

Prints one JSON line per window (with the worker's RSS and the seconds of churn so far).
Figures: docs/benchmarks.md ("Inventory under churn").
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


def measure(
    nodes: int,
    rate: float,
    seconds: float,
    warmup: float,
    windows: int = 1,
) -> list[dict[str, float]]:
    """One figure per window of ``seconds`` (``windows`` in a row, churn going on)."""
    work = Path(tempfile.mkdtemp(prefix="numagate-threads-"))
    fake = churn.fake_cluster(work, nodes)
    out = []
    try:
        kubeconfig = fake.write_kubeconfig(work / "kubeconfig")
        source = ["--kubeconfig", str(kubeconfig)]
        ng = parts.start_numagate(source, work / "certs", work / "api.log", 900)
        try:
            fake.churn(NRTS, rate, nrt_available, exclude=(parts.PROBE,))
            time.sleep(warmup)
            helpers = ng.helpers()
            before, events0 = thread_cpu(ng.worker), fake.churned(NRTS)
            helped0 = sum(sum(thread_cpu(h).values()) for h in helpers)
            for k in range(windows):
                time.sleep(seconds)
                after, events1 = thread_cpu(ng.worker), fake.churned(NRTS)
                helped1 = sum(sum(thread_cpu(h).values()) for h in helpers)
                figure = _figure(nodes, ng.worker, before, after, events1 - events0, seconds)
                figure["churn_s"] = round(warmup + (k + 1) * seconds, 1)
                figure["rss_mib"] = ng.rss_mib()
                if helpers:
                    spent = (helped1 - helped0) / max(1, events1 - events0)
                    figure["inventory_process_us_per_event"] = round(spent * 1e6, 1)
                    figure["inventory_process_rss_mib"] = ng.helpers_rss_mib()
                out.append(figure)
                before, events0, helped0 = after, events1, helped1
            fake.churn(NRTS, 0, nrt_available)
        finally:
            ng.stop()
    finally:
        fake.stop()
        shutil.rmtree(work, ignore_errors=True)
    return out


def _figure(
    nodes: int,
    worker: int,
    before: dict[int, float],
    after: dict[int, float],
    events: int,
    seconds: float,
) -> dict[str, float]:
    events = max(1, events)
    spent = {tid: cpu - before.get(tid, 0.0) for tid, cpu in after.items()}
    loop = spent.pop(worker, 0.0)  # the main thread's id is the process id
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
    p.add_argument("--windows", type=int, default=1,
                   help="windows of --seconds in a row (sustained churn: per-event cost, RSS)")  # fmt: skip
    args = p.parse_args()
    for figure in measure(args.nodes, args.rate, args.seconds, args.warmup, args.windows):
        print(json.dumps(figure), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
