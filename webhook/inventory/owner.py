"""The inventory process (its loop: webhook/inventory/feed.py): its spec, its main, and
its start and restarts; one per replica, whatever ``--workers`` is. The serve process
starts it before it forks the workers (or the single worker starts it, with ``--workers
1``), and restarts it when it exits; the workers connect to its socket
(webhook/inventory/fed.py)."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection, Listener, wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from webhook.inventory.file_build import die_with_parent
from webhook.logs import get_logger

if TYPE_CHECKING:
    from webhook.inventory.feed import Fanout, Feed
    from webhook.inventory.live import LiveSource

log = get_logger("inventory")

# A process that exits is started again after this long, doubling while it keeps failing
# (one that ran for RESTART_MAX seconds or more starts from RESTART_INITIAL again).
RESTART_INITIAL = 1.0
RESTART_MAX = 30.0
# The inventory process runs at a lower CPU priority than the workers: when they compete
# for a core (a CPU limit, a busy node), reviews go first and the inventory lags a little
# (its events are ~0.2 of a core at 100,000 nodes; the workers' share is what p99 needs).
NICENESS = 10
_GO = b"go"


@dataclass(frozen=True)
class FeederSpec:
    """What the inventory process needs (picklable: it is spawned; defined here, where
    importing it costs nothing, so that serve spawns the process before its own imports)."""

    address: str  # the Unix socket the workers connect to
    kubeconfig: str | None = None
    context: str | None = None
    in_cluster: bool = False
    include_pods: bool | None = False  # None: as the configuration file ``config`` says
    log_level: str = "info"
    window: float = 0.05
    live: Mapping[str, Any] = field(default_factory=dict)  # LiveSource options (tests)
    config: str | None = None


class ClusterOptions(Protocol):
    """What :func:`owner_for` reads of serve's arguments or options."""

    kubeconfig: str | None
    context: str | None
    in_cluster: bool
    config: str | None
    log_level: str


def socket_address() -> str:
    """A fresh path for the process's socket, in a directory only this user can enter."""
    return str(Path(tempfile.mkdtemp(prefix="numagate-inventory-")) / "inventory.sock")


def _process_main(spec: FeederSpec, gate: Connection | None) -> None:
    """The spawned process's entry. The configuration file is read here, not in a parent
    that has not loaded it. ``gate``: wait, once imported, until the parent has checked its
    arguments; a parent that refused them says why itself, so this process goes quietly."""
    from webhook.config import ConfigHolder

    # The watch's modules (the kubernetes client, the parsers) imported before the gate:
    # beside serve's own start (docs/inventory.md, the inventory process's own parse).
    from webhook.inventory import feed, kube, live  # noqa: F401

    if gate is not None and not _released(gate):
        return
    if spec.include_pods is None:
        spec = replace(spec, include_pods=ConfigHolder(spec.config).current.inventory.watch_pods)
    feeder_main(spec)


def _released(gate: Connection) -> bool:
    try:
        return gate.recv_bytes() == _GO
    except (EOFError, OSError):  # the parent closed it (stopping us), or is gone
        return False
    finally:
        gate.close()


class InventoryOwner:
    """The inventory process of this replica, kept running until :meth:`stop`."""

    def __init__(self, spec: FeederSpec) -> None:
        self.spec = spec
        self.restarts = 0
        self._proc: BaseProcess | None = None
        self._gate: Connection | None = None  # the parent's end while the process is held
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None

    @property
    def address(self) -> str:
        return self.spec.address

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def spawn(self, *, held: bool = False) -> None:
        """Start the process (spawned, not forked: the caller's threads, event loop and
        sockets stay its own). Starts no thread here, so that the serve process may still
        fork its workers afterwards; :meth:`supervise` then watches it. ``held``: it
        imports, then waits for :meth:`release` (or goes quietly at :meth:`stop`)."""
        ctx = multiprocessing.get_context("spawn")
        theirs = None
        if held:
            theirs, self._gate = ctx.Pipe(duplex=False)
        proc = ctx.Process(
            target=_process_main,
            args=(self.spec, theirs),
            name="numagate-inventory",
        )
        proc.daemon = True
        proc.start()
        if theirs is not None:
            theirs.close()
        self._proc = proc
        log.info("inventory process started", extra={"pid": proc.pid})

    def release(self) -> None:
        """Let a held process go on: watch the cluster."""
        gate, self._gate = self._gate, None
        if gate is not None:
            with contextlib.suppress(OSError):  # it died: supervise() restarts it
                gate.send_bytes(_GO)
            gate.close()

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
        if self._gate is not None:  # held: it sees the end and returns
            self._gate.close()
            self._gate = None
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


def owner_for(opts: ClusterOptions, include_pods: bool | None = None) -> InventoryOwner | None:
    """The replica's inventory process for the cluster ``opts`` names (serve's arguments or
    options), not started yet; None without a cluster to watch. ``include_pods`` None: as
    ``opts.config`` says (read in the process)."""
    if not (opts.kubeconfig or opts.in_cluster):
        return None
    spec = FeederSpec(
        address=socket_address(),
        kubeconfig=opts.kubeconfig,
        context=opts.context,
        in_cluster=opts.in_cluster,
        include_pods=include_pods,
        log_level=opts.log_level,
        config=opts.config,
    )
    return InventoryOwner(spec)


def listen(address: str) -> Listener:
    """The process's socket (a stale one, left by a process that was killed, replaced)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(address)
    return Listener(address, family="AF_UNIX")


def accept_forever(listener: Listener, fanout: Fanout) -> None:
    """The accepting thread: every worker that connects joins ``fanout``."""
    while True:
        try:
            fanout.join(listener.accept())
        except OSError:
            return  # the listener was closed


def watch_cluster(spec: FeederSpec, listener: Listener) -> tuple[Feed, LiveSource]:
    """The watches started, for the workers that connect to ``listener``; the caller runs
    the Feed's loop (``feed_cluster``; tests run it in a thread)."""
    from webhook.inventory.feed import Fanout, Feed
    from webhook.inventory.kube import build_api_client, describe
    from webhook.inventory.live import LiveSource

    client = build_api_client(
        kubeconfig=spec.kubeconfig,
        context=spec.context,
        in_cluster=spec.in_cluster,
        use_default=False,
    )
    fanout = Fanout()
    threading.Thread(
        target=accept_forever, args=(listener, fanout), name="inventory-accept", daemon=True
    ).start()
    feed = Feed(fanout, window=spec.window)
    live = LiveSource(client, feed, include_pods=spec.include_pods, **spec.live)
    feed.synced = lambda: live.synced
    feed.last_sync = lambda: live.last_sync
    feed.sync = live.sync
    live.start()
    log.info("watching the cluster", extra={"host": describe(client)})
    return feed, live


def feed_cluster(spec: FeederSpec, listener: Listener, stop: threading.Event | None = None) -> None:
    """Watch the cluster and serve the workers that connect to ``listener`` until ``stop``
    (the process: until it is killed)."""
    feed, live = watch_cluster(spec, listener)
    try:
        feed.run(stop)
    finally:
        live.stop(timeout=1.0)
        listener.close()


def feeder_main(spec: FeederSpec) -> None:
    """The inventory process: watch, merge, send, until its parent (the serve process or
    the single worker) is gone (the kernel's parent-death signal) or stops it."""
    from webhook.heap import limit_malloc_arenas, survivors_frozen
    from webhook.logs import setup_logging

    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C: the parent stops us
    with contextlib.suppress(OSError):
        os.nice(NICENESS)
    limit_malloc_arenas()  # before the watch threads start, as in the worker
    survivors_frozen()
    setup_logging(spec.log_level)
    try:
        feed_cluster(spec, listen(spec.address))
    except Exception:  # the parent restarts us; the log line says why
        log.exception("inventory process failed")
        raise SystemExit(1) from None
