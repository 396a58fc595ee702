"""TLS serving for ``numagate serve``: one process, or ``--workers N`` processes that share
the port with SO_REUSEPORT (the kernel spreads new connections over the listeners).

Shutdown on SIGTERM follows the order a rolling update needs. The pod's deletion, not
readiness, takes its endpoint out of the Service (at the same time as the SIGTERM), and
kube-proxy and the apiserver's pooled keep-alive connections follow only after a while. So
for ``shutdown.delaySeconds`` the listener stays open, every answer carries "Connection:
close" (pooled connections move to other replicas) and ``/readyz`` answers 503 (marks the
terminating endpoint not serving); then the listener closes, requests in flight finish (up
to ``shutdown.gracePeriodSeconds``), and the process exits (docs/deploy.md, "Shutdown
timing"). Certificates are reloaded in place by ``certs.watcher`` (no
listener restart).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import multiprocessing
import os
import shutil
import signal
import socket
import ssl
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web

from certs.watcher import CertWatcher, build_server_context
from webhook.app import Health, make_app
from webhook.config import ConfigHolder, Shutdown
from webhook.dra import state as dra_sources
from webhook.heap import limit_malloc_arenas
from webhook.inventory.start import start_sources
from webhook.inventory.state import InventoryState
from webhook.logs import get_logger, setup_logging
from webhook.metrics import MULTIPROC_ENV, WebhookMetrics
from webhook.review.pipeline import Runtime

if TYPE_CHECKING:
    from webhook.inventory.owner import InventoryOwner

log = get_logger("server")


@dataclass(frozen=True)
class ServeOptions:
    """Everything a worker needs (picklable: a worker is spawned when it cannot be forked)."""

    host: str
    port: int
    cert: str
    key: str
    client_ca: str | None = None
    inventory: str | None = None
    kubeconfig: str | None = None
    context: str | None = None
    in_cluster: bool = False
    config: str | None = None
    log_level: str = "info"
    # The replica's inventory process's socket, when the serve process started it
    # (--workers N; webhook/inventory/owner.py); None: the worker starts it itself.
    inventory_address: str | None = None


async def _config_loop(holder: ConfigHolder, state: InventoryState) -> None:
    while True:
        await asyncio.sleep(holder.current.reload_interval_seconds)
        result = await asyncio.to_thread(holder.check)
        if result is not None and state.metrics is not None:
            state.metrics.config_reloads.inc(result="success" if result else "failure")


def _wire_cert_metrics(metrics: WebhookMetrics, watcher: CertWatcher) -> None:
    metrics.cert_expiry.set_function(lambda: watcher.not_after.timestamp())
    metrics.cert_reads.set_function(lambda: float(watcher.reloads))
    metrics.cert_read_errors.set_function(lambda: float(watcher.errors))


# With several workers, each copies its function-backed values (certificate reloads,
# inventory age) into the shared files this often, so a scrape answered by another
# worker sees them at most this old.
METRICS_REFRESH_SECONDS = 2.0


async def _refresh_metrics(metrics: WebhookMetrics) -> None:
    while True:
        metrics.refresh()
        await asyncio.sleep(METRICS_REFRESH_SECONDS)


def _install_signal_handlers(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)


def _tls(
    opts: ServeOptions, holder: ConfigHolder, metrics: WebhookMetrics
) -> tuple[ssl.SSLContext, CertWatcher]:
    """The server's TLS context and the watcher that reloads its certificate in place."""
    ctx = build_server_context(
        Path(opts.cert), Path(opts.key), client_ca=Path(opts.client_ca) if opts.client_ca else None
    )
    watcher = CertWatcher(
        Path(opts.cert),
        Path(opts.key),
        ctx,
        interval=holder.current.certificates.reload_interval_seconds,
    )
    _wire_cert_metrics(metrics, watcher)
    return ctx, watcher


async def _listen(
    runner: web.AppRunner,
    opts: ServeOptions,
    ctx: ssl.SSLContext,
    watcher: CertWatcher,
    health: Health,
    on_ready: Callable[[int], None] | None,
) -> web.TCPSite:
    """Open the listener, start the certificate watcher, report the port: ready."""
    site = web.TCPSite(runner, opts.host, opts.port, ssl_context=ctx, reuse_port=True)
    await site.start()
    await watcher.start()
    health.serving = True
    log.info("serving", extra={"url": f"https://{opts.host}:{site.port}", "pid": os.getpid()})
    # One write(2) per line: workers share stdout, and a pipe write below PIPE_BUF
    # is atomic, so their lines never interleave.
    sys.stdout.flush()
    os.write(
        1, f"numagate: worker {os.getpid()} serving https://{opts.host}:{site.port}\n".encode()
    )
    if on_ready is not None:
        on_ready(site.port)
    return site


async def _shut_down(
    site: web.TCPSite, health: Health, holder: ConfigHolder, shutdown: Shutdown
) -> None:
    """Readiness false and "Connection: close" for the delay, then close the listener and
    let the requests in flight finish (the module docstring's order)."""
    health.shutting_down = True
    log.info("shutting down: readiness false", extra={"delaySeconds": shutdown.delay_seconds})
    await asyncio.sleep(holder.current.shutdown.delay_seconds)
    await site.stop()  # no new connections from here on
    await _drain(health, shutdown.grace_period_seconds)


async def serve_worker(
    opts: ServeOptions,
    *,
    stop: asyncio.Event | None = None,
    on_ready: Callable[[int], None] | None = None,
    preloaded: bytes | None = None,
) -> None:
    """Serve until ``stop`` is set (or SIGTERM/SIGINT), then shut down gracefully.
    ``on_ready`` receives the bound port once TLS is being served; ``preloaded`` is the
    static inventory built once by the parent (see :func:`run_workers`)."""
    limit_malloc_arenas()  # before the watch and evaluation threads start
    holder = ConfigHolder(opts.config)
    metrics = WebhookMetrics()
    state = InventoryState(metrics=metrics)
    dra = dra_sources.DraState()
    runtime = Runtime(config=lambda: holder.current, inventory=state, metrics=metrics, dra=dra)
    health = Health()
    ctx, watcher = _tls(opts, holder, metrics)
    if stop is None:
        stop = asyncio.Event()
        _install_signal_handlers(stop)
    sources = start_sources(opts, state, holder, preloaded=preloaded, dra=dra)
    sources.tasks.append(asyncio.get_running_loop().create_task(_config_loop(holder, state)))
    if metrics.multiprocess:
        sources.tasks.append(asyncio.get_running_loop().create_task(_refresh_metrics(metrics)))
    preloaded = None  # the pickled bytes are not needed any more
    shutdown = holder.current.shutdown
    runner = web.AppRunner(
        make_app(runtime, health=health),
        handle_signals=False,
        access_log=None,
        shutdown_timeout=shutdown.grace_period_seconds,
    )
    await runner.setup()
    try:
        site = await _listen(runner, opts, ctx, watcher, health, on_ready)
        await stop.wait()
        await _shut_down(site, health, holder, shutdown)
    finally:
        health.serving = False
        await runner.cleanup()  # stops listening, then waits for requests in flight
        await watcher.stop()
        for task in sources.tasks:
            task.cancel()
        await asyncio.gather(*sources.tasks, return_exceptions=True)
        sources.stop()
    log.info("stopped", extra={"pid": os.getpid()})


async def _drain(health: Health, grace: float) -> None:
    """Wait until no review request is in flight (body still arriving included), at most
    ``grace`` seconds; keep-alive connections stay open meanwhile and get "Connection:
    close" on their next response."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace
    while health.in_flight and loop.time() < deadline:
        await asyncio.sleep(0.01)
    if health.in_flight:
        log.warning(
            "grace period over with requests in flight", extra={"inFlight": health.in_flight}
        )


def settle_heap() -> None:
    """Before serving: collect what start-up left behind, then move every object alive now
    (the imported modules, mostly) out of the cyclic collector's reach (``gc.freeze``).
    They live as long as the process, yet each full collection walked them all: the
    first one in a worker came at its first reviews and took ~100 ms of CPU (~0.5 s of
    wall time on a busy machine) at 1,000 nodes, nearly all of it these objects
    (docs/benchmarks.md, "numagate's tail as the apiserver measures it"). Called once, in the
    process that forks the workers (they inherit the frozen heap, and a collection no
    longer writes to the pages they share with it), or in the single worker. What is
    allocated later (the inventory, the requests' objects) is collected as before."""
    gc.collect()
    gc.freeze()


def _worker_main(opts: ServeOptions, preloaded: bytes | None = None) -> None:
    # A forked worker has prometheus-client as the parent imported it, before the metrics
    # directory was set: its value class is chosen again (the multiprocess files).
    from prometheus_client import values

    values.ValueClass = values.get_value_class()
    setup_logging(opts.log_level)
    # The parent forwards SIGINT/SIGTERM; a terminal's Ctrl-C reaches us too, handled the same.
    try:
        asyncio.run(serve_worker(opts, preloaded=preloaded))
    except Exception as exc:
        log.exception("worker failed")
        print(f"numagate serve: worker failed: {exc}", file=sys.stderr, flush=True)
        sys.exit(1)


def reserve_port(host: str, port: int) -> socket.socket:
    """Bind (not listen) with SO_REUSEPORT to fix the port number before the workers
    bind it too; a bound socket that does not listen receives no connections."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    return sock


def run_workers(
    opts: ServeOptions,
    workers: int,
    *,
    preloaded: bytes | None = None,
    owner: InventoryOwner | None = None,
) -> int:
    """Start ``workers`` processes on ``opts.port``, forward SIGTERM/SIGINT, wait for them.
    Their metrics go to a private directory (prometheus-client's multiprocess mode: any
    worker's /metrics shows them all), removed when the last worker has exited.

    ``preloaded``: a large static inventory, built once for all of them in a helper
    process (``serve``: webhook.inventory.file_build), as the pickled FileBuild. A
    worker that parsed the file itself would pay the parse once per worker and keep its
    fragmented heap; unpickling the built view is far cheaper and leaves only the view
    (figures: docs/benchmarks.md, R6).

    ``owner``: the inventory process ``serve`` spawned already (``opts.inventory_address``
    is its socket); else one is spawned here for a watched cluster. Supervised once the
    workers are forked."""
    metrics_dir = tempfile.mkdtemp(prefix="numagate-metrics-")
    previous = os.environ.get(MULTIPROC_ENV)
    # Read by prometheus-client in each worker (see _worker_main): set before they start.
    os.environ[MULTIPROC_ENV] = metrics_dir
    try:
        # Forked, not spawned: a spawned worker imports numagate again (1.2 s of CPU each;
        # 2 workers served after 3.1-3.6 s spawned, 1.2-1.9 s forked: docs/benchmarks.md).
        # Only from a parent with no other thread, where forking is safe.
        ctx = multiprocessing.get_context("fork" if threading.active_count() == 1 else "spawn")
        if owner is None:
            owner = _start_owner(opts)
            if owner is not None:
                opts = dataclasses.replace(opts, inventory_address=owner.address)
        settle_heap()  # the workers fork from here: see settle_heap
        procs = [
            ctx.Process(target=_worker_main, args=(opts, preloaded), name=f"numagate-worker-{i}")
            for i in range(workers)
        ]
        for p in procs:
            p.start()
        del preloaded  # the workers have it (inherited, or pickled at a spawn's start)
        if owner is not None:
            owner.supervise()  # a thread: after the workers are forked
        _forward_signals(procs)
        _join_all(procs, metrics_dir)
    finally:
        if owner is not None:
            owner.stop()
        if previous is None:
            os.environ.pop(MULTIPROC_ENV, None)
        else:
            os.environ[MULTIPROC_ENV] = previous
        shutil.rmtree(metrics_dir, ignore_errors=True)
    failed = [p for p in procs if p.exitcode not in (0, -signal.SIGTERM)]
    return 1 if failed else 0


def _start_owner(opts: ServeOptions) -> InventoryOwner | None:
    """A watched cluster's inventory process, one for all the workers (issue 31): spawned
    first, it lists while the workers start."""
    from webhook.inventory.owner import owner_for

    owner = owner_for(opts)
    if owner is not None:
        owner.spawn()
    return owner


def _forward_signals(procs: list[Any]) -> None:
    def forward(signum: int, _frame: object) -> None:
        for p in procs:
            if p.pid is not None and p.is_alive():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)


def _join_all(procs: list[Any], metrics_dir: str) -> None:
    """Wait for every worker; as each exits, drop its live gauges (in flight, inventory,
    certificate expiry) from the merged view; its counters stay counted."""
    from multiprocessing.connection import wait

    from prometheus_client.multiprocess import mark_process_dead

    pending = {p.sentinel: p for p in procs}
    while pending:
        for sentinel in wait(list(pending)):
            p = pending.pop(sentinel)
            p.join()
            mark_process_dead(p.pid, metrics_dir)
