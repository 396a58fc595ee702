"""A backlog of watch events (webhook/inventory/updates.py): drained in slices that grow
while it ages, with only the last state of each object applied, and the same inventory
as a whole build of the final objects."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from core.inventory.build import build_inventory
from tests.webhook.fake_apiserver_objects import node, nrt
from webhook.inventory import updates as updates_module
from webhook.inventory.live import NODE_RESOURCE_TOPOLOGIES, NODES, WatchedResource
from webhook.inventory.state import InventoryState
from webhook.inventory.updates import MIN_SLICE, InventoryUpdates


class _Reflector:
    def __init__(self, resource: WatchedResource) -> None:
        self.resource = resource


def _nrt_free(name: str, free: int) -> dict[str, Any]:
    obj = nrt(name)
    for zone in obj["zones"]:
        zone["resources"][0]["available"] = str(free)
    return obj


def _apply_backlog(names: list[str], states: int) -> tuple[InventoryUpdates, list[Any]]:
    final: dict[str, dict[str, Any]] = {}

    async def run() -> InventoryUpdates:
        loop = asyncio.get_running_loop()
        updates = InventoryUpdates(InventoryState(), loop, window=0.001)
        nodes, nrts = _Reflector(NODES), _Reflector(NODE_RESOURCE_TOPOLOGIES)
        for name in names:
            updates.on_event(nodes, "ADDED", ("", name), node(name))  # type: ignore[arg-type]
        while updates.state.view is None:
            await asyncio.sleep(0.01)
        # A backlog older than BACKLOG_SECONDS: several states of every NRT queued at once.
        for k in range(states):
            for i, name in enumerate(names):
                final[name] = _nrt_free(name, (i + k) % 31)
                updates.on_event(nrts, "MODIFIED", ("", name), final[name])  # type: ignore[arg-type]
        updates._queue = type(updates._queue)((t - 1.0, *rest) for t, *rest in updates._queue)
        while updates._queue or updates._scheduled:
            await asyncio.sleep(0.01)
        return updates

    updates = asyncio.run(run())
    objects = [node(n) for n in names] + [final[n] for n in names]
    return updates, objects


def test_a_backlog_gives_the_inventory_of_the_last_states(monkeypatch) -> None:
    monkeypatch.setattr(updates_module, "MAX_SLICE", 4 * MIN_SLICE)
    names = [f"n{i:03d}" for i in range(150)]
    updates, objects = _apply_backlog(names, states=4)
    view = updates.state.view
    assert view is not None
    expected = {n.name: n for n in build_inventory(objects).nodes}
    assert {n.name: n for n in view.nodes} == expected
    assert updates.applied == len(names) * 5  # every event counted, superseded ones too
    # Slices grew past the minimum while the backlog aged (bounded by MAX_SLICE).
    assert MIN_SLICE < updates._slice <= 4 * MIN_SLICE


def test_an_aged_backlog_raises_the_budget_within_bounds() -> None:
    updates = InventoryUpdates(InventoryState(), asyncio.new_event_loop())
    assert updates._budget(0.0) == updates_module.SLICE_SECONDS
    updates._queue.append((0.0, "nrt", "MODIFIED", ("NodeResourceTopology", "", "a"), None))
    assert updates._budget(0.1) == updates_module.SLICE_SECONDS
    assert updates_module.SLICE_SECONDS < updates._budget(0.5) <= updates_module.MAX_SLICE_SECONDS
    assert updates._budget(60.0) == updates_module.MAX_SLICE_SECONDS


def test_a_first_build_put_off_happens_when_the_last_type_settles() -> None:
    """A flush that finds a type not yet listed does not build; the reflector's touch
    once it has set its flag must bring the build, with no further event needed."""
    settled = [False]

    async def run() -> InventoryState:
        loop = asyncio.get_running_loop()
        state = InventoryState()
        updates = InventoryUpdates(state, loop, window=0.001, synced=lambda: settled[0])
        updates.on_event(_Reflector(NODES), "ADDED", ("", "n1"), node("n1"))  # type: ignore[arg-type]
        await asyncio.sleep(0.05)
        assert state.view is None and not updates._scheduled  # put off, nothing pending
        settled[0] = True
        updates.on_touch()
        for _ in range(500):
            if state.view is not None:
                break
            await asyncio.sleep(0.01)
        return state

    state = asyncio.run(run())
    assert state.view is not None and [n.name for n in state.view.nodes] == ["n1"]


def test_objects_go_into_the_inventory_as_the_lists_come() -> None:
    """Until every type has listed, each window takes the queued objects into the
    inventory, where their maps are shared as they go in (left queued, every object's own
    copies were alive at once: 25 MiB of RSS at 10,000 nodes, docs/benchmarks.md round 9).
    The first build then counts their events, and its view is the build of the objects."""
    settled = [False]
    names = ["n1", "n2", "n3"]
    objects = [node(n) for n in names] + [nrt(n) for n in names]

    async def run() -> InventoryUpdates:
        loop = asyncio.get_running_loop()
        updates = InventoryUpdates(InventoryState(), loop, window=0.001, synced=lambda: settled[0])
        reflectors = {"Node": _Reflector(NODES), "NodeResourceTopology": _Reflector(NODE_RESOURCE_TOPOLOGIES)}  # fmt: skip
        for obj in objects:
            name = obj["metadata"]["name"]
            updates.on_event(reflectors[obj["kind"]], "ADDED", ("", name), obj)  # type: ignore[arg-type]
        await asyncio.sleep(0.05)
        assert updates.state.view is None and not updates._queue
        held = [updates.inventory._objects[("NodeResourceTopology", "", n)].data for n in names]
        assert held[0].zones[0].capacity is held[1].zones[0].capacity  # type: ignore[union-attr]
        settled[0] = True
        updates.on_touch()
        for _ in range(500):
            if updates.state.view is not None:
                break
            await asyncio.sleep(0.01)
        return updates

    updates = asyncio.run(run())
    view = updates.state.view
    assert view is not None
    assert list(view.nodes) == list(build_inventory(objects).nodes)
    assert updates.applied == len(objects)


def test_a_build_cancelled_at_shutdown_is_not_an_error(caplog: pytest.LogCaptureFixture) -> None:
    """Stopping the loop cancels a whole build's wait for its thread: that is shutdown,
    not a failed build (it printed a traceback from the loop's exception handler)."""
    loop = asyncio.new_event_loop()
    try:
        updates = InventoryUpdates(InventoryState(), loop)
        task = loop.create_future()
        task.cancel()
        updates._building = True
        updates._built(task)  # type: ignore[arg-type]
        assert not updates._building
        assert updates.editor is None and updates.full_builds == 0
        assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]
    finally:
        loop.close()
