"""PackedStore: the packed arrays of the incremental inventory are copy-on-write. No
snapshot handed out ever sees a write: appends land past its prefix, and a freed slot is
written only in a copy of the arrays made after it was freed."""

from __future__ import annotations

import pickle
import random
import weakref
from typing import Any

from core.feasibility.codes import SF_TOPO_OFF, SHAPE_FIELDS, topology_size
from core.feasibility.verdicts import evaluate
from core.inventory.incremental import IncrementalInventory, parse_object
from core.model import NodeTopology
from core.snapshot.delta import SnapshotEditor
from core.snapshot.snapshot import Snapshot, rows_of
from tests.builders.model import container, listed_rows
from tests.builders.model import intent as pod_intent
from tests.builders.objects import nrt, zone

NAMES = [f"n{i}" for i in range(10)]
KEPT = 30  # snapshots still read after later batches (longer than compaction takes)
PODS = [
    pod_intent(scheduler_name="", containers=[container(cpu=c, memory=2**30)]) for c in (4, 12, 30)
]


def _verdicts(snap: Snapshot) -> list[dict[str, Any]]:
    return [
        {v.name: (v.verdict, v.numa, v.reason) for v in evaluate(pod, snap).verdicts}
        for pod in PODS
    ]


def _churn(editor: SnapshotEditor, inventory: IncrementalInventory, rng: random.Random,
           names: list[str]) -> Snapshot:  # fmt: skip
    for name in names:
        free = [str(rng.randint(0, 31)) for _ in (0, 1)]
        obj = nrt(name, [zone(i, {"cpu": ("32", "31", free[i])}) for i in (0, 1)],
                  attributes={"topologyManagerPolicy": "single-numa-node"})  # fmt: skip
        inventory.set(parse_object(obj, inventory.units))
    return editor.apply(inventory.flush())


def test_every_earlier_snapshot_stays_as_it_was() -> None:
    """200 batches of usage churn; every snapshot is checked against its own verdicts
    (taken when it was made) after every later batch while it is kept; freed slots are
    reused (not one new slot per event)."""
    rng = random.Random(3)
    inventory = IncrementalInventory()
    editor = SnapshotEditor(Snapshot.build(()))
    kept: list[tuple[Snapshot, list[dict[str, Any]]]] = []
    for step in range(200):
        snap = _churn(editor, inventory, rng, NAMES if not step else rng.sample(NAMES, 3))
        kept = [*kept[-KEPT + 1 :], (snap, _verdicts(snap))]
        for old, verdicts in kept:
            assert _verdicts(old) == verdicts
    assert _verdicts(kept[-1][0]) == _verdicts(Snapshot.build(inventory.nodes()))
    assert editor.store.renewals > 1  # slots and regions freed were written in later copies
    assert editor.store.moves > 100  # most events keep their slot and move their usage
    assert editor.snapshot.packed.n_shapes < 10 + 3 * 60


def test_a_freed_slot_is_written_only_in_a_later_copy_of_the_arrays() -> None:
    rng = random.Random(4)
    inventory = IncrementalInventory()
    editor = SnapshotEditor(Snapshot.build(()))
    first = _churn(editor, inventory, rng, NAMES)
    listed = [s for shapes in first.topo_shapes for s in shapes]
    rows = [listed_rows(rows_of(first.packed, s)) for s in listed]
    verdicts = _verdicts(first)
    for _ in range(100):
        _churn(editor, inventory, rng, rng.sample(NAMES, 3))
    store = editor.store
    assert store.moves > 0 and store.renewals > 0  # usage moved, freed regions reused
    assert store.free or store.regions_free
    # Every row ``first`` reads is as it was.
    assert [listed_rows(rows_of(first.packed, s)) for s in listed] == rows
    assert _verdicts(first) == verdicts


def test_dead_shapes_stay_a_small_part_of_each_class() -> None:
    # Every review that scans a class walks its dead shapes: under churn (every event a
    # new shape) they must not pile up to the size of the class.
    # Every usage event makes a new shape and kills one (the case the bound is for).
    rng = random.Random(5)
    inventory = IncrementalInventory()
    editor = SnapshotEditor(Snapshot.build(()))
    names = [f"n{i}" for i in range(300)]
    _churn(editor, inventory, rng, names)
    worst = 0
    for _ in range(150):
        snap = _churn(editor, inventory, rng, rng.sample(names, 20))
        for shapes in snap.topo_shapes:
            dead = sum(1 for s in shapes if snap.shape_rep[s] < 0)
            assert dead <= 20 + (len(shapes) - dead) // 6, (dead, len(shapes))
            worst = max(worst, dead)
    assert worst > 0  # shapes did die: the bound was exercised
    assert _verdicts(snap) == _verdicts(Snapshot.build(inventory.nodes()))


def test_a_reserved_store_does_not_grow_under_usage_churn() -> None:
    # A live inventory reserves room for a shape per node, the dead ones a class keeps and
    # the freed ones awaiting a copy (SnapshotEditor(reserve=True)): churn that gives every
    # node a shape of its own copies the arrays at their length now and then (freed slots
    # are reused in the copy), never larger. Built with one shape for all 300 nodes.
    rng = random.Random(6)
    inventory = IncrementalInventory()
    names = [f"n{i}" for i in range(300)]
    for name in names:
        obj = nrt(name, [zone(i, {"cpu": ("32", "31", "31")}) for i in (0, 1)],
                  attributes={"topologyManagerPolicy": "single-numa-node"})  # fmt: skip
        inventory.set(parse_object(obj, inventory.units))
    inventory.flush()
    editor = SnapshotEditor(Snapshot.build(inventory.nodes()), reserve=True)
    assert editor.snapshot.packed.n_shapes == 1
    sizes = {k: len(a) for k, a in editor.store.arrays.items()}
    for _ in range(100):
        snap = _churn(editor, inventory, rng, rng.sample(names, 30))
    assert snap.packed.n_shapes > 250  # nearly every node has a shape of its own
    assert editor.store.renewals > 0  # 3,000 events, ~500 slots: freed ones were reused
    assert {k: len(a) for k, a in editor.store.arrays.items()} == sizes
    assert _verdicts(snap) == _verdicts(Snapshot.build(inventory.nodes()))


def _reserving_editor(
    rng: random.Random,
) -> tuple[SnapshotEditor, IncrementalInventory, list[str]]:
    """A reserving editor (as a worker's at a Whole) over 300 nodes of random usage."""
    inventory = IncrementalInventory()
    names = [f"n{i}" for i in range(300)]
    editor = SnapshotEditor(Snapshot.build(()))
    _churn(editor, inventory, rng, names)
    return SnapshotEditor(editor.snapshot, reserve=True), inventory, names


def test_a_renewal_copies_into_the_array_it_replaced_once_no_snapshot_holds_it() -> None:
    # The array a renewal replaced is kept; the next renewal copies into it (pages mapped
    # already) only when no snapshot holds it: here one snapshot is kept throughout and
    # the others dropped. The kept one reads what it did; the store did reuse arrays.
    rng = random.Random(9)
    editor, inventory, names = _reserving_editor(rng)
    store = editor.store
    kept = _churn(editor, inventory, rng, rng.sample(names, 30))
    listed = [s for shapes in kept.topo_shapes for s in shapes]
    rows = [listed_rows(rows_of(kept.packed, s)) for s in listed]
    verdicts = _verdicts(kept)
    held = {name: getattr(kept.packed, name) for name in ("available", "states", "shape_info")}
    renewals, replaced = store.renewals, set()
    for _ in range(100):
        snap = _churn(editor, inventory, rng, rng.sample(names, 30))
        # once replaced, a kept array never comes back
        assert not any(store.arrays[k] is held[k] for k in replaced)
        replaced |= {k for k, a in held.items() if store.arrays[k] is not a}
    assert replaced == set(held)
    assert store.renewals - renewals > 2 and store.reused > 0
    assert [listed_rows(rows_of(kept.packed, s)) for s in listed] == rows
    assert _verdicts(kept) == verdicts
    assert _verdicts(snap) == _verdicts(Snapshot.build(inventory.nodes()))


def test_the_first_zone_renewal_after_reserve_copies_into_the_spare_reserve_made() -> None:
    # ``reserve`` makes the zone group's spares (pages written then, not at the renewal);
    # the first renewal of that group copies into them, and the snapshots stay right.
    rng = random.Random(5)
    editor, inventory, names = _reserving_editor(rng)
    store = editor.store
    # ids, not references: a reference held here would keep the store from reusing them
    spares = {k: id(store.spare[k]) for k in ("available", "states")}
    assert all(len(store.spare[k]) == len(store.arrays[k]) for k in spares)
    zones = store.arrays["available"]
    for _ in range(200):
        snap = _churn(editor, inventory, rng, rng.sample(names, 30))
        if store.arrays["available"] is not zones:
            break
    assert all(id(store.arrays[k]) == spares[k] for k in spares) and store.reused == 2
    assert _verdicts(snap) == _verdicts(Snapshot.build(inventory.nodes()))


def test_the_first_snapshots_arrays_are_freed_with_it() -> None:
    # The editor keeps the resource table of the snapshot it starts from, not its arrays:
    # once ``reserve`` copied them and a batch replaced the snapshot, nothing holds them
    # (they were ~39 MiB in a worker at 100,000 distinct shapes, docs/inventory.md).
    inventory = IncrementalInventory()
    rng = random.Random(7)
    editor = SnapshotEditor(Snapshot.build(()))
    first = _churn(editor, inventory, rng, NAMES)
    editor = SnapshotEditor(first, reserve=True)
    zones = weakref.ref(first.packed.available)
    del first
    _churn(editor, inventory, rng, NAMES[:3])
    assert zones() is None


def test_a_reserving_editor_serves_its_copies_at_once() -> None:
    # ``reserve`` copies the arrays with room to spare; the editor's snapshot reads those
    # copies from the start, so the snapshot it was given (a worker's Whole) takes its own
    # arrays with it before any batch (51 MiB in a worker at 100,000 distinct shapes),
    # and answers as that snapshot did.
    inventory = IncrementalInventory()
    rng = random.Random(8)
    first = _churn(SnapshotEditor(Snapshot.build(())), inventory, rng, NAMES)
    expected = _verdicts(first)
    zones = weakref.ref(first.packed.available)
    editor = SnapshotEditor(first, reserve=True)
    served = editor.snapshot
    assert served.packed.available is editor.store.arrays["available"]
    assert len(served.packed.available) > len(first.packed.available)  # the reserve
    assert served.structure is first.structure  # only arrays moved: decisions still hold
    del first
    assert zones() is None
    assert _verdicts(served) == expected


def test_two_usages_of_one_hash_keep_shapes_of_their_own() -> None:
    # The editor indexes shapes by their key's hash and checks a hash found against the
    # key. Python's int hash is modulo 2**61 - 1, so 0 and 2**61 - 1 free bytes of memory
    # make keys of one hash: a node must not join the shape of the other usage.
    big = str(2**61 - 1)
    inventory = IncrementalInventory()
    editor = SnapshotEditor(Snapshot.build(()))

    def put(name: str, free: str) -> Snapshot:
        obj = nrt(name, [zone(0, {"cpu": ("32", "31", "8"), "memory": (big, big, free)})],
                  attributes={"topologyManagerPolicy": "single-numa-node"})  # fmt: skip
        inventory.set(parse_object(obj, inventory.units))
        return editor.apply(inventory.flush())

    put("a", "0")
    put("b", big)
    snap = put("c", big)
    for s in {snap.shape_of[i] for i in range(len(snap.nodes))}:
        members = [i for i in range(len(snap.nodes)) if snap.shape_of[i] == s]
        usage = {snap.nodes[i].zones[0].available["memory"] for i in members}
        assert len(usage) == 1, [snap.nodes[i].name for i in members]
    assert _verdicts(snap) == _verdicts(Snapshot.build(inventory.nodes()))


def test_unpickled_records_share_their_policy_strings() -> None:
    # As parsed, every record held its own copy of "best-effort", "container", "static"
    # (~10 MiB in a worker at 100,000 nodes); a worker gets its records unpickled.
    def record(name: str) -> NodeTopology:
        policy, scope, cpu = ("".join(("best-", "effort")), "".join(("con", "tainer")),
                              "".join(("sta", "tic")))  # fmt: skip
        return NodeTopology(name, {}, {}, {}, tm_policy=policy, tm_scope=scope,  # type: ignore[arg-type]
                            cpu_manager_policy=cpu)  # type: ignore[arg-type]  # fmt: skip

    a, b = record("a"), record("b")
    assert a.tm_policy is not b.tm_policy
    x, y = pickle.loads(pickle.dumps((a, b)))
    assert (x, y) == (a, b)
    assert x.tm_policy is y.tm_policy and x.tm_scope is y.tm_scope
    assert x.cpu_manager_policy is y.cpu_manager_policy


def test_the_shapes_of_a_topology_class_share_one_topology_block() -> None:
    # Only usage differs between a class's shapes: the whole build stores the class's
    # topology block once, and usage churn through the editor adds none (new shapes point
    # at the class's block); a node of a new topology adds exactly one.
    rng = random.Random(6)
    inventory = IncrementalInventory()
    first = _churn(SnapshotEditor(Snapshot.build(())), inventory, rng, NAMES)
    block = topology_size(2, first.packed.n_res)
    built = Snapshot.build(inventory.nodes())
    assert built.packed.n_shapes > 1 and built.packed.topo_len == block
    editor = SnapshotEditor(built)
    for _ in range(40):
        snap = _churn(editor, inventory, rng, rng.sample(NAMES, 3))
    assert snap.packed.topo_len == block
    offsets = {
        snap.packed.shape_info[s * SHAPE_FIELDS + SF_TOPO_OFF] for s in range(snap.packed.n_shapes)
    }
    assert offsets == {0}
    wide = nrt("wide", [zone(i, {"cpu": ("64", "63", "9")}) for i in (0, 1)],
               attributes={"topologyManagerPolicy": "single-numa-node"})  # fmt: skip
    inventory.set(parse_object(wide, inventory.units))
    snap = editor.apply(inventory.flush())
    assert snap.packed.topo_len == 2 * block
    assert _verdicts(snap) == _verdicts(Snapshot.build(inventory.nodes()))
