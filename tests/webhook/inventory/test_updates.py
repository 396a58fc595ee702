"""The live inventory applied incrementally, from the inventory process's loop to a
worker's view (webhook/inventory/{feed,fed}.py), against the list/watch test server:
events change only their node, a relist after 410 while events keep coming converges to
the truth, staleness is per resource type."""

from __future__ import annotations

import asyncio
import copy
import json
import random
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from core.feasibility.verdicts import evaluate
from core.inventory.build import build_inventory
from core.model import PodIntent
from core.snapshot.snapshot import Snapshot
from tests.builders.model import container, intent
from tests.launch import wait_for
from tests.webhook.fake_apiserver import (
    NODES,
    NRTS,
    NUMATOPOLOGIES,
    FakeApiServer,
    node,
    nrt,
)
from tests.webhook.fake_apiserver_churn import churning
from webhook.inventory.fed import FedInventory
from webhook.inventory.live import Timing
from webhook.inventory.owner import FeederSpec, listen, socket_address, watch_cluster
from webhook.inventory.state import InventoryState
from webhook.metrics import WebhookMetrics

FAST = {
    "timing": Timing(watch_timeout=1, backoff_initial=0.05, backoff_max=0.4, request_timeout=5.0)
}
pytestmark = pytest.mark.slow


def cpu_pod(cpus: int) -> PodIntent:
    return intent(scheduler_name="", containers=[container(cpu=cpus)])


class Running:
    """The inventory process's loop (its watches, parse and merge) in a thread of this
    process, and a worker's event loop in another, connected over a real Unix socket."""

    def __init__(self, kubeconfig: Path, address: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.state = InventoryState(metrics=WebhookMetrics())
        live = {**FAST, "rng": random.Random(3)}
        spec = FeederSpec(address=address, kubeconfig=str(kubeconfig), live=live)
        self.address = address
        self.listener = listen(address)
        self.feed, self.live = watch_cluster(spec, self.listener)
        self.stopping = threading.Event()
        self.owner = threading.Thread(target=self.feed.run, args=(self.stopping,), daemon=True)
        self.owner.start()
        self.fed = FedInventory(self.state, self.loop, address, metrics=self.state.metrics)
        self.fed.start()

    def stop(self) -> None:
        self.fed.stop()
        self.stopping.set()
        self.owner.join(5)
        self.live.stop()
        self.listener.close()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        shutil.rmtree(Path(self.address).parent, ignore_errors=True)

    def nodes(self) -> dict[str, Any]:
        view = self.state.view
        return {} if view is None else {n.name: n for n in view.nodes}


@pytest.fixture
def running(server: FakeApiServer, tmp_path: Path) -> Iterator[Callable[[], Running]]:
    made: list[Running] = []
    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")

    def make() -> Running:
        made.append(Running(kubeconfig, socket_address()))
        return made[0]

    yield make
    for r in made:
        r.stop()


def truth_nodes(server: FakeApiServer) -> dict[str, Any]:
    objects = [o for r in (NODES, NRTS, NUMATOPOLOGIES) for o in server.objects(r)]
    return {n.name: n for n in build_inventory(copy.deepcopy(objects)).nodes}


def seed(server: FakeApiServer, names: list[str]) -> None:
    for name in names:
        server.apply(node(name))
        server.apply(nrt(name))


def test_an_event_changes_exactly_its_node(server, running):
    names = [f"n{i}" for i in range(8)]
    seed(server, names)
    r = running()
    wait_for(lambda: r.state.view is not None and len(r.state.view.nodes) == 8, 10.0, step=0.01)
    before = r.state.view
    assert r.fed.full_builds == 1
    server.apply(nrt("n3", free=2))
    wait_for(lambda: r.nodes()["n3"].zones[0].available["cpu"] == 2000, 10.0, step=0.01)
    after = r.state.view
    assert r.fed.full_builds == 1  # applied incrementally
    assert after.snapshot.structure is before.snapshot.structure
    old = {v.name: v.verdict for v in evaluate(cpu_pod(16), before.snapshot).verdicts}
    new = {v.name: v.verdict for v in evaluate(cpu_pod(16), after.snapshot).verdicts}
    assert {n for n in names if old[n] != new[n]} == {"n3"}
    assert (old["n3"], new["n3"]) == ("fits", "no-room-now")
    metrics = r.state.metrics
    assert metrics is not None
    assert (
        metrics.inventory_updates.events.value(resource="noderesourcetopologies", type="MODIFIED")
        >= 1
    )
    assert metrics.inventory_updates.latency.count() >= 1


def test_a_batch_that_forces_a_whole_build_reaches_the_update_metrics(server, running):
    """A node with a resource the packed table lacks makes the batch a whole build (in a
    thread): its events are still counted and their latency observed."""
    from tests.builders import objects

    names = [f"n{i}" for i in range(4)]
    seed(server, names)
    r = running()
    wait_for(lambda: r.state.view is not None and len(r.state.view.nodes) == 4, 10.0, step=0.01)
    metrics = r.state.metrics
    assert metrics is not None and r.fed.full_builds == 1
    updates = metrics.inventory_updates
    modified = updates.events.value(resource="noderesourcetopologies", type="MODIFIED")
    observed = updates.latency.count()
    gpus = {"cpu": ("32", "32", "30"), "nvidia.com/gpu": ("2", "2", "2")}
    zones = [objects.zone(i, gpus) for i in (0, 1)]
    server.apply(objects.nrt("n1", zones, attributes={"topologyManagerPolicy": "single-numa-node"}))
    wait_for(lambda: r.fed.full_builds == 2, 10.0, step=0.01)
    assert "nvidia.com/gpu" in r.nodes()["n1"].zones[0].available
    assert updates.events.value(resource="noderesourcetopologies", type="MODIFIED") == modified + 1
    assert updates.latency.count() == observed + 1


def test_relist_after_410_while_events_keep_coming(server, running):
    names = [f"n{i}" for i in range(20)]
    seed(server, names)
    r = running()
    wait_for(lambda: r.state.view is not None and len(r.state.view.nodes) == 20, 10.0, step=0.01)
    with churning(server.apply, names):
        time.sleep(0.3)
        server.down()
        server.delete(NODES, "n2")
        server.apply(node("n77"))
        server.apply(nrt("n77"))
        server.compact()  # our resourceVersions are gone: 410, relist
        server.up()
        wait_for(
            lambda: sum(x.relists for x in r.live.reflectors) >= 2 and "n77" in r.nodes(),
            10.0,
            step=0.01,
        )
        time.sleep(0.3)
    wait_for(lambda: r.nodes() == truth_nodes(server), 10.0, step=0.01)
    assert r.fed.full_builds == 1  # the relist was applied as a difference
    expected = Snapshot.build(tuple(truth_nodes(server)[k] for k in sorted(truth_nodes(server))))
    got = {v.name: v.verdict for v in evaluate(cpu_pod(20), r.state.view.snapshot).verdicts}
    want = {v.name: v.verdict for v in evaluate(cpu_pod(20), expected).verdicts}
    assert got == want


def test_staleness_is_per_resource_type(server, running):
    seed(server, ["n1"])
    r = running()
    wait_for(lambda: r.state.view is not None, 10.0, step=0.01)
    nodes = next(x for x in r.live.reflectors if x.resource.name == "nodes")
    server.hold_lists(NODES)  # the Node type cannot resync; NRT events keep coming
    try:
        server.advance(3)
        server.compact()
        nodes.cut()
        wait_for(lambda: nodes.relists >= 1, 10.0, step=0.01)
        stalled = nodes.synced_until()
        assert stalled is not None
        for i in range(12):
            server.apply(nrt("n1", free=i))
            time.sleep(0.05)
        wait_for(lambda: r.nodes()["n1"].zones[0].available["cpu"] == 11000, 10.0, step=0.01)
        assert nodes.synced_until() == stalled
        last = r.live.last_sync
        assert last is not None and last <= stalled  # the NRT events did not refresh it
        assert time.monotonic() - last >= 0.5
    finally:
        server.release_lists(NODES)
    wait_for(lambda: (nodes.synced_until() or 0) > stalled, 10.0, step=0.01)


def test_koordlet_annotations_on_an_nrt_update_reach_the_view(server, running):
    # issue 30: the CPUs koord-scheduler holds back arrive on an NRT update (koordlet
    # rewrites its annotations) and flow through the incremental inventory like any field.
    names = ["k0", "k1"]
    seed(server, names)
    r = running()
    wait_for(lambda: r.state.view is not None and len(r.state.view.nodes) == 2, 10.0, step=0.01)
    detail = [{"id": c, "core": c, "socket": c // 32, "node": c // 32} for c in range(64)]
    updated = nrt("k1", free=32)
    updated["metadata"]["annotations"] = {
        "node.koordinator.sh/cpu-topology": json.dumps({"detail": detail}),
        "kubelet.koordinator.sh/cpu-manager-policy": json.dumps({"reservedCPUs": "0-1"}),
        "node.koordinator.sh/pod-cpu-allocs": json.dumps(
            [{"uid": "u", "cpuset": "32-47", "managedByKubelet": True}]
        ),
    }
    server.apply(updated)
    wait_for(lambda: bool(r.nodes()["k1"].koord_held), 10.0, step=0.01)
    assert r.fed.full_builds == 1  # applied incrementally
    got = r.nodes()["k1"]
    assert got == truth_nodes(server)["k1"]
    assert got.koord_held == ((2, 0, 0, 0), (0, 16, 0, 0))
    assert [(z.allocatable["cpu"], z.available["cpu"]) for z in got.zones] == [
        (30000, 30000),
        (32000, 16000),
    ]
    # a later update without them gives the NUMA nodes back
    server.apply(nrt("k1", free=32))
    wait_for(lambda: not r.nodes()["k1"].koord_held, 10.0, step=0.01)
    assert r.nodes()["k1"] == truth_nodes(server)["k1"]
