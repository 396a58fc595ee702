"""Pod creations through a real kube-apiserver (issue 26): etcd, kube-apiserver and kwok
from tests/e2e (no kube-scheduler: admission alone is measured), N kwok nodes with their
NRTs, every pod different, numagate registered against not registered, in one run.

    .venv/bin/python benchmarks/e2e_creates.py [--nodes 1000,10000] [--pods 1500] [--clients 16]

Per size it prints: the control plane's node-creation time and memory (RSS of etcd,
kube-apiserver, kwok), numagate's time to ready from the real API, pod creates/s without
and with numagate and their ratio, numagate's p99 as the apiserver measures it
(``apiserver_admission_webhook_admission_duration_seconds``, interpolated in its buckets:
5, 25, 100 ms, ...) without and with NRT churn (each node's NRT rewritten once a minute),
and, at a fixed offered rate below saturation (``--offered``, a quarter of the maximum
without numagate by default), the achieved rate and the create latency without and with numagate.
The binaries come from ``make e2e-build``.

With ``--baseline DIR`` numagate's phases run from this checkout and from DIR's (its own
.venv), alternately, ``--rounds`` times, after one set of phases without numagate: a
before/after in one session on the same control plane. Beside the apiserver's p99 and
share of calls under 5 ms, each phase prints numagate's own (its review time, from
``numagate_admission_duration_seconds``): what the apiserver sees above it is the call's
way there and back, the apiserver's own work, and waiting for a core.

``--ready-only STARTS`` measures the time to ready alone: per size, numagate started
STARTS times after one warm-up start that is not counted (with ``--baseline DIR``,
alternately from this checkout and from DIR's, its own .venv: a before/after in one session
on the same control plane), each start's steps read from its debug log (docs/inventory.md,
"Where the ready time goes").
"""

from __future__ import annotations

import argparse
import base64
import calendar
import contextlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import urllib3
import yaml

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]

from tests.e2e.cluster import KOORD_LABEL, koord, nrt, pod, webhooks_to_url  # noqa: E402
from tests.e2e.controlplane import ControlPlane, fake_node, free_port  # noqa: E402
from tests.launch import http  # noqa: E402

POLICIES = ("SingleNUMANode", "Restricted", "BestEffort", None)
KUBELET = {"SingleNUMANode": "single-numa-node", "Restricted": "restricted", "BestEffort": "best-effort", None: "none"}  # fmt: skip
WEBHOOKS = ("mutate.numagate.io", "pods.validate.numagate.io")


class Api:
    """Raw HTTP to the apiserver as the admin, many threads (urllib3, bodies pre-encoded)."""

    def __init__(self, plane: ControlPlane, clients: int) -> None:
        assert plane.pki is not None
        self.base = plane.server
        self.pool = urllib3.HTTPSConnectionPool(
            "127.0.0.1", plane.apiserver_port, maxsize=clients + 8, ca_certs=str(plane.pki.ca),
            cert_file=str(plane.pki.admin_cert), key_file=str(plane.pki.admin_key),
            assert_hostname="127.0.0.1", retries=False, timeout=60,
        )  # fmt: skip

    def send(
        self, method: str, path: str, body: bytes, content_type: str = "application/json"
    ) -> int:
        resp = self.pool.request(method, path, body=body, headers={"Content-Type": content_type})
        if resp.status >= 300 and resp.status != 409:
            raise RuntimeError(f"{method} {path}: {resp.status} {resp.data[:300]!r}")
        return resp.status


def parallel(api: Api, clients: int, calls: Sequence[tuple[str, str, bytes]]) -> float:
    """Send every call with ``clients`` threads; the wall time."""
    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(lambda c: api.send(*c), calls))
    return time.perf_counter() - started


def paced(
    api: Api, clients: int, calls: Sequence[tuple[str, str, bytes]], rate: float
) -> dict[str, float]:
    """Send the calls at a fixed offered rate (call i is due at i / rate) with ``clients``
    threads: the achieved rate and the latency percentiles, each latency counted from the
    call's due time, so that a call held up by a slow one counts its wait (no coordinated
    omission). Below saturation, the achieved rate is the offered one whatever each create
    costs; what numagate adds shows in the latency."""
    lock, order = threading.Lock(), iter(range(len(calls)))
    lat: list[float] = []
    start = time.perf_counter() + 0.05

    def run() -> None:
        while True:
            with lock:
                i = next(order, None)
            if i is None:
                return
            due = start + i / rate
            time.sleep(max(0.0, due - time.perf_counter()))
            api.send(*calls[i])
            done = time.perf_counter()
            with lock:
                lat.append(done - due)

    threads = [threading.Thread(target=run) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.perf_counter() - start
    lat.sort()
    return {
        "offered": rate,
        "achieved": len(calls) / took,
        "p50_ms": 1000 * lat[len(lat) // 2],
        "p99_ms": 1000 * lat[min(len(lat) - 1, int(len(lat) * 0.99))],
    }


def cpu_by_pid() -> dict[int, tuple[int, float]]:
    """Every process's (parent PID, CPU seconds user + system) from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        out[int(d.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
    return out


def tree_cpu(root: int, procs: dict[int, tuple[int, float]]) -> float:
    """CPU seconds of ``root`` and its descendants (numagate's workers and their helpers)."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += procs.get(pid, (0, 0.0))[1]
        todo.extend(children.get(pid, ()))
    return total


class CpuMeter:
    """CPU seconds spent by each part (the control plane's processes, numagate's process
    tree, this process's client threads) between two readings: CPU per pod create does not
    depend on what else shares the machine, as wall-clock rates do."""

    def __init__(self, parts: dict[str, int]) -> None:
        self.parts = parts  # name -> root PID

    def read(self) -> dict[str, float]:
        procs = cpu_by_pid()
        out = {name: tree_cpu(pid, procs) for name, pid in self.parts.items()}
        t = os.times()
        out["clients"] = t.user + t.system
        return out

    @staticmethod
    def per(before: dict[str, float], after: dict[str, float], count: int) -> dict[str, float]:
        """Milliseconds of CPU per unit of work, per part."""
        return {k: round(1000 * (after[k] - before.get(k, 0.0)) / count, 2) for k in after}


def pin(pid: int, cpus: set[int]) -> None:
    """Pin a process tree to ``cpus`` (its threads too: affinity is per thread)."""
    procs = cpu_by_pid()
    todo = [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").iterdir():
            with contextlib.suppress(OSError):
                os.sched_setaffinity(int(task.name), cpus)
        todo.extend(c for c, (pp, _) in procs.items() if pp == p)


def latency(api: Api, calls: Sequence[tuple[str, str, bytes]]) -> float:
    """Median wall time of one create, sent one at a time (ms): the latency floor."""
    times = []
    for call in calls:
        started = time.perf_counter()
        api.send(*call)
        times.append(time.perf_counter() - started)
    return 1000 * sorted(times)[len(times) // 2]


def passive_opens() -> int:
    """TCP connections accepted on this machine so far (/proc/net/snmp): the count per
    create shows whether the apiserver reuses its connections to numagate or makes a TLS
    handshake per call."""
    lines = [
        ln.split()
        for ln in Path("/proc/net/snmp").read_text().splitlines()
        if ln.startswith("Tcp:")
    ]
    return int(lines[1][lines[0].index("PassiveOpens")])


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def create_nodes(plane: ControlPlane, api: Api, n: int, clients: int) -> dict[str, float]:
    rng = random.Random(n)
    nodes, nrts = [], []
    for i in range(n):
        policy = POLICIES[i % len(POLICIES)]
        name = f"bench-{i:05d}"
        labels = {KOORD_LABEL: policy} if policy else {}
        nodes.append(
            (
                "POST",
                "/api/v1/nodes",
                json.dumps(fake_node(name, labels, cpu="64", memory="256Gi")).encode(),
            )
        )
        doc = nrt(name, KUBELET[policy], rng.randint(4, 8))
        nrts.append(
            (
                "POST",
                "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies",
                json.dumps(doc).encode(),
            )
        )
    t_nodes = parallel(api, clients, nodes)
    t_nrts = parallel(api, clients, nrts)
    started = time.perf_counter()
    ready = 0
    while time.perf_counter() - started < 600:
        out = plane.kubectl(
            "get",
            "nodes",
            "-o",
            'jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\\n"}{end}',
        )
        ready = out.stdout.split().count("True")
        if ready >= n:
            break
        time.sleep(2)
    return {
        "nodes_s": t_nodes,
        "nrts_s": t_nrts,
        "all_ready_s": t_nodes + t_nrts + time.perf_counter() - started,
    }


# The steps of a start, from the log lines of serve (and of its inventory process).
MARKS = {
    "inventory process started": "spawned",
    "watching the cluster": "watching",
    "listed nodes": "nodes listed",
    "listed noderesourcetopologies": "NRTs listed",
    "listed numatopologies": "Numatopologies listed",
    "listed pods": "pods listed",
    "inventory built whole": "built",
}


def log_marks(text: str, started: float) -> dict[str, float]:
    """Seconds from ``started`` (wall clock) to the first log line of each mark."""
    marks: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith("{"):
            continue
        doc = json.loads(line)
        for needle, mark in MARKS.items():
            if mark not in marks and str(doc.get("msg", "")).startswith(needle):
                when = calendar.timegm(time.strptime(doc["ts"][:19], "%Y-%m-%dT%H:%M:%S"))
                when += float(doc["ts"][19:-1] or 0)
                marks[mark] = round(when - started, 2)
    return marks


def ready_once(checkout: Path, plane: ControlPlane, work: Path, workers: int) -> dict[str, Any]:
    """One start of ``serve --kubeconfig`` from ``checkout`` (its .venv): ready (/readyz
    200, polled every 50 ms) and the steps from its log, in seconds from the start."""
    certs, log = work / "ready-certs", work / "ready.log"
    port = free_port()
    python = checkout / ".venv" / "bin" / "python"
    cmd = [str(python), "-m", "webhook", "serve", "--host", "127.0.0.1", "--port", str(port),
           "--cert-dir", str(certs), "--kubeconfig", str(plane.kubeconfig), "--config",
           str(work / "config.yaml"), "--workers", str(workers), "--log-level", "debug"]  # fmt: skip
    wall, started = time.time(), time.perf_counter()
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=work, stdout=out, stderr=subprocess.STDOUT)
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"numagate exited: {log.read_text()[-2000:]}")
            with contextlib.suppress(OSError):
                if http(port, certs / "ca.crt", "GET", "/readyz", name="127.0.0.1")[0] == 200:
                    break
            time.sleep(0.05)
        ready = time.perf_counter() - started
    finally:
        proc.terminate()
        proc.wait(20)
    return {"ready_s": round(ready, 2), **log_marks(log.read_text(errors="replace"), wall)}


def ready_runs(plane: ControlPlane, args: argparse.Namespace, work: Path) -> None:
    """``--ready-only``: the starts, alternated between the checkouts, then a table."""
    checkouts = [HERE.parent] + ([Path(args.baseline)] if args.baseline else [])
    runs: dict[Path, list[dict[str, Any]]] = {c: [] for c in checkouts}
    # The first start after the nodes were made is slower at every step, the ones before
    # any list included (round 15: "watching" at 3.2 s against 1.1-1.4 s), whichever
    # checkout it is: one start first that no figure counts.
    warm_up = ready_once(checkouts[0], plane, work, args.workers)
    print(f"warm-up (not counted): {warm_up}", file=sys.stderr, flush=True)
    for _ in range(args.ready_only):
        for checkout in checkouts:
            run = ready_once(checkout, plane, work, args.workers)
            runs[checkout].append(run)
            print(f"{checkout}: {run}", file=sys.stderr, flush=True)
    steps = ["ready_s", *MARKS.values()]
    print("| checkout | " + " | ".join(steps) + " |")
    print("|---|" + "---:|" * len(steps))
    for checkout, done in runs.items():
        cells = [" / ".join(str(r.get(k, "-")) for r in done) for k in steps]
        print(f"| {checkout.name} | " + " | ".join(cells) + " |")


def pods(prefix: str, count: int, seed: int) -> list[tuple[str, str, bytes]]:
    """Every pod different: its own CPU, memory and policy (no two reviews alike)."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        policy = ("SingleNUMANode", "Restricted", "BestEffort")[i % 3]
        doc = pod(f"{prefix}-{i}", cpu=f"{rng.randint(100, 4000)}m", memory=f"{rng.randint(64, 4096)}Mi",
                  annotations=koord(policy), namespace="bench")  # fmt: skip
        out.append(("POST", "/api/v1/namespaces/bench/pods", json.dumps(doc).encode()))
    return out


def histogram(plane: ControlPlane) -> dict[str, dict[float, float]]:
    """The apiserver's admission webhook duration buckets, per webhook (all labels summed)."""
    out: dict[str, dict[float, float]] = {w: {} for w in WEBHOOKS}
    for line in plane.get("/metrics").decode().splitlines():
        if not line.startswith("apiserver_admission_webhook_admission_duration_seconds_bucket{"):
            continue
        labels, value = line.rsplit(" ", 1)
        for hook in WEBHOOKS:
            if f'name="{hook}"' in labels:
                le = labels.split('le="', 1)[1].split('"', 1)[0]
                bound = float("inf") if le == "+Inf" else float(le)
                out[hook][bound] = out[hook].get(bound, 0.0) + float(value)
    return out


def own_histogram(port: int, ca: Path) -> dict[str, dict[float, float]]:
    """numagate's own review duration buckets (``numagate_admission_duration_seconds``, from
    the request's headers in to its answer built; all labels summed), keyed as the
    apiserver's webhooks are: the two read side by side tell a slow call spent inside
    numagate from one spent in the apiserver, the connection or waiting for a core."""
    names = {"mutate": WEBHOOKS[0], "validate": WEBHOOKS[1]}
    out: dict[str, dict[float, float]] = {w: {} for w in WEBHOOKS}
    text = http(port, ca, "GET", "/metrics", name="127.0.0.1")[1].decode()
    for line in text.splitlines():
        if not line.startswith("numagate_admission_duration_seconds_bucket{"):
            continue
        labels, value = line.rsplit(" ", 1)
        hook = names.get(labels.split('webhook="', 1)[1].split('"', 1)[0])
        if hook is None:
            continue
        le = labels.split('le="', 1)[1].split('"', 1)[0]
        bound = float("inf") if le == "+Inf" else float(le)
        out[hook][bound] = out[hook].get(bound, 0.0) + float(value)
    return out


def p99(before: dict[float, float], after: dict[float, float]) -> tuple[float, float, int]:
    """(p99 in ms interpolated linearly within its bucket, share under 5 ms, calls)."""
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    total = counts[-1] if counts else 0
    if not total:
        return float("nan"), float("nan"), 0
    under5 = counts[bounds.index(0.005)] / total
    target, lower, lower_count = 0.99 * total, 0.0, 0.0
    for bound, count in zip(bounds, counts, strict=True):
        if count >= target:
            if bound == float("inf"):
                return float("inf"), under5, int(total)
            share = (target - lower_count) / max(count - lower_count, 1e-9)
            return 1000 * (lower + share * (bound - lower)), under5, int(total)
        lower, lower_count = bound, count
    return float("nan"), under5, int(total)


def server_time(port: int, ca: Path) -> dict[str, float]:
    """numagate's own mean review time (numagate_admission_duration_seconds sum/count), per
    webhook, over the whole run: the part of the apiserver's figure spent inside numagate."""
    sums: dict[str, list[float]] = {}
    for line in http(port, ca, "GET", "/metrics", name="127.0.0.1")[1].decode().splitlines():
        for suffix in ("_sum", "_count"):
            if line.startswith(f"numagate_admission_duration_seconds{suffix}{{"):
                hook = line.split('webhook="', 1)[1].split('"', 1)[0]
                sums.setdefault(hook, [0.0, 0.0])[suffix == "_count"] += float(
                    line.rsplit(" ", 1)[1]
                )
    return {hook: 1000 * s / c for hook, (s, c) in sums.items() if c}


def churn(api: Api, n: int, stop: threading.Event, threads: int = 4) -> list[int]:
    """Each node's NRT rewritten once a minute (n/60 per second), its free CPUs changed.
    Several threads, each for its own share of the nodes: one thread's PATCH round trips
    kept up with about 40 per second, not the 167 of 10,000 nodes."""
    done = [0] * threads

    def run(k: int) -> None:
        rng = random.Random(7 + k)
        names = [f"bench-{i:05d}" for i in range(k, n, threads)]
        period = 60.0 / max(1, len(names))
        i, next_at = 0, time.perf_counter()
        while not stop.is_set():
            name = names[i % len(names)]
            patch = {"zones": nrt(name, "none", rng.randint(2, 8))["zones"]}
            api.send("PATCH", f"/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies/{name}",
                     json.dumps(patch).encode(), "application/merge-patch+json")  # fmt: skip
            done[k] += 1
            i += 1
            next_at += period
            time.sleep(max(0.0, next_at - time.perf_counter()))

    for k in range(threads):
        threading.Thread(target=run, args=(k,), daemon=True).start()
    return done


def start_serve(checkout: Path, port: int, certs: Path, plane: ControlPlane, work: Path,
                workers: int) -> subprocess.Popen[bytes]:  # fmt: skip
    """``numagate serve --kubeconfig`` from ``checkout`` (its .venv), ready (/readyz 200)."""
    python = checkout / ".venv" / "bin" / "python"
    cmd = [str(python), "-m", "webhook", "serve", "--host", "127.0.0.1", "--port", str(port),
           "--cert-dir", str(certs), "--kubeconfig", str(plane.kubeconfig), "--config",
           str(work / "config.yaml"), "--workers", str(workers)]  # fmt: skip
    log = (work / f"serve-{port}.log").open("wb")
    proc = subprocess.Popen(cmd, cwd=work, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"numagate exited: {(work / f'serve-{port}.log').read_text()[-2000:]}"
            )
        with contextlib.suppress(OSError, IndexError):
            if http(port, certs / "ca.crt", "GET", "/readyz", name="127.0.0.1")[0] == 200:
                return proc
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("numagate not ready after 600 s")


def measure(
    plane: ControlPlane, api: Api, args: argparse.Namespace, n: int, work: Path
) -> dict[str, Any]:
    result: dict[str, Any] = {"nodes": n}
    result.update(create_nodes(plane, api, n, args.clients))
    procs = {name: p.popen.pid for name, p in plane.procs.items() if p.popen}
    result["rss_mib"] = {name: round(rss_mib(pid)) for name, pid in procs.items()}
    meter = CpuMeter(procs)
    if args.pin:  # the control plane and the clients on CPU 0, numagate on CPU 1 below
        for pid in [*procs.values(), os.getpid()]:
            pin(pid, {0})
    plane.kubectl(
        "delete",
        "mutatingwebhookconfiguration,validatingwebhookconfiguration",
        "numagate",
        "--ignore-not-found",
    )
    # Warm-up, then without numagate.
    parallel(api, args.clients, pods(f"warm-{n}", 200, 1))
    c0, a0 = meter.read(), passive_opens()
    result["without_s"] = parallel(api, args.clients, pods(f"off-{n}", args.pods, 2))
    result["cpu_without"] = meter.per(c0, meter.read(), args.pods)
    result["accepts_without"] = (passive_opens() - a0) / args.pods
    rate = args.offered * args.pods / result["without_s"]
    result["paced_without"] = paced(api, args.clients, pods(f"pace-off-{n}", args.pods, 8), rate)
    result["latency_without"] = latency(api, pods(f"lat-off-{n}", args.latency_pods, 6))
    # numagate, from the real API (the admin's kubeconfig: RBAC is the e2e suite's test);
    # with --baseline, the same phases again from the other checkout, alternately.
    checkouts = [HERE.parent] + ([Path(args.baseline)] if args.baseline else [])
    result["checkouts"] = {}
    for rnd in range(args.rounds):
        for checkout in checkouts:
            tag = f"{n}-{rnd}-{checkout.name}"
            run = with_numagate(plane, api, args, n, work, meter, rate, checkout, tag)
            result["checkouts"].setdefault(str(checkout), []).append(run)
    return result


def with_numagate(plane: ControlPlane, api: Api, args: argparse.Namespace, n: int, work: Path,
                  meter: CpuMeter, rate: float, checkout: Path, tag: str) -> dict[str, Any]:  # fmt: skip
    """numagate from ``checkout`` registered: saturated, one at a time, paced, idle, churn."""
    result: dict[str, Any] = {}
    certs = work / f"certs-{tag}"
    port = free_port()
    ca_path = certs / "ca.crt"
    started = time.perf_counter()
    serve = start_serve(checkout, port, certs, plane, work, args.workers)
    try:
        result["ready_s"] = time.perf_counter() - started
        meter.parts["numagate"] = serve.pid
        if args.pin:
            pin(serve.pid, {1})
        ca = base64.b64encode(ca_path.read_bytes()).decode()
        docs = webhooks_to_url([d for d in yaml.safe_load_all(plane.kubectl("kustomize", str(HERE.parent / "manifests" / "base")).stdout)
                                if d and d["kind"].endswith("WebhookConfiguration")], port)  # fmt: skip
        for doc in docs:
            for hook in doc["webhooks"]:
                hook["clientConfig"]["caBundle"] = ca
        plane.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
        time.sleep(2)
        parallel(api, args.clients, pods(f"warm-on-{tag}", 200, 3))

        def both() -> tuple[dict[str, dict[float, float]], dict[str, dict[float, float]]]:
            return histogram(plane), own_histogram(port, ca_path)

        before = both()
        c0, a0 = meter.read(), passive_opens()
        result["with_s"] = parallel(api, args.clients, pods(f"on-{tag}", args.pods, 4))
        result["cpu_with"] = meter.per(c0, meter.read(), args.pods)
        result["accepts_with"] = (passive_opens() - a0) / args.pods
        mid = both()
        c0 = meter.read()
        result["latency_with"] = latency(api, pods(f"lat-on-{tag}", args.latency_pods, 7))
        result["cpu_one"] = meter.per(c0, meter.read(), args.latency_pods)
        one = both()
        result["paced_with"] = paced(api, args.clients, pods(f"pace-on-{tag}", args.pods, 9), rate)
        paced_end = both()
        # Idle: what numagate burns with nothing to review and no NRT change (timers,
        # watches), in ms of CPU per second; part of every per-create figure above.
        c0 = meter.read()
        time.sleep(5)
        result["idle_ms_per_s"] = meter.per(c0, meter.read(), 5)["numagate"]
        stop = threading.Event()
        churned = churn(api, n, stop)
        time.sleep(5)
        churn_start = both()
        c0 = meter.read()
        result["churn_s"] = parallel(api, args.clients, pods(f"churn-{tag}", args.pods, 5))
        result["cpu_churn"] = meter.per(c0, meter.read(), args.pods)
        stop.set()
        after = both()
        result["churn_updates"] = sum(churned)
        result["churn_rate"] = sum(churned) / (result["churn_s"] + 5)
        phases = {"": (before, mid), "one_": (mid, one), "paced_": (one, paced_end),
                  "churn_": (churn_start, after)}  # fmt: skip
        for hook in WEBHOOKS:
            for name, (start, end) in phases.items():
                result[f"p99_{name}{hook}"] = p99(start[0][hook], end[0][hook])
                result[f"own_{name}{hook}"] = p99(start[1][hook], end[1][hook])
        result["serve_rss_mib"] = round(rss_mib(serve.pid))
        result["server_time"] = server_time(port, ca_path)
    finally:
        serve.terminate()
        serve.wait(30)
        plane.kubectl(
            "delete",
            "mutatingwebhookconfiguration,validatingwebhookconfiguration",
            "numagate",
            "--ignore-not-found",
        )
    return result


def report(r: dict[str, Any], pods_n: int) -> None:
    without = pods_n / r["without_s"]
    print(f"\n== {r['nodes']} kwok nodes with NRTs ==")
    print(f"control plane: nodes created {r['nodes_s']:.1f} s, NRTs {r['nrts_s']:.1f} s, all Ready after "
          f"{r['all_ready_s']:.1f} s; RSS MiB {r['rss_mib']}")  # fmt: skip
    print(f"without numagate: {without:.0f} creates/s; one create at a time, median {r['latency_without']:.1f} ms; "
          f"TCP connections accepted per create {r['accepts_without']:.2f}")  # fmt: skip
    for checkout, runs in r["checkouts"].items():
        for i, run in enumerate(runs):
            print(f"\n-- numagate from {checkout} (round {i + 1}) --")
            report_run(run, r, pods_n)


def report_run(r: dict[str, Any], base: dict[str, Any], pods_n: int) -> None:
    """One checkout's phases: the apiserver's p99 and share of calls under 5 ms, then
    numagate's own (its review time alone) for the same calls."""
    without, with_ = pods_n / base["without_s"], pods_n / r["with_s"]
    print(f"numagate ready from the real API: {r['ready_s']:.2f} s (RSS {r['serve_rss_mib']} MiB)")
    print(f"numagate's own mean review time, ms: {r['server_time']}")
    print(f"pod creates/s: without {without:.0f}, with numagate {with_:.0f}, ratio {with_ / without:.2f}; "
          f"under NRT churn {pods_n / r['churn_s']:.0f}/s ({r['churn_updates']} NRT updates, {r['churn_rate']:.0f}/s; target {base['nodes'] / 60:.0f}/s)")  # fmt: skip
    for source, label in (("p99", "apiserver"), ("own", "numagate's own")):
        for hook in WEBHOOKS:
            cells = []
            for name, phase in (("", "16 clients"), ("one_", "one at a time"), ("paced_", "paced"), ("churn_", "under churn")):  # fmt: skip
                ms, fast, calls = r[f"{source}_{name}{hook}"]
                cells.append(f"{phase} {ms:.1f} ms ({fast:.1%} under 5 ms, {calls})")
            print(f"{label} p99, {hook}: " + "; ".join(cells))
    print(
        f"one create at a time, median: {base['latency_without']:.1f} ms without, {r['latency_with']:.1f} ms with numagate"
    )
    print(
        f"TCP connections accepted per create: {base['accepts_without']:.2f} without, {r['accepts_with']:.2f} with numagate"
    )
    off, on = base["paced_without"], r["paced_with"]
    print(f"offered {off['offered']:.0f} creates/s ({off['offered'] / without:.0%} of the maximum without): "
          f"achieved {off['achieved']:.0f} without, {on['achieved']:.0f} with numagate (ratio {on['achieved'] / off['achieved']:.2f}); "
          f"create latency p50/p99 {off['p50_ms']:.1f}/{off['p99_ms']:.1f} ms without, {on['p50_ms']:.1f}/{on['p99_ms']:.1f} ms with")  # fmt: skip
    print(f"numagate idle: {r['idle_ms_per_s']:.1f} ms of CPU per second")
    print("CPU ms per pod create, by process (without / with / one at a time with / under churn):")
    for part in r["cpu_with"]:
        print(f"  {part:15} {base['cpu_without'].get(part, 0.0):7.2f} {r['cpu_with'][part]:7.2f} "
              f"{r['cpu_one'][part]:7.2f} {r['cpu_churn'][part]:7.2f}")  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", default="1000,10000")
    p.add_argument("--pods", type=int, default=1500, help="pods per measured phase")
    p.add_argument("--clients", type=int, default=16, help="concurrent API clients")
    p.add_argument("--workers", type=int, default=2, help="numagate serve --workers")
    p.add_argument("--latency-pods", type=int, default=100, help="pods created one at a time")
    p.add_argument(
        "--offered",
        type=float,
        default=0.25,
        help="the paced phase's offered rate, as a fraction of the maximum measured without numagate",
    )
    p.add_argument(
        "--pin",
        action="store_true",
        help="control plane and clients on CPU 0, numagate on CPU 1 (as on separate nodes)",
    )
    p.add_argument("--ready-only", type=int, default=0, metavar="STARTS",
                   help="only numagate's time to ready and its steps, STARTS starts per size "
                        "after one warm-up start that is not counted")  # fmt: skip
    p.add_argument("--baseline", metavar="DIR",
                   help="another checkout (with its .venv): numagate's phases (or, with "
                        "--ready-only, its starts) run from each, alternately, on one control plane")  # fmt: skip
    p.add_argument("--rounds", type=int, default=1,
                   help="numagate's phases this many times per checkout (alternated)")  # fmt: skip
    args = p.parse_args(argv)
    sizes = [int(x) for x in args.nodes.split(",")]
    work = Path(tempfile.mkdtemp(prefix="numagate-e2e-bench-"))
    (work / "config.yaml").write_text("shutdown: {delaySeconds: 0}\n")
    results = []
    for n in sizes:
        plane = ControlPlane(work / f"plane-{n}", with_scheduler=False,
                             apiserver_flags=["--max-requests-inflight", "800", "--max-mutating-requests-inflight", "400"])  # fmt: skip
        with plane:
            plane.create_namespace("bench")
            plane.kubectl("apply", "-f", str(HERE.parent / "tests" / "e2e" / "crds"))
            plane.kubectl(
                "wait",
                "--for",
                "condition=Established",
                "crd/noderesourcetopologies.topology.node.k8s.io",
            )
            api = Api(plane, args.clients)
            if args.ready_only:
                created = create_nodes(plane, api, n, args.clients)
                print(f"== {n} kwok nodes: {created}", flush=True)
                ready_runs(plane, args, work)
                continue
            results.append(measure(plane, api, args, n, work))
        report(results[-1], args.pods)
    if not os.environ.get("NUMAGATE_E2E_KEEP"):
        shutil.rmtree(work, ignore_errors=True)  # etcd data: about 1 GiB at 10,000 nodes
    return 0


if __name__ == "__main__":
    sys.exit(main())
