"""The impossible pod's scan over the benchmark inventory (issue 27): the decision the
validating webhook makes for it (``evaluate(full=False)``: no node fits, so every
topology class and node shape is looked at), with the compiled kernel and with the
pure-Python reference, alternated in one process, and the whole review through
``webhook.review.pipeline.answer``.

    .venv/bin/python benchmarks/server_scan.py [--nodes 10000] [--rounds 5] [--calls 100]

Prints CPU milliseconds per call (median of the rounds) and the reference/compiled ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

import gen  # noqa: E402
import server as bench  # noqa: E402


def per_call_ms(fn: Callable[[], Any], calls: int) -> float:
    start = time.process_time()  # CPU, not wall: the machine is shared
    for _ in range(calls):
        fn()
    return (time.process_time() - start) / calls * 1000


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=10_000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--calls", type=int, default=100, help="calls per round (reference: 1/10)")
    args = p.parse_args(argv)

    from core.feasibility import _kernel_py as reference
    from core.feasibility import kernel
    from core.feasibility.verdicts import evaluate
    from core.intent.read import read_intent
    from core.intent.workloads import pod_templates
    from webhook.review.pipeline import answer

    runtime = bench.build_runtime(args.nodes)
    snapshot = runtime.inventory.view.snapshot
    pod = gen.impossible_pod()
    intent = read_intent(pod_templates(pod)[0]).intent
    body = gen.review_bodies([pod], prefix="i")[0]
    compiled_ev = evaluate(intent, snapshot, full=False)
    reference_ev = evaluate(intent, snapshot, full=False, impl=reference)
    if compiled_ev.counts != reference_ev.counts:
        raise SystemExit(f"kernels disagree: {compiled_ev.counts} != {reference_ev.counts}")
    loop = asyncio.new_event_loop()
    n = [0]

    def review() -> None:
        n[0] += 1
        result = loop.run_until_complete(
            answer(gen.vary(body, n[0], unique=True), webhook="validate", runtime=runtime)
        )
        if result.allowed is not False:
            raise SystemExit(f"the impossible pod was not denied: {result.body[:200]!r}")

    rows: dict[str, list[float]] = {"compiled": [], "reference": [], "review": []}
    for _ in range(args.rounds):  # alternated, so each ratio comes from the same minutes
        rows["compiled"].append(
            per_call_ms(lambda: evaluate(intent, snapshot, full=False), args.calls)
        )
        rows["reference"].append(
            per_call_ms(
                lambda: evaluate(intent, snapshot, full=False, impl=reference),
                max(1, args.calls // 10),
            )
        )
        rows["review"].append(per_call_ms(review, args.calls))
    medians = {k: round(statistics.median(v), 4) for k, v in rows.items()}
    out = {
        "nodes": args.nodes,
        "implementation": kernel.IMPLEMENTATION,
        "verdicts": dict(compiled_ev.counts),
        "ms_per_call_median": medians,
        "ms_per_call_rounds": {k: [round(x, 4) for x in v] for k, v in rows.items()},
        "reference_over_compiled": round(medians["reference"] / medians["compiled"], 1),
    }
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
