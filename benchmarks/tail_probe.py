"""Where the request path's tail comes from (issue 27): numagate and the two bare servers
under wrk, each worker watched from inside.

    .venv/bin/python benchmarks/tail_probe.py [--tree DIR] [--scenarios mutate-unique]
        [--duration 8] [--delay-ms 0] [--nodes 10000]

Every server process imports this module at start-up (a ``sitecustomize`` on PYTHONPATH
calls :func:`install`), which records, per worker: every pass of the cyclic collector
(``gc.callbacks``: generation, CPU, wall), and every event-loop callback's duration
(``asyncio.events.Handle._run``: a task step, a transport's read; one over a few ms holds
up every other request of that worker). A worker writes what it counted on SIGUSR1; the
driver asks before and after each wrk run and prints the difference next to wrk's p50 and
p99. With wrk's fixed connections, latency follows throughput (Little's law), so the p99
ratio to the bare server is split as benchmarks/server_ab.py does: the p50 ratio times the
tail's shape (p99/p50 over the bare server's).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT_ENV = "NUMAGATE_TAIL_PROBE"
SLOW_MS = (1.0, 2.0, 5.0)


def install() -> None:
    """In a server process: count collector passes and loop callbacks; write them to
    ``$NUMAGATE_TAIL_PROBE/<pid>.json`` on SIGUSR1 (forked workers inherit all of it)."""
    import asyncio.events
    import gc
    import threading

    out = os.environ[OUT_ENV]
    clock, cpu = time.perf_counter, time.thread_time
    counts: dict[str, Any] = {"gc": {}, "callbacks": 0, "callback_s": 0.0,
                              "slow": {str(ms): 0 for ms in SLOW_MS}, "other_thread_gc": 0}  # fmt: skip
    started = [0.0, 0.0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if threading.current_thread() is not threading.main_thread():
            counts["other_thread_gc"] += phase == "stop"
        elif phase == "start":
            started[:] = clock(), cpu()
        else:
            g = counts["gc"].setdefault(str(info["generation"]), [0, 0.0, 0.0, 0.0])
            wall = clock() - started[0]
            g[0] += 1
            g[1] += cpu() - started[1]
            g[2] += wall
            g[3] = max(g[3], wall)

    gc.callbacks.append(on_gc)
    run = asyncio.events.Handle._run

    def timed(self: asyncio.events.Handle) -> None:
        start = clock()
        try:
            run(self)
        finally:
            took = clock() - start
            counts["callbacks"] += 1
            counts["callback_s"] += took
            for ms in SLOW_MS:
                if took * 1000 > ms:
                    counts["slow"][str(ms)] += 1

    asyncio.events.Handle._run = timed  # type: ignore[method-assign]

    def dump(_signum: int, _frame: object) -> None:
        Path(out, f"{os.getpid()}.json").write_text(json.dumps(counts))

    signal.signal(signal.SIGUSR1, dump)


def _snapshot(pids: Sequence[int], out: Path) -> dict[int, dict[str, Any]]:
    for pid in pids:
        Path(out, f"{pid}.json").unlink(missing_ok=True)
        os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if all(Path(out, f"{pid}.json").exists() for pid in pids):
            time.sleep(0.05)  # written in one call; let it land
            return {pid: json.loads(Path(out, f"{pid}.json").read_text()) for pid in pids}
        time.sleep(0.05)
    raise SystemExit(f"no probe dump from {pids}")


def _difference(before: dict[int, Any], after: dict[int, Any], reviews: int) -> dict[str, Any]:
    """The run's own counts over all workers, per 1,000 reviews where it says so."""
    k = 1000 / max(reviews, 1)
    callbacks = sum(after[p]["callbacks"] - before[p]["callbacks"] for p in after)
    seconds = sum(after[p]["callback_s"] - before[p]["callback_s"] for p in after)
    row: dict[str, Any] = {
        "callbacks_per_review": round(callbacks / max(reviews, 1), 2),
        "callback_mean_us": round(seconds / max(callbacks, 1) * 1e6, 1),
    }
    for ms in SLOW_MS:
        slow = sum(after[p]["slow"][str(ms)] - before[p]["slow"][str(ms)] for p in after)
        row[f"callbacks_over_{ms:g}ms_per_1k_reviews"] = round(slow * k, 2)
    for gen in ("0", "1", "2"):
        n = cpu = longest = 0.0
        for p in after:
            a, b = after[p]["gc"].get(gen, [0, 0.0, 0.0, 0.0]), before[p]["gc"].get(gen, [0, 0.0])
            n += a[0] - b[0]
            cpu += a[1] - b[1]
            longest = max(longest, a[3])
        row[f"gc{gen}_passes_per_1k_reviews"] = round(n * k, 2)
        row[f"gc{gen}_cpu_ms_mean"] = round(cpu / n * 1000, 3) if n else 0.0
        row[f"gc{gen}_cpu_us_per_review"] = round(cpu / max(reviews, 1) * 1e6, 2)
        row[f"gc{gen}_longest_wall_ms_ever"] = round(longest * 1000, 2)
    return row


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tree", type=Path, default=HERE.parent, help="checkout with its .venv")
    p.add_argument("--scenarios", default="mutate-unique")
    p.add_argument("--duration", type=int, default=8)
    p.add_argument("--delay-ms", type=int, default=0, help="as server_ab.py's")
    p.add_argument("--nodes", type=int, default=10_000)
    args = p.parse_args(argv)
    sys.path[:0] = [str(HERE.parent), str(HERE)]
    import gen
    import server as bench
    import server_ab

    if args.delay_ms:
        os.environ["NUMAGATE_WRK_DELAY_MS"] = str(args.delay_ms)
    wrk = bench.ensure_wrk()
    rows: dict[str, Any] = {}
    servers: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="numagate-tail-") as tmp:
        work, out = Path(tmp), Path(tmp, "probe")
        out.mkdir()
        site = Path(tmp, "site")
        site.mkdir()
        # loaded from its file: the benchmarks folder on sys.path would shadow the core package
        site.joinpath("sitecustomize.py").write_text(
            "import importlib.util\n"
            f"spec = importlib.util.spec_from_file_location('tail_probe', {__file__!r})\n"
            "probe = importlib.util.module_from_spec(spec)\n"
            "spec.loader.exec_module(probe)\n"
            "probe.install()\n"
        )
        env_before = dict(os.environ)
        os.environ.update({"PYTHONPATH": str(site), OUT_ENV: str(out)})
        try:
            inputs = gen.write_inputs(work / "inputs", nodes=args.nodes)
            bodies = {"realistic": inputs.realistic, "impossible": inputs.impossible}
            bodies.update(server_ab.apiserver_inputs(work / "inputs"))
            ca = bench.ensure_certs(work / "certs")
            servers["numagate"] = bench.start_numagate(
                inputs.inventory, work / "certs", work, workers=2, log_level="info",
                executable=args.tree.resolve() / ".venv" / "bin" / "numagate",
            )  # fmt: skip
            servers["bare"] = bench.start_bare(work / "certs", work, workers=2)
            servers["bare-valid"] = bench.start_bare(work / "certs", work, workers=2, valid=True)
            opts = {"duration": args.duration, "connections": 32, "threads": 2}
            for scenario in args.scenarios.split(","):
                path, kind, unique = server_ab.SCENARIOS[scenario]
                for name, server in servers.items():
                    bench.check_answers(server, ca, path, bodies[kind])
                    before = _snapshot(server.workers, out)
                    got = bench.measured_run(server, wrk, path, bodies[kind],
                                             {**opts, "unique": unique})  # fmt: skip
                    after = _snapshot(server.workers, out)
                    row = {k: got[k] for k in ("reviews_per_s", "p50_ms", "p99_ms", "loadavg_1m")}
                    row["cpu_ms_per_review"] = got["server_cpu_ms_per_review"]
                    row["p99_over_p50"] = round(got["p99_ms"] / got["p50_ms"], 2)
                    row.update(_difference(before, after, got["requests"]))
                    rows[f"{scenario} {name}"] = row
                    print(f"{scenario} {name}: {json.dumps(row)}", file=sys.stderr, flush=True)
        finally:
            os.environ.clear()
            os.environ.update(env_before)
            for server in servers.values():
                server.stop()
    print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
