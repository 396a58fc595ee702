"""The control plane's processes die with the process that started them: a pytest run
killed by a timeout must not leave etcd and kube-apiserver running (tests/e2e/controlplane.py
``Proc``)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tests.paths import ROOT

STARTER = textwrap.dedent(
    """
    import sys, threading, time
    from pathlib import Path
    from tests.e2e.controlplane import Proc

    log = Path(sys.argv[1])
    main = Proc("main", ["sleep", "300"], log)
    main.start()
    side: list[Proc] = []

    def from_thread() -> None:
        side.append(Proc("thread", ["sleep", "300"], log))
        side[0].start()

    t = threading.Thread(target=from_thread)
    t.start()
    t.join()  # the thread that forked it has ended: its child must live on
    time.sleep(0.5)
    print(main.popen.pid, side[0].popen.pid, side[0].alive(), flush=True)
    time.sleep(300)
    """
)


def _gone(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        # a zombie whose parent died is reaped by init; until then kill(0) succeeds
        stat = Path(f"/proc/{pid}/stat")
        if stat.exists() and stat.read_text().split(") ")[1].startswith("Z"):
            return True
        time.sleep(0.05)
    return False


def test_started_processes_die_when_their_starter_is_killed(tmp_path: Path) -> None:
    starter = subprocess.Popen(
        [sys.executable, "-c", STARTER, str(tmp_path / "log")],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert starter.stdout is not None
    main_pid, thread_pid, thread_alive = starter.stdout.readline().split()
    try:
        assert thread_alive == "True", "a process started from a thread died with the thread"
        starter.send_signal(signal.SIGKILL)  # as pytest-timeout's or CI's kill would
        starter.wait()
        assert _gone(int(main_pid)), "the child outlived the killed process that started it"
    finally:
        for pid in (main_pid, thread_pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
