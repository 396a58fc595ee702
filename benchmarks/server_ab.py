"""The request path, A/B: several checkouts of numagate and the bare aiohttp TLS server,
all serving at once, driven by wrk in alternating order, so that every figure of a pair
comes from the same minutes of a shared machine (issue 27).

    .venv/bin/python benchmarks/server_ab.py [--tree NAME=DIR ...] [--pairs 2]
        [--duration 10] [--scenarios mutate,mutate-unique,validate-impossible]

Scenarios: benchmarks/server.py's, and ``{mutate,validate}-apiserver[-replicas|-unique]``:
the bodies a real kube-apiserver sent (tests/fixtures/reviews/apiserver-raw/), each request
with its own uid, name and service-account volume name; ``-unique``: every pod different
(its spec varied, a label new per request: benchmarks/gen.py apiserver_unique_templates).

Each ``--tree`` is a checkout with its own ``.venv`` (``make install`` there; the default
is this checkout alone, as ``this``). Scenarios, inputs and wrk options are
benchmarks/server.py's (2 workers, TLS, 10,000 nodes, each request its own uid). Per
scenario and round the servers are measured one after the other, the order reversed every
round. The figure that holds across runs on a shared machine is CPU per review (from
/proc over the server's worker processes); CPU efficiency is the bare server's CPU per
review over a tree's (1.0 = as cheap as parse-nothing-and-answer), taken from the same
round. A second baseline, ``bare-valid``, is the minimal webhook an apiserver accepts: it
decodes the body and echoes the request's uid (benchmarks/bare_server.py ``--valid``);
every tree's efficiency is printed against both. The p99 ratio to the bare server is
printed split in two: the p50 ratio (wrk keeps a fixed number of requests in flight, so
latency follows throughput) and the tail's shape (p99/p50 over the bare server's
p99/p50; above 1: slow requests of our own). Prints one table (medians over the rounds,
with each round's values) and writes ``--out``/server_ab.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

import gen  # noqa: E402
import server as bench  # noqa: E402

SCENARIOS = {name: (path, kind, unique) for name, path, kind, unique in bench.SCENARIOS}
VALID = "bare-valid"  # the minimal valid webhook: decodes the body, echoes the uid
# The bodies a real kube-apiserver sent (benchmarks/record_bodies.py), each request with
# its own uid, name and service-account volume (gen.apiserver_template): a named pod, and
# a ReplicaSet's replica (at mutate it has only generateName); "-unique": both with the
# pod's spec varied and a label new on every request (gen.apiserver_unique_templates).
for _webhook in ("mutate", "validate"):
    for _which, _suffix in (("pod", ""), ("replica", "-replicas"), ("unique", "-unique")):
        SCENARIOS[f"{_webhook}-apiserver{_suffix}"] = (
            f"/{_webhook}?timeout=10s",
            f"{_webhook}-{_which}",
            False,
        )


def apiserver_inputs(out: Path) -> dict[str, list[Path]]:
    """The recorded bodies as wrk templates, one file per (webhook, pod or replica)."""
    out.mkdir(parents=True, exist_ok=True)
    files = {}
    for webhook in ("mutate", "validate"):
        for which in ("pod", "replica", "unique"):
            paths = []
            for k, body in enumerate(gen.apiserver_templates(webhook, which)):
                path = out / f"apiserver-{webhook}-{which}-{k:02d}.json"
                path.write_bytes(body)
                paths.append(path)
            files[f"{webhook}-{which}"] = paths
    return files


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tree", action="append", default=[], metavar="NAME=DIR",
                   help="a checkout to measure (repeat); default: this one as 'this'")  # fmt: skip
    p.add_argument("--pairs", type=int, default=2, help="rounds per scenario")
    p.add_argument("--duration", type=int, default=10, help="seconds per wrk run")
    p.add_argument("--connections", type=int, default=32)
    p.add_argument("--threads", type=int, default=2, help="wrk threads")
    p.add_argument("--workers", type=int, default=2, help="server worker processes")
    p.add_argument("--nodes", type=int, default=10_000)
    p.add_argument("--delay-ms", type=int, default=0,
                   help="each connection waits this long between requests (a paced rate, "
                        "as the apiserver's creates arrive one by one); 0: as fast as possible")  # fmt: skip
    p.add_argument("--scenarios", default="mutate,mutate-unique,validate-impossible")
    p.add_argument("--log-level", default="info")
    p.add_argument("--keep", type=Path, help="generate inputs here and keep them")
    p.add_argument("--out", type=Path, default=bench.RESULTS)
    return p.parse_args(argv)


def trees(specs: list[str]) -> dict[str, Path]:
    out = {}
    for spec in specs or [f"this={HERE.parent}"]:
        name, _, where = spec.partition("=")
        exe = Path(where).resolve() / ".venv" / "bin" / "numagate"
        if not name or not exe.exists():
            raise bench.BenchError(f"--tree {spec!r}: no {exe} (make install in that checkout)")
        out[name] = exe
    return out


def _efficiency(base: list[dict[str, Any]], got: list[dict[str, Any]]) -> list[float]:
    """Per round: the baseline's CPU per review over ``got``'s."""
    return [b["server_cpu_ms_per_review"] / r["server_cpu_ms_per_review"]
            for b, r in zip(base, got, strict=True)]  # fmt: skip


def summarize(runs: dict[str, dict[str, list[dict[str, Any]]]]) -> dict[str, Any]:
    """Per scenario and tree: medians of CPU per review, CPU efficiency (bare CPU / ours in
    the same round; and against the valid bare server when it ran), reviews/s and p99
    ratios to the bare server."""
    out: dict[str, Any] = {}
    for scenario, by_server in runs.items():
        bare = by_server["bare"]
        valid = by_server.get(VALID)
        rows = {}
        for name, got in by_server.items():
            cpu = [r["server_cpu_ms_per_review"] for r in got]
            eff = _efficiency(bare, got)
            eff_valid = _efficiency(valid, got) if valid is not None else []
            rps = [r["reviews_per_s"] / b["reviews_per_s"] for b, r in zip(bare, got, strict=True)]
            p99 = [r["p99_ms"] / b["p99_ms"] for b, r in zip(bare, got, strict=True)]
            # The p99 ratio is the p50 ratio (with wrk's fixed connections, Little's law:
            # latency ~ connections / reviews per second) times the tail's shape, p99/p50
            # over the bare server's p99/p50: a shape above 1 is a tail of our own.
            p50 = [r["p50_ms"] / b["p50_ms"] for b, r in zip(bare, got, strict=True)]
            shape = [(r["p99_ms"] / r["p50_ms"]) / (b["p99_ms"] / b["p50_ms"])
                     for b, r in zip(bare, got, strict=True)]  # fmt: skip
            rows[name] = {
                "cpu_ms_per_review": round(statistics.median(cpu), 4),
                "cpu_efficiency": round(statistics.median(eff), 3),
                "cpu_efficiency_valid": (
                    round(statistics.median(eff_valid), 3) if eff_valid else None
                ),
                "rps_ratio": round(statistics.median(rps), 3),
                "p99_ratio": round(statistics.median(p99), 2),
                "p50_ratio": round(statistics.median(p50), 2),
                "tail_shape": round(statistics.median(shape), 2),
                "reviews_per_s": round(statistics.median(r["reviews_per_s"] for r in got)),
                "p99_ms": round(statistics.median(r["p99_ms"] for r in got), 2),
                "rounds": {"cpu": cpu, "efficiency": [round(e, 3) for e in eff],
                           "efficiency_valid": [round(e, 3) for e in eff_valid],
                           "p99_ratio": [round(x, 2) for x in p99],
                           "tail_shape": [round(x, 2) for x in shape]},
            }  # fmt: skip
        out[scenario] = rows
    return out


def table(summary: dict[str, Any]) -> str:
    lines = [
        "| scenario | server | CPU ms/review | CPU efficiency vs bare | vs bare-valid "
        "| reviews/s (ratio) | p99 ms (ratio) | efficiency per round (vs bare; vs bare-valid) "
        "| p50 ratio; tail shape |",
        "|---|---|---:|---:|---:|---:|---:|---|---:|",
    ]
    for scenario, rows in summary.items():
        for name, r in rows.items():
            valid = r.get("cpu_efficiency_valid")
            per_round = ", ".join(map(str, r["rounds"]["efficiency"]))
            if r["rounds"].get("efficiency_valid"):
                per_round += "; " + ", ".join(map(str, r["rounds"]["efficiency_valid"]))
            lines.append(
                f"| {scenario} | {name} | {r['cpu_ms_per_review']:.3f} | {r['cpu_efficiency']:.2f} "
                f"| {'' if valid is None else f'{valid:.2f}'} "
                f"| {r['reviews_per_s']:,} ({r['rps_ratio']:.2f}) | {r['p99_ms']:.2f} "
                f"({r['p99_ratio']:.2f}x) | {per_round} "
                f"| {r['p50_ratio']:.2f}x; {r['tail_shape']:.2f} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    names = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    if args.delay_ms:
        os.environ["NUMAGATE_WRK_DELAY_MS"] = str(args.delay_ms)  # benchmarks/wrk/review.lua
    servers: dict[str, bench.Server] = {}
    try:
        exes = trees(args.tree)
        unknown = [n for n in names if n not in SCENARIOS]
        if unknown:
            raise bench.BenchError(f"unknown scenarios {unknown}; known: {sorted(SCENARIOS)}")
        wrk = bench.ensure_wrk()
        with tempfile.TemporaryDirectory(prefix="numagate-ab-") as tmp:
            work = Path(tmp)
            inputs = gen.write_inputs(args.keep or work / "inputs", nodes=args.nodes)
            bodies = {"realistic": inputs.realistic, "impossible": inputs.impossible}
            bodies.update(apiserver_inputs(args.keep or work / "inputs"))
            ca = bench.ensure_certs(work / "certs")
            for name, exe in exes.items():
                print(f"starting {name} ({exe})...", file=sys.stderr)
                servers[name] = bench.start_numagate(
                    inputs.inventory, work / "certs", work, workers=args.workers,
                    log_level=args.log_level, executable=exe, name=name,
                )  # fmt: skip
            servers["bare"] = bench.start_bare(work / "certs", work, workers=args.workers)
            servers[VALID] = bench.start_bare(
                work / "certs", work, workers=args.workers, valid=True
            )
            opts = {"duration": args.duration, "connections": args.connections,
                    "threads": args.threads}  # fmt: skip
            runs: dict[str, dict[str, list[dict[str, Any]]]] = {}
            order = list(servers)
            for scenario in names:
                path, kind, unique = SCENARIOS[scenario]
                for server in servers.values():
                    bench.check_answers(server, ca, path, bodies[kind])
                runs[scenario] = {name: [] for name in order}
                for n in range(args.pairs):
                    for name in order if n % 2 == 0 else order[::-1]:
                        got = bench.measured_run(servers[name], wrk, path, bodies[kind],
                                                 {**opts, "unique": unique})  # fmt: skip
                        runs[scenario][name].append(got)
                        print(f"{scenario} round {n + 1} {name}: {got['reviews_per_s']:.0f}/s "
                              f"CPU {got['server_cpu_ms_per_review']} ms/review, p99 "
                              f"{got['p99_ms']:.2f} ms, load {got['loadavg_1m']}",
                              file=sys.stderr, flush=True)  # fmt: skip
    except bench.BenchError as exc:
        print(f"benchmarks/server_ab.py: {exc}", file=sys.stderr)
        return 1
    finally:
        for server in servers.values():
            server.stop()
    summary = summarize(runs)
    result = {"machine": bench.machine(), "trees": {k: str(v) for k, v in exes.items()},
              "options": vars(args) | {"out": str(args.out), "keep": str(args.keep)},
              "summary": summary, "runs": runs}  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "server_ab.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(table(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
