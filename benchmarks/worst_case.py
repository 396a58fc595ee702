"""CPU time of one review of each worst-case input (issue 17): tests/fixtures/slow's
generators (up to 3 MiB, the kube-apiserver's request limit: over numagate's limits, at
them, and just under the decode guard) through the in-process handler
(webhook.review.pipeline.answer, what the server calls) on /mutate and /validate, with the
demo inventory and the default configuration, a fresh decision cache each time. Prints a
table (time.process_time, best of N) and exits 1 when the worst is over the limit.

    .venv/bin/python benchmarks/worst_case.py [--repeat 5] [--limit-ms 50] [--only NAME,...]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402

from tests.fixtures.slow.table import CASES, build_review  # noqa: E402
from webhook.config import load_config  # noqa: E402
from webhook.inventory.state import InventoryState, load_demo  # noqa: E402
from webhook.review.pipeline import Runtime, answer  # noqa: E402

WEBHOOKS = ("mutate", "validate")


def _summary(status: int, body: bytes) -> str:
    if status != 200:
        return f"HTTP {status}"
    response = orjson.loads(body)["response"]
    verdict = "allowed" if response["allowed"] else "denied"
    if "patch" in response:
        verdict += "+patch"
    return f"{verdict}, {len(body)} B"


def measure(raw: bytes, webhook: str, state: InventoryState, repeat: int) -> tuple[float, str]:
    """Best CPU seconds of ``repeat`` answers, and what the last one said."""
    config = load_config(None)
    loop = asyncio.new_event_loop()
    best = float("inf")
    summary = ""
    try:
        for _ in range(repeat):
            runtime = Runtime(config=lambda: config, inventory=state)
            gc.collect()
            t0 = time.process_time()
            result = loop.run_until_complete(answer(raw, webhook=webhook, runtime=runtime))  # type: ignore[arg-type]
            best = min(best, time.process_time() - t0)
            summary = _summary(result.status, result.body)
    finally:
        loop.close()
    return best, summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="best of N (default 5)")
    parser.add_argument("--limit-ms", type=float, default=50.0, help="fail above (default 50)")
    parser.add_argument("--only", default="", help="comma-separated case names")
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)  # each refused body is logged; not what is measured
    only = {n for n in args.only.split(",") if n}
    state = InventoryState()
    load_demo(state)
    worst = ("", 0.0)
    print(f"{'case':34} {'shape':5} {'bytes':>9} {'webhook':8} {'cpu ms':>8}  answer")
    for case in CASES:
        if only and case.name not in only:
            continue
        _, raw = build_review(case)
        for webhook in WEBHOOKS:
            cpu, summary = measure(raw, webhook, state, args.repeat)
            ms = cpu * 1000
            print(f"{case.name:34} {case.shape:5} {len(raw):9} {webhook:8} {ms:8.1f}  {summary}")
            if ms > worst[1]:
                worst = (f"{case.name} {webhook}", ms)
    print(f"worst: {worst[0]} {worst[1]:.1f} ms (limit {args.limit_ms:.0f} ms)")
    return 1 if worst[1] > args.limit_ms else 0


if __name__ == "__main__":
    sys.exit(main())
