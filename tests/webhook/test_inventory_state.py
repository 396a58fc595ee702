"""webhook.inventory_state: atomic swaps, the static file reloaded on change with the last
good version kept, the embedded demo, staleness of live sources."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.webhook.test_pipeline import SMALL
from webhook.inventory_state import InventoryState, StaticFileSource, load_demo
from webhook.metrics import WebhookMetrics


def test_demo_inventory_is_embedded() -> None:
    state = InventoryState()
    assert not state.ready
    view = load_demo(state)
    assert state.ready and state.view is view
    assert len(view.nodes) == 10 and view.source == "demo"
    assert view.snapshot.nodes == view.nodes
    assert view.has_label("node.koordinator.sh/numa-topology-policy")


def test_static_file_reload_keeps_last_good(tmp_path: Path) -> None:
    metrics = WebhookMetrics()
    state = InventoryState(metrics=metrics)
    path = tmp_path / "inv.yaml"
    path.write_text(SMALL.read_text())
    source = StaticFileSource(path, state)
    first = source.load()
    assert [n.name for n in first.nodes] == ["busy-1", "restricted-1"]
    assert source.check() is None  # unchanged content: no rebuild
    assert state.view is first
    path.write_text("{{{ not yaml")
    assert source.check() is False
    assert state.view is first and "not valid YAML" in (source.last_error or "")
    assert metrics.inventory_load_failures.value() == 1
    assert source.check() is None  # the same garbage is not reported twice
    path.unlink()
    assert source.check() is False and state.view is first
    one_node = SMALL.read_text().split("\n---\n")[:2]
    path.write_text("\n---\n".join(one_node))
    assert source.check() is True
    assert [n.name for n in state.view.nodes] == ["busy-1"]
    assert metrics.inventory_nodes.value() == 1


async def test_static_source_polls_in_the_background(tmp_path: Path) -> None:
    state = InventoryState()
    path = tmp_path / "inv.yaml"
    path.write_text(SMALL.read_text())
    source = StaticFileSource(path, state, interval=0.05)
    source.load()
    task = asyncio.create_task(source.run())
    try:
        path.write_text(SMALL.read_text().split("\n---\n")[0])
        for _ in range(100):
            if state.view is not None and not state.view.nodes[1:]:
                break
            await asyncio.sleep(0.05)
        assert state.view is not None and [n.name for n in state.view.nodes] == ["busy-1"]
    finally:
        task.cancel()


def test_staleness_applies_to_live_sources_only() -> None:
    now = [1000.0]
    metrics = WebhookMetrics()
    state = InventoryState(metrics=metrics, clock=lambda: now[0])
    load_demo(state)
    now[0] += 10_000
    assert not state.is_stale(300)  # a static inventory is never stale
    assert metrics.inventory_age.value() == 10_000
    state.live = True
    synced = [False]
    last = [None]
    state.synced = lambda: synced[0]
    state.last_sync = lambda: last[0]
    assert not state.ready and state.is_stale(300) and state.age() is None
    synced[0], last[0] = True, now[0] - 5
    assert state.ready and not state.is_stale(300) and state.age() == 5
    now[0] += 400
    assert state.is_stale(300)
