"""Benchmark of core/dra: one pod's claims judged on every node of a cluster whose nodes
each publish 8 GPUs (2 NUMA nodes, a PCIe root each) through one ResourceSlice, a class with
a CEL selector and a claim template asking 2 GPUs with matchAttribute over the NUMA node;
a quarter of the GPUs allocated. Prints CPU per node evaluation (process time), for the
first pass (CEL programs compiled) and a second (cached), as JSON.

With ``--live``, the live inventory instead (webhook/dra/live.py): CPU of the whole build
(read_inventory, what every change cost before) against CPU per watch event applied
incrementally (the event parsed as the reflector thread does, then a flush and a new view
per event, the worst case: no two events share a flush), for claims allocated and
released, a node's slice rewritten and a class changed; and the change-visible latency
(an event handed to the listener until its view is installed, the flush thread's window
included).

    .venv/bin/python benchmarks/dra.py [--nodes 1000] [--live] [--events 2000]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.dra.evaluate import evaluate_node, pod_claims  # noqa: E402
from core.dra.inventory import IncrementalDra, parse_dra, read_inventory  # noqa: E402
from core.dra.pools import NodeRef  # noqa: E402
from core.dra.selectors import compiled  # noqa: E402

DRIVER = "gpu.example.com"


def objects(nodes: int, seed: int = 1) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out: list[dict[str, Any]] = [
        {
            "kind": "DeviceClass",
            "metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        },
        {
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "two", "namespace": "default"},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "g",
                                "exactly": {
                                    "deviceClassName": "gpu",
                                    "count": 2,
                                    "selectors": [
                                        {
                                            "cel": {
                                                "expression": f'device.capacity["{DRIVER}"].memory'
                                                '.compareTo(quantity("40Gi")) >= 0'
                                            }
                                        }
                                    ],
                                },
                            }
                        ],
                        "constraints": [{"matchAttribute": f"{DRIVER}/numaNode"}],
                    }
                }
            },
        },
    ]
    results = []
    for n in range(nodes):
        devices = []
        for g in range(8):
            devices.append(
                {
                    "name": f"gpu-{g}",
                    "attributes": {
                        "numaNode": {"int": g // 4},
                        "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{g // 2:02x}"},
                        "model": {"string": rng.choice(["a100", "h100"])},
                    },
                    "capacity": {"memory": {"value": rng.choice(["40Gi", "80Gi"])}},
                }
            )
            if rng.random() < 0.25:
                results.append(
                    {"request": "g", "driver": DRIVER, "pool": f"n{n}", "device": f"gpu-{g}"}
                )
        out.append(
            {
                "kind": "ResourceSlice",
                "metadata": {"name": f"n{n}-gpus"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": f"n{n}",
                    "pool": {"name": f"n{n}", "generation": 1, "resourceSliceCount": 1},
                    "devices": devices,
                },
            }
        )
    out.append(
        {
            "kind": "ResourceClaim",
            "metadata": {"name": "used", "namespace": "default"},
            "spec": {
                "devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu"}}]}
            },
            "status": {"allocation": {"devices": {"results": results}}},
        }
    )
    return out


def churn(nodes: int, events: int, seed: int = 2) -> list[dict[str, Any]]:
    """Watch events of a busy DRA cluster: claims allocated (ADDED with an allocation) and
    released (DELETED, given as the object without its spec), a node's slice rewritten
    (a device's model changed), a class changed; in that proportion 8:8:3:1."""
    rng = random.Random(seed)
    base = {o["metadata"]["name"]: o for o in objects(nodes) if o["kind"] == "ResourceSlice"}
    gpu_class = objects(0)[0]
    out: list[dict[str, Any]] = []
    live: list[str] = []
    for i in range(events):
        pick = rng.randrange(20)
        if pick < 8 or (pick < 16 and not live):
            n, g = rng.randrange(nodes), rng.randrange(8)
            name = f"c{i}"
            live.append(name)
            results = [{"request": "g", "driver": DRIVER, "pool": f"n{n}", "device": f"gpu-{g}"}]
            out.append(
                {
                    "kind": "ResourceClaim",
                    "metadata": {"name": name, "namespace": "default"},
                    "spec": {
                        "devices": {
                            "requests": [{"name": "g", "exactly": {"deviceClassName": "gpu"}}]
                        }
                    },
                    "status": {"allocation": {"devices": {"results": results}}},
                }
            )
        elif pick < 16:
            name = live.pop(rng.randrange(len(live)))
            out.append(
                {"kind": "ResourceClaim", "metadata": {"name": name, "namespace": "default"}}
            )
        elif pick < 19:
            s = base[f"n{rng.randrange(nodes)}-gpus"]
            devices = [dict(d) for d in s["spec"]["devices"]]
            g = rng.randrange(8)
            devices[g]["attributes"] = {
                **devices[g]["attributes"],
                "model": {"string": rng.choice(["a100", "h100", "b200"])},
            }
            out.append({**s, "spec": {**s["spec"], "devices": devices}})
        else:
            sel = f'device.driver == "{DRIVER}" && {rng.randrange(1, 9)} > 0'
            out.append({**gpu_class, "spec": {"selectors": [{"cel": {"expression": sel}}]}})
    return out


def _key(obj: dict[str, Any]) -> tuple[str, str, str]:
    meta = obj["metadata"]
    return (obj["kind"], meta.get("namespace", ""), meta["name"])


def live_figures(nodes: int, events: int) -> dict[str, Any]:
    from webhook.dra.live import DraUpdates

    everything = objects(nodes)
    whole = []
    for _ in range(3):
        start = time.process_time()
        read_inventory(everything)
        whole.append(time.process_time() - start)
    inc = IncrementalDra()
    start = time.process_time()
    for obj in everything:
        found = parse_dra(obj)
        assert found is not None
        inc.apply(*found)
    inc.flush()
    first = time.process_time() - start
    stream = churn(nodes, events)
    per_kind: dict[str, list[float]] = {}
    for obj in stream:
        kind = obj["kind"] if "spec" in obj else "ResourceClaim (deleted)"
        start = time.process_time()
        found = parse_dra(obj) if "spec" in obj else None
        inc.apply(*(found if found is not None else (_key(obj), None)))
        inc.flush()
        per_kind.setdefault(kind, []).append(time.process_time() - start)
    cpu = [t for times in per_kind.values() for t in times]
    figures: dict[str, Any] = {
        "nodes": nodes,
        "events": events,
        "whole_build_cpu_s": round(min(whole), 3),
        "first_incremental_build_cpu_s": round(first, 3),
        "cpu_us_per_event": round(sum(cpu) / len(cpu) * 1e6, 1),
        "cpu_us_per_event_by_kind": {
            k: round(sum(v) / len(v) * 1e6, 1) for k, v in sorted(per_kind.items())
        },
    }
    figures["whole_build_over_event"] = round(min(whole) / (sum(cpu) / len(cpu)), 1)
    # change-visible latency: the listener and its flush thread, as served
    installed = threading.Event()
    updates = DraUpdates(lambda inv, n: installed.set())
    updates.inventory = inc
    updates.flushes = 1
    updates.start()
    reflector = SimpleNamespace(resource=SimpleNamespace(kind="ResourceClaim"))
    waits = []
    try:
        for obj in [o for o in stream if o["kind"] == "ResourceClaim"][:200]:
            installed.clear()
            start = time.monotonic()
            key = _key(obj)[1:]
            updates.on_event(reflector, "ADDED" if "spec" in obj else "DELETED", key, obj)
            installed.wait(5.0)
            waits.append(time.monotonic() - start)
    finally:
        updates.stop()
    waits.sort()
    figures["change_visible_ms"] = {
        "window_ms": updates.window * 1000,
        "median": round(waits[len(waits) // 2] * 1000, 1),
        "p99": round(waits[int(len(waits) * 0.99)] * 1000, 1),
    }
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--live", action="store_true", help="the live inventory's figures")
    parser.add_argument("--events", type=int, default=2000, help="watch events (--live)")
    args = parser.parse_args()
    if args.live:
        print(json.dumps(live_figures(args.nodes, args.events), indent=2))
        return
    inv = read_inventory(objects(args.nodes))
    pod = {
        "metadata": {"namespace": "default"},
        "spec": {"resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "two"}]},
    }
    claims = pod_claims(pod, inv)
    nodes = [NodeRef(f"n{n}", {}) for n in range(args.nodes)]
    figures: dict[str, Any] = {"nodes": args.nodes, "devices_per_node": 8}
    compiled.cache_clear()
    for label in ("first_pass", "second_pass"):
        verdicts: dict[str, int] = {}
        start = time.process_time()
        for node in nodes:
            v = evaluate_node(claims, node, inv).verdict
            verdicts[v] = verdicts.get(v, 0) + 1
        cpu = time.process_time() - start
        figures[label] = {"cpu_us_per_node": round(cpu / args.nodes * 1e6, 1), "verdicts": verdicts}
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
