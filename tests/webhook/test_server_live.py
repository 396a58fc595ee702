"""`inventory.watchPods`: the live source of `serve --kubeconfig` watches bound Pods, so what
only they carry (kube-scheduler's requested amounts for FitPlus, HAMi card usage,
Koordinator NUMA states) reaches the inventory; switched off, nodes carry none of it. And
``serve --workers 2``: one inventory process for both workers, restarted by the serve
process when it dies, both workers following it again."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from tests.launch import http, start_process, wait_for, write_config
from tests.webhook.fake_apiserver import running_apiserver
from tests.webhook.fake_apiserver_objects import node, nrt, pod
from tests.webhook.scrape import parse
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


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        here = todo.pop()
        try:
            tids = os.listdir(f"/proc/{here}/task")
        except OSError:
            continue  # the process has exited
        for tid in tids:
            try:
                children = Path(f"/proc/{here}/task/{tid}/children").read_text().split()
            except OSError:
                continue  # a thread (an executor's, say) that exited after the listing
            out.extend(int(c) for c in children)
            todo.extend(int(c) for c in children)
    return out


def _inventory_processes(pid: int) -> list[int]:
    """The spawned inventory processes below ``pid`` (forked workers share its command)."""
    found = []
    for child in _descendants(pid):
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue  # gone meanwhile
        if b"spawn_main" in cmdline:
            found.append(child)
    return found


def test_two_workers_share_one_inventory_process_that_serve_restarts(tmp_path: Path) -> None:
    with running_apiserver(tmp_path) as fake:
        fake.apply(node("n1"))
        fake.apply(nrt("n1"))
        kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
        certs = tmp_path / "certs"
        args = ["--cert-dir", str(certs), "--config", str(write_config(tmp_path / "c.json"))]
        server = start_process(
            [*args, "--kubeconfig", str(kubeconfig)], ca=certs / "ca.crt", workers=2, timeout=60
        )
        try:

            def scrape() -> dict[str, float]:
                status, text = http(
                    server.port, certs / "ca.crt", "GET", "/metrics", name="localhost"
                )
                return parse(text.decode()) if status == 200 else {}

            def nodes() -> float:  # the fewest any worker serves (a livemin gauge)
                return scrape().get("numagate_inventory_nodes{}", 0.0)

            wait_for(lambda: nodes() == 1, 60.0, step=0.2)
            (first,) = _inventory_processes(server.proc.pid)  # one for both workers
            os.kill(first, signal.SIGKILL)
            wait_for(lambda: _inventory_processes(server.proc.pid) not in ([], [first]), 30.0)
            lost = "numagate_inventory_process_restarts_total{}"
            wait_for(lambda: scrape().get(lost) == 2, 30.0, step=0.2)  # each worker, once
            fake.apply(node("n2"))
            fake.apply(nrt("n2"))
            wait_for(lambda: nodes() == 2, 30.0, step=0.2)  # both follow the new process
            (second,) = _inventory_processes(server.proc.pid)
        finally:
            assert server.sigterm() == 0
        assert not Path(f"/proc/{second}").exists()  # stopped with the replica
