"""Benchmark of the feasibility core: decisions (full=False) and full scans over clusters of
100 .. 100,000 nodes with 8 NUMA nodes each, mixed shapes, usage and policies; compiled
kernel against the pure-Python reference. Prints JSON and writes benchmarks/results/core.md.

    .venv/bin/python benchmarks/core.py [--sizes 100,1000,10000,100000] [--ref-max 10000]
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import platform
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.feasibility import _kernel_py as ref  # noqa: E402
from core.feasibility.decision import decide  # noqa: E402
from core.feasibility.verdicts import evaluate  # noqa: E402
from core.model import ContainerDemand, NodeTopology, NumaZone, PodIntent  # noqa: E402
from core.snapshot.snapshot import Snapshot  # noqa: E402

GI = 2**30
POLICIES = ["none", "best-effort", "restricted", "single-numa-node"]
KOORD = {"single-numa-node": "single-numa-node", "restricted": "restricted"}


# Machine types x node pools: a real cluster has a handful of topology classes, while
# usage (free CPUs and memory per NUMA node, Koordinator NUMA states) differs per node.
TYPES = [
    # cpus per NUMA, memory per NUMA (Gi), GPUs per NUMA, kubelet policy, koord label,
    # memory manager, prefer-closest
    (8, 32, 0, "none", None, "None", False),
    (16, 64, 0, "best-effort", None, "None", True),
    (16, 64, 0, "restricted", "restricted", "Static", False),
    (16, 64, 1, "single-numa-node", "single-numa-node", "None", False),
    (8, 32, 0, "single-numa-node", None, "Static", False),
    (16, 32, 0, "restricted", None, "None", False),
]


def make_node(i: int, rnd: random.Random) -> NodeTopology:
    numa = 8
    cpus, mem_gi, gpus, policy, koord, mem_policy, closest = rnd.choice(TYPES)
    mem = mem_gi * GI
    zones = []
    for z in range(numa):
        used = rnd.randint(0, cpus)
        cap = {"cpu": cpus * 1000, "memory": mem, "nvidia.com/gpu": gpus}
        free = {
            "cpu": (cpus - used) * 1000,
            "memory": mem - used * mem // cpus,
            "nvidia.com/gpu": rnd.randint(0, gpus),
        }
        costs = {o: 10 if o == z else (12 if o // 4 == z // 4 else 30) for o in range(numa)}
        zones.append(NumaZone(z, cap, cap, free, costs))
    return NodeTopology(
        name=f"node-{i:06d}",
        labels={"pool": rnd.choice(["a", "b", "c"]), "gen": str(rnd.randint(1, 5))},
        allocatable={},
        capacity={},
        zones=tuple(zones),
        tm_policy=policy,
        koord_policy=koord,
        volcano_policy=policy,
        volcano_cpu_manager_policy="static",
        memory_manager_policy=mem_policy,  # type: ignore[arg-type]
        prefer_closest=closest,
        numa_states=tuple(rnd.choice(["idle", "idle", "shared", "single"]) for _ in range(numa)),
    )


def pod(
    name: str,
    cpus: int,
    mem_gi: int,
    *,
    scheduler: str = "default",
    policy: str | None = None,
    gpus: int = 0,
    containers: int = 1,
) -> PodIntent:
    cs = []
    for c in range(containers):
        req = {"cpu": cpus * 1000, "memory": mem_gi * GI}
        if gpus:
            req["nvidia.com/gpu"] = gpus
        cs.append(ContainerDemand(f"{name}-{c}", "app", req, req, cpus))
    return PodIntent(scheduler, "", policy, None, None, "Guaranteed", tuple(cs), {})  # type: ignore[arg-type]


PODS = {
    "kubelet-4cpu": pod("a", 4, 8),
    "koordinator-single-6cpu": pod("b", 6, 8, scheduler="koordinator", policy="single-numa-node"),
    "volcano-restricted-24cpu": pod("c", 24, 16, scheduler="volcano", policy="restricted"),
    "gpu-2x2": pod("d", 2, 4, gpus=1, containers=2),
    "impossible-200cpu": pod("e", 200, 8, policy="single-numa-node", scheduler="koordinator"),
}


def timed(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * len(s)))]


def ms(x: float) -> float:
    return round(x * 1000, 4)


def bench_size(n: int, comp, ref_max: int) -> dict:
    rnd = random.Random(n)
    nodes = [make_node(i, rnd) for i in range(n)]
    t0 = time.perf_counter()
    snap = Snapshot.build(nodes)
    build = time.perf_counter() - t0
    # The inventory is long-lived: move it out of the collector's generations, as a server
    # does after swapping in a snapshot; a full collection otherwise walks every node.
    gc.collect()
    gc.freeze()
    repeat = max(20, min(300, 300_000 // n))
    del nodes
    result: dict = {
        "nodes": n,
        "shapes": snap.packed.n_shapes,
        "topology_classes": len(snap.topo_bits),
        "snapshot_build_ms": ms(build),
        "pods": {},
    }
    for name, intent in PODS.items():
        # warm the per-snapshot kernel objects once
        evaluate(intent, snap, full=False, impl=comp)

        def decision(intent: PodIntent = intent) -> None:
            decide(evaluate(intent, snap, full=False, impl=comp))

        dec = timed(decision, repeat)
        full = timed(
            lambda intent=intent: evaluate(intent, snap, full=True, impl=comp), max(3, repeat // 10)
        )
        entry = {
            "allowed": decide(evaluate(intent, snap, full=False, impl=comp)).allowed,
            "decision_p50_ms": ms(statistics.median(dec)),
            "decision_p99_ms": ms(pct(dec, 0.99)),
            "full_scan_p50_ms": ms(statistics.median(full)),
        }
        if n <= ref_max:
            rfull = timed(lambda intent=intent: evaluate(intent, snap, full=True, impl=ref), 2)
            entry["reference_full_scan_ms"] = ms(min(rfull))
            entry["compiled_full_scan_ms"] = ms(min(full))
            entry["speedup_full_scan"] = round(min(rfull) / min(full), 1)
            # the kernel alone: every shape x every policy, compiled vs reference
            entry["speedup_kernel"], entry["compiled_check_us"] = kernel_speedup(snap, intent, comp)
        result["pods"][name] = entry
    gc.unfreeze()
    return result


def kernel_speedup(snap: Snapshot, intent: PodIntent, comp) -> tuple[float, float]:
    """Reference time / compiled time over the same Kernel.check calls, and the compiled
    kernel's microseconds per check (KernelResult included)."""
    from core.snapshot.snapshot import Demand

    demand = Demand.build(intent, snap)
    shapes = range(min(snap.packed.n_shapes, 200))

    def run(k) -> None:
        for s in shapes:
            for policy in range(4):
                k.check(demand, s, policy, 0)
                k.check(demand, s, policy, 1)

    kc, kp = snap.kernel(comp), snap.kernel(ref)
    tc = min(timed(lambda: run(kc), 3))
    tp = min(timed(lambda: run(kp), 1))
    return round(tp / tc, 1), round(tc / (len(shapes) * 8) * 1e6, 3)


def write_markdown(report: dict, path: Path) -> None:
    lines = [
        "# Core benchmark (benchmarks/core.py)",
        "",
        f"Machine: {report['machine']}; Python {report['python']}; kernel {report['implementation']}.",
        "Nodes have 8 NUMA nodes each, mixed policies, usage and Koordinator states. A decision is",
        "`decide(evaluate(intent, snapshot, full=False))`; a full scan is `evaluate(full=True)`.",
        "The snapshot is built once per inventory and frozen out of the garbage collector",
        "(`gc.freeze()`), as a long-lived inventory should be.",
        "",
        "| nodes | shapes / classes | pod | allowed | decision p50 ms | decision p99 ms | full scan ms | reference full scan ms | speedup (scan) | speedup (kernel) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for size in report["sizes"]:
        for name, e in size["pods"].items():
            lines.append(
                f"| {size['nodes']} | {size['shapes']} / {size['topology_classes']} | {name} | {e['allowed']} | {e['decision_p50_ms']} | "
                f"{e['decision_p99_ms']} | {e['full_scan_p50_ms']} | {e.get('reference_full_scan_ms', '-')} | "
                f"{e.get('speedup_full_scan', '-')} | {e.get('speedup_kernel', '-')} |"
            )
    lines.append("")
    lines.append(
        "Snapshot build (once per inventory): "
        + ", ".join(f"{s['nodes']} nodes {s['snapshot_build_ms']} ms" for s in report["sizes"])
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="100,1000,10000,100000")
    parser.add_argument(
        "--ref-max", type=int, default=10000, help="largest size run with the reference"
    )
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "core.md"))
    args = parser.parse_args()
    comp = importlib.import_module("core.feasibility._kernel_c")
    report = {
        "machine": platform.machine() + " " + platform.processor(),
        "python": platform.python_version(),
        "implementation": "cython",
        "sizes": [bench_size(int(s), comp, args.ref_max) for s in args.sizes.split(",")],
    }
    print(json.dumps(report, indent=2))
    write_markdown(report, Path(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
