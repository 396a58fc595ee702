"""The inventory process (webhook/inventory/feed.py, one per replica): what it sends its
workers, applied there, gives the inventory of a full build of the final objects, for a
worker there from the start and one that joins later; a usage-only change travels as free
amounts; a change the worker cannot place makes it connect again; against the list/watch
test server over TLS, with the real process, an event changes exactly its node's verdicts
and a killed process is restarted while the last good view is served."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import shutil
import signal
import time
import weakref
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.feasibility.verdicts import evaluate
from core.inventory.build import build_inventory
from core.inventory.incremental import ObjectKey
from core.model import PodIntent
from core.snapshot.snapshot import Snapshot
from tests.builders.events import events
from tests.builders.model import container, intent, intents
from tests.builders.objects import nrt, zone
from tests.webhook.fake_apiserver import NODES as API_NODES
from tests.webhook.fake_apiserver import NRTS as API_NRTS
from tests.webhook.fake_apiserver import FakeApiServer, running_apiserver
from tests.webhook.fake_apiserver import node as api_node
from tests.webhook.fake_apiserver import nrt as api_nrt
from tests.webhook.fake_apiserver_churn import churning
from webhook.inventory import feed as feed_module
from webhook.inventory import owner as owner_module
from webhook.inventory.fed import FedInventory
from webhook.inventory.feed import Batch, Fanout, Feed, Whole, decode, encode
from webhook.inventory.live import (
    BOUND_PODS,
    NODE_RESOURCE_TOPOLOGIES,
    NODES,
    NUMATOPOLOGIES,
    Timing,
)
from webhook.inventory.owner import FeederSpec, InventoryOwner, listen, socket_address
from webhook.inventory.state import InventoryState
from webhook.metrics import WebhookMetrics

RESOURCES = {
    "Node": NODES,
    "NodeResourceTopology": NODE_RESOURCE_TOPOLOGIES,
    "Numatopology": NUMATOPOLOGIES,
    "Pod": BOUND_PODS,
}
FAST = {
    "timing": Timing(watch_timeout=1, backoff_initial=0.05, backoff_max=0.4, request_timeout=5.0)
}


def _event(feed: Feed, obj: dict[str, Any], *, delete: bool = False) -> None:
    meta = obj["metadata"]
    reflector = SimpleNamespace(resource=RESOURCES[obj["kind"]])
    key = (meta.get("namespace", ""), meta["name"])
    feed.on_event(reflector, "DELETED" if delete else "MODIFIED", key, obj)


class _Worker:
    """A worker's end as the process sees it: what it was sent."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def send_bytes(self, buf: bytes) -> None:
        self.sent.append(buf)

    def close(self) -> None:
        pass


def _feed(**kwargs: Any) -> tuple[Feed, Fanout, _Worker]:
    """A Feed with one worker connected from the start."""
    fanout, worker = Fanout(), _Worker()
    fanout.join(worker)
    return Feed(fanout, **kwargs), fanout, worker


def _messages(sent: list[bytes]) -> list[Whole | Batch]:
    out = [decode(b) for b in sent]
    sent.clear()
    return out


def _fed(state: InventoryState) -> FedInventory:
    """A worker's end fed by hand (``accept``): it does not connect."""
    return FedInventory(state, asyncio.get_running_loop(), "unused", metrics=state.metrics)


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
    late=st.integers(0, 12),
    probes=st.lists(intents(), min_size=1, max_size=3),
)
def test_what_the_process_sends_gives_the_full_build(
    events: list[tuple[bool, dict[str, Any]]],
    first: int,
    batch: int,
    unsynced: int,
    late: int,
    probes: list[PodIntent],
) -> None:
    """Events before the first build arrive in the Whole, later ones in Batches of at most
    ``batch`` events; the worker's view is the full build of the final objects. For the
    first ``unsynced`` steps a type has not listed yet: the events are taken into the
    inventory as they come, and the Whole still reports every one of them. A second worker
    that joins before step ``late`` (a reconnect) starts with a Whole of its own and ends
    with the same view."""
    feed, fanout, worker = _feed(max_batch=batch)
    second = _Worker()
    steps = [0]
    feed.synced = lambda: steps[0] >= unsynced
    final: dict[ObjectKey, dict[str, Any]] = {}
    before_whole = [0]

    def step() -> None:
        if steps[0] == late:
            fanout.join(second)
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

    async def run() -> list[InventoryState]:
        play(events[:first])
        step()
        for start in range(first, len(events), 3):
            play(events[start : start + 3])
            step()
        while not feed.built or steps[0] <= late:
            step()
        messages = _messages(worker.sent)
        assert isinstance(messages[0], Whole)  # nothing before it
        assert len(messages[0].events) == before_whole[0]
        assert all(isinstance(m, Batch) and len(m.events) <= batch for m in messages[1:])
        joined = _messages(second.sent)
        assert isinstance(joined[0], Whole)
        assert all(isinstance(m, Batch) for m in joined[1:])
        states = [InventoryState(), InventoryState()]
        await _apply(_fed(states[0]), messages)
        await _apply(_fed(states[1]), joined)
        return states

    states = asyncio.run(run())
    full = build_inventory(list(final.values()))
    expected = Snapshot.build(full.nodes)
    for state in states:
        assert state.view is not None
        snap = state.view.snapshot
        assert sorted(snap.nodes, key=lambda n: n.name) == list(full.nodes)
        assert sorted(state.view.errors) == sorted(full.errors)
        for pod in [*probes, _cpu_pod(4), _cpu_pod(20)]:
            assert _verdicts(snap, pod) == _verdicts(expected, pod)


def _free_nrt(name: str, free: str) -> dict[str, Any]:
    memory = ("128Gi", "120Gi", "100Gi")
    zones = [
        zone(i, {"cpu": ("32", "31", free if i == 0 else "31"), "memory": memory}) for i in (0, 1)
    ]
    return nrt(name, zones)


def test_the_first_build_returns_its_garbage_before_a_worker_reads_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The heap is trimmed between pickling the Whole and sending it: while the workers
    read it, the process holds the bytes, not also the snapshot and the lists' garbage
    (the replica's startup peak)."""
    calls: list[str] = []
    monkeypatch.setattr(feed_module, "release_free_heap", lambda: calls.append("trim") or True)
    feed, _, worker = _feed()
    sent = worker.send_bytes
    worker.send_bytes = lambda buf: (calls.append("send"), sent(buf))[1]  # type: ignore[method-assign]
    _event(feed, _free_nrt("a", "31"))
    feed.step()
    assert calls == ["trim", "send", "trim"]
    (whole,) = _messages(worker.sent)
    assert isinstance(whole, Whole) and [n.name for n in whole.snapshot.nodes] == ["a"]


def test_a_change_of_free_amounts_travels_as_free_amounts() -> None:
    feed, _, worker = _feed()
    for name in ("a", "b"):
        _event(feed, _free_nrt(name, "31"))
    feed.step()
    _event(feed, _free_nrt("a", "3"))
    feed.step()
    whole, batch = _messages(worker.sent)
    assert isinstance(whole, Whole) and isinstance(batch, Batch)
    assert batch.records == ()
    ((name, free),) = batch.usage
    assert name == "a" and free[0]["cpu"] == 3000 and free[1]["cpu"] == 31000
    assert len(batch.events) == 1 and batch.events[0][1:] == ("noderesourcetopologies", "MODIFIED")

    async def run() -> InventoryState:
        state = InventoryState()
        await _apply(_fed(state), [whole, batch])
        return state

    state = asyncio.run(run())
    assert state.view is not None
    nodes = {n.name: n for n in state.view.nodes}
    assert nodes == feed.inventory.records  # the worker's records are the process's
    assert nodes["a"].zones[0].available["cpu"] == 3000


def test_a_whole_arrives_with_the_room_the_worker_reserves() -> None:
    """The Whole's packed arrays are made, as they are read, at the length the worker's
    editor reserves: the view is served over them as they came, never copied (the worker
    does not hold them twice; docs/inventory.md, "The replica at ready"). Their values are
    the process's build, byte for byte, then zeros."""
    feed, _, worker = _feed()
    for name in ("a", "b", "c"):
        _event(feed, _free_nrt(name, str(ord(name) % 20)))
    feed.step()
    (whole,) = _messages(worker.sent)
    sent = whole.snapshot.packed
    built = feed._snapshot().packed
    state = InventoryState()

    async def run(messages: list[Whole | Batch]) -> FedInventory:
        fed = _fed(state)
        await _apply(fed, messages)
        return fed

    fed = asyncio.run(run([whole]))
    assert state.view is not None and fed.editor is not None
    served = state.view.snapshot.packed
    for name, array in fed.editor.store.arrays.items():
        assert getattr(served, name) is array is getattr(sent, name), name
        values = getattr(built, name)
        assert len(array) > len(values) and array[: len(values)] == values, name
        assert not any(array[len(values) :]), name
    assert {n.name: n for n in state.view.nodes} == feed.inventory.records


class _Cyclic:
    """An object in a reference cycle: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


async def test_a_wholes_records_leave_the_collectors_reach_until_the_next_whole() -> None:
    """After a Whole the worker freezes what is alive (heap.settle_records): a full
    collection no longer walks the records, the cause of its longest stalls. A Batch
    freezes nothing. The first Whole leaves frozen what was frozen before it (the pages
    forked workers share); the next one unfreezes first: a cycle dropped since is
    collected."""
    feed, _, worker = _feed()
    for name in ("a", "b"):
        _event(feed, _free_nrt(name, "31"))
    feed.step()
    first = list(worker.sent)
    (whole,) = _messages(worker.sent)
    state = InventoryState()
    fed = _fed(state)
    before: _Cyclic | None = _Cyclic()  # frozen before the first Whole, as settle_heap does
    before_gone = weakref.ref(before)
    gc.freeze()
    del before
    held: _Cyclic | None = _Cyclic()
    gone = weakref.ref(held)
    try:
        await _apply(fed, [whole])
        await asyncio.sleep(0)  # settle_records runs once the Whole's callback is over
        assert before_gone() is not None  # not unfrozen, so not walked by the collection
        assert state.view is not None
        record = state.view.snapshot.nodes.base[0]
        assert gc.is_tracked(record)
        assert all(o is not record for o in gc.get_objects())  # in no generation: frozen
        frozen = gc.get_freeze_count()
        _event(feed, _free_nrt("a", "3"))
        feed.step()
        await _apply(fed, _messages(worker.sent))
        await asyncio.sleep(0)
        assert gc.get_freeze_count() <= frozen  # a Batch freezes nothing more
        del held  # now garbage in a cycle, and frozen: no collection sees it
        gc.collect()
        assert gone() is not None
        await _apply(fed, [decode(b) for b in first])  # a Whole again
        await asyncio.sleep(0)
        assert gone() is None and before_gone() is None
    finally:
        gc.unfreeze()


async def test_a_delta_for_a_node_the_worker_lacks_makes_it_connect_again() -> None:
    """Over a real Unix socket: the worker keeps its last good view, hangs up, connects
    again, and takes the new connection's Whole."""
    feed, _, worker = _feed()
    _event(feed, _free_nrt("a", "31"))
    feed.step()
    (whole,) = _messages(worker.sent)
    stray = Batch((("zz", ({"cpu": 1},)),), (), None, (), whole.status)
    address = socket_address()
    listener = listen(address)
    loop = asyncio.get_running_loop()
    state = InventoryState(metrics=WebhookMetrics())
    fed = FedInventory(state, loop, address, metrics=state.metrics)
    fed.start()
    try:
        first = await asyncio.to_thread(listener.accept)
        first.send_bytes(encode(whole))
        await _wait(lambda: state.view is not None, 5, "the Whole")
        served = state.view
        first.send_bytes(encode(stray))
        second = await asyncio.to_thread(listener.accept)  # it hung up and came back
        assert await asyncio.to_thread(first.poll, 5) and _ended(first)
        assert state.view is served  # the last good view stays
        assert fed.losses == 1 and fed.full_builds == 1
        assert state.metrics is not None
        assert state.metrics.inventory_updates.process_restarts.value() == 1
        second.send_bytes(encode(whole))
        await _wait(lambda: fed.full_builds == 2, 5, "the new connection's Whole")
    finally:
        fed.stop()
        listener.close()
        shutil.rmtree(Path(address).parent, ignore_errors=True)


def _ended(conn: Any) -> bool:
    try:
        conn.recv_bytes()
    except EOFError:
        return True
    return False


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
) -> AsyncIterator[tuple[FakeApiServer, InventoryState, FedInventory, InventoryOwner]]:
    """The test API server holding a Node and an NRT per name, and a worker's inventory
    fed by a real inventory process watching it, ready; stopped on the way out."""
    with running_apiserver(tmp_path) as fake:
        for name in names:
            fake.apply(api_node(name))
            fake.apply(api_nrt(name))
        kubeconfig = str(fake.write_kubeconfig(tmp_path / "kc"))
        owner = InventoryOwner(FeederSpec(socket_address(), kubeconfig=kubeconfig, live=FAST))
        owner.start()
        state = InventoryState(metrics=WebhookMetrics())
        fed = FedInventory(state, asyncio.get_running_loop(), owner.address, metrics=state.metrics)
        fed.start()
        try:
            await _wait(lambda: state.ready, 30, "ready")
            yield fake, state, fed, owner
        finally:
            fed.stop()
            owner.stop()


@pytest.mark.slow
async def test_the_inventory_process_feeds_the_worker_and_is_restarted_when_killed(
    tmp_path: Path,
) -> None:
    names = [f"n{i}" for i in range(8)]

    def cpu(name: str) -> int:
        view = state.view
        assert view is not None
        return {n.name: n for n in view.nodes}[name].zones[0].available["cpu"]

    async with _feeding(tmp_path, names) as (fake, state, fed, owner):
        first = owner.pid
        assert first is not None and first != os.getpid()
        # Reviews go first when the workers and the inventory process compete for a core.
        ours = os.getpriority(os.PRIO_PROCESS, 0)
        assert os.getpriority(os.PRIO_PROCESS, first) == min(19, ours + owner_module.NICENESS)
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
        await _wait(lambda: fed.losses == 1, 10, "the connection lost")
        assert state.view is after  # served meanwhile
        await _wait(lambda: fed.full_builds == 2, 30, "the new process's Whole")
        assert owner.restarts == 1 and owner.pid not in (None, first)
        assert metrics.inventory_updates.process_restarts.value() == 1
        fake.apply(api_nrt("n5", free=1))
        await _wait(lambda: cpu("n5") == 1000, 10, "a change through the new process")
        assert cpu("n3") == 2000
        proc = owner._proc
    assert proc is not None and not proc.is_alive()  # stopped with its parent


@pytest.mark.slow
async def test_two_workers_share_one_process_and_a_reconnect_gets_a_whole(
    tmp_path: Path,
) -> None:
    """One inventory process per replica: a second worker connects to the same socket,
    gets a Whole of the records held then, and follows the same changes."""
    async with _feeding(tmp_path, ["n1", "n2"]) as (fake, state, fed, owner):
        fake.apply(api_nrt("n1", free=3))
        other = InventoryState()
        late = FedInventory(other, asyncio.get_running_loop(), owner.address)
        late.start()
        try:
            await _wait(lambda: other.view is not None, 10, "the second worker's Whole")
            fake.apply(api_nrt("n2", free=4))

            def free(s: InventoryState) -> dict[str, int]:
                nodes = s.view.nodes if s.view is not None else ()
                return {n.name: n.zones[0].available["cpu"] for n in nodes}

            want = {"n1": 3000, "n2": 4000}
            await _wait(lambda: free(state) == want == free(other), 10, "both workers")
            assert late.full_builds == 1 and fed.full_builds == 1
            assert owner.restarts == 0
        finally:
            late.stop()


@pytest.mark.slow
async def test_relist_after_410_through_the_process_while_events_keep_coming(
    tmp_path: Path,
) -> None:
    names = [f"n{i}" for i in range(20)]

    def nodes() -> dict[str, Any]:
        view = state.view
        return {} if view is None else {n.name: n for n in view.nodes}

    async with _feeding(tmp_path, names) as (fake, state, fed, owner):
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
        assert owner.restarts == 0 and fed.losses == 0


@pytest.mark.slow
async def test_while_the_process_is_down_the_view_ages_into_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dead inventory process is a watch that is down: the last good view is served,
    its sync time stops advancing, and past staleAfterSeconds it is stale (never denies);
    the restarted process's Whole makes it fresh again."""
    monkeypatch.setattr(owner_module, "RESTART_INITIAL", 5.0)
    async with _feeding(tmp_path, ["n1"]) as (fake, state, fed, owner):
        await asyncio.sleep(1.2)  # a heartbeat: the sync time moves while it runs
        assert not state.is_stale(3.0)  # watches end every second or two (FAST)
        first = owner.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        await _wait(lambda: fed.losses == 1, 10, "the loss noticed")
        frozen = fed.last_sync
        await asyncio.sleep(3.5)  # the restart waits 5 s
        assert fed.last_sync == frozen and state.view is not None
        assert state.is_stale(3.0)  # older than the threshold: never denies
        assert state.ready  # as with a watch that is down: served, stale
        fake.hold_lists(API_NODES)  # the new process cannot finish its first list
        await _wait(lambda: owner.pid not in (None, first), 10, "the new process")
        await asyncio.sleep(2.5)
        assert state.ready and fed.last_sync == frozen  # the old status stands
        assert fed.full_builds == 1
        fake.release_lists(API_NODES)
        await _wait(lambda: fed.full_builds == 2, 30, "the new process's Whole")
        assert not state.is_stale(3.0)


@pytest.mark.slow
async def test_a_failing_inventory_process_says_why_and_is_restarted(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    spec = FeederSpec(socket_address(), kubeconfig=str(tmp_path / "missing-kubeconfig"))
    owner = InventoryOwner(spec)
    state = InventoryState(metrics=WebhookMetrics())
    fed = FedInventory(state, asyncio.get_running_loop(), owner.address, metrics=state.metrics)
    owner.start()
    fed.start()
    try:
        first = owner._proc
        await _wait(lambda: owner.restarts >= 1, 20, "the restart")
        assert first is not None and first.exitcode == 1
        assert not state.ready
    finally:
        fed.stop()
        owner.stop()
    err = capfd.readouterr().err
    assert '"msg":"inventory process failed"' in err and "missing-kubeconfig" in err
