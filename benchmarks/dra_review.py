"""What the DRA step of /validate costs a pod without claims: CPU per call of
webhook.dra.admission.check_claims (a Guaranteed pod, no claim, on an inventory with a
DeviceClass, so the extended-resource scan runs) against CPU per whole /validate answer of
the same pod (decision cache off), measured in one run. Prints JSON.

    .venv/bin/python benchmarks/dra_review.py [--reviews 3000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402

from core.intent.read import read_intent  # noqa: E402
from core.intent.workloads import pod_templates  # noqa: E402
from tests.builders.objects import build_review  # noqa: E402
from tests.webhook import harness  # noqa: E402
from tests.webhook.dra.objects import claim, inventory, pod, request  # noqa: E402
from webhook.dra.admission import check_claims  # noqa: E402
from webhook.dra.state import DraFileSource, DraState  # noqa: E402
from webhook.review.pipeline import answer  # noqa: E402


async def measure(n: int, path: Path) -> dict[str, float]:
    rt = harness.runtime({"decisionCache": {"entries": 0}}, inventory=path)
    rt.dra = DraState()
    DraFileSource(str(path), rt.dra).load()
    p = pod("p", {}, cpu="2", guaranteed=True)
    reviews = [orjson.dumps(build_review(p)) for _ in range(n)]
    t = pod_templates(p)[0]
    pairs = [(t, read_intent(t).intent)]
    view = rt.inventory.view
    assert view is not None
    for r in reviews[:200]:  # warm-up
        await answer(r, webhook="validate", runtime=rt)
    c0 = time.process_time()
    for r in reviews:
        await answer(r, webhook="validate", runtime=rt)
    whole = (time.process_time() - c0) / n
    c0 = time.process_time()
    for _ in range(n):
        await check_claims(
            pairs,
            namespace="ml",
            nodes=view.nodes,
            nrt_stale=False,
            dra=rt.dra,
            stale_after=300.0,
            remaining=5.0,
        )
    step = (time.process_time() - c0) / n
    return {
        "validate_us": round(whole * 1e6, 1),
        "dra_step_us": round(step * 1e6, 2),
        "ratio": round(step / whole, 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reviews", type=int, default=3000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "inventory.json"
        items = inventory([claim("two", [request("g", 2)])])
        path.write_text(json.dumps({"kind": "List", "items": items}))
        print(json.dumps(asyncio.run(measure(args.reviews, path))))


if __name__ == "__main__":
    main()
