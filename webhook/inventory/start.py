"""The worker's inventory source, started at serve time: a static file (reloaded when it
changes), the cluster (through the replica's inventory process), or the
embedded demo. Split from webhook/server.py, which wires it into the server's lifetime."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from webhook.config import ConfigHolder
from webhook.dra import state as dra_sources
from webhook.inventory.state import InventoryState, StaticFileSource, load_demo
from webhook.logs import get_logger


class ServeOptions(Protocol):
    """What the sources read of the serve options (webhook/server.py)."""

    inventory: str | None
    kubeconfig: str | None
    context: str | None
    in_cluster: bool
    log_level: str
    inventory_address: str | None
    config: str | None


log = get_logger("server")


@dataclass
class Sources:
    """The running inventory source(s), to stop at shutdown."""

    tasks: list[asyncio.Task[Any]]
    stop: Callable[[], None]


def _start_fed(
    opts: ServeOptions, state: InventoryState, *, watch_pods: bool
) -> tuple[Callable[[], None], list[asyncio.Task[Any]]]:
    """Watch the cluster through the replica's inventory process: it lists, watches,
    parses and merges, and this worker applies the changes it sends
    (webhook/inventory/feed.py). With ``--workers N`` the serve process started it
    (``opts.inventory_address``); else this worker starts it and restarts it."""
    from webhook.inventory.fed import FedInventory, report_sync
    from webhook.inventory.owner import owner_for

    loop = asyncio.get_running_loop()
    owner = None
    address = opts.inventory_address
    if address is None:
        owner = owner_for(opts, watch_pods)
        assert owner is not None  # a cluster is named (``start_sources``)
        owner.start()
        address = owner.address
    fed = FedInventory(state, loop, address, metrics=state.metrics)
    fed.start()
    log.info("watching the cluster through the inventory process", extra={"socket": address})
    tasks = [loop.create_task(report_sync(fed.sync, fed.lag, state.metrics))]

    def stop() -> None:
        fed.stop()
        if owner is not None:
            owner.stop()

    return stop, tasks


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
        static.load(preloaded)
        tasks.append(asyncio.get_running_loop().create_task(static.run()))
    elif opts.kubeconfig or opts.in_cluster:
        watch_pods = holder.current.inventory.watch_pods
        stop, started = _start_fed(opts, state, watch_pods=watch_pods)
        tasks.extend(started)
    else:
        load_demo(state)
    return Sources(tasks, dra_sources.chain(stop, stop_dra))
