"""Inventory under churn (issue 14): ``numagate serve --kubeconfig`` (one worker) against
the test API server (tests/webhook/fake_apiserver.py: real TLS, list/watch with paging,
bookmarks, compaction) holding a generated cluster whose NodeResourceTopologies are
rewritten at a given rate, as NFD's topology-updater does (each node every 60 s = nodes/60
events per second).

    .venv/bin/python benchmarks/churn.py [--nodes 10000] [--rates 0,0.5,2,20,170]
        [--duration 10] [--probes 10] [--outage 40] [--large] [--quick] [--pin] [--wire]

Measured: reviews/s and p99 of /validate driven by wrk with every pod different, at each
NRT churn rate, as ratios to no churn, with /healthz p99 beside it; the time from an NRT
write in the API to the first decision that reflects it (a probe pod pinned to a probe
node whose CPUs are made free or full), without churn and under the highest rate; time to
ready from the API and from a JSON ``List`` file; the worker's RSS; recovery after an
API outage (connections refused for ``--outage`` seconds; a change written during it;
seconds from the API's return to the watches resumed and to the change visible).
``--large`` adds 100,000 nodes at 1,700 events/s and the 100,000-node file (minutes).
``--pin`` puts the worker alone on CPU 0 and the harness (test API server, wrk) on the
other CPUs once it is ready. ``--wire`` adds each rate's review p99 on the wire, the
server's side of it without wrk's (benchmarks/wire.py), its ratio, the longest exchange,
and the wire's p99 with wrk's correction for stalls (wire.as_wrk). The watches and
the merge run in the inventory process (one per replica, a child of the single worker
here), whose RSS is reported beside the worker's.

Prints a Markdown table and writes benchmarks/results/churn.json and churn.md.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

import churn_parts as parts  # noqa: E402
import churn_report as report  # noqa: E402
import gen  # noqa: E402
import server as bench  # noqa: E402
import wire  # noqa: E402

from tests.webhook.fake_apiserver import NRTS, FakeApiServer, make_tls  # noqa: E402
from tests.webhook.fake_apiserver_churn import nrt_available  # noqa: E402

WATCHED = 3  # numagate watches Nodes, NRTs and Numatopologies (no pods by default)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=10_000)
    p.add_argument("--rates", default="0,0.5,2,20,170", help="NRT events/s, first must be 0")
    p.add_argument("--duration", type=int, default=10, help="seconds of wrk per rate")
    p.add_argument("--warmup", type=float, default=3.0, help="seconds of churn before wrk")
    p.add_argument("--connections", type=int, default=16)
    p.add_argument("--threads", type=int, default=2, help="wrk threads")
    p.add_argument("--probes", type=int, default=10, help="NRT flips per visibility figure")
    p.add_argument("--pairs", type=int, default=3,
                   help="no churn / highest rate pairs behind the headline ratios (medians)")  # fmt: skip
    p.add_argument("--outage", type=float, default=40.0, help="API outage, seconds")
    p.add_argument("--large", action="store_true", help="also 100,000 nodes at 1,700/s")
    p.add_argument("--large-nodes", type=int, default=100_000)
    p.add_argument("--quick", action="store_true", help="a smoke run of a few seconds")
    p.add_argument("--distinct-usage", action="store_true",
                   help="every NRT with free amounts of its own from the start (a running "
                        "cluster's), not the generator's few levels")  # fmt: skip
    p.add_argument("--pin", action="store_true",
                   help="the worker alone on CPU 0, the test API server and wrk on the others "
                        "(from ready on)")  # fmt: skip
    p.add_argument("--wire", action="store_true",
                   help="also the reviews' p99 on the wire (tcpdump on lo, as root): the "
                        "server's side without the client's, and that p99 with wrk's "
                        "correction for stalls (benchmarks/wire.py)")  # fmt: skip
    p.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for ready")
    p.add_argument("--out", type=Path, default=bench.RESULTS)
    args = p.parse_args(argv)
    if args.quick:
        args.nodes, args.rates, args.duration, args.warmup = 200, "0,20", 2, 0.5
        args.probes, args.outage, args.connections, args.large = 2, 2.0, 4, False
        args.pairs = 2
    args.rate_list = [float(r) for r in args.rates.split(",")]
    if args.rate_list[0] != 0:
        p.error("--rates: the first rate must be 0 (the baseline of the ratios)")
    return args


def fake_cluster(work: Path, nodes: int, *, distinct: bool = False) -> FakeApiServer:
    """The test API server with ``nodes`` generated nodes and the probe node."""
    fake = FakeApiServer(
        make_tls(work / "api-tls"), default_watch_timeout=300, bookmark_interval=60,
        compaction_interval=300,
    )  # fmt: skip
    fake.start()
    fake.load(cluster_objects(nodes, distinct=distinct))
    # The test API server stands in for kube-apiserver, whose Go collector runs beside
    # its goroutines. This process's collector stopped the server's threads instead: at
    # 100,000 nodes a full collection of 250-360 ms during the first churn (gc.callbacks),
    # the watch events then delivered at once. The loaded objects stay for the whole run
    # and the churn's garbage is freed by reference counting: the collector is off.
    gc.collect()
    gc.freeze()
    gc.disable()
    return fake


def cluster_objects(nodes: int, *, distinct: bool = False) -> Iterator[dict[str, Any]]:
    """The generated cluster and the probe node. ``distinct``: every NRT with free
    amounts of its own (drawn as the churn draws them), as a running cluster's
    topology-updaters report each node's actual free CPUs and memory; the generator's
    few usage levels let thousands of nodes share a shape at start, which the churn then
    splits one event at a time."""
    rng = random.Random(11)
    for obj in gen.inventory_objects(nodes):
        if distinct and obj["kind"] == "NodeResourceTopology":
            nrt_available(obj, rng)
        yield obj
    yield from parts.probe_objects()


def write_json_list(path: Path, nodes: int, *, distinct: bool = False) -> Path:
    """The inventory as ``kubectl get nodes,noderesourcetopologies,... -o json`` prints it."""
    items = cluster_objects(nodes, distinct=distinct)
    with path.open("wb") as out:  # streamed: 100,000 nodes' dicts at once would be GiBs
        out.write(b'{"apiVersion":"v1","kind":"List","items":[')
        for k, item in enumerate(items):
            out.write(b"," + orjson.dumps(item) if k else orjson.dumps(item))
        out.write(b"]}")
    return path


def ready_from_file(
    work: Path, nodes: int, timeout: float, *, distinct: bool = False
) -> dict[str, Any]:
    path = write_json_list(work / f"inventory-{nodes}.json", nodes, distinct=distinct)
    print(f"ready from a {nodes}-node JSON file...", file=sys.stderr)
    ng = parts.start_numagate(
        ["--inventory", str(path)], work / "certs", work / "file.log", timeout
    )
    try:
        return {"ready_s": ng.ready_s, "rss_mib": ng.rss_mib(), "bytes": path.stat().st_size}
    finally:
        ng.stop()


def churn_points(
    fake: FakeApiServer, ng: parts.Numagate, load: parts.Load, rates: list[float], warmup: float
) -> list[dict[str, Any]]:
    points = []
    for rate in rates:
        print(f"wrk at {rate:g} NRT events/s...", file=sys.stderr)
        fake.churn(NRTS, rate, nrt_available, exclude=(parts.PROBE,))
        time.sleep(warmup)
        before, t0 = fake.churned(NRTS), time.monotonic()
        reviews, healthz = parts.wrk_pair(ng, load)
        observed = (fake.churned(NRTS) - before) / (time.monotonic() - t0)
        points.append({"rate": rate, "observed_rate": round(observed, 1), "reviews": reviews,
                       "healthz": healthz, "rss_mib": ng.rss_mib()})  # fmt: skip
    return points


def recovery(fake: FakeApiServer, prober: parts.Prober, outage: float) -> dict[str, Any]:
    """Refuse connections for ``outage`` s, write a probe change meanwhile, come back."""
    print(f"API outage of {outage:g} s...", file=sys.stderr)
    room = prober.room()
    fake.down()
    time.sleep(outage)
    fake.apply(parts.probe_nrt(not room))
    fake.up()
    back = time.monotonic()
    resumed = None
    while resumed is None and time.monotonic() - back < 300:
        if fake.open_watches() >= WATCHED:
            resumed = round(time.monotonic() - back, 2)
        time.sleep(0.02)
    visible = prober.wait_for(not room, 300, back)
    return {"outage_s": outage, "watches_resumed_s": resumed, "change_visible_s": visible}


def api_run(args: argparse.Namespace, work: Path, load: parts.Load, nodes: int,
            rates: list[float]) -> dict[str, Any]:  # fmt: skip
    """numagate on the live API: ready, visibility, the rates, recovery, RSS."""
    print(f"loading {nodes} nodes into the test API server...", file=sys.stderr)
    fake = fake_cluster(work, nodes, distinct=args.distinct_usage)
    try:
        kubeconfig = fake.write_kubeconfig(work / "kubeconfig")
        source = ["--kubeconfig", str(kubeconfig)]
        ng = parts.start_numagate(source, work / "certs", work / f"api-{nodes}.log", args.timeout)
        sampler = parts.RssSampler(ng)
        pinning = parts.Pinning(ng, args.pin)
        try:
            out: dict[str, Any] = {"nodes": nodes, "ready_s": ng.ready_s, "watched": ng.watched,
                                   "rss_mib_ready": ng.rss_mib(),
                                   "helpers_rss_mib_ready": ng.helpers_rss_mib()}  # fmt: skip
            prober = parts.Prober(ng)
            timeout = max(120.0, args.timeout / 4)
            out["probe_timeout_s"] = timeout
            if not prober.room():
                raise bench.BenchError("the probe pod does not fit its probe node at the start")
            print("NRT change to decision, no churn...", file=sys.stderr)
            probes = args.probes if nodes == args.nodes else max(3, args.probes // 3)
            out["visible_idle_s"] = parts.change_visible(fake, prober, probes, timeout)
            out["points"] = churn_points(fake, ng, load, rates, args.warmup)
            # Ten seconds of wrk vary by +-0.1 in reviews/s on a shared machine: the
            # headline ratios are medians over pairs measured back to back.
            out["pairs"] = [report.pair_ratios(out["points"][0], out["points"][-1])]
            for _ in range(args.pairs - 1):
                base, last = churn_points(fake, ng, load, [0.0, rates[-1]], args.warmup)
                out["pairs"].append(report.pair_ratios(base, last))
            print(f"NRT change to decision at {rates[-1]:g} events/s...", file=sys.stderr)
            out["visible_churn_s"] = parts.change_visible(fake, prober, probes, timeout)
            fake.churn(NRTS, 0, nrt_available)
            if nodes == args.nodes:
                out["recovery"] = recovery(fake, prober, args.outage)
            out["rss_mib_peak"] = sampler.stop()
            out["helpers_rss_mib_peak"] = sampler.helpers_peak
            out["nrt_list_requests"] = len(fake.list_requests(NRTS))  # pages; more = relists
            return out
        finally:
            pinning.release()
            sampler.stop()
            ng.stop()
    finally:
        fake.stop()


def find_wrk() -> str:
    if shutil.which("wrk") is None:
        print("wrk is not installed: trying `apt-get install -y wrk` (the Debian package)...",
              file=sys.stderr)  # fmt: skip
    return bench.ensure_wrk()


def run(args: argparse.Namespace) -> dict[str, Any]:
    wrk = find_wrk()
    result: dict[str, Any] = {"machine": bench.machine(), "args": {
        k: v for k, v in vars(args).items() if k not in ("out", "rate_list")}}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="numagate-churn-") as tmp:
        work = Path(tmp)
        bodies = []
        for k, body in enumerate(gen.review_bodies(gen.realistic_pods(12), prefix="c")):
            bodies.append(work / f"review-{k:02d}.json")
            bodies[-1].write_bytes(body)
        load = parts.Load(wrk, bodies, args.duration, args.connections, args.threads,
                          tcpdump=wire.ensure_tcpdump() if args.wire else None, work=work)  # fmt: skip
        # The floor: Python, imports and TLS setup with an inventory of one node.
        result["startup_floor_s"] = ready_from_file(work, 0, args.timeout)["ready_s"]
        result["file"] = {
            str(args.nodes): ready_from_file(
                work, args.nodes, args.timeout, distinct=args.distinct_usage
            )
        }
        result["api"] = api_run(args, work, load, args.nodes, args.rate_list)
        if args.large:
            big = args.large_nodes
            result["file"][str(big)] = ready_from_file(
                work, big, args.timeout, distinct=args.distinct_usage
            )
            result["large"] = api_run(args, work, load, big, [0.0, big / 60])
    result["figures"] = report.figures(result)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        result = run(args)
    except (bench.BenchError, wire.WireError) as exc:
        print(f"benchmarks/churn.py: {exc}", file=sys.stderr)
        return 1
    text = report.markdown(result)
    args.out.mkdir(parents=True, exist_ok=True)
    name = "churn-quick" if args.quick else "churn"
    (args.out / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / f"{name}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
