"""Review latency on the wire: the loopback packets of the server's port captured with
tcpdump (the Debian package, as root) while wrk runs, and each exchange timed from the
client's first request packet to the server's last answer packet before the next request.

That is the server's side of a review, the wait in its socket included, without the
client's. Only packet headers are kept (TLS hides the rest); an exchange whose request is
under ``REVIEW_BYTES`` is /healthz's.

wrk's own percentiles are not raw: before it reports them, wrk 4 adds, for every sample
longer than twice the mean interval between a connection's requests, synthetic samples
one interval shorter each, down to that interval (``stats_correct`` in its stats.c: the
requests a stalled closed-loop client did not send). So one stall of D ms on every
connection weighs as much as D / interval samples each, and wrk's p99 reads the longest
stalls, not the 99th slowest answer. :func:`as_wrk` applies the same correction to the
wire's samples: it gives wrk's p99 back (docs/inventory.md, "The stalls behind wrk's
p99"), which is how the server's stalls were found to be the whole of the gap between
the two.
"""

from __future__ import annotations

import math
import os
import signal
import struct
import subprocess
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import server as bench

REVIEW_BYTES = 1000  # an AdmissionReview request is kilobytes; GET /healthz a few hundred
_LINK_HEADER = {1: 14, 113: 16, 0: 4}  # Ethernet (Linux lo), Linux cooked, BSD loopback


class WireError(RuntimeError):
    pass


def ensure_tcpdump() -> str:
    """tcpdump (installed from Debian if missing); capturing needs root."""
    if os.geteuid() != 0:
        raise WireError("--wire captures packets with tcpdump: run as root")
    try:
        return bench.ensure_tool("tcpdump")
    except bench.BenchError as exc:
        raise WireError(str(exc)) from exc


class Capture:
    """tcpdump on ``lo`` for one TCP port, from ``start()`` (returns once it listens) to
    ``stop()``; the file is read with :func:`exchanges`."""

    def __init__(self, tcpdump: str, port: int, path: Path) -> None:
        self.path = path
        cmd = [tcpdump, "-i", "lo", "-s", "96", "-B", "65536", "-U", "-w", str(path),
               f"tcp port {port}"]  # fmt: skip
        self._proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)

    def start(self) -> None:
        assert self._proc.stderr is not None
        line = self._proc.stderr.readline()  # "listening on lo, ..." once it captures
        if "listening" not in line:
            self._proc.kill()
            raise WireError(f"tcpdump did not start: {line.strip() or self._proc.wait()}")

    def stop(self) -> str:
        """Stop, and tcpdump's own count ("N packets dropped by kernel" must be 0)."""
        self._proc.send_signal(signal.SIGINT)
        _, err = self._proc.communicate(timeout=30)
        return err.strip()


def exchanges(path: Path, port: int) -> list[tuple[float, float, int]]:
    """(start, milliseconds, request bytes) per request/answer exchange to ``port``."""
    data = path.read_bytes()
    if len(data) < 24:
        return []
    nano = struct.unpack("<I", data[:4])[0] == 0xA1B23C4D
    skip = _LINK_HEADER.get(struct.unpack("<I", data[20:24])[0], 14)
    open_: dict[int, list[Any]] = {}  # client port -> [start, request bytes, last answer]
    out: list[tuple[float, float, int]] = []
    off = 24
    while off + 16 <= len(data):
        sec, frac, size, _ = struct.unpack("<IIII", data[off : off + 16])
        packet = data[off + 16 + skip : off + 16 + size]
        off += 16 + size
        if len(packet) < 20 or packet[0] >> 4 != 4:
            continue
        ip_len = (packet[0] & 15) * 4
        tcp = packet[ip_len:]
        src, dst = struct.unpack(">HH", tcp[:4])
        payload = struct.unpack(">H", packet[2:4])[0] - ip_len - (tcp[12] >> 4) * 4
        if payload <= 0:
            continue
        t = sec + frac / (1e9 if nano else 1e6)
        if dst == port:
            state = open_.get(src)
            if state is None or state[2] is not None:  # a new request on this connection
                if state is not None:
                    out.append((state[0], (state[2] - state[0]) * 1e3, state[1]))
                state = open_[src] = [t, 0, None]
            state[1] += payload
        elif src == port and dst in open_:
            open_[dst][2] = t
    out += [(s[0], (s[2] - s[0]) * 1e3, s[1]) for s in open_.values() if s[2] is not None]
    return out


def review_latency(path: Path, port: int, seconds: float, connections: int) -> dict[str, Any]:
    """p50/p99/max of the review exchanges (requests of ``REVIEW_BYTES`` or more), and the
    p99 as wrk counts it (:func:`as_wrk`, for a run of ``seconds`` over ``connections``)."""
    ms = sorted(m for _, m, size in exchanges(path, port) if size >= REVIEW_BYTES)
    if not ms:
        return {"exchanges": 0}

    def at(q: float) -> float:
        return round(ms[min(len(ms) - 1, int(q * len(ms)))], 2)

    return {"exchanges": len(ms), "p50_ms": at(0.5), "p99_ms": at(0.99), "max_ms": at(1.0),
            "p99_as_wrk_ms": as_wrk(ms, seconds, connections, 99.0)}  # fmt: skip


def as_wrk(ms: Sequence[float], seconds: float, connections: int, pct: float) -> float:
    """The ``pct`` percentile of ``ms`` after wrk 4's correction (stats.c ``stats_correct``
    and ``stats_percentile``, on whole microseconds as wrk records them): the interval is
    the run's length over the requests per connection; a sample n of at least twice the
    interval adds one sample at each n - k * interval above the interval."""
    hist = Counter(int(m * 1000) for m in ms)
    total = len(ms)
    per_connection = total // connections
    if not per_connection:
        return round(max(ms, default=0.0), 2)
    interval = int(seconds * 1e6) // per_connection
    for n in sorted(k for k in hist if k >= 2 * interval):
        weight, m = hist[n], n - interval
        while m > interval:
            hist[m] += weight
            total += weight
            m -= interval
    rank, seen = math.floor(pct / 100 * total + 1.0), 0  # C's round(x + 0.5), x >= 0
    for n in sorted(hist):
        seen += hist[n]
        if seen >= rank:
            return round(n / 1000, 2)
    return round(max(hist) / 1000, 2)
