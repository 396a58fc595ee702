"""The incremental inventory (issue 14): random add/update/delete events of Nodes, NRTs,
Numatopologies and Pods applied one by one give the inventory, and the snapshot verdicts,
of a full build from the final objects."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.feasibility.decision import decide
from core.feasibility.verdicts import evaluate
from core.inventory.build import build_inventory
from core.inventory.incremental import IncrementalInventory, ObjectKey, parse_object
from core.inventory.merge import merge
from core.model import NumaZone, PodIntent
from core.snapshot.delta import SnapshotEditor
from core.snapshot.rows import resource_names, shape_rows, usage_rows
from core.snapshot.snapshot import Snapshot, rows_of, within_allocatable
from core.snapshot.snapshot import (
    _topology_key as topology_key,
)
from tests.builders.events import NAMES, events, object_key
from tests.builders.model import container, intents, listed_rows
from tests.builders.model import intent as pod_intent
from tests.builders.objects import koord_status, node, nrt, pod, zone


def _cpu_pod(cpus: int, **devices: int) -> PodIntent:
    return pod_intent(scheduler_name="", containers=[container(cpu=cpus, memory=2**30, **devices)])


def _verdicts(snap: Snapshot, intent: PodIntent) -> dict[str, tuple[Any, ...]]:
    ev = evaluate(intent, snap)
    return {v.name: (v.verdict, v.numa, v.preferred, v.reason) for v in ev.verdicts}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    events=events,
    probes=st.lists(intents(), min_size=1, max_size=3),
    batch=st.integers(1, 6),
)
def test_incremental_equals_full_build(
    events: list[tuple[bool, dict[str, Any]]], probes: list[PodIntent], batch: int
) -> None:
    inventory = IncrementalInventory()
    editor = SnapshotEditor(Snapshot.build(()))
    final: dict[ObjectKey, dict[str, Any]] = {}
    for n, (delete, obj) in enumerate(events, 1):
        key = object_key(obj)
        if delete:
            final.pop(key, None)
            inventory.delete(key)
        else:
            final[key] = obj
            inventory.set(parse_object(obj, inventory.units))
        if n % batch == 0 or n == len(events):
            editor.apply(inventory.flush())
    _assert_same_as_full_build(inventory, editor, final, probes)


def _assert_same_as_full_build(
    inventory: IncrementalInventory,
    editor: SnapshotEditor,
    final: dict[ObjectKey, dict[str, Any]],
    probes: list[PodIntent],
) -> None:
    full = build_inventory(list(final.values()))
    assert inventory.nodes() == full.nodes
    assert sorted(inventory.errors()) == sorted(full.errors)
    snap = editor.snapshot
    expected = Snapshot.build(full.nodes)
    assert sorted(snap.nodes, key=lambda n: n.name) == list(full.nodes)
    assert {snap.nodes[i].name: i for i in range(len(snap.nodes))} == dict(snap.name_index)
    for intent in [*probes, _cpu_pod(4), _cpu_pod(20)]:
        assert _verdicts(snap, intent) == _verdicts(expected, intent)
        got, want = evaluate(intent, snap), evaluate(intent, expected)
        assert got.counts == want.counts
        assert decide(got).allowed == decide(want).allowed
        assert decide(got).warnings == decide(want).warnings
    # A class is monotone (its nodes skipped once it cannot fit empty) only while no node
    # of it has more free than allocatable (a patched class may stay not monotone).
    for i, record in enumerate(snap.nodes):
        if not within_allocatable(record.zones, [z.available for z in record.zones]):
            assert not snap.topo_monotone[snap.topo_of[snap.shape_of[i]]], record.name
    # The patched arrays hold exactly what packing each live shape afresh gives (the
    # usage-only rows and reused slots included).
    names = snap.packed.res_names
    for s in set(snap.shape_of):
        rep = snap.nodes[snap.shape_rep[s]]
        assert listed_rows(rows_of(snap.packed, s)) == listed_rows(shape_rows(rep, names))


def test_within_allocatable_holds_only_while_every_free_amount_is_within_its_zones():
    # The reference of the monotone check above: tested on its own, since the check
    # calls it too (a wrong comparison here would pass both).
    zones = [
        NumaZone(0, {}, {"cpu": 8000, "memory": 64}, {}),
        NumaZone(1, {}, {"cpu": 8000}, {}),
    ]
    assert within_allocatable(zones, [{"cpu": 8000, "memory": 64}, {"cpu": 0}])
    assert within_allocatable(zones, [{}, {"memory": 0}])  # absent: allocatable 0
    assert not within_allocatable(zones, [{"cpu": 8001}, {}])
    assert not within_allocatable(zones, [{"cpu": 1}, {"memory": 1}])  # zone 1 has none
    assert not within_allocatable(zones, [{"memory": 64}, {"cpu": 9000}])


# Usage churn as NFD and koordlet write it: a node's NRT again with new free amounts per
# zone (and one of two memory amounts), or its Koordinator pod placed on other NUMA nodes
# (its NUMA states), so most events find the node alone in its shape.
PLACEMENTS = (None, {0: {"cpu": "4"}}, {1: {"cpu": "2"}}, {0: {"cpu": "1"}, 1: {"cpu": "1"}})
usage_events = st.lists(
    st.tuples(
        st.sampled_from(NAMES),
        st.integers(0, 33),  # over 31 (the allocatable): a class that is not monotone
        st.integers(0, 33),
        st.booleans(),
        st.sampled_from(range(len(PLACEMENTS))),
        st.integers(0, 4),  # 0: the node goes (its NRT and pod deleted): the last takes its index
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    changes=usage_events,
    probes=st.lists(intents(), min_size=1, max_size=3),
    batch=st.integers(1, 6),
    policy=st.sampled_from(["single-numa-node", "restricted", "best-effort"]),
    deltas=st.booleans(),
)
def test_usage_churn_rewritten_in_place_equals_full_build(
    changes: list[tuple[str, int, int, bool, int, int]],
    probes: list[PodIntent],
    batch: int,
    policy: str,
    deltas: bool,
) -> None:
    """``deltas``: the usage-only changes reach the editor as the inventory process sends
    them (free amounts, ``split_usage``), not as records."""
    inventory = IncrementalInventory()
    final: dict[ObjectKey, dict[str, Any]] = {}

    def place(name: str, placement: int) -> None:
        numa = PLACEMENTS[placement]
        obj = pod(f"p-{name}", node=name, annotations=koord_status(numa or {}, cpuset="1-2"))
        if numa is None:
            final.pop(object_key(obj), None)
            inventory.delete(object_key(obj))
        else:
            final[object_key(obj)] = obj
            inventory.set(parse_object(obj, inventory.units))

    def put(name: str, free: tuple[int, int], full_memory: bool) -> None:
        memory = ("128Gi", "120Gi", "120Gi" if full_memory else "64Gi")
        zones = [zone(i, {"cpu": ("32", "31", str(free[i])), "memory": memory}) for i in (0, 1)]
        obj = nrt(name, zones, attributes={"topologyManagerPolicy": policy})
        final[object_key(obj)] = obj
        inventory.set(parse_object(obj, inventory.units))

    for k, name in enumerate(NAMES):
        put(name, (k, 31 - k), True)
    inventory.flush()
    editor = SnapshotEditor(Snapshot.build(inventory.nodes()), reserve=True)

    def drop(name: str) -> None:
        place(name, 0)
        key = object_key(nrt(name, []))
        final.pop(key, None)
        inventory.delete(key)

    for n, (name, free0, free1, full_memory, placement, gone) in enumerate(changes, 1):
        if not gone:
            drop(name)
        elif n % 2:
            place(name, placement)
        else:
            put(name, (free0, free1), full_memory)
        if n % batch == 0 or n == len(changes):
            flushed = inventory.flush()
            if not deltas:
                editor.apply(flushed)
                continue
            records, usage = editor.split_usage(
                (name, tuple(z.available for z in flushed.pop(name).zones))  # type: ignore[union-attr]
                for name in inventory.usage_flushed
            )
            assert not records  # the process's usage-only changes keep the worker's keys
            editor.apply(flushed, usage)
    _assert_same_as_full_build(inventory, editor, final, probes)


def test_usage_churn_reuses_dead_shapes_and_keeps_every_verdict() -> None:
    """Most watch events change usage only: every one makes a new shape and kills one.
    Dead shapes stay listed in their class until half of it is dead, then their slots
    are reused; throughout, verdicts and packed rows equal a whole build's."""
    import random

    rng = random.Random(5)
    settings = {"topologyManagerPolicy": "single-numa-node"}
    names = [f"n{i}" for i in range(12)]
    inventory = IncrementalInventory()
    editor = SnapshotEditor(Snapshot.build(()))
    pods = [_cpu_pod(4), _cpu_pod(12), _cpu_pod(30)]
    most_shapes = 0
    for step in range(150):
        for name in rng.sample(names, 3) if step else names:
            free = [str(rng.randint(0, 31)) for _ in (0, 1)]
            obj = nrt(name, [zone(i, {"cpu": ("32", "31", free[i])}) for i in (0, 1)],
                      attributes=settings)  # fmt: skip
            inventory.set(parse_object(obj, inventory.units))
        snap = editor.apply(inventory.flush())
        most_shapes = max(most_shapes, snap.packed.n_shapes)
        if step % 10 == 0 or step == 149:
            expected = Snapshot.build(inventory.nodes())
            for pod in pods:
                assert _verdicts(snap, pod) == _verdicts(expected, pod)
                # early exit: the order differs (arrival vs names), the outcome does not
                quick, whole = evaluate(pod, snap, full=False), evaluate(pod, expected)
                assert bool(quick.counts["fits"]) == bool(whole.counts["fits"])
            for s in set(snap.shape_of):
                rep = snap.nodes[snap.shape_rep[s]]
                assert listed_rows(rows_of(snap.packed, s)) == listed_rows(
                    shape_rows(rep, snap.packed.res_names)
                )
    assert editor.rebuilt == 0
    # 12 nodes, 450 usage changes: slots were reused, the arrays did not grow per event
    assert most_shapes < 12 + 2 * 16 + 12


def test_a_usage_change_keeps_the_record_and_writes_only_untracked_atoms() -> None:
    """A usage-only change leaves the node's record as it was and writes its free amounts
    and NUMA states beside it, as atoms the cyclic collector stops tracking; reading the
    node gives the new record, in the new snapshot only."""
    import gc

    settings = {"topologyManagerPolicy": "single-numa-node"}
    inventory = IncrementalInventory()

    def put(name: str, free: tuple[str, str]) -> None:
        obj = nrt(name, [zone(i, {"cpu": ("32", "31", free[i])}) for i in (0, 1)],
                  attributes=settings)  # fmt: skip
        inventory.set(parse_object(obj, inventory.units))

    for name in ("a", "b"):
        put(name, ("31", "31"))
    editor = SnapshotEditor(Snapshot.build(inventory.nodes()))
    editor.apply(inventory.flush())
    before = editor.snapshot
    put("a", ("3", "30"))
    after = editor.apply(inventory.flush())
    i = after.name_index["a"]
    assert after.nodes.base[i] is before.nodes.base[i]  # no new record kept
    assert after.nodes[i] == inventory.nodes()[0] and before.nodes[i] != after.nodes[i]
    assert [z.available["cpu"] for z in after.nodes[i].zones] == [3000, 30000]
    gc.collect()
    assert after.nodes.usage[i] is not None and not gc.is_tracked(after.nodes.usage[i])
    put("a", ("5", "5"))
    put("b", ("1", "1"))
    inventory.flush()
    structural = {"a": editor.snapshot.nodes[i], "b": None}  # a removed: b moves to 0 or 1
    snap = editor.apply({**inventory.flush(), **structural})
    assert list(snap.nodes) == [after.nodes[i]]


def test_usage_rows_are_the_rows_of_the_record() -> None:
    """A new shape of a known topology class copies the class's rows but for available
    amounts and NUMA states: the same rows as computed from the record."""
    settings = {"topologyManagerPolicy": "single-numa-node"}
    a = nrt("a", [zone(i, {"cpu": ("32", "31", "20"), "memory": ("64Gi", "60Gi", "10Gi")})
                  for i in (0, 1)], attributes=settings)  # fmt: skip
    b = nrt("b", [zone(i, {"cpu": ("32", "31", str(3 + i)), "memory": ("64Gi", "60Gi", "1Gi")})
                  for i in (0, 1)], attributes=settings)  # fmt: skip
    inventory = IncrementalInventory()
    for obj in (a, b):
        inventory.set(parse_object(obj, inventory.units))
    inventory.flush()
    na, nb = inventory.records["a"], inventory.records["b"]
    names = resource_names([na, nb])
    assert listed_rows(usage_rows(nb, names, shape_rows(na, names))) == listed_rows(
        shape_rows(nb, names)
    )
    assert listed_rows(shape_rows(na, names)) != listed_rows(shape_rows(nb, names))


def test_one_event_changes_exactly_that_nodes_verdicts() -> None:
    objs = [
        nrt(
            n,
            [zone(i, {"cpu": ("32", "31", "20")}) for i in (0, 1)],
            attributes={"topologyManagerPolicy": "single-numa-node"},
        )
        for n in NAMES
    ]
    inventory = IncrementalInventory()
    for obj in objs:
        inventory.set(parse_object(obj, inventory.units))
    editor = SnapshotEditor(Snapshot.build(()))
    before = editor.apply(inventory.flush())
    busy = nrt(
        "c",
        [zone(i, {"cpu": ("32", "31", "2")}) for i in (0, 1)],
        attributes={"topologyManagerPolicy": "single-numa-node"},
    )
    inventory.set(parse_object(busy, inventory.units))
    changes = inventory.flush()
    assert list(changes) == ["c"]
    after = editor.apply(changes)
    old, new = _verdicts(before, _cpu_pod(8)), _verdicts(after, _cpu_pod(8))
    assert {n for n in NAMES if old[n] != new[n]} == {"c"}
    assert new["c"][0] == "no-room-now" and old["c"][0] == "fits"
    assert after.structure is before.structure  # only usage changed
    assert after.usage_gen != before.usage_gen


def test_the_sharer_stays_bounded_under_usage_churn(monkeypatch) -> None:
    import core.inventory.incremental as incremental

    monkeypatch.setattr(incremental, "SHARE_LIMIT", 50)
    inventory = IncrementalInventory()
    final = {}
    for step in range(300):
        name = NAMES[step % len(NAMES)]
        obj = nrt(name, [zone(i, {"cpu": ("32", "31", str(step % 31))}) for i in (0, 1)])
        final[name] = obj
        inventory.set(parse_object(obj, inventory.units))
        inventory.flush()
        assert len(inventory.share) <= 50 + 16 * len(NAMES) + 40
    assert inventory.nodes() == build_inventory(list(final.values())).nodes


def test_a_resource_no_node_reports_any_more_is_not_checked_after_updates() -> None:
    """The only GPU node loses its GPUs: a whole build no longer knows the resource (the
    kubelet drops what the node does not report), so a GPU pod must not turn never-fits on
    the other nodes just because the snapshot was patched instead of built."""
    zones = [zone(i, {"cpu": ("32", "31", "31"), "memory": ("128Gi", "120Gi")}) for i in (0, 1)]
    plain = [node("a", allocatable={"cpu": "64", "memory": "256Gi"}), nrt("a", zones)]
    gpu = {"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": "4"}
    inventory = IncrementalInventory()
    editor = SnapshotEditor(Snapshot.build(()))
    for obj in (*plain, node("b", allocatable=gpu)):
        inventory.set(parse_object(obj, inventory.units))
    editor.apply(inventory.flush())
    inventory.set(parse_object(node("b", allocatable={"cpu": "64"}), inventory.units))
    snap = editor.apply(inventory.flush())
    pod_gpu = _cpu_pod(2, **{"nvidia.com/gpu": 1})
    expected = Snapshot.build(build_inventory([*plain, node("b", allocatable={"cpu": "64"})]).nodes)
    assert _verdicts(snap, pod_gpu) == _verdicts(expected, pod_gpu)
    assert _verdicts(snap, pod_gpu)["a"][0] == "fits"


def _free(name: str, cpu: str, memory: str | None = "100Gi", **attributes: str) -> dict[str, Any]:
    mem = ("128Gi", "120Gi", memory) if memory else ("128Gi", "120Gi")
    zones = [zone(i, {"cpu": ("32", "31", cpu), "memory": mem}) for i in (0, 1)]
    return nrt(name, zones, attributes=attributes or {"topologyManagerPolicy": "restricted"})


def test_a_change_of_free_amounts_only_skips_the_merge_and_the_topology_key(
    monkeypatch,
) -> None:
    """Under churn most events rewrite free amounts only: the record is patched
    (incremental._with_usage) and keeps its topology class (core/inventory/usage_only.py), with the
    result of the whole path; any other change, or a free amount the NRT leaves out
    (merge derives it from bound pods), takes the whole path."""
    import core.inventory.incremental as incremental
    import core.snapshot.delta as delta
    import core.snapshot.draft as draft

    merged, keyed = [], []
    monkeypatch.setattr(incremental, "merge", lambda *a: merged.append(a[0]) or merge(*a))

    def key(n: Any, *memo: Any) -> Any:
        return keyed.append(n.name) or topology_key(n, *memo)

    monkeypatch.setattr(delta, "_topology_key", key)
    monkeypatch.setattr(draft, "_topology_key", key)
    final = {n: _free(n, "20") for n in NAMES}
    inventory = IncrementalInventory()
    for obj in final.values():
        inventory.set(parse_object(obj, inventory.units))
    editor = SnapshotEditor(Snapshot.build(()))
    editor.apply(inventory.flush())
    capacity = inventory.records["b"].zones[0].capacity

    def event(obj: dict[str, Any]) -> Snapshot:
        final[obj["metadata"]["name"]] = obj
        merged.clear(), keyed.clear()
        inventory.set(parse_object(obj, inventory.units))
        return editor.apply(inventory.flush())

    snap = event(_free("b", "3"))
    assert merged == [] and keyed == []
    assert inventory.records["b"].zones[0].capacity is capacity  # still shared
    assert _verdicts(snap, _cpu_pod(8))["b"][0] == "no-room-now"
    # (event, merged whole, keyed again): without memory's free amount the record needs
    # merge (which derives it), yet only its usage changes.
    for obj, merges, keys in [
        (_free("c", "3", memory=None), ["c"], []),
        (_free("d", "3", topologyManagerPolicy="single-numa-node"), ["d"], ["d"]),
        (_free("e", "7"), [], []),
    ]:
        snap = event(obj)
        assert (merged, keyed) == (merges, keys)
    expected = build_inventory(list(final.values()))
    assert inventory.nodes() == expected.nodes
    for intent in (_cpu_pod(4), _cpu_pod(8), _cpu_pod(20)):
        assert _verdicts(snap, intent) == _verdicts(Snapshot.build(expected.nodes), intent)
