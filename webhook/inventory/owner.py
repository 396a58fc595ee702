"""Starting and restarting the inventory process (webhook/inventory/feed.py): one per
replica, whatever ``--workers`` is. The serve process starts it before it forks the
workers (or the single worker starts it, with ``--workers 1``), and restarts it when it
exits; the workers connect to its socket (webhook/inventory/fed.py)."""

from __future__ import annotations

import contextlib
import multiprocessing
import shutil
import tempfile
import threading
import time
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from pathlib import Path

from webhook.inventory.feed import FeederSpec, feeder_main
from webhook.logs import get_logger

log = get_logger("inventory")

# A process that exits is started again after this long, doubling while it keeps failing
# (one that ran for RESTART_MAX seconds or more starts from RESTART_INITIAL again).
RESTART_INITIAL = 1.0
RESTART_MAX = 30.0


def socket_address() -> str:
    """A fresh path for the process's socket, in a directory only this user can enter."""
    return str(Path(tempfile.mkdtemp(prefix="numagate-inventory-")) / "inventory.sock")


class InventoryOwner:
    """The inventory process of this replica, kept running until :meth:`stop`."""

    def __init__(self, spec: FeederSpec) -> None:
        self.spec = spec
        self.restarts = 0
        self._proc: BaseProcess | None = None
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None

    @property
    def address(self) -> str:
        return self.spec.address

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def spawn(self) -> None:
        """Start the process (spawned, not forked: the caller's threads, event loop and
        sockets stay its own). Starts no thread here, so that the serve process may still
        fork its workers afterwards; :meth:`supervise` then watches it."""
        ctx = multiprocessing.get_context("spawn")
        proc = ctx.Process(target=feeder_main, args=(self.spec,), name="numagate-inventory")
        proc.daemon = True
        proc.start()
        self._proc = proc
        log.info("inventory process started", extra={"pid": proc.pid})

    def supervise(self) -> None:
        """Restart the process whenever it exits, from a thread, until :meth:`stop`."""
        self._watcher = threading.Thread(target=self._watch, name="inventory-owner", daemon=True)
        self._watcher.start()

    def start(self) -> None:
        self.spawn()
        self.supervise()

    def _watch(self) -> None:
        delay = RESTART_INITIAL
        while not self._stop.is_set():
            proc = self._proc
            assert proc is not None
            started = time.monotonic()
            while not wait([proc.sentinel], timeout=0.5):
                if self._stop.is_set():
                    return
            proc.join()
            if self._stop.is_set():
                return
            if time.monotonic() - started >= RESTART_MAX:
                delay = RESTART_INITIAL
            log.warning(
                "inventory process exited; restarting it",
                extra={"pid": proc.pid, "exitcode": proc.exitcode, "inSeconds": delay},
            )
            if self._stop.wait(delay):
                return
            delay = min(RESTART_MAX, delay * 2)
            self.restarts += 1
            self.spawn()

    def stop(self) -> None:
        self._stop.set()
        proc = self._proc
        if proc is not None and proc.is_alive():
            proc.terminate()
            proc.join(2.0)
            if proc.is_alive():
                proc.kill()
                proc.join(2.0)
        if self._watcher is not None:
            self._watcher.join(2.0)
        with contextlib.suppress(OSError):
            shutil.rmtree(Path(self.address).parent)
