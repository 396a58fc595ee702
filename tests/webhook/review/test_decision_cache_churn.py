"""The decision cache under churn (issue 14): answers survive usage changes of the
topology classes they did not read, and the cache never serves an answer that the
current inventory would change (every cached answer is compared with a fresh decision
on the same inventory)."""

from __future__ import annotations

import copy
import random
from typing import Any

from core.inventory.incremental import IncrementalInventory, parse_object
from core.snapshot.delta import SnapshotEditor
from core.snapshot.snapshot import Snapshot
from tests.builders.objects import build_review, koord_pod, node, nrt, replica, zone
from tests.webhook.harness import call
from webhook.config import parse_config
from webhook.inventory.state import InventoryState, InventoryView
from webhook.review.pipeline import Runtime

NAMES = [f"n{i}" for i in range(6)]
POLICY_LABEL = "node.koordinator.sh/numa-topology-policy"


def nrt_of(name: str, free: int, cores: int) -> dict[str, Any]:
    zones = [
        zone(i, {"cpu": (str(cores), str(cores), str(free)), "memory": ("64Gi", "64Gi")})
        for i in (0, 1)
    ]
    return nrt(name, zones, attributes={"topologyManagerPolicy": "single-numa-node"})


def node_of(name: str, label: str, cores: int) -> dict[str, Any]:
    labels = {POLICY_LABEL: label, "kubernetes.io/hostname": name}
    return node(name, labels=labels, allocatable={"cpu": str(2 * cores), "memory": "128Gi"})


class Cluster:
    def __init__(self, state: InventoryState) -> None:
        self.state = state
        self.inventory = IncrementalInventory()
        self.editor = SnapshotEditor(Snapshot.build(()))
        # Two hardware classes (16- and 32-core NUMA nodes): two topology classes.
        self.cores = {n: 16 if i % 2 else 32 for i, n in enumerate(NAMES)}

    def put(self, obj: dict[str, Any]) -> None:
        self.inventory.set(parse_object(obj, self.inventory.units))

    def publish(self) -> None:
        snap = self.editor.apply(self.inventory.flush())
        view = InventoryView(snap.nodes, snap, self.inventory.errors(), "test", 0.0)
        old = self.state.view
        if old is not None and old.snapshot.structure is snap.structure:
            view.memo.update(old.memo)
        self.state.install(view, quiet=True)


def _answer(response: dict[str, Any]) -> Any:
    r = response
    return (r["allowed"], r.get("status"), r.get("warnings"), r.get("patch"))


async def test_the_cache_never_serves_an_answer_the_inventory_would_change() -> None:
    rng = random.Random(14)
    state = InventoryState()
    cluster = Cluster(state)
    for name in NAMES:
        cluster.put(node_of(name, "SingleNUMANode", cluster.cores[name]))
        cluster.put(nrt_of(name, cluster.cores[name], cluster.cores[name]))
    cluster.publish()
    cached_cfg = parse_config({}, env={})
    plain_cfg = parse_config({"decisionCache": {"entries": 0}}, env={})
    cached = Runtime(config=lambda: cached_cfg, inventory=state)
    plain = Runtime(config=lambda: plain_cfg, inventory=state)
    reviews = {cpu: build_review(koord_pod(cpu)) for cpu in ("4", "12", "24", "40")}
    hits_after_usage_change = 0
    changed_since_hit = False
    for step in range(600):
        roll = rng.random()
        if roll < 0.35:
            name = rng.choice(NAMES)
            cores = cluster.cores[name]
            cluster.put(nrt_of(name, rng.randint(0, cores), cores))
            cluster.publish()
            changed_since_hit = True
        elif roll < 0.38:
            name = rng.choice(NAMES)
            label = rng.choice(["SingleNUMANode", "Restricted", ""])
            cluster.put(node_of(name, label, cluster.cores[name]))
            cluster.publish()
        else:
            review = replica(copy.deepcopy(reviews[rng.choice(list(reviews))]), step)
            hits = cached.metrics.decision_cache.value(result="hit")
            got = await call(cached, "validate", review)
            want = await call(plain, "validate", review)
            assert _answer(got) == _answer(want), (step, got, want)
            if cached.metrics.decision_cache.value(result="hit") > hits and changed_since_hit:
                hits_after_usage_change += 1
                changed_since_hit = False
    assert cached.metrics.decision_cache.value(result="hit") > 50
    assert hits_after_usage_change > 10  # usage changes do not empty the cache
