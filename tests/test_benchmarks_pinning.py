"""benchmarks/churn_parts.pin_threads: every thread of a process, the ones it has and the
ones it starts afterwards, runs on the CPUs given (churn.py --pin)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.paths import ROOT

sys.path[:0] = [str(ROOT / "benchmarks")]
import churn_parts  # noqa: E402

CHILD = """
import sys, threading, time
threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
print("ready", flush=True)
sys.stdin.readline()  # pinned by now: start one more thread
threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
print("more", flush=True)
time.sleep(30)
"""


def _affinities(pid: int) -> list[set[int]]:
    return [os.sched_getaffinity(int(tid)) for tid in os.listdir(f"/proc/{pid}/task")]


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="pinning needs two CPUs")
def test_every_thread_of_the_process_is_pinned_and_new_ones_inherit_it() -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "ready"
        before = _affinities(child.pid)
        assert len(before) >= 2 and all(len(a) > 1 for a in before)
        churn_parts.pin_threads(child.pid, {1})
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "more"
        time.sleep(0.05)
        after = _affinities(child.pid)
        assert len(after) == len(before) + 1
        assert all(a == {1} for a in after)
    finally:
        child.kill()
        child.wait()
