"""Search for the slowest review (issue 17): hypothesis draws the size parameters of
tests/fixtures/slow/shapes.py, reviews the object through the in-process handler on
/validate and /mutate, and steers towards CPU time (``hypothesis.target``). The slowest
parameter sets are written to tests/fixtures/slow/found.json (merged with those kept
before), where tests/reliability/test_worst_case.py and benchmarks/worst_case.py pick them
up as regression cases.

    .venv/bin/python fuzz/worst_case_fuzz.py [--examples 300] [--keep 8] [--no-write]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hypothesis import HealthCheck, assume, given, settings, target
from hypothesis import strategies as st

from tests.fixtures.slow.shapes import (
    ANNOTATION_KINDS,
    FOUND,
    OPERATORS,
    QUANTITIES,
    RANGES,
    build,
    estimate,
    found,
)
from tests.fixtures.slow.worst_cases import LIMIT, review
from webhook.config import load_config
from webhook.inventory.state import InventoryState, load_demo
from webhook.review.pipeline import Runtime, answer

PARAMS = st.fixed_dictionaries(
    {
        **{name: st.integers(low, high) for name, (low, high) in RANGES.items()},
        "quantity": st.sampled_from(QUANTITIES),
        "operator": st.sampled_from(OPERATORS),
        "kind": st.sampled_from(ANNOTATION_KINDS),
        "volcano": st.booleans(),
    }
)


def review_cpu(params: dict[str, Any], state: InventoryState) -> tuple[float, list[int]]:
    """CPU seconds of /validate plus /mutate for ``params``, and the HTTP statuses; (0, [])
    for an object over the apiserver's 3 MiB (it never reaches a webhook)."""
    if estimate(params) > 2 * LIMIT:
        return 0.0, []
    raw = review(build(params))
    if len(raw) > LIMIT:
        return 0.0, []
    config = load_config(None)
    loop = asyncio.new_event_loop()
    statuses = []
    t0 = time.process_time()
    try:
        for webhook in ("validate", "mutate"):
            runtime = Runtime(config=lambda: config, inventory=state)
            result = loop.run_until_complete(answer(raw, webhook=webhook, runtime=runtime))  # type: ignore[arg-type]
            statuses.append(result.status)
    finally:
        loop.close()
    return time.process_time() - t0, statuses


def search(examples: int, state: InventoryState) -> list[tuple[float, dict[str, Any]]]:
    seen: list[tuple[float, dict[str, Any]]] = []

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(PARAMS)
    def run(params: dict[str, Any]) -> None:
        cpu, statuses = review_cpu(params, state)
        assume(statuses)
        assert all(s in (200, 413) for s in statuses), (statuses, params)
        target(cpu * 1000, label="cpu ms")
        seen.append((cpu, params))

    run()
    return sorted(seen, key=lambda x: -x[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=300)
    parser.add_argument("--keep", type=int, default=8)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)
    state = InventoryState()
    load_demo(state)
    ranked = search(args.examples, state)
    # the kept ones are re-measured so old and new compare on this machine
    kept = [(review_cpu(p, state)[0], p) for p in found()]
    merged: dict[str, tuple[float, dict[str, Any]]] = {}
    for cpu, params in kept + ranked[: args.keep]:
        merged[json.dumps(params, sort_keys=True)] = (cpu, params)
    best = sorted(merged.values(), key=lambda x: -x[0])[: args.keep]
    for cpu, params in best:
        print(f"{cpu * 1000:8.1f} ms  {json.dumps(params, sort_keys=True)}")
    if not args.no_write:
        FOUND.write_text(json.dumps([p for _, p in best], indent=1, sort_keys=True) + "\n")
        print(f"kept {len(best)} in {FOUND}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
