"""The inventory at cluster scale, in process (issue 14): build time and RSS from a JSON
file, and the cost of one watch event applied incrementally.

    python benchmarks/inventory.py [--nodes 10000 100000] [--events 2000]

The benchmark inventory (benchmarks/gen.py) is written once per size as a JSON ``List``
(``kubectl get -o json``). Each figure comes from a fresh child process, so that its RSS
is its own. Times are CPU seconds of the process (``time.process_time``): the machine
is shared, and wall time would measure the neighbours.

- ``file``: what ``serve --inventory FILE`` keeps: read + orjson parse + build_view;
  CPU seconds and RSS after (the parsed objects freed).
- ``worker``: what a ``serve`` worker holds for that file: the view built in a helper
  process, unpickled (RSS, with the baseline of the server's imports).
- ``live``: what ``serve --kubeconfig`` keeps: every object parsed into the incremental
  inventory, the snapshot and its editor; then NRT updates with new free CPUs on random
  nodes (the worst case: every event makes a new shape) parsed, merged and patched into
  the snapshot in batches of 1, 10 and 100 events: CPU microseconds per event (parse,
  which runs in the watch threads, and apply, which runs on the event loop) and the
  longest batch (how long one batch holds the event loop).
- ``stream``: the live source's memory: objects parsed one at a time as the pages of a
  list arrive (no whole list held), RSS after the first build.
- ``loop``: the server's arrangement (webhook/inventory/fed.py on an event loop, NRT
  events parsed in a feeder thread) at each ``--rate`` for ``--seconds``: how late a
  1 ms timer on the loop runs (p50/p99/max: what a review or /healthz waits), the
  event-received-to-served latency, and the process's CPU per event applied (parse,
  apply, the timer itself) with the part spent in the garbage collector.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import gc
import json
import pickle
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import gen  # noqa: E402
from core.inventory.incremental import IncrementalInventory, parse_object  # noqa: E402
from core.snapshot.delta import SnapshotEditor  # noqa: E402
from core.snapshot.snapshot import Snapshot  # noqa: E402
from webhook.inventory.fed import FedInventory  # noqa: E402
from webhook.inventory.feed import Fanout, Feed, decode  # noqa: E402
from webhook.inventory.live import NODE_RESOURCE_TOPOLOGIES  # noqa: E402
from webhook.inventory.loader import parse_objects, read_text  # noqa: E402
from webhook.inventory.state import InventoryState, build_view  # noqa: E402


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def _cpu() -> float:
    return time.process_time()


def _load(path: str) -> list[dict[str, Any]]:
    return [o.obj for o in parse_objects(read_text(path), path)]


def file_mode(path: str) -> dict[str, Any]:
    t0 = _cpu()
    objects = _load(path)
    t1 = _cpu()
    view = build_view(objects, source="bench", now=0.0)
    t2 = _cpu()
    del objects
    gc.collect()
    with open(path + ".view.pickle", "wb") as out:
        pickle.dump(view, out, protocol=pickle.HIGHEST_PROTOCOL)
    return {
        "mode": "file",
        "nodes": len(view.nodes),
        "parse_cpu_s": round(t1 - t0, 2),
        "build_cpu_s": round(t2 - t1, 2),
        "rss_mib": rss_mib(),
    }


def adopt_mode(path: str) -> dict[str, Any]:
    """What a server worker holds for a large file: ``serve`` builds it in a helper
    process and the worker unpickles the built view (webhook/inventory/state.py)."""
    import webhook.server  # noqa: F401  (the worker's imports, in its baseline)

    base = rss_mib()
    t0 = _cpu()
    with open(path + ".view.pickle", "rb") as f:
        view = pickle.load(f)
    t1 = _cpu()
    gc.collect()
    return {
        "mode": "worker",
        "nodes": len(view.nodes),
        "unpickle_cpu_s": round(t1 - t0, 2),
        "rss_mib": rss_mib(),
        "rss_baseline_mib": base,
    }


def stream_mode(nodes: int) -> dict[str, Any]:
    """The live source's memory: objects arrive a page at a time (here generated one by
    one and dropped once parsed), so no whole list is ever held; RSS after the first
    build is what the incremental inventory, the snapshot and its editor keep."""
    base = rss_mib()
    t0 = _cpu()
    inventory = IncrementalInventory()
    for obj in gen.inventory_objects(nodes):
        inventory.set(parse_object(obj, inventory.units))
    inventory.flush()
    editor = SnapshotEditor(Snapshot.build(inventory.nodes()))
    t1 = _cpu()
    gc.collect()
    return {
        "mode": "stream",
        "nodes": len(editor.snapshot.nodes),
        "build_cpu_s": round(t1 - t0, 2),
        "rss_mib": rss_mib(),
        "rss_baseline_mib": base,
    }


def _nrt_update(obj: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    new = copy.deepcopy(obj)
    for zone in new["zones"]:
        for res in zone["resources"]:
            if res["name"] == "cpu":
                res["available"] = str(rng.randint(0, int(res["allocatable"])))
    return new


def live_mode(path: str, events: int) -> dict[str, Any]:
    objects = _load(path)
    nrts = [copy.deepcopy(o) for o in objects if o["kind"] == "NodeResourceTopology"][:2000]
    t0 = _cpu()
    inventory = IncrementalInventory()
    for obj in objects:
        inventory.set(parse_object(obj, inventory.units))
    inventory.flush()
    editor = SnapshotEditor(Snapshot.build(inventory.nodes()))
    t1 = _cpu()
    del objects
    gc.collect()
    out: dict[str, Any] = {
        "mode": "live",
        "nodes": len(inventory),
        "build_cpu_s": round(t1 - t0, 2),
        "rss_mib": rss_mib(),
    }
    rng = random.Random(1)
    updates = [_nrt_update(rng.choice(nrts), rng) for _ in range(events)]
    t = _cpu()
    parsed = [parse_object(obj, inventory.units) for obj in updates]
    out["parse_us_per_event"] = round((_cpu() - t) / events * 1e6, 1)
    for batch in (1, 10, 100):
        longest = total = 0.0
        for first in range(0, events, batch):
            t = _cpu()
            for item in parsed[first : first + batch]:
                inventory.set(item)
            editor.apply(inventory.flush())
            spent = _cpu() - t
            total += spent
            longest = max(longest, spent)
        out[f"apply_us_per_event_batch{batch}"] = round(total / events * 1e6, 1)
        out[f"longest_batch{batch}_ms"] = round(longest * 1e3, 2)
    out["shapes"] = editor.snapshot.packed.n_shapes
    out["rss_after_events_mib"] = rss_mib()
    return out


class _Feeder:
    """Stands in for the NRT reflector: only ``resource`` is read by the listener."""

    resource = NODE_RESOURCE_TOPOLOGIES


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def _recorded_feed(path: str, rate: float, seconds: float) -> list[bytes]:
    """What the inventory process sends a worker for ``seconds`` of NRT updates at
    ``rate`` (every event new free CPUs on a random node): the Whole, then one Batch per
    50 ms window. Made here, then replayed with the process's objects gone."""
    objects = _load(path)
    nrts = [o for o in objects if o["kind"] == "NodeResourceTopology"]
    sent: list[bytes] = []
    fanout = Fanout()
    fanout.join(SimpleNamespace(send_bytes=sent.append, close=lambda: None))  # type: ignore[arg-type]
    feed = Feed(fanout)
    for obj in objects:
        feed.on_event(_Feeder(), "ADDED", ("", obj["metadata"]["name"]), obj)  # type: ignore[arg-type]
    objects.clear()
    feed.step()
    rng = random.Random(2)
    per_window = max(0, round(rate * WINDOW))
    for _ in range(round(seconds / WINDOW)):
        for _ in range(per_window):
            obj = _nrt_update(rng.choice(nrts), rng)
            feed.on_event(_Feeder(), "MODIFIED", ("", obj["metadata"]["name"]), obj)  # type: ignore[arg-type]
        feed.step()
    return sent


WINDOW = 0.05  # the inventory process's window (FeederSpec.window)


def worker_mode(path: str, rate: float, seconds: float) -> dict[str, Any]:
    """A served worker's side of the live inventory, alone in its process: the messages
    of the inventory process (recorded first, then that process's objects dropped) are
    applied on an event loop as they would arrive, one Batch per 50 ms. A 1 ms ticker
    on the loop measures how late it runs (what a review or /healthz waits); every pass
    of the cyclic collector is timed (gc.callbacks, wall), with its generation."""
    sent = _recorded_feed(path, rate, seconds)
    gc.collect()
    base = rss_mib()

    async def run() -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        state = InventoryState()
        fed = FedInventory(state, loop, "unused")
        t = _cpu()
        fed.accept(decode(sent[0]))
        whole_cpu = _cpu() - t
        rss_whole = rss_mib()
        pauses.clear()
        late: list[float] = []
        done = asyncio.Event()

        def replay() -> None:
            for k, message in enumerate(sent[1:], 1):
                loop.call_at(loop.time() + k * WINDOW, fed.accept, decode(message))
            loop.call_at(loop.time() + len(sent) * WINDOW, done.set)

        cpu0 = _cpu()
        replay()
        while not done.is_set():
            t0 = time.monotonic()
            await asyncio.sleep(0.001)
            late.append(time.monotonic() - t0 - 0.001)
        cpu = _cpu() - cpu0
        events = max(1, round(rate * WINDOW) * (len(sent) - 1))
        worst = {g: max((p[1] for p in pauses if p[0] == g), default=0.0) for g in range(3)}
        worst_cpu = {g: max((p[2] for p in pauses if p[0] == g), default=0.0) for g in range(3)}
        return {
            "mode": "worker",
            "nodes": len(state.view.nodes) if state.view else 0,
            "events_per_s": rate,
            "events": events,
            "whole_cpu_s": round(whole_cpu, 2),
            "loop_late_p50_ms": round(_quantile(late, 0.5) * 1e3, 2),
            "loop_late_p99_ms": round(_quantile(late, 0.99) * 1e3, 2),
            "loop_late_max_ms": round(max(late) * 1e3, 2),
            # the worker's CPU per event applied (apply, unpickle, the ticker itself)
            "cpu_us_per_event": round(cpu / events * 1e6, 1),
            "gc_passes": [sum(1 for p in pauses if p[0] == k) for k in range(3)],
            "gc_worst_ms": [round(worst[k] * 1e3, 2) for k in range(3)],
            "gc_worst_cpu_ms": [round(worst_cpu[k] * 1e3, 2) for k in range(3)],
            "gc_total_ms": round(sum(p[1] for p in pauses) * 1e3, 1),
            "rss_baseline_mib": base,
            "rss_whole_mib": rss_whole,
            "rss_mib": rss_mib(),
        }

    pauses: list[tuple[int, float, float]] = []  # generation, wall, CPU of the thread
    started = [0.0, 0.0]

    def clock(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[:] = time.perf_counter(), time.thread_time()
        else:
            wall, cpu = time.perf_counter() - started[0], time.thread_time() - started[1]
            pauses.append((info["generation"], wall, cpu))

    gc.callbacks.append(clock)
    try:
        return asyncio.run(run())
    finally:
        gc.callbacks.remove(clock)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--rate", type=float, nargs="+", default=[0.0, 170.0, 1700.0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument(
        "--child", choices=("file", "adopt", "live", "stream", "worker"), help=argparse.SUPPRESS
    )
    parser.add_argument("--path", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "file":
        print(json.dumps(file_mode(args.path)))
        return
    if args.child == "adopt":
        print(json.dumps(adopt_mode(args.path)))
        return
    if args.child == "stream":
        print(json.dumps(stream_mode(args.nodes[0])))
        return
    if args.child == "live":
        print(json.dumps(live_mode(args.path, args.events)))
        return
    if args.child == "worker":
        print(json.dumps(worker_mode(args.path, args.rate[0], args.seconds)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.nodes:
            path = Path(tmp) / f"inventory-{n}.json"
            items = list(gen.inventory_objects(n))
            path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
            del items
            runs = [["file"], ["adopt"], ["live"], ["stream", "--nodes", str(n)]]
            runs += [["worker", "--rate", str(r)] for r in args.rate]
            for mode, *extra in runs:
                cmd = [sys.executable, __file__, "--child", mode, "--path", str(path), *extra]
                cmd += ["--events", str(args.events), "--seconds", str(args.seconds)]
                got = subprocess.run(cmd, check=True, capture_output=True, text=True)
                print(got.stdout.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
