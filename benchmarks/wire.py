"""Review latency on the wire: the loopback packets of the server's port captured with
tcpdump (the Debian package, as root) while wrk runs, and each exchange timed from the
client's first request packet to the server's last answer packet before the next request.

That is the server's side of a review, the wait in its socket included, without the
client's. At 100,000 nodes under churn wrk's p99 and this one part ways for some servers
and not for others (docs/inventory.md, "The 100,000-node p99, measured on the server's
side"), so churn.py prints both. Only packet headers are kept (TLS hides the rest); an
exchange whose request is under ``REVIEW_BYTES`` is /healthz's.
"""

from __future__ import annotations

import os
import signal
import struct
import subprocess
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


def review_latency(path: Path, port: int) -> dict[str, Any]:
    """p50/p99/max of the review exchanges (requests of ``REVIEW_BYTES`` or more)."""
    ms = sorted(m for _, m, size in exchanges(path, port) if size >= REVIEW_BYTES)
    if not ms:
        return {"exchanges": 0}

    def at(q: float) -> float:
        return round(ms[min(len(ms) - 1, int(q * len(ms)))], 2)

    return {"exchanges": len(ms), "p50_ms": at(0.5), "p99_ms": at(0.99), "max_ms": at(1.0)}
