"""Sustained churn in one process (issue 14): what grows while every node's free amounts
keep changing. The generated cluster is loaded into the incremental inventory and a
snapshot editor with reserved arrays, as the server has it (core/inventory/incremental.py,
core/snapshot/delta.py); NRT usage events (the churn of the test API
server: each NRT in turn, shuffled once) are applied in batches of ``--rate * --batch``
events per ``--batch`` seconds of simulated time. The collector runs as Python sets it,
as in the server (issue 31: no freeze, no collection per batch). The inventory process's
merge and a worker's patch run here in one process, so the collector's pauses are those
of both heaps (benchmarks/inventory.py ``--child worker`` times a worker's alone).

    .venv/bin/python benchmarks/sustained.py [--nodes 100000] [--rate 1666.67]
        [--windows 14] [--seconds 10] [--batch 0.05]

One JSON line per window of ``--seconds`` simulated seconds: CPU per event of the merge
(``IncrementalInventory.flush`` and the sets before it) and of the patch
(``SnapshotEditor.apply``), the collector's pauses in the window (per event, the
longest), the longest batch, the array copies and usage moves; the shape slots, live shapes,
free slots, the longest class's evaluation order and the dead shapes listed in it; the
mean evaluation time of the twelve realistic pods against the current snapshot; RSS.
The server-side counterpart, with the watch threads and the event loop: thread_cpu.py.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

import gen  # noqa: E402
from inventory import rss_mib  # noqa: E402

from core.feasibility.verdicts import evaluate  # noqa: E402
from core.intent.read import read_intent  # noqa: E402
from core.intent.workloads import pod_templates  # noqa: E402
from core.inventory.incremental import IncrementalInventory, parse_object  # noqa: E402
from core.model import PodIntent  # noqa: E402
from core.snapshot.delta import SnapshotEditor  # noqa: E402
from core.snapshot.snapshot import Snapshot  # noqa: E402
from tests.webhook.fake_apiserver_churn import nrt_available  # noqa: E402


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=100_000)
    p.add_argument("--rate", type=float, default=1666.67, help="NRT events per second")
    p.add_argument("--windows", type=int, default=14)
    p.add_argument("--seconds", type=float, default=10.0, help="simulated seconds per window")
    p.add_argument("--batch", type=float, default=0.05, help="seconds of events per batch")
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args(argv)


def _intents() -> list[PodIntent]:
    out = []
    for pod in gen.realistic_pods(12):
        template = next(iter(pod_templates(pod)))
        intent = read_intent(template).intent
        assert intent is not None
        out.append(intent)
    return out


def _evaluation_ms(intents: list[PodIntent], snap: Snapshot) -> float:
    started = time.perf_counter()
    for intent in intents:
        evaluate(intent, snap, full=False)
    return (time.perf_counter() - started) * 1000 / len(intents)


def _shapes(editor: SnapshotEditor) -> dict[str, int]:
    snap = editor.snapshot
    longest = max(snap.topo_shapes, key=len, default=())
    return {
        "slots": snap.packed.n_shapes,
        "live": sum(1 for c in editor.count if c),
        "free": sum(len(q) for q in editor.store.free.values()),
        "longest_class": len(longest),
        "dead_in_it": sum(1 for s in longest if snap.shape_rep[s] < 0),
    }


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    objects = list(gen.inventory_objects(args.nodes))
    nrts = [o for o in objects if o["kind"] == "NodeResourceTopology"]
    inventory = IncrementalInventory()
    for obj in objects:
        inventory.set(parse_object(obj, inventory.units))
    inventory.flush()
    inventory.share_usage(False)  # as the server, after the first build
    records = inventory.records
    editor = SnapshotEditor(Snapshot.build([records[k] for k in sorted(records)]), reserve=True)
    del objects
    intents = _intents()
    gc.collect()
    pauses: list[float] = []
    clock = _gc_clock(pauses)
    gc.callbacks.append(clock)
    rng = random.Random(args.seed)
    order = list(range(len(nrts)))
    rng.shuffle(order)
    per_batch = max(1, round(args.rate * args.batch))
    batches = max(1, round(args.seconds / args.batch))
    position = 0
    out = [{"window": -1, "churn_s": 0.0, **_shapes(editor),
            "evaluation_ms_per_pod": round(_evaluation_ms(intents, editor.snapshot), 3),
            "rss_mib": rss_mib()}]  # fmt: skip
    print(json.dumps(out[0]), flush=True)
    for window in range(args.windows):
        merge = patch = worst = 0.0
        events = 0
        pauses.clear()
        for _ in range(batches):
            parsed = []
            for _ in range(per_batch):
                k = order[position % len(order)]
                position += 1
                nrts[k] = copy.deepcopy(nrts[k])
                nrt_available(nrts[k], rng)
                parsed.append(parse_object(nrts[k], inventory.units))
            t1 = time.process_time()
            for p in parsed:
                inventory.set(p)
            changes = inventory.flush()
            t2 = time.process_time()
            editor.apply(changes)
            t3 = time.process_time()
            merge, patch = merge + t2 - t1, patch + t3 - t2
            worst = max(worst, t3 - t1)
            events += per_batch
        line = {
            "window": window,
            "churn_s": round((window + 1) * batches * args.batch, 1),
            "merge_us_per_event": round(merge / events * 1e6, 1),
            "patch_us_per_event": round(patch / events * 1e6, 1),
            "gc_us_per_event": round(sum(pauses) / events * 1e6, 1),
            "gc_longest_ms": round(max(pauses, default=0.0) * 1e3, 2),
            "longest_batch_ms": round(worst * 1e3, 2),
            "renewals": getattr(editor.store, "renewals", None),
            "moves": getattr(editor.store, "moves", None),
            **_shapes(editor),
            "evaluation_ms_per_pod": round(_evaluation_ms(intents, editor.snapshot), 3),
            "rss_mib": rss_mib(),
        }
        print(json.dumps(line), flush=True)
        out.append(line)
    gc.callbacks.remove(clock)
    gc.unfreeze()
    return out


def _gc_clock(pauses: list[float]) -> Any:
    """A gc callback that appends each collection's wall time to ``pauses``."""
    started = [0.0]

    def clock(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            pauses.append(time.perf_counter() - started[0])

    return clock


def main(argv: Sequence[str] | None = None) -> int:
    run(parse_args(argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
