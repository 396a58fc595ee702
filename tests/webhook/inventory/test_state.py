"""webhook.inventory.state: atomic swaps, the static file reloaded on change with the last
good version kept, the embedded demo, staleness of live sources."""

from __future__ import annotations

import asyncio
import os
import pickle
import time
from pathlib import Path

import pytest

from tests.builders.objects import SMALL
from webhook.inventory.state import InventoryState, StaticFileSource, build_file, load_demo
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


# ----------------------------------------------------------------------------- issue 7


def _age(path: Path, seconds: float = 60.0) -> None:
    """Move the file's mtime into the past: out of the racy window, as a file that has
    not been written for a while."""
    old = time.time() - seconds
    os.utime(path, (old, old))


def test_unchanged_stat_skips_the_read(tmp_path: Path) -> None:
    state = InventoryState()
    path = tmp_path / "inv.yaml"
    path.write_text(SMALL.read_text())
    _age(path)
    source = StaticFileSource(path, state)
    first = source.load()
    reads = source.reads
    for _ in range(3):
        assert source.check() is None
    assert source.reads == reads  # stat only: no read, no hash
    path.write_text(SMALL.read_text().split("\n---\n")[0])
    assert source.check() is True and state.view is not first
    assert [n.name for n in state.view.nodes] == ["busy-1"]


def test_recently_written_file_is_hashed_until_its_stat_can_be_trusted(tmp_path: Path) -> None:
    """A write within the file system's timestamp tick keeps mtime and (here) size: the
    signature of a just-written file is not trusted, so the content is compared."""
    state = InventoryState()
    path = tmp_path / "inv.yaml"
    text = SMALL.read_text()
    path.write_text(text)
    source = StaticFileSource(path, state)
    source.load()
    before = os.stat(path)
    reads = source.reads
    assert source.check() is None and source.reads == reads + 1  # re-read: still racy
    # same size, same mtime, different content: only the hash can tell
    changed = text.replace("busy-1", "busy-9")
    assert len(changed) == len(text)
    path.write_text(changed)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert source.check() is True
    assert "busy-9" in [n.name for n in state.view.nodes]


@pytest.mark.slow
def test_large_file_is_built_in_a_helper_process(tmp_path: Path) -> None:
    """isolate_above=0 makes the small file "large": load and reload go through the
    helper process and give the same inventory; a broken file keeps the last good."""
    path = tmp_path / "inv.yaml"
    path.write_text(SMALL.read_text())
    reference = StaticFileSource(path, InventoryState()).load()
    state = InventoryState(metrics=WebhookMetrics())
    source = StaticFileSource(path, state, isolate_above=0)
    view = source.load()
    assert view.nodes == reference.nodes and view.errors == reference.errors
    assert view.snapshot.label_bits == reference.snapshot.label_bits
    assert view.source == f"file:{path}"
    assert abs(view.built_at - state.clock()) < 60  # stamped with this process's clock
    path.write_text("{{{ not yaml")
    assert source.check() is False and state.view is view
    assert "not valid YAML" in (source.last_error or "")
    path.write_text(SMALL.read_text().split("\n---\n")[0])
    assert source.check() is True
    assert state.view is not None and [n.name for n in state.view.nodes] == ["busy-1"]


def test_adopted_build_then_reloads_on_change(tmp_path: Path) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text(SMALL.read_text())
    _age(path)
    built = build_file(str(path), now=0.0)
    state = InventoryState()
    source = StaticFileSource(path, state)
    view = source.load(pickle.dumps(built))
    assert state.view is view and view.built_at > 0  # stamped when adopted, not built
    assert source.check() is None and source.reads == 0  # adopted: not read again
    path.write_text(SMALL.read_text().split("\n---\n")[0])
    assert source.check() is True
    assert [n.name for n in state.view.nodes] == ["busy-1"]


def test_file_caught_mid_write_keeps_last_good(tmp_path: Path) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text(SMALL.read_text())
    state = InventoryState()
    source = StaticFileSource(path, state)
    source.load()
    nodes = len(state.view.nodes)
    assert nodes > 0
    path.write_text("")  # truncated by `>` or an editor, content not written yet
    assert source.check() is False
    assert len(state.view.nodes) == nodes
    assert source.last_error is not None and "empty" in source.last_error
    path.write_text(SMALL.read_text())  # the write completes: content equal to the last good
    assert source.check() is True
    assert len(state.view.nodes) == nodes
