"""The inventory process's CPU per listed object (issue 26: ready at 10,000 nodes): list
pages as the apiserver serves them, read by the real Reflector (its HTTP request replaced
by the recorded page bytes) into the real Feed, then the first build (the Whole) made and
pickled, as in the inventory process (webhook/inventory/feed.py).

    .venv/bin/python benchmarks/parse_cost.py write DIR --count 10000
    .venv/bin/python benchmarks/parse_cost.py run DIR [--kind node] [--profile OUT] [--repeat 3]

``write`` makes, per kind (node, nrt, numatopology, pod), ``DIR/KIND.pages``: the list's
pages of 250 objects as orjson writes them, one page a line (objects shaped as a
kube-apiserver lists them: uid, resourceVersion, creationTimestamp, managedFields; kwok
Nodes with their status). ``run`` prints the CPU seconds of the lists and of the first
build. Instructions per object: ``--hold`` waits for a line on stdin after the imports and
the reading of the pages, so that callgrind counts only the lists and the build (valgrind
--tool=callgrind --instr-atstart=no, then ``callgrind_control -i on PID`` and the line);
a DIR of N objects minus one of 0, over N (benchmarks/parse_cost.sh does it).
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import random
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

import gen  # noqa: E402

KINDS = ("node", "nrt", "numatopology", "pod")
PAGE = 250
STAMP = "2026-11-27T07:00:00Z"


def _meta(name: str, i: int, manager: str, fields: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """What the apiserver adds to every object's metadata."""
    return {
        "name": name,
        **extra,
        "uid": f"{i:08x}-1111-2222-3333-{i:012x}",
        "resourceVersion": str(1000 + i),
        "creationTimestamp": STAMP,
        "managedFields": [
            {"manager": manager, "operation": "Update", "apiVersion": "v1", "time": STAMP,
             "fieldsType": "FieldsV1", "fieldsV1": fields},
        ],
    }  # fmt: skip


def _node(obj: dict[str, Any], i: int) -> dict[str, Any]:
    """A kwok Node as the apiserver lists it (conditions, addresses, nodeInfo)."""
    meta = obj["metadata"]
    labels = {**meta["labels"], "type": "kwok", "beta.kubernetes.io/os": "linux",
              "beta.kubernetes.io/arch": "amd64"}  # fmt: skip
    annotations = {"node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake"}
    fields = {"f:metadata": {"f:annotations": {".": {}, "f:kwok.x-k8s.io/node": {}},
              "f:labels": {k and f"f:{k}": {} for k in labels}}, "f:status": {
              "f:conditions": {f'k:{{"type":"{c}"}}': {".": {}, "f:status": {}}
                               for c in ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")}}}  # fmt: skip
    conditions = [
        {"type": t, "status": s, "lastHeartbeatTime": STAMP, "lastTransitionTime": STAMP,
         "reason": r, "message": m}
        for t, s, r, m in (
            ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
            ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            ("NetworkUnavailable", "False", "RouteCreated", "RouteController created a route"),
        )
    ]  # fmt: skip
    status = {
        **obj["status"],
        "conditions": conditions,
        "addresses": [{"type": "InternalIP", "address": f"10.{i >> 16}.{(i >> 8) & 255}.{i & 255}"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {"machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "",
                     "osImage": "", "containerRuntimeVersion": "", "kubeletVersion": "fake",
                     "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"},
        "phase": "Running",
    }  # fmt: skip
    meta = _meta(meta["name"], i, "kwok", fields, labels=labels, annotations=annotations)
    return {"metadata": meta, "spec": {}, "status": status}


def _custom(obj: dict[str, Any], i: int) -> dict[str, Any]:
    """An NRT or Numatopology as listed: items without kind/apiVersion, the metadata."""
    body = {k: v for k, v in obj.items() if k not in ("kind", "apiVersion", "metadata")}
    fields = {f"f:{k}": {} for k in body}
    return {"metadata": _meta(obj["metadata"]["name"], i, "exporter", fields), **body}


def _pods(count: int) -> Iterator[dict[str, Any]]:
    rng = random.Random(5)
    for i in range(count):
        dialect = ("koordinator", "volcano", "hami", "none")[i % 4]
        obj = gen.pod_object(rng, dialect=dialect, name=f"app-{i % 97}")
        meta = obj["metadata"]
        name = f"{meta['generateName']}{i:05x}"
        extra = {k: v for k, v in meta.items() if k != "generateName"}
        obj["metadata"] = _meta(name, i, "kube-controller-manager", {"f:spec": {}}, **extra)
        obj["spec"]["nodeName"] = f"node-{i % 10_000:05d}"
        obj["status"] = {"phase": "Running", "qosClass": "Burstable", "startTime": STAMP,
                         "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": STAMP}]}  # fmt: skip
        del obj["kind"], obj["apiVersion"]
        yield obj


def objects(kind: str, count: int) -> Iterator[dict[str, Any]]:
    if kind == "pod":
        yield from _pods(count)
        return
    # A node of every Node; an NRT or a Numatopology as its exporter says (gen.py's mix).
    want = {"node": "Node", "nrt": "NodeResourceTopology", "numatopology": "Numatopology"}[kind]
    made = 0
    for i, obj in enumerate(gen.inventory_objects(max(count, 1) * 6)):
        if made >= count:
            return
        if obj["kind"] == want:
            yield _node(obj, i) if kind == "node" else _custom(obj, i)
            made += 1


def write(out: Path, count: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    versions = {"node": "v1", "pod": "v1", "nrt": "topology.node.k8s.io/v1alpha2",
                "numatopology": "nodeinfo.volcano.sh/v1alpha1"}  # fmt: skip
    for kind in KINDS:
        items = list(objects(kind, count))
        pages = [items[k : k + PAGE] for k in range(0, len(items), PAGE)] or [[]]
        with (out / f"{kind}.pages").open("wb") as f:
            for n, page in enumerate(pages):
                meta: dict[str, Any] = {"resourceVersion": "99999"}
                if n + 1 < len(pages):
                    meta["continue"] = f"page-{n + 1}"
                    meta["remainingItemCount"] = len(items) - (n + 1) * PAGE
                body = {
                    "kind": "List",
                    "apiVersion": versions[kind],
                    "metadata": meta,
                    "items": page,
                }
                f.write(orjson.dumps(body) + b"\n")
        print(f"{kind}: {len(items)} objects, {len(pages)} pages", file=sys.stderr)


class _Response:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def release_conn(self) -> None:
        pass


def run(where: Path, kinds: Sequence[str], hold: bool = False) -> dict[str, float]:
    """Every kind's list through a Reflector into one Feed, then the first build: CPU s.
    ``hold``: wait for a line on stdin first (once everything is imported and read)."""
    from webhook.inventory import live
    from webhook.inventory.feed import Fanout, Feed
    from webhook.inventory.reflector import Reflector, Timing

    resources = {"node": live.NODES, "nrt": live.NODE_RESOURCE_TOPOLOGIES,
                 "numatopology": live.NUMATOPOLOGIES, "pod": live.BOUND_PODS}  # fmt: skip
    feed = Feed(Fanout())
    feed.synced = lambda: False  # until every kind listed: no build before
    timing = Timing(60, 30.0, 0.2, 3.0, 60.0, PAGE)
    figures: dict[str, float] = {}
    every = {kind: (where / f"{kind}.pages").read_bytes().splitlines() for kind in kinds}
    if hold:
        print("holding", flush=True)
        sys.stdin.readline()
    for kind, pages in every.items():
        resource = dataclasses.replace(resources[kind], from_cache=False)
        reflector = Reflector(resource, None, feed, timing, threading.Event(), random.Random(1))  # type: ignore[arg-type]  # fmt: skip

        def request(
            version: str, params: dict[str, Any], timeout: float, pages: list[bytes] = pages
        ) -> Any:
            token = params.get("continue")
            return _Response(pages[int(token.split("-")[1]) if token else 0])

        reflector._request = request  # type: ignore[method-assign]
        started = time.process_time()
        reflector._list()
        feed.step()  # before the build: the queued objects go into the inventory
        figures[kind] = time.process_time() - started
    feed.synced = lambda: True
    started = time.process_time()
    feed.step()  # the first build and its pickle (no worker connected)
    figures["build"] = time.process_time() - started
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=("write", "run"))
    p.add_argument("dir", type=Path)
    p.add_argument("--count", type=int, default=10_000, help="write: objects per kind")
    p.add_argument("--kind", action="append", choices=KINDS, help="run: these kinds (default all)")
    p.add_argument(
        "--repeat", type=int, default=1, help="run: this many times, each figure printed"
    )
    p.add_argument("--profile", type=Path, help="run: cProfile stats into this file")
    p.add_argument("--hold", action="store_true", help="run: wait for a line on stdin first")
    args = p.parse_args(argv)
    if args.what == "write":
        write(args.dir, args.count)
        return 0
    kinds = args.kind or list(KINDS)
    for _ in range(args.repeat):
        profile = cProfile.Profile() if args.profile else None
        if profile:
            profile.enable()
        figures = run(args.dir, kinds, args.hold)
        if profile:
            profile.disable()
            profile.dump_stats(args.profile)
        print(" ".join(f"{k} {v:.3f}" for k, v in figures.items()), "(CPU s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
