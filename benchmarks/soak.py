"""Soak test (``make soak``): numagate with a large inventory under a steady load for ten
minutes; passes when no request failed and memory did not grow.

    .venv/bin/python benchmarks/soak.py [--duration 600] [--nodes 10000]

The load is wrk over TLS with keep-alive (wrk2 is not packaged): a fixed number of
connections, each pacing itself with ``NUMAGATE_WRK_DELAY_MS`` between requests (see
benchmarks/wrk/review.lua), half on /mutate with the reviews of replicas (the decision
cache's hits) and half on /validate with every pod different (its misses, resting and
eviction: the cache must stay bounded). RSS of every worker is
sampled every ``--sample`` seconds. Failure: any non-2xx answer or socket error, a worker
gone, or resident memory at the end more than ``--max-growth`` above the first minute's
average. Prints one JSON document (also written to benchmarks/results/soak.json); exit
status 0 pass, 1 fail.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

import gen  # noqa: E402
import server as bench  # noqa: E402


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--duration", type=int, default=600, help="seconds of load (default 600)")
    p.add_argument("--nodes", type=int, default=10_000, help="inventory size")
    p.add_argument("--connections", type=int, default=16, help="total wrk connections")
    p.add_argument("--delay-ms", type=int, default=10, help="pause per connection per request")
    p.add_argument("--sample", type=float, default=10.0, help="RSS sampling interval, seconds")
    p.add_argument("--baseline", type=float, default=60.0, help="baseline window, seconds")
    p.add_argument("--max-growth", type=float, default=0.10, help="allowed RSS growth fraction")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--log-level", default="info")
    p.add_argument("--out", type=Path, default=bench.RESULTS, help="where soak.json goes")
    return p.parse_args(argv)


def start_wrk(wrk: str, url: str, path: str, bodies: Sequence[Path], *, connections: int,
              duration: int, delay_ms: int, unique: bool) -> subprocess.Popen[str]:  # fmt: skip
    cmd = [wrk, "-t1", f"-c{connections}", f"-d{duration}s", "--timeout", "10s",
           "-s", str(bench.LUA), url, "--", path, *map(str, bodies)]  # fmt: skip
    env = {**os.environ, "NUMAGATE_WRK_DELAY_MS": str(delay_ms),
           "NUMAGATE_WRK_UNIQUE": "1" if unique else "0"}  # fmt: skip
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def wrk_result(proc: subprocess.Popen[str], duration: int) -> dict[str, Any]:
    stdout, stderr = proc.communicate(timeout=duration + 120)
    if "WRK_RESULT " not in stdout:
        raise bench.BenchError(f"wrk printed no result ({proc.returncode}): {stderr[-400:]}")
    return bench.parse_wrk(stdout)


def sample_rss(
    server: bench.Server, args: argparse.Namespace, procs: list[Any]
) -> list[dict[str, Any]]:
    """RSS of each worker every ``args.sample`` seconds until the load generators end."""
    samples = []
    start = time.monotonic()
    while any(p.poll() is None for p in procs):
        samples.append(
            {"t": round(time.monotonic() - start, 1), "rss_mib": server.worker_rss_mib()}
        )
        deadline = time.monotonic() + args.sample
        while time.monotonic() < deadline and any(p.poll() is None for p in procs):
            time.sleep(0.2)
    return samples


def memory_growth(
    samples: list[dict[str, Any]], workers: list[int], baseline_s: float
) -> dict[str, Any]:
    """Per worker: the first minute's mean RSS, the last sample, and the growth fraction."""
    out = {}
    for pid in map(str, workers):
        series = [(s["t"], s["rss_mib"].get(pid)) for s in samples]
        base = [v for t, v in series if v is not None and t <= baseline_s]
        last = next((v for _, v in reversed(series) if v is not None), None)
        if not base or last is None:
            out[pid] = {"baseline_mib": None, "end_mib": last, "growth": None}
            continue
        mean = statistics.fmean(base)
        out[pid] = {"baseline_mib": round(mean, 1), "end_mib": last,
                    "growth": round((last - mean) / mean, 4)}  # fmt: skip
    return out


def verdict(result: dict[str, Any], args: argparse.Namespace) -> list[str]:
    problems = []
    for name, w in result["wrk"].items():
        if w["non_2xx"] or w["socket_errors"]:
            problems.append(f"{name}: {w['non_2xx']} non-2xx, {w['socket_errors']} socket errors")
        if w["requests"] == 0:
            problems.append(f"{name}: no request completed")
    for pid, g in result["memory"].items():
        if g["growth"] is None:
            problems.append(f"worker {pid}: gone or never sampled")
        elif g["growth"] > args.max_growth:
            problems.append(
                f"worker {pid}: RSS grew {g['growth']:.1%} ({g['baseline_mib']} -> "
                f"{g['end_mib']} MiB), over {args.max_growth:.0%}"
            )
    if not result["alive_at_end"]:
        problems.append("numagate exited during the soak")
    return problems


def soak(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    wrk = bench.ensure_wrk()
    inputs = gen.write_inputs(work / "inputs", nodes=args.nodes)
    cert_dir = work / "certs"
    ca = bench.ensure_certs(cert_dir)
    print(f"starting numagate with {args.nodes} nodes...", file=sys.stderr)
    server = bench.start_numagate(
        inputs.inventory, cert_dir, work, workers=args.workers, log_level=args.log_level
    )
    try:
        half = max(1, args.connections // 2)
        procs = [
            start_wrk(wrk, server.url, path, inputs.realistic, connections=half,
                      duration=args.duration, delay_ms=args.delay_ms, unique=unique)
            for path, unique in (("/mutate?timeout=10s", False), ("/validate?timeout=10s", True))
        ]  # fmt: skip
        print(f"soaking for {args.duration} s...", file=sys.stderr)
        samples = sample_rss(server, args, procs)
        results = {
            name: wrk_result(p, args.duration)
            for name, p in zip(("mutate", "validate"), procs, strict=True)
        }
        alive = server.proc.poll() is None and bool(server.worker_rss_mib())
        status, _ = bench._https(server.port, ca, "GET", "/readyz") if alive else (0, b"")
    finally:
        server.stop()
    return {
        "duration_s": args.duration,
        "nodes": args.nodes,
        "connections": args.connections,
        "delay_ms": args.delay_ms,
        "wrk": results,
        "rss_samples": samples,
        "memory": memory_growth(samples, server.workers, args.baseline),
        "alive_at_end": alive and status == 200,
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        with tempfile.TemporaryDirectory(prefix="numagate-soak-") as tmp:
            result = soak(args, Path(tmp))
    except bench.BenchError as exc:
        print(f"benchmarks/soak.py: {exc}", file=sys.stderr)
        return 1
    problems = verdict(result, args)
    result["passed"] = not problems
    result["problems"] = problems
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "soak.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
