"""Time to ready from a JSON file (issue 14): ``numagate serve --inventory FILE`` (one
worker) started ``--starts`` times per size, ready = ``/readyz`` 200 (polled every 50 ms).

    .venv/bin/python benchmarks/ready.py [--nodes 0,10000] [--starts 5]

0 nodes is a one-node file (the probe node): the startup floor (Python, imports, TLS).
Starts alternate between the sizes, so a slow spell of the machine spreads over all of
them. Prints each start, the median per size and the worker's RSS at ready. The same
figure is in churn.py's table, from one start.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

import churn  # noqa: E402
import churn_parts as parts  # noqa: E402


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", default="0,10000", help="comma-separated sizes")
    p.add_argument("--starts", type=int, default=5, help="starts per size")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for ready")
    p.add_argument("--distinct-usage", action="store_true",
                   help="every NRT with free amounts of its own (churn.py's option): a "
                        "running cluster's dump, and a larger file")  # fmt: skip
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = [int(n) for n in args.nodes.split(",")]
    with tempfile.TemporaryDirectory(prefix="numagate-ready-") as tmp:
        work = Path(tmp)
        paths = {
            n: churn.write_json_list(work / f"inventory-{n}.json", n, distinct=args.distinct_usage)
            for n in sizes
        }
        megabytes = {n: path.stat().st_size / 1e6 for n, path in paths.items()}
        ready: dict[int, list[float]] = {n: [] for n in sizes}
        rss: dict[int, float] = {}
        for _ in range(args.starts):
            for n in sizes:
                ng = parts.start_numagate(
                    ["--inventory", str(paths[n])], work / "certs", work / "serve.log", args.timeout
                )
                try:
                    ready[n].append(ng.ready_s)
                    rss[n] = ng.rss_mib()
                finally:
                    ng.stop()
                print(f"{n} nodes: ready in {ng.ready_s} s", file=sys.stderr, flush=True)
    print("| nodes | file MB | ready, each start (s) | median (s) | RSS at ready (MiB) |")
    print("|---:|---:|---|---:|---:|")
    for n in sizes:
        starts = ", ".join(f"{x:.2f}" for x in ready[n])
        print(
            f"| {n:,} | {megabytes[n]:.1f} | {starts} | {statistics.median(ready[n]):.2f} | {rss[n]} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
