"""The incremental inventory (issue 14): random add/update/delete events of Nodes, NRTs,
Numatopologies and Pods applied one by one give the inventory, and the snapshot verdicts,
of a full build from the final objects."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.feasibility.decision import decide
from core.feasibility.delta import SnapshotEditor
from core.feasibility.snapshot import (
    ShapeRows,
    Snapshot,
    resource_names,
    rows_of,
    shape_rows,
    usage_rows,
)
from core.feasibility.verdicts import evaluate
from core.inventory.build import build_inventory
from core.inventory.incremental import IncrementalInventory, ObjectKey, parse_object
from core.model import PodIntent
from tests.builders.model import container, intents
from tests.builders.model import intent as pod_intent
from tests.builders.objects import (
    SINGLE_SPEC,
    cpu_detail,
    koord_status,
    node,
    nrt,
    numatopology,
    pod,
    two_zones,
    zone,
)

NAMES = ("a", "b", "c", "d", "e")
POLICIES = ("single-numa-node", "restricted", "best-effort", "none")


@st.composite
def objects(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["Node", "NodeResourceTopology", "Numatopology", "Pod"]))
    name = draw(st.sampled_from(NAMES))
    if kind == "Node":
        labels = {"zone": draw(st.sampled_from(["x", "y"]))}
        if draw(st.booleans()):
            labels["node.koordinator.sh/numa-topology-policy"] = "SingleNUMANode"
        cpu = draw(st.sampled_from(["64", "32", "bad"]))
        gpus = draw(st.sampled_from([None, "4", "8"]))
        alloc = {"cpu": cpu, "memory": "256Gi", **({"nvidia.com/gpu": gpus} if gpus else {})}
        return node(name, labels=labels, allocatable=alloc)
    if kind == "NodeResourceTopology":
        free = str(draw(st.integers(0, 31)))
        zones = [zone(i, {"cpu": ("32", "31", free), "memory": ("128Gi", "120Gi")}) for i in (0, 1)]
        if draw(st.integers(0, 9)) == 0:
            zones = two_zones()
        policy = draw(st.sampled_from(POLICIES))
        return nrt(name, zones, attributes={"topologyManagerPolicy": policy})
    if kind == "Numatopology":
        return numatopology(
            name, allocatable=draw(st.sampled_from(["0-15", "0-7"])), detail=cpu_detail(8)
        )
    numa = draw(
        st.sampled_from(
            [
                {0: {"cpu": "4"}},
                {1: {"cpu": "2"}},
                {0: {"cpu": "1"}, 1: {"cpu": "1"}},
                {3: {"cpu": "1"}},
            ]
        )
    )
    annotations = koord_status(numa, cpuset=draw(st.sampled_from(["", "1-2"])))
    if draw(st.booleans()):
        annotations.update(SINGLE_SPEC)
    phase = draw(st.sampled_from(["Running", "Running", "Succeeded"]))
    return pod(f"p{draw(st.integers(0, 5))}", node=name, annotations=annotations, phase=phase)


def _key(obj: dict[str, Any]) -> ObjectKey:
    meta = obj["metadata"]
    return (obj["kind"], meta.get("namespace", ""), meta["name"])


events = st.lists(st.tuples(st.booleans(), objects()), min_size=1, max_size=40)


def _cpu_pod(cpus: int, **devices: int) -> PodIntent:
    return pod_intent(scheduler_name="", containers=[container(cpu=cpus, memory=2**30, **devices)])


def _verdicts(snap: Snapshot, intent: PodIntent) -> dict[str, tuple[Any, ...]]:
    ev = evaluate(intent, snap)
    return {v.name: (v.verdict, v.numa, v.preferred, v.reason) for v in ev.verdicts}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=events, probes=st.lists(intents(), min_size=1, max_size=3), batch=st.integers(1, 6))
def test_incremental_equals_full_build(
    events: list[tuple[bool, dict[str, Any]]], probes: list[PodIntent], batch: int
) -> None:
    inventory = IncrementalInventory()
    editor = SnapshotEditor(Snapshot.build(()))
    final: dict[ObjectKey, dict[str, Any]] = {}
    for n, (delete, obj) in enumerate(events, 1):
        key = _key(obj)
        if delete:
            final.pop(key, None)
            inventory.delete(key)
        else:
            final[key] = obj
            inventory.set(parse_object(obj, inventory.units))
        if n % batch == 0 or n == len(events):
            editor.apply(inventory.flush())
    full = build_inventory(list(final.values()))
    assert inventory.nodes() == full.nodes
    assert sorted(inventory.errors()) == sorted(full.errors)
    snap = editor.snapshot
    expected = Snapshot.build(full.nodes)
    assert sorted(n.name for n in snap.nodes) == [n.name for n in full.nodes]
    assert {snap.nodes[i].name: i for i in range(len(snap.nodes))} == dict(snap.name_index)
    for intent in [*probes, _cpu_pod(4), _cpu_pod(20)]:
        assert _verdicts(snap, intent) == _verdicts(expected, intent)
        got, want = evaluate(intent, snap), evaluate(intent, expected)
        assert got.counts == want.counts
        assert decide(got).allowed == decide(want).allowed
        assert decide(got).warnings == decide(want).warnings
    # The patched arrays hold exactly what packing each live shape afresh gives (the
    # usage-only rows and reused slots included).
    names = snap.packed.res_names
    for s in set(snap.shape_of):
        rep = snap.nodes[snap.shape_rep[s]]
        assert _listed(rows_of(snap.packed, s)) == _listed(shape_rows(rep, names))


def _listed(rows: ShapeRows) -> list[list[int]]:
    return [[rows.n], *(list(x) for x in (rows.info, rows.zones, rows.dist, rows.states,
            rows.node_alloc, rows.unaligned))]  # fmt: skip


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
                assert _listed(rows_of(snap.packed, s)) == _listed(
                    shape_rows(rep, snap.packed.res_names)
                )
    assert editor.rebuilt == 0
    # 12 nodes, 450 usage changes: slots were reused, the arrays did not grow per event
    assert most_shapes < 12 + 2 * 16 + 12


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
    assert _listed(usage_rows(nb, names, shape_rows(na, names))) == _listed(shape_rows(nb, names))
    assert _listed(shape_rows(na, names)) != _listed(shape_rows(nb, names))


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
