"""benchmarks/churn_parts.resident_once_mib: a replica's resident memory with each physical
page counted once, so that pages forked workers share are not counted once per process."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

from tests.paths import ROOT

sys.path[:0] = [str(ROOT / "benchmarks")]
import churn_parts  # noqa: E402

# 64 MiB written by the parent before it forks; the child only reads it.
CHILD = """
import os, sys, time
shared = bytearray(os.urandom(1 << 20) * 64)
if os.fork() == 0:
    sum(shared[::4096])
    time.sleep(30)
    os._exit(0)
print("ready", flush=True)
sys.stdin.readline()
"""


def _rss_mib(pid: int) -> float:
    kib = churn_parts.bench.rss_kib(pid)
    assert kib is not None
    return kib / 1024


def test_pages_a_forked_child_shares_are_counted_once() -> None:
    """As root; without root the frame numbers read as 0 and the figure is None."""
    forked: list[int] = []
    parent = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert parent.stdout is not None and parent.stdin is not None
        assert parent.stdout.readline().strip() == "ready"
        [child] = churn_parts.children(parent.pid)
        forked.append(child)
        summed = _rss_mib(parent.pid) + _rss_mib(child)
        once = churn_parts.resident_once_mib(parent.pid)
        if os.geteuid() != 0:
            assert once is None
            return
        # The 64 MiB buffer is resident in both and counted once: the parent's RSS bounds
        # the union from below, and the sum overcounts it by about the buffer.
        assert _rss_mib(parent.pid) <= once + 1
        assert summed - once > 50, (summed, once)
    finally:
        assert parent.stdin is not None
        parent.stdin.close()
        parent.kill()
        parent.wait()
        for pid in forked:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
