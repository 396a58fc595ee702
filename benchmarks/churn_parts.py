"""The pieces of benchmarks/churn.py: the numagate process, the probe that sees an NRT
change reach the decisions, the paired wrk runs and the RSS sampler."""

from __future__ import annotations

import contextlib
import http.client
import os
import random
import re
import ssl
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]

import gen  # noqa: E402
import server as bench  # noqa: E402
import wire  # noqa: E402

from tests.webhook.fake_apiserver import FakeApiServer  # noqa: E402

HEALTHZ_LUA = HERE / "wrk" / "healthz.lua"
PROBE = "probe-node"
NO_ROOM = "no node has room now"
WORKER_LINE = re.compile(r"numagate: worker (\d+) serving")
WATCHED = re.compile(r"; watched in ([^)]*)\)")


# ----------------------------------------------------------------------------- numagate


@dataclass
class Numagate:
    """``numagate serve`` with one worker; ``ready_s`` from the process start to /readyz 200."""

    proc: subprocess.Popen[bytes]
    port: int
    ca: Path
    log: Path
    worker: int = 0
    ready_s: float = 0.0
    watched: str = ""  # serve's "watched in ...: reason" for a cluster source

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def rss_mib(self) -> float:
        kib = bench.rss_kib(self.worker) if self.worker else None
        return round(kib / 1024, 1) if kib else 0.0

    def helpers(self) -> list[int]:
        """The worker's child processes (the inventory process it starts, with one worker)."""
        return children(self.worker) if self.worker else []

    def helpers_rss_mib(self) -> float:
        kib = sum(bench.rss_kib(pid) or 0 for pid in self.helpers())
        return round(kib / 1024, 1)

    def stop(self) -> None:
        bench.Server("numagate", self.proc, self.port, self.log).stop()


def start_numagate(
    source: list[str],
    cert_dir: Path,
    log: Path,
    timeout: float,
    workers: int = 1,
    while_starting: Callable[[int], None] | None = None,
) -> Numagate:
    """Start ``numagate serve SOURCE --workers N`` (1 by default) and wait until it is
    ready (polled every 50 ms, so the readiness figure is that precise).
    ``while_starting(pid)`` is called at each poll (a sampler of the startup)."""
    ca = bench.ensure_certs(cert_dir)
    port = bench.free_port()
    cmd = [str(bench.VENV_BIN / "numagate"), "serve", *source, "--workers", str(workers),
           "--port", str(port), "--cert-dir", str(cert_dir), "--log-level", "warning"]  # fmt: skip
    started = time.monotonic()
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    ng = Numagate(proc, port, ca, log)
    ctx = ssl.create_default_context(cafile=str(ca))
    while time.monotonic() - started < timeout:
        if proc.poll() is not None:
            raise bench.BenchError(f"numagate exited with {proc.returncode}:\n{_tail(log)}")
        if while_starting is not None:
            while_starting(proc.pid)
        with contextlib.suppress(OSError, ssl.SSLError, http.client.HTTPException):
            conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=5)
            conn.request("GET", "/readyz")
            if conn.getresponse().status == 200:
                ng.ready_s = round(time.monotonic() - started, 2)
                text = log.read_text(errors="replace")
                found = WORKER_LINE.search(text)
                ng.worker = int(found[1]) if found else proc.pid
                watched = WATCHED.search(text)
                ng.watched = watched[1] if watched else ""
                return ng
        time.sleep(0.05)
    ng.stop()
    raise bench.BenchError(f"numagate not ready after {timeout:.0f} s:\n{_tail(log)}")


def replica(pid: int) -> list[int]:
    """``pid`` and all its descendants: the serve process, its workers and the inventory
    process, whoever started which."""
    out, todo = [], [pid]
    while todo:
        out.append(todo.pop())
        todo.extend(children(out[-1]))
    return out


def replica_mib(pid: int) -> dict[str, float]:
    """RSS and PSS of a replica, summed over its processes (PSS splits the pages forked
    workers share, so its sum is what the replica takes from the machine)."""
    rss = pss = 0
    for p in replica(pid):
        rss += bench.rss_kib(p) or 0
        pss += pss_kib(p)
    return {"rss_mib": round(rss / 1024, 1), "pss_mib": round(pss / 1024, 1)}


def pss_kib(pid: int) -> int:
    """The process's proportional set size (0 when it is gone)."""
    with contextlib.suppress(OSError, StopIteration):
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
        return int(next(li for li in text.splitlines() if li.startswith("Pss:")).split()[1])
    return 0


def processes_mib(pid: int) -> dict[str, dict[str, float]]:
    """RSS and PSS of each process of a replica, by role: ``serve``, ``inventory`` (the
    spawned inventory process), ``worker-1``... (forked, in pid order), ``tracker``
    (multiprocessing's resource tracker, where there is one)."""
    out: dict[str, dict[str, float]] = {}
    workers = 0
    for p in sorted(replica(pid)):
        try:
            cmd = Path(f"/proc/{p}/cmdline").read_bytes()
        except OSError:
            continue
        if p == pid:
            role = "serve"
        elif b"resource_tracker" in cmd:
            role = "tracker"
        elif b"spawn_main" in cmd:
            role = "inventory"
        else:
            workers += 1
            role = f"worker-{workers}"
        rss, pss = bench.rss_kib(p) or 0, pss_kib(p)
        out[role] = {"rss": round(rss / 1024, 1), "pss": round(pss / 1024, 1)}
    return out


def resident_once_mib(pid: int) -> float | None:
    """The replica's resident memory with each physical page counted once, as its cgroup
    charges it: the union of its processes' present page frames (/proc/PID/pagemap; the
    frame numbers need root, else None). Summed RSS counts a page the forked workers share
    once per process; PSS splits it."""
    frames: set[int] = set()
    for p in replica(pid):
        with contextlib.suppress(OSError), open(f"/proc/{p}/pagemap", "rb") as pagemap:
            for line in Path(f"/proc/{p}/maps").read_text().splitlines():
                low, high = (int(x, 16) for x in line.split()[0].split("-"))
                if low >= 1 << 47:  # [vsyscall]: not readable
                    continue
                pagemap.seek(low // 4096 * 8)
                for (entry,) in struct.iter_unpack("<Q", pagemap.read((high - low) // 4096 * 8)):
                    if entry >> 63:  # present
                        frames.add(entry & ((1 << 55) - 1))
    if frames <= {0}:  # not root: every frame reads as 0
        return None
    return round(len(frames) * 4096 / 2**20, 1)


def children(pid: int) -> list[int]:
    """The child processes of ``pid`` (any of its threads')."""
    out: list[int] = []
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                text = Path(f"/proc/{pid}/task/{tid}/children").read_text()
                out.extend(int(c) for c in text.split())
    return out


def pin_threads(pid: int, cpus: set[int]) -> None:
    """Every thread of ``pid`` on ``cpus`` (threads it starts later inherit the CPUs of
    the thread that starts them)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError):  # a thread that has just exited
            os.sched_setaffinity(int(tid), cpus)


class Pinning:
    """``--pin``: the worker alone on CPU 0, this process (the test API server) and the
    wrk it starts on the others, as in a cluster where the worker has a core (a CPU limit
    of 1) and the API server runs elsewhere. Unpinned, the test API server's churn (~84 us
    of CPU per event) and wrk take CPU from the worker under churn but not in the
    baseline, on a machine of two cores. The worker's inventory process goes with the
    harness: a process of its own is the point of it."""

    def __init__(self, ng: Numagate, on: bool) -> None:
        self.on = on and (os.cpu_count() or 1) > 1
        self.all = os.sched_getaffinity(0)
        if self.on:
            pin_threads(ng.worker, {0})
            pin_threads(os.getpid(), self.all - {0})
            for helper in ng.helpers():
                pin_threads(helper, self.all - {0})

    def release(self) -> None:
        if self.on:
            pin_threads(os.getpid(), self.all)


def _tail(path: Path) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-15:])
    return ""


class RssSampler:
    """The worker's RSS every 0.5 s in a thread; ``peak`` is the largest seen, and
    ``helpers_peak`` that of its child processes together."""

    def __init__(self, ng: Numagate) -> None:
        self.ng = ng
        self.peak = 0.0
        self.helpers_peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            self.peak = max(self.peak, self.ng.rss_mib())
            self.helpers_peak = max(self.helpers_peak, self.ng.helpers_rss_mib())

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        self.helpers_peak = max(self.helpers_peak, self.ng.helpers_rss_mib())
        return max(self.peak, self.ng.rss_mib())


# ----------------------------------------------------------------------------- probe


def probe_objects() -> list[dict[str, Any]]:
    """A node of its own (never churned) with an NRT of two 32-CPU NUMA nodes under
    single-numa-node: the probe pod (8 exclusive CPUs, pinned there) fits while a zone
    has 8 CPUs available, and has "no room now" when none has."""
    shape = gen.SHAPES[0]
    return [
        gen.node_object(PROBE, shape, "nrt-attributes", "single-numa-node"),
        gen.nrt_object(PROBE, shape, "single-numa-node", 1.0, koord=False),
    ]


def probe_nrt(room: bool) -> dict[str, Any]:
    nrt = probe_objects()[1]
    for zone in nrt["zones"]:
        for res in zone["resources"]:
            if res["name"] == "cpu":
                res["available"] = res["allocatable"] if room else "0"
    return nrt


def probe_body() -> bytes:
    pod = gen.pod_object(random.Random(5), dialect="kubelet", name="probe", app_cpu="8")
    pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": PROBE}
    return gen.review_bodies([pod], prefix="probe")[0]


class Prober:
    """Asks /validate about the probe pod (a different pod every time, so no cache can
    answer) over one keep-alive connection; ``room()`` says which answer came back."""

    def __init__(self, ng: Numagate) -> None:
        self.ng = ng
        self.body = probe_body()
        self.n = 0
        self.ctx = ssl.create_default_context(cafile=str(ng.ca))
        self.conn: http.client.HTTPSConnection | None = None

    def room(self) -> bool:
        self.n += 1
        body = gen.vary(self.body, 10_000_000 + self.n, unique=True)
        for _ in range(3):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPSConnection(
                        "127.0.0.1", self.ng.port, context=self.ctx, timeout=30
                    )
                self.conn.request(
                    "POST", "/validate", body=body, headers={"Content-Type": "application/json"}
                )
                raw = self.conn.getresponse().read()
                break
            except (OSError, http.client.HTTPException):
                self.conn = None
        else:
            raise bench.BenchError("the probe cannot reach numagate's /validate")
        response = orjson.loads(raw)["response"]
        return not any(NO_ROOM in w for w in response.get("warnings") or [])

    def wait_for(self, room: bool, timeout: float, since: float) -> float | None:
        """Seconds from ``since`` until the answer says ``room``; None after ``timeout``."""
        while time.monotonic() - since < timeout:
            if self.room() == room:
                return round(time.monotonic() - since, 3)
            time.sleep(0.01)
        print(f"the probe's verdict did not change within {timeout:.0f} s", file=sys.stderr)
        return None


def change_visible(
    fake: FakeApiServer, prober: Prober, samples: int, timeout: float
) -> list[float | None]:
    """Flip the probe node's NRT ``samples`` times; each time, seconds from the write in
    the API to the first decision that reflects it (None: not within ``timeout``, and
    the sampling stops there)."""
    room = prober.room()
    out: list[float | None] = []
    rng = random.Random(3)
    for _ in range(samples):
        room = not room
        fake.apply(probe_nrt(room))
        out.append(prober.wait_for(room, timeout, time.monotonic()))
        if out[-1] is None:
            break
        time.sleep(rng.uniform(0.05, 0.3))  # not in step with any timer of the server
    return out


# ----------------------------------------------------------------------------- wrk


@dataclass
class Load:
    """wrk options for the review load."""

    wrk: str
    bodies: Sequence[Path]
    duration: int
    connections: int
    threads: int
    extra_env: dict[str, str] = field(default_factory=dict)
    tcpdump: str | None = None  # --wire: the reviews' latency on the wire beside wrk's
    work: Path = Path(".")


def wrk_pair(ng: Numagate, load: Load) -> tuple[dict[str, Any], dict[str, Any]]:
    """The review load (every pod different) and, beside it, a paced /healthz probe;
    their results and the worker's CPU per review (and with ``load.tcpdump``, the
    reviews' latency on the wire: benchmarks/wire.py)."""
    review = [load.wrk, f"-t{load.threads}", f"-c{load.connections}", f"-d{load.duration}s",
              "--timeout", "10s", "-s", str(bench.LUA), ng.url, "--", "/validate?timeout=10s",
              *map(str, load.bodies)]  # fmt: skip
    health = [load.wrk, "-t1", "-c1", f"-d{load.duration}s", "--timeout", "10s",
              "-s", str(HEALTHZ_LUA), ng.url]  # fmt: skip
    env = {**os.environ, "NUMAGATE_WRK_UNIQUE": "1", **load.extra_env}
    capture = None
    if load.tcpdump is not None:
        capture = wire.Capture(load.tcpdump, ng.port, load.work / "wire.pcap")
        capture.start()
    try:
        cpu_before = bench.cpu_seconds(ng.worker)
        procs = [
            subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=env)
            for cmd in (review, health)
        ]  # fmt: skip
        outs = [p.communicate(timeout=load.duration + 120)[0] for p in procs]
        spent = bench.cpu_seconds(ng.worker) - cpu_before
    finally:  # tcpdump stops whatever happened to wrk
        counts = capture.stop() if capture is not None else ""
    reviews, healthz = (bench.parse_wrk(out) for out in outs)
    if capture is not None:
        latency = wire.review_latency(capture.path, ng.port, load.duration, load.connections)
        reviews["wire"] = {**latency, "tcpdump": counts}
        capture.path.unlink()
    reviews["server_cpu_ms_per_review"] = (
        round(spent * 1000 / reviews["requests"], 3) if reviews["requests"] else None
    )
    return reviews, healthz
