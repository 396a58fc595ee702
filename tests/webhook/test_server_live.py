"""`inventory.watchPods`: the live source of `serve --kubeconfig` watches bound Pods, so what
only they carry (kube-scheduler's requested amounts for FitPlus, HAMi card usage,
Koordinator NUMA states) reaches the inventory; switched off, nodes carry none of it. The
same through the inventory process (``--inventory-process``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.webhook.fake_apiserver import running_apiserver
from tests.webhook.fake_apiserver_objects import node, nrt, pod
from webhook import server as server_module
from webhook.config import ConfigHolder
from webhook.inventory.state import InventoryState

pytestmark = pytest.mark.slow  # starts a test API server and the live source


async def _bound_requests(tmp_path: Path, *, watch_pods: bool) -> object:
    config = tmp_path / "config.yaml"
    config.write_text(f"inventory: {{watchPods: {str(watch_pods).lower()}}}\n")
    with running_apiserver(tmp_path) as fake:
        for obj in (node("n1"), nrt("n1"), pod("p1", node_name="n1")):
            fake.apply(obj)
        kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
        opts = server_module.ServeOptions(
            host="127.0.0.1",
            port=0,
            cert="",
            key="",
            kubeconfig=str(kubeconfig),
        )
        state = InventoryState()
        sources = server_module.start_sources(opts, state, ConfigHolder(config))
        try:
            for _ in range(400):
                if state.ready:
                    break
                await asyncio.sleep(0.05)
            assert state.view is not None and state.ready
            (n1,) = state.view.nodes
            return n1.bound_requests
        finally:
            sources.stop()
            for task in sources.tasks:
                task.cancel()


async def test_bound_pods_reach_the_live_inventory(tmp_path: Path) -> None:
    # a container without requests counts as 100m CPU / 200Mi, as kube-scheduler's NodeInfo does
    requests = await _bound_requests(tmp_path, watch_pods=True)
    assert requests is not None and requests["cpu"] == 100


async def test_watch_pods_off_leaves_bound_requests_unknown(tmp_path: Path) -> None:
    assert await _bound_requests(tmp_path, watch_pods=False) is None
