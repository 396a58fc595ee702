"""benchmarks/wire.py: exchanges timed from a capture file, from the client's first
request packet to the server's last answer packet; /healthz told from reviews by size."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT

sys.path[:0] = [str(ROOT / "benchmarks")]
import wire  # noqa: E402

SERVER = 8443


def _packet(t: float, src: int, dst: int, payload: int) -> bytes:
    """One captured frame: Ethernet, IPv4 and TCP headers; the payload counted, not kept
    (as tcpdump -s 96 keeps it)."""
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + 20 + payload, 0, 0, 64, 6, 0,
                     bytes([127, 0, 0, 1]), bytes([127, 0, 0, 1]))  # fmt: skip
    tcp = struct.pack(">HHIIBBHHH", src, dst, 0, 0, 5 << 4, 0x18, 65535, 0, 0)
    frame = bytes(14) + ip + tcp
    sec, usec = int(t), round((t - int(t)) * 1e6)
    return struct.pack("<IIII", sec, usec, len(frame), len(frame) + payload) + frame


def _capture(path: Path, packets: list[tuple[float, int, int, int]]) -> Path:
    header = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 96, 1)
    path.write_bytes(header + b"".join(_packet(*p) for p in packets))
    return path


def test_an_exchange_runs_from_the_first_request_packet_to_the_last_answer_packet(
    tmp_path: Path,
) -> None:
    review, health = 50001, 50002
    path = _capture(tmp_path / "c.pcap", [
        (100.000, review, SERVER, 1500),  # a review in two segments
        (100.001, review, SERVER, 600),
        (100.002, SERVER, review, 0),  # a bare ACK: not an answer
        (100.005, health, SERVER, 120),
        (100.006, SERVER, health, 90),
        (100.010, SERVER, review, 400),  # the answer in two segments
        (100.012, SERVER, review, 30),
        (100.020, review, SERVER, 1200),  # the next review on the same connection
        (100.027, SERVER, review, 400),
    ])  # fmt: skip
    got = sorted((round(t, 3), round(ms, 3), size) for t, ms, size in wire.exchanges(path, SERVER))
    assert got == [(100.0, 12.0, 2100), (100.005, 1.0, 120), (100.02, 7.0, 1200)]
    latency = wire.review_latency(path, SERVER, 0.03, 1)
    assert latency == {
        "exchanges": 2, "p50_ms": 12.0, "p99_ms": 12.0, "max_ms": 12.0, "p99_as_wrk_ms": 12.0
    }  # fmt: skip


def test_a_request_without_an_answer_yet_is_not_an_exchange(tmp_path: Path) -> None:
    path = _capture(tmp_path / "c.pcap", [(1.0, 50001, SERVER, 1500)])
    assert wire.exchanges(path, SERVER) == []
    assert wire.review_latency(path, SERVER, 1.0, 1) == {"exchanges": 0}


def test_as_wrk_adds_the_samples_a_stalled_closed_loop_client_did_not_send() -> None:
    # One connection, 1 s, 100 answers: wrk's interval is 10 ms. Each 50 ms answer adds
    # one sample at 40, 30 and 20 ms (above the interval, one interval apart): 106 in all.
    ms = [5.0] * 98 + [50.0, 50.0]
    assert wire.as_wrk(ms, 1.0, 1, 90.0) == 5.0
    assert wire.as_wrk(ms, 1.0, 1, 95.0) == 30.0  # rank 101: after 98 x 5 and 2 x 20 ms
    assert wire.as_wrk(ms, 1.0, 1, 99.0) == 50.0
    # The raw samples' 95th percentile is 5 ms: the correction is what moved it.
    assert sorted(ms)[94] == 5.0
    # Under twice the interval nothing is added, as in wrk (n starts at 2 x interval).
    assert wire.as_wrk([5.0] * 98 + [19.9, 19.9], 1.0, 1, 99.0) == 19.9
    # Two connections halve the requests per connection: the interval doubles to 20 ms,
    # so a 50 ms answer adds 30 ms only.
    assert wire.as_wrk(ms, 1.0, 2, 99.0) == 50.0
    assert wire.as_wrk(ms, 1.0, 2, 98.0) == 30.0


def test_ensure_tcpdump_refuses_without_root_with_the_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(wire.os, "geteuid", lambda: 1000)
    with pytest.raises(wire.WireError, match="run as root"):
        wire.ensure_tcpdump()
