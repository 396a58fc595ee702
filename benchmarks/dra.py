"""Benchmark of core/dra: one pod's claims judged on every node of a cluster whose nodes
each publish 8 GPUs (2 NUMA nodes, a PCIe root each) through one ResourceSlice, a class with
a CEL selector and a claim template asking 2 GPUs with matchAttribute over the NUMA node;
a quarter of the GPUs allocated. Prints CPU per node evaluation (process time), for the
first pass (CEL programs compiled) and a second (cached), as JSON.

    .venv/bin/python benchmarks/dra.py [--nodes 1000]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.dra.evaluate import evaluate_node, pod_claims  # noqa: E402
from core.dra.inventory import read_inventory  # noqa: E402
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    args = parser.parse_args()
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
