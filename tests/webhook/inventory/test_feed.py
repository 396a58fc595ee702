"""The inventory process (webhook/inventory/feed.py, ``serve --inventory-process``): what it
sends a worker, applied there, gives the inventory of a full build of the final objects;
a usage-only change travels as free amounts; a change the worker cannot place restarts the
process; against the list/watch test server over TLS, with the real process, an event
changes exactly its node's verdicts and a killed process is replaced while the last good
view is served."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import signal
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.feasibility.snapshot import Snapshot
from core.feasibility.verdicts import evaluate
from core.inventory.build import build_inventory
from core.inventory.incremental import ObjectKey
from core.model import PodIntent
from tests.builders.events import events
from tests.builders.model import container, intent, intents
from tests.builders.objects import nrt, zone
from tests.webhook.fake_apiserver import NODES as API_NODES
from tests.webhook.fake_apiserver import NRTS as API_NRTS
from tests.webhook.fake_apiserver import FakeApiServer, running_apiserver
from tests.webhook.fake_apiserver import node as api_node
from tests.webhook.fake_apiserver import nrt as api_nrt
from tests.webhook.fake_apiserver_churn import churning
from webhook.inventory import fed as fed_module
from webhook.inventory import feed as feed_module
from webhook.inventory.fed import FedInventory
from webhook.inventory.feed import Batch, Feed, FeederSpec, Whole
from webhook.inventory.live import BOUND_PODS, NODE_RESOURCE_TOPOLOGIES, NODES, NUMATOPOLOGIES
from webhook.inventory.state import InventoryState
from webhook.metrics import WebhookMetrics

RESOURCES = {
    "Node": NODES,
    "NodeResourceTopology": NODE_RESOURCE_TOPOLOGIES,
    "Numatopology": NUMATOPOLOGIES,
    "Pod": BOUND_PODS,
}
FAST = {"watch_timeout": 1, "backoff_initial": 0.05, "backoff_max": 0.4, "request_timeout": 5.0}


def _event(feed: Feed, obj: dict[str, Any], *, delete: bool = False) -> None:
    meta = obj["metadata"]
    reflector = SimpleNamespace(resource=RESOURCES[obj["kind"]])
    key = (meta.get("namespace", ""), meta["name"])
    feed.on_event(reflector, "DELETED" if delete else "MODIFIED", key, obj)


def _messages(sent: list[bytes]) -> list[Whole | Batch]:
    out = [pickle.loads(b) for b in sent]
    sent.clear()
    return out


async def _apply(fed: FedInventory, messages: list[Whole | Batch]) -> None:
    for message in messages:
        fed.accept(message)
    while not fed.idle:  # a resource new to the packed table: a build in a thread
        await asyncio.sleep(0.001)


def _verdicts(snap: Snapshot, pod: PodIntent) -> dict[str, tuple[Any, ...]]:
    return {
        v.name: (v.verdict, v.numa, v.preferred, v.reason) for v in evaluate(pod, snap).verdicts
    }


def _cpu_pod(cpus: int) -> PodIntent:
    return intent(scheduler_name="", containers=[container(cpu=cpus, memory=2**30)])


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    events=events,
    first=st.integers(0, 10),
    batch=st.integers(1, 6),
    unsynced=st.integers(0, 4),
    probes=st.lists(intents(), min_size=1, max_size=3),
)
def test_what_the_process_sends_gives_the_full_build(
    events: list[tuple[bool, dict[str, Any]]],
    first: int,
    batch: int,
    unsynced: int,
    probes: list[PodIntent],
) -> None:
    """Events before the first build arrive in the Whole, later ones in Batches of at most
    ``batch`` events; the worker's view is the full build of the final objects. For the
    first ``unsynced`` steps a type has not listed yet: the events are taken into the
    inventory as they come, and the Whole still reports every one of them."""
    sent: list[bytes] = []
    feed = Feed(sent.append, max_batch=batch)
    steps = [0]
    feed.synced = lambda: steps[0] >= unsynced
    final: dict[ObjectKey, dict[str, Any]] = {}
    before_whole = [0]

    def step() -> None:
        feed.step()
        steps[0] += 1
        assert feed.built or not feed._queue  # taken in, not left queued

    def play(part: list[tuple[bool, dict[str, Any]]]) -> None:
        for delete, obj in part:
            before_whole[0] += not feed.built
            meta = obj["metadata"]
            key = (obj["kind"], meta.get("namespace", ""), meta["name"])
            if delete:
                final.pop(key, None)
            else:
                final[key] = obj
            _event(feed, obj, delete=delete)

    async def run() -> InventoryState:
        state = InventoryState()
        fed = FedInventory(state, asyncio.get_running_loop(), FeederSpec())
        play(events[:first])
        step()
        for start in range(first, len(events), 3):
            play(events[start : start + 3])
            step()
        while not feed.built:
            step()
        messages = _messages(sent)
        whole = next(k for k, m in enumerate(messages) if isinstance(m, Whole))
        assert whole == min(unsynced, steps[0] - 1)
        assert all(isinstance(m, Batch) and not m.events for m in messages[:whole])
        assert len(messages[whole].events) == before_whole[0]
        assert all(isinstance(m, Batch) and len(m.events) <= batch for m in messages[whole + 1 :])
        await _apply(fed, messages)
        return state

    state = asyncio.run(run())
    full = build_inventory(list(final.values()))
    assert state.view is not None
    snap = state.view.snapshot
    assert sorted(snap.nodes, key=lambda n: n.name) == list(full.nodes)
    assert sorted(state.view.errors) == sorted(full.errors)
    expected = Snapshot.build(full.nodes)
    for pod in [*probes, _cpu_pod(4), _cpu_pod(20)]:
        assert _verdicts(snap, pod) == _verdicts(expected, pod)


def _free_nrt(name: str, free: str) -> dict[str, Any]:
    memory = ("128Gi", "120Gi", "100Gi")
    zones = [
        zone(i, {"cpu": ("32", "31", free if i == 0 else "31"), "memory": memory}) for i in (0, 1)
    ]
    return nrt(name, zones)


def test_a_change_of_free_amounts_travels_as_free_amounts() -> None:
    sent: list[bytes] = []
    feed = Feed(sent.append)
    for name in ("a", "b"):
        _event(feed, _free_nrt(name, "31"))
    feed.step()
    _event(feed, _free_nrt("a", "3"))
    feed.step()
    whole, batch = _messages(sent)
    assert isinstance(whole, Whole) and isinstance(batch, Batch)
    assert batch.records == ()
    ((name, free),) = batch.usage
    assert name == "a" and free[0]["cpu"] == 3000 and free[1]["cpu"] == 31000
    assert len(batch.events) == 1 and batch.events[0][1:] == ("noderesourcetopologies", "MODIFIED")

    async def run() -> InventoryState:
        state = InventoryState()
        fed = FedInventory(state, asyncio.get_running_loop(), FeederSpec())
        await _apply(fed, [whole, batch])
        return state

    state = asyncio.run(run())
    assert state.view is not None
    nodes = {n.name: n for n in state.view.nodes}
    assert nodes == feed.inventory.records  # the worker's records are the process's
    assert nodes["a"].zones[0].available["cpu"] == 3000


class _Process:
    """The handle ``start`` returns, for a process this test plays itself."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.exitcode: int | None = None
        self.killed = False

    def kill(self) -> None:
        self.killed = True

    terminate = kill

    def join(self, timeout: float | None = None) -> None:
        return None

    def is_alive(self) -> bool:
        return not self.killed


def test_a_delta_for_a_node_the_worker_lacks_restarts_the_process() -> None:
    import multiprocessing

    started: list[_Process] = []
    ends: list[Any] = []

    def start(spec: FeederSpec) -> tuple[Any, Any]:
        started.append(_Process(1000 + len(started)))
        receive, send = multiprocessing.Pipe(duplex=False)
        ends.append(send)  # open: the reader waits (this test hands messages to accept)
        return started[-1], receive

    sent: list[bytes] = []
    feed = Feed(sent.append)
    _event(feed, _free_nrt("a", "31"))
    feed.step()
    (whole,) = _messages(sent)
    stray = Batch((("zz", ({"cpu": 1},)),), (), None, (), whole.status)

    async def run() -> tuple[FedInventory, InventoryState]:
        state = InventoryState(metrics=WebhookMetrics())
        fed = FedInventory(
            state, asyncio.get_running_loop(), FeederSpec(), metrics=state.metrics, start=start
        )
        fed.start()
        fed.accept(whole)
        served = state.view
        fed.accept(stray)
        assert state.view is served  # the last good view stays
        return fed, state

    fed, state = asyncio.run(run())
    for end in ends:
        end.close()
    assert fed.restarts == 1 and started[0].killed
    assert state.metrics is not None
    assert state.metrics.inventory_updates.process_restarts.value() == 1


def _wait(predicate: Callable[[], bool], timeout: float, what: str) -> Any:
    async def wait() -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            await asyncio.sleep(0.01)

    return wait()


@contextlib.asynccontextmanager
async def _feeding(
    tmp_path: Path, names: list[str]
) -> AsyncIterator[tuple[FakeApiServer, InventoryState, FedInventory]]:
    """The test API server holding a Node and an NRT per name, and a worker's inventory
    fed by a real inventory process watching it, ready; stopped on the way out."""
    with running_apiserver(tmp_path) as fake:
        for name in names:
            fake.apply(api_node(name))
            fake.apply(api_nrt(name))
        spec = FeederSpec(kubeconfig=str(fake.write_kubeconfig(tmp_path / "kc")), live=FAST)
        state = InventoryState(metrics=WebhookMetrics())
        fed = FedInventory(state, asyncio.get_running_loop(), spec, metrics=state.metrics)
        state.live, state.synced = True, lambda: fed.synced
        state.last_sync = lambda: fed.last_sync
        fed.start()
        try:
            await _wait(lambda: state.ready, 30, "ready")
            yield fake, state, fed
        finally:
            fed.stop()


@pytest.mark.slow
async def test_the_inventory_process_feeds_the_worker_and_is_replaced_when_killed(
    tmp_path: Path,
) -> None:
    names = [f"n{i}" for i in range(8)]

    def cpu(name: str) -> int:
        view = state.view
        assert view is not None
        return {n.name: n for n in view.nodes}[name].zones[0].available["cpu"]

    async with _feeding(tmp_path, names) as (fake, state, fed):
        first = fed.pid
        assert first is not None and first != os.getpid()
        # Reviews go first when the worker and its inventory process compete for a core.
        ours = os.getpriority(os.PRIO_PROCESS, 0)
        assert os.getpriority(os.PRIO_PROCESS, first) == min(19, ours + feed_module.NICENESS)
        assert fed.full_builds == 1 and len(state.view.nodes) == 8  # type: ignore[union-attr]
        assert {r for r, _ in fed.sync()} == {"nodes", "noderesourcetopologies", "numatopologies"}
        before = state.view
        fake.apply(api_nrt("n3", free=2))
        await _wait(lambda: cpu("n3") == 2000, 10, "n3's change")
        after = state.view
        assert fed.full_builds == 1  # applied as a change, not a build
        old = _verdicts(before.snapshot, _cpu_pod(16))  # type: ignore[union-attr]
        new = _verdicts(after.snapshot, _cpu_pod(16))  # type: ignore[union-attr]
        assert {n for n in names if old[n] != new[n]} == {"n3"}
        metrics = state.metrics
        assert metrics is not None
        events = metrics.inventory_updates.events
        assert events.value(resource="noderesourcetopologies", type="MODIFIED") >= 1
        assert metrics.inventory_updates.latency.count() >= 1

        os.kill(first, signal.SIGKILL)
        await _wait(lambda: fed.restarts == 1, 10, "the restart")
        assert state.view is after  # served meanwhile
        await _wait(lambda: fed.full_builds == 2, 30, "the new process's build")
        assert fed.pid not in (None, first)
        assert metrics.inventory_updates.process_restarts.value() == 1
        fake.apply(api_nrt("n5", free=1))
        await _wait(lambda: cpu("n5") == 1000, 10, "a change through the new process")
        assert cpu("n3") == 2000
    assert fed._proc is not None and not fed._proc.is_alive()  # stopped with the worker


@pytest.mark.slow
async def test_relist_after_410_through_the_process_while_events_keep_coming(
    tmp_path: Path,
) -> None:
    names = [f"n{i}" for i in range(20)]

    def nodes() -> dict[str, Any]:
        view = state.view
        return {} if view is None else {n.name: n for n in view.nodes}

    async with _feeding(tmp_path, names) as (fake, state, fed):
        lists = len(fake.list_requests(API_NRTS))
        with churning(fake.apply, names):
            await asyncio.sleep(0.3)
            fake.down()
            fake.delete(API_NODES, "n2")
            fake.apply(api_node("n77"))
            fake.apply(api_nrt("n77"))
            fake.compact()  # the process's resourceVersions are gone: 410, relist
            fake.up()
            await _wait(lambda: "n77" in nodes(), 15, "n77 through the relist")
            await asyncio.sleep(0.3)
        objects = [o for r in (API_NODES, API_NRTS) for o in fake.objects(r)]
        truth = {n.name: n for n in build_inventory(objects).nodes}
        await _wait(lambda: nodes() == truth, 15, "the final objects")
        assert len(fake.list_requests(API_NRTS)) > lists  # relisted
        assert fed.full_builds == 1  # the relist arrived as a difference, not a Whole
        assert fed.restarts == 0


@pytest.mark.slow
async def test_while_the_process_is_down_the_view_ages_into_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dead inventory process is a watch that is down: the last good view is served,
    its sync time stops advancing, and past staleAfterSeconds it is stale (never denies);
    the new process's first build makes it fresh again."""
    monkeypatch.setattr(fed_module, "RESTART_INITIAL", 5.0)
    async with _feeding(tmp_path, ["n1"]) as (fake, state, fed):
        await asyncio.sleep(1.2)  # a heartbeat: the sync time moves while it runs
        assert not state.is_stale(3.0)  # watches end every second or two (FAST)
        first = fed.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        await _wait(lambda: fed.restarts == 1, 10, "the loss noticed")
        frozen = fed.last_sync
        await asyncio.sleep(3.5)  # the restart waits 5 s
        assert fed.last_sync == frozen and state.view is not None
        assert state.is_stale(3.0)  # older than the threshold: never denies
        assert state.ready  # as with a watch that is down: served, stale
        fake.hold_lists(API_NODES)  # the new process cannot finish its first list
        await _wait(lambda: fed.pid not in (None, first), 10, "the new process")
        await asyncio.sleep(2.5)  # its heartbeats (not synced yet) come meanwhile
        assert state.ready and fed.last_sync == frozen  # the old status stands
        assert fed.full_builds == 1
        fake.release_lists(API_NODES)
        await _wait(lambda: fed.full_builds == 2, 30, "the new process's build")
        assert not state.is_stale(3.0)


@pytest.mark.slow
async def test_a_failing_inventory_process_says_why_and_is_restarted(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    spec = FeederSpec(kubeconfig=str(tmp_path / "missing-kubeconfig"), live=FAST)
    state = InventoryState(metrics=WebhookMetrics())
    fed = FedInventory(state, asyncio.get_running_loop(), spec, metrics=state.metrics)
    fed.start()
    try:
        first = fed._proc
        await _wait(lambda: fed.restarts >= 1, 20, "the restart")
        assert first is not None and first.exitcode == 1
        assert not state.ready
    finally:
        fed.stop()
    err = capfd.readouterr().err
    assert '"msg":"inventory process failed"' in err and "missing-kubeconfig" in err
