"""The worker's inventory source, started at serve time: a static file (reloaded when it
changes), the cluster (watched in this worker or in an inventory process), or the
embedded demo. Split from webhook/server.py, which wires it into the server's lifetime."""

from __future__ import annotations

import asyncio
import gc
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from webhook.config import ConfigHolder
from webhook.dra import state as dra_sources
from webhook.heap import release_free_heap
from webhook.inventory.state import FileBuild, InventoryState, StaticFileSource, load_demo
from webhook.logs import get_logger


class ServeOptions(Protocol):
    """What the sources read of the serve options (webhook/server.py)."""

    inventory: str | None
    kubeconfig: str | None
    context: str | None
    in_cluster: bool
    log_level: str
    inventory_process: bool


log = get_logger("server")
# The first list of a live cluster allocates millions of objects, most of which stay (the
# inventory): cyclic collections meanwhile traverse them again and again, ~40% of the CPU
# to ready at 10,000 nodes (docs/benchmarks.md). The collector is paused until the
# inventory is ready (its first view is then frozen, InventoryState.install), at most this
# long: an API that never answers must not leave it off.
GC_PAUSE_MAX_SECONDS = 60.0


@dataclass
class Sources:
    """The running inventory source(s), to stop at shutdown."""

    tasks: list[asyncio.Task[Any]]
    stop: Callable[[], None]


def pause_gc_until_ready(state: InventoryState, limit: float) -> asyncio.Task[None] | None:
    """Pause the cyclic collector now, until ``state`` is ready or ``limit`` seconds passed
    (GC_PAUSE_MAX_SECONDS); the returned task turns it back on (also when cancelled), and
    once ready releases the free heap. A collector already off is left alone (None)."""
    if not gc.isenabled():
        return None
    gc.disable()

    async def wait() -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        while not state.ready and loop.time() < deadline:
            await asyncio.sleep(0.02)
        if state.ready:
            release_free_heap()

    task = asyncio.get_running_loop().create_task(wait())
    task.add_done_callback(lambda _: gc.enable())
    return task


def _start_live(
    opts: ServeOptions, state: InventoryState, *, watch_pods: bool
) -> tuple[Callable[[], None], list[asyncio.Task[Any]]]:
    """Watch the cluster; every change is applied incrementally on this event loop
    (webhook/inventory/updates.py). Returns the stop function and the tasks (metrics,
    the collector's pause)."""
    from webhook.inventory.kube import build_api_client, describe
    from webhook.inventory.live import LiveSource
    from webhook.inventory.updates import InventoryUpdates, reflector_sync, report_sync

    loop = asyncio.get_running_loop()
    paused = pause_gc_until_ready(state, GC_PAUSE_MAX_SECONDS)
    client = build_api_client(
        kubeconfig=opts.kubeconfig,
        context=opts.context,
        in_cluster=opts.in_cluster,
        use_default=False,
    )
    updates = InventoryUpdates(state, loop, metrics=state.metrics)
    live = LiveSource(client, updates=updates, include_pods=watch_pods)
    updates.synced = lambda: live.synced
    state.live = True
    state.last_sync = lambda: live.last_sync
    state.synced = lambda: live.synced and updates.editor is not None
    live.start()
    log.info("watching the cluster", extra={"host": describe(client)})
    sync = loop.create_task(report_sync(lambda: reflector_sync(live), updates.lag, state.metrics))
    tasks = [sync]
    return live.stop, tasks if paused is None else [paused, *tasks]


def _start_fed(
    opts: ServeOptions, state: InventoryState, *, watch_pods: bool
) -> tuple[Callable[[], None], list[asyncio.Task[Any]]]:
    """Watch the cluster from an inventory process (``--inventory-process``): it lists,
    watches, parses and merges, and this worker applies the changes it sends
    (webhook/inventory/feed.py). The worker's collector is not paused: the first view
    arrives built."""
    from webhook.inventory.fed import FedInventory
    from webhook.inventory.feed import FeederSpec
    from webhook.inventory.updates import report_sync

    loop = asyncio.get_running_loop()
    spec = FeederSpec(
        kubeconfig=opts.kubeconfig,
        context=opts.context,
        in_cluster=opts.in_cluster,
        include_pods=watch_pods,
        log_level=opts.log_level,
    )
    fed = FedInventory(state, loop, spec, metrics=state.metrics)
    state.live = True
    state.last_sync = lambda: fed.last_sync
    state.synced = lambda: fed.synced
    fed.start()
    tasks = [loop.create_task(report_sync(fed.sync, fed.lag, state.metrics))]
    return fed.stop, tasks


def start_sources(
    opts: ServeOptions,
    state: InventoryState,
    holder: ConfigHolder,
    *,
    preloaded: bytes | None = None,
    dra: dra_sources.DraState | None = None,
) -> Sources:
    """Load the inventory once (a bad static file fails startup) and start reloading.
    ``preloaded``: the static file already built by the parent (a pickled FileBuild).
    ``dra``: the DRA inventory, fed from the same file or cluster (webhook/dra/state.py)."""
    tasks: list[asyncio.Task[Any]] = []
    stop: Callable[[], None] = lambda: None  # noqa: E731
    interval = holder.current.inventory.reload_interval_seconds
    stop_dra, dra_tasks = dra_sources.start_for(dra, opts, interval)
    tasks.extend(dra_tasks)
    if opts.inventory:
        static = StaticFileSource(opts.inventory, state, interval=interval)
        if preloaded is not None:
            built: FileBuild = pickle.loads(preloaded)
            static.adopt(built)
            del built
        else:
            static.load()
        tasks.append(asyncio.get_running_loop().create_task(static.run()))
    elif opts.kubeconfig or opts.in_cluster:
        start = _start_fed if opts.inventory_process else _start_live
        stop, started = start(opts, state, watch_pods=holder.current.inventory.watch_pods)
        tasks.extend(started)
    else:
        load_demo(state)
    return Sources(tasks, dra_sources.chain(stop, stop_dra))
