"""The inventory at cluster scale, in process (issue 14): full build time and RSS from a
JSON file, and the cost of one watch event applied incrementally.

    python benchmarks/inventory.py [--nodes 10000 100000] [--events 2000]

For each size, a child process (so that RSS is its own) writes the benchmark inventory
(benchmarks/gen.py) as a JSON List, then measures:

- ``load``: read + orjson parse + build (IncrementalInventory, Snapshot.build), RSS after;
- ``event``: an NRT update with new free CPUs on a random node (worst case: every event
  makes a new shape), parsed, merged and patched into the snapshot, in batches of 1, 10
  and 100 events; microseconds per event and the longest batch (what one batch holds
  the event loop).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import gen  # noqa: E402
from core.feasibility.delta import SnapshotEditor  # noqa: E402
from core.feasibility.snapshot import Snapshot  # noqa: E402
from core.inventory.incremental import IncrementalInventory, parse_object  # noqa: E402
from webhook.inventory.loader import parse_objects  # noqa: E402


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _nrt_update(obj: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    new = json.loads(json.dumps(obj))
    for zone in new["zones"]:
        for res in zone["resources"]:
            if res["name"] == "cpu":
                res["available"] = str(rng.randint(0, int(res["allocatable"])))
    return new


def child(nodes: int, events: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "inventory.json"
        objects = list(gen.inventory_objects(nodes))
        nrts = [o for o in objects if o["kind"] == "NodeResourceTopology"]
        path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
        del objects
        gc.collect()
        base = rss_mib()
        t0 = time.perf_counter()
        loaded = [o.obj for o in parse_objects(path.read_text(), str(path))]
        t1 = time.perf_counter()
        inventory = IncrementalInventory()
        for obj in loaded:
            inventory.set(parse_object(obj, inventory.units))
        inventory.flush()
        snapshot = Snapshot.build(inventory.nodes())
        t2 = time.perf_counter()
        del loaded
        gc.collect()
        out: dict[str, Any] = {
            "nodes": nodes,
            "parse_s": round(t1 - t0, 2),
            "build_s": round(t2 - t1, 2),
            "rss_mib": round(rss_mib(), 1),
            "rss_before_load_mib": round(base, 1),
        }
    rng = random.Random(1)
    editor = SnapshotEditor(snapshot)
    del snapshot
    updates = [_nrt_update(rng.choice(nrts), rng) for _ in range(events)]
    for batch in (1, 10, 100):
        longest = 0.0
        start = time.perf_counter()
        for first in range(0, events, batch):
            t = time.perf_counter()
            for obj in updates[first : first + batch]:
                inventory.set(parse_object(obj, inventory.units))
            editor.apply(inventory.flush())
            longest = max(longest, time.perf_counter() - t)
        total, done = time.perf_counter() - start, events
        out[f"us_per_event_batch{batch}"] = round(total / done * 1e6, 1)
        out[f"longest_batch{batch}_ms"] = round(longest * 1e3, 2)
    out["shapes"] = editor.snapshot.packed.n_shapes
    out["rss_after_events_mib"] = round(rss_mib(), 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.nodes[0], args.events)))
        return
    for n in args.nodes:
        cmd = [sys.executable, __file__, "--child", "--nodes", str(n), "--events", str(args.events)]
        got = subprocess.run(cmd, check=True, capture_output=True, text=True, env=os.environ)
        print(json.dumps(json.loads(got.stdout.strip().splitlines()[-1])))


if __name__ == "__main__":
    main()
