"""The request path counted on the wire: CPU instructions per review of the whole server
process (TLS, aiohttp, the handler), numagate against the bare aiohttp server, under
valgrind's callgrind, which does not depend on what else the machine runs (issue 27).

    .venv/bin/python benchmarks/wire_count.py [--tree NAME=DIR ...] [--stream replicas]
        [--requests 1000] [--warmup 200] [--nodes 10000] [--workers 2] [--no-bare] [--top 0]

Each server (every ``--tree``'s ``numagate serve``, then benchmarks/bare_server.py and
its ``--valid`` form from this checkout) starts under callgrind with instrumentation off,
``--workers N`` as in production (prometheus-client's multiprocess mode, logging at
info). A client in this process (not counted) sends ``--warmup`` reviews over one TLS
keep-alive connection, then instrumentation is switched on in every worker
(``callgrind_control -i on``), ``--requests`` reviews are sent and the counts dumped.
One worker answers them all; the others only run what a worker runs on its own (timers:
numagate's metrics refresh every 2 s is ~1.8 M instructions). Valgrind slows the workers
some 50 times, so that timed work would weigh 50 times more per review than at full
speed: ``per_review`` takes the quietest worker's count off every worker
(``per_review_raw`` keeps it; ``periodic_per_second`` is its rate). Efficiency: the bare
server's per_review over a tree's (1.0: as cheap as read-the-body-and-answer).

Streams: ``replicas`` (gen.py's twelve realistic pods, each request its own uid, as
benchmarks/wrk/review.lua sends them: the decision cache's raw layer answers them),
``unique`` (every request a different pod), ``apiserver-replicas`` (a real apiserver's
replica bodies, each request its own uid, name and token volume).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

import gen  # noqa: E402
import server as bench  # noqa: E402

STREAMS = ("replicas", "unique", "apiserver-replicas")
READY_TIMEOUT = 1800.0  # the inventory build runs under valgrind too (uninstrumented)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tree", action="append", default=[], metavar="NAME=DIR",
                   help="a checkout with its .venv (repeat); default: this one as 'this'")  # fmt: skip
    p.add_argument("--stream", choices=STREAMS, default="replicas")
    p.add_argument("--webhook", choices=("mutate", "validate"), default="mutate")
    p.add_argument("--requests", type=int, default=1000, help="reviews counted per server")
    p.add_argument("--warmup", type=int, default=200, help="reviews sent before counting")
    p.add_argument("--nodes", type=int, default=10_000)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--no-bare", action="store_true", help="count the trees only")
    p.add_argument("--top", type=int, default=0, help="also print the N costliest functions")
    p.add_argument("--keep", type=Path, help="keep the callgrind files in this directory")
    return p.parse_args(argv)


def bodies_for(stream: str, webhook: str) -> Callable[[int], bytes]:
    """The ``k``-th request body of the stream."""
    if stream == "apiserver-replicas":
        templates = gen.apiserver_templates(webhook, "replica")
        return lambda k: gen.vary_template(templates[k % len(templates)], k)
    bodies = gen.review_bodies(gen.realistic_pods(), prefix="r")
    unique = stream == "unique"
    return lambda k: gen.vary(bodies[k % len(bodies)], k, unique=unique)


def _control(option: str, pids: Sequence[int]) -> None:
    for pid in pids:
        done = subprocess.run(
            ["callgrind_control", *option.split(), str(pid)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise bench.BenchError(f"callgrind_control {option} {pid}: {done.stderr.strip()}")


class _Client:
    """One TLS keep-alive connection that writes each request (headers and body) with one
    write: http.client writes a body over 2 KiB apart from its headers, and whether the
    server wakes once or twice for a request then depends on the machine's load, which
    the count must not (a few thousand instructions per review)."""

    def __init__(self, port: int, ca: Path) -> None:
        ctx = bench.client_context(ca)
        raw = socket.create_connection(("127.0.0.1", port), timeout=600)
        self.sock = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
        self.port = port

    def post(self, path: str, body: bytes, *, echo: bool) -> None:
        head = (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        self.sock.sendall(head.encode() + body)
        resp = http.client.HTTPResponse(self.sock)  # type: ignore[arg-type]
        resp.begin()
        raw = resp.read()
        if resp.status != 200:
            raise bench.BenchError(f"HTTP {resp.status}: {raw[:300]!r}")
        if echo and json.loads(raw)["response"]["uid"] != json.loads(body)["request"]["uid"]:
            raise bench.BenchError("the answer does not echo the request's uid")

    def close(self) -> None:
        self.sock.close()


def _dumped(out_dir: Path, pid: int) -> int:
    """Instructions of one worker's dump (the counted requests)."""
    path = out_dir / f"cg.{pid}.out.1"
    if not path.exists():
        raise bench.BenchError(f"worker {pid} left no dump in {out_dir}")
    for line in path.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise bench.BenchError(f"{path}: no totals")


def figures(counts: dict[int, int], requests: int, window: float) -> dict[str, Any]:
    """Per review, from each worker's instructions over the counted requests. One
    keep-alive connection: one worker answers every request, the others only do what a
    worker does on its own (timers), which is taken off each worker."""
    quiet = min(counts.values()) if len(counts) > 1 else 0
    total = sum(counts.values())
    return {
        "per_review": round((total - len(counts) * quiet) / requests),
        "per_review_raw": round(total / requests),
        "periodic_per_second": round(quiet / window),
        "window_s": round(window, 2),
    }


def count_server(
    name: str,
    cmd: list[str],
    pattern: str,
    args: argparse.Namespace,
    ca: Path,
    out_dir: Path,
    *,
    echo: bool = True,
) -> dict[str, Any]:
    """Start ``cmd`` under callgrind, warm it up, count ``args.requests`` reviews (each
    answered 200; ``echo``: with the request's uid)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    port = bench.free_port()
    log = out_dir / "server.log"
    valgrind = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--trace-children=yes",
                f"--callgrind-out-file={out_dir}/cg.%p.out"]  # fmt: skip
    env = dict(os.environ, PYTHONHASHSEED="0")
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [*valgrind, *cmd, "--port", str(port)], stdout=sink, stderr=subprocess.STDOUT, env=env
        )
    server = bench.Server(name, proc, port, log)
    try:
        bench.wait_ready(server, ca, args.workers, pattern, READY_TIMEOUT)
        body = bodies_for(args.stream, args.webhook)
        path = f"/{args.webhook}?timeout=10s"
        conn = _Client(port, ca)
        for k in range(args.warmup):
            conn.post(path, body(k), echo=echo)
        varied = [body(args.warmup + k) for k in range(args.requests)]
        _control("-i on", server.workers)
        started = time.monotonic()
        for data in varied:
            conn.post(path, data, echo=echo)
        window = time.monotonic() - started
        _control("-d", server.workers)
        _control("-i off", server.workers)
        conn.close()
    finally:
        server.stop()
    counts = {pid: _dumped(out_dir, pid) for pid in server.workers}
    result = figures(counts, args.requests, window)
    if args.top:
        busiest = max(counts, key=counts.__getitem__)
        result["top"] = _top(out_dir / f"cg.{busiest}.out.1", args.top, args.requests)
    return result


def _top(path: Path, n: int, requests: int) -> list[tuple[str, int]]:
    import server_count

    return server_count.top(path, n, requests)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    trees = [t.split("=", 1) for t in args.tree] or [["this", str(HERE.parent)]]
    with tempfile.TemporaryDirectory(prefix="wire-count-") as tmp:
        work = args.keep or Path(tmp)
        ca = bench.ensure_certs(work / "certs")
        inventory = gen.write_inventory(work / f"inventory-{args.nodes}.yaml", args.nodes)
        result: dict[str, Any] = {"stream": args.stream, "webhook": args.webhook,
                                  "requests": args.requests, "nodes": args.nodes}  # fmt: skip
        servers = []
        for name, tree in trees:
            exe = str(Path(tree) / ".venv" / "bin" / "numagate")
            cmd = [exe, "serve", "--inventory", str(inventory), "--workers", str(args.workers),
                   "--cert-dir", str(work / "certs"), "--log-level", "info"]  # fmt: skip
            servers.append((name, cmd, r"numagate: worker (\d+) serving", True))
        if not args.no_bare:
            for valid in (False, True):
                cmd = [sys.executable, str(HERE / "bare_server.py"), "--cert-dir",
                       str(work / "certs"), "--workers", str(args.workers),
                       *(["--valid"] if valid else [])]  # fmt: skip
                label = bench.BARE_VALID if valid else bench.BARE
                servers.append((label, cmd, r"bare: worker (\d+) serving", valid))
        for k, (name, cmd, pattern, echo) in enumerate(servers):
            print(f"counting {name}...", file=sys.stderr)
            out = work / f"server-{k}"
            result[name] = count_server(name, cmd, pattern, args, ca, out, echo=echo)
    bare = result.get(bench.BARE)
    for name, _ in trees:
        if bare is not None:
            result[name]["efficiency"] = round(bare["per_review"] / result[name]["per_review"], 3)
        valid = result.get(bench.BARE_VALID)
        if valid is not None:
            eff = round(valid["per_review"] / result[name]["per_review"], 3)
            result[name]["efficiency_valid"] = eff
    print(json.dumps(result))
    for name, entry in result.items():
        if isinstance(entry, dict):
            extra = f", efficiency {entry['efficiency']}" if "efficiency" in entry else ""
            print(
                f"{name}: {entry['per_review']:,} instructions per review{extra}", file=sys.stderr
            )
            for fn, n in entry.get("top", []):
                print(f"  {n:>9,}  {fn}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
