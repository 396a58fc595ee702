"""PackedStore: the packed arrays of the incremental inventory grow in place, and no
snapshot a registered reader holds ever sees a write (appends land past its prefix; a
freed slot is rewritten in place only once no reader of a snapshot that had it is left;
without ``Readers``, on a copy)."""

from __future__ import annotations

import random
from typing import Any

from core.feasibility.delta import SnapshotEditor
from core.feasibility.packing import Readers, Reading
from core.feasibility.snapshot import Snapshot
from core.feasibility.verdicts import evaluate
from core.inventory.incremental import IncrementalInventory, parse_object
from tests.builders.model import container
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


def _run(readers: Readers | None) -> int:
    """200 batches of usage churn; every snapshot is checked against its own verdicts
    (taken when it was made) after every later batch while it is kept (registered as
    read when there are ``readers``)."""
    rng = random.Random(3)
    inventory = IncrementalInventory()
    editor = SnapshotEditor(Snapshot.build(()), readers=readers)
    kept: list[tuple[Snapshot, list[dict[str, Any]], Reading | None]] = []
    for step in range(200):
        snap = _churn(editor, inventory, rng, NAMES if not step else rng.sample(NAMES, 3))
        reading = readers.enter(snap.generation) if readers is not None else None
        assert reading is None or reading.start()
        kept.append((snap, _verdicts(snap), reading))
        for _, _, gone in kept[:-KEPT]:  # the readers still around: the last KEPT snapshots
            if gone is not None:
                gone.done()
        kept = kept[-KEPT:]
        for old, verdicts, _ in kept:
            assert _verdicts(old) == verdicts
    assert _verdicts(kept[-1][0]) == _verdicts(Snapshot.build(inventory.nodes()))
    return editor.snapshot.packed.n_shapes


def test_without_readers_every_earlier_snapshot_stays_as_it_was() -> None:
    _run(None)


def test_in_place_reuse_waits_for_the_readers_to_be_gone() -> None:
    shapes = _run(Readers())
    assert shapes < 10 + 3 * (KEPT + 30)  # slots were reused: not one new slot per event


def test_a_reader_holds_the_slots_of_its_snapshot_until_it_is_done() -> None:
    rng = random.Random(6)
    inventory = IncrementalInventory()
    readers = Readers()
    editor = SnapshotEditor(Snapshot.build(()), readers=readers)
    first = _churn(editor, inventory, rng, NAMES)
    reading = readers.enter(first.generation)
    assert reading.start()
    verdicts = _verdicts(first)
    for _ in range(100):
        _churn(editor, inventory, rng, rng.sample(NAMES, 3))
    assert _verdicts(first) == verdicts
    held = editor.snapshot.packed.n_shapes
    assert held > 200  # nothing freed after ``first`` was taken could be reused
    reading.done()
    assert readers.oldest() is None
    for _ in range(100):
        _churn(editor, inventory, rng, rng.sample(NAMES, 3))
    assert editor.snapshot.packed.n_shapes < held + 60  # reused again


def test_a_reading_dropped_before_it_starts_never_reads_and_is_released() -> None:
    readers = Readers()
    waiting, running = readers.enter(4), readers.enter(5)
    assert readers.oldest() == 4
    assert running.start()
    waiting.drop()  # the review stopped waiting before its thread began
    assert not waiting.start()
    assert readers.oldest() == 5
    running.drop()  # stopped waiting, but the thread reads on: still registered
    assert readers.oldest() == 5
    running.done()
    running.done()
    assert readers.oldest() is None


def test_appends_and_late_reuse_do_not_copy_the_arrays() -> None:
    rng = random.Random(4)
    inventory = IncrementalInventory()
    readers = Readers()
    editor = SnapshotEditor(Snapshot.build(()), readers=readers)
    _churn(editor, inventory, rng, NAMES)
    first = _churn(editor, inventory, rng, NAMES[:3]).packed.zones  # grown once here
    for _ in range(100):
        snap = _churn(editor, inventory, rng, rng.sample(NAMES, 2))
    assert snap.packed.zones is first or len(snap.packed.zones) > len(first)
    assert snap.packed.n_shapes < 40  # freed slots were rewritten in place


def test_dead_shapes_stay_a_small_part_of_each_class() -> None:
    # Every review that scans a class walks its dead shapes: under churn (every event a
    # new shape) they must not pile up to the size of the class.
    # Without readers: a node alone in its shape is not rewritten in place, so every
    # event makes a new shape and kills one (the case the bound is for).
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


def test_a_node_alone_in_its_shape_has_its_usage_rewritten_in_place() -> None:
    """With no reader off the writer's thread, a usage change of a node whose shape is its
    own is written over that shape: no new slot, no dead one. The first batch after the
    reserve (which replaced the arrays) is seen by the new snapshot; a registered reader
    turns it back into a new shape, and its snapshot keeps its verdicts."""
    rng = random.Random(8)
    inventory = IncrementalInventory()
    readers = Readers()
    names = [f"n{i}" for i in range(40)]
    for k, name in enumerate(names):  # a usage of its own per node: 40 shapes
        free = (k % 32, k // 32)
        obj = nrt(name, [zone(i, {"cpu": ("32", "31", str(free[i]))}) for i in (0, 1)],
                  attributes={"topologyManagerPolicy": "single-numa-node"})  # fmt: skip
        inventory.set(parse_object(obj, inventory.units))
    inventory.flush()
    editor = SnapshotEditor(Snapshot.build(inventory.nodes()), readers=readers, reserve=True)
    assert editor.snapshot.packed.n_shapes == len(names)
    for _ in range(30):
        snap = _churn(editor, inventory, rng, rng.sample(names, 5))
        assert _verdicts(snap) == _verdicts(Snapshot.build(inventory.nodes()))
    assert editor.rewrites > 130  # nearly all 150 events (a usage equal to another's joins it)
    assert snap.packed.n_shapes <= len(names) + 30
    reading = readers.enter(snap.generation)
    assert reading.start()
    held, rewrites = _verdicts(snap), editor.rewrites
    later = _churn(editor, inventory, rng, names[:5])
    assert editor.rewrites == rewrites  # read elsewhere: new shapes instead
    assert _verdicts(snap) == held
    reading.done()
    assert _verdicts(later) == _verdicts(Snapshot.build(inventory.nodes()))


def test_a_reserved_store_does_not_grow_under_usage_churn() -> None:
    # A live inventory reserves room for a shape per node and the dead ones a class keeps
    # (SnapshotEditor(reserve=True)): churn that gives every node a shape of its own never
    # grows (copies) an array on the event loop. Built with one shape for all 300 nodes.
    rng = random.Random(6)
    inventory = IncrementalInventory()
    names = [f"n{i}" for i in range(300)]
    for name in names:
        obj = nrt(name, [zone(i, {"cpu": ("32", "31", "31")}) for i in (0, 1)],
                  attributes={"topologyManagerPolicy": "single-numa-node"})  # fmt: skip
        inventory.set(parse_object(obj, inventory.units))
    inventory.flush()
    editor = SnapshotEditor(Snapshot.build(inventory.nodes()), readers=Readers(), reserve=True)
    assert editor.snapshot.packed.n_shapes == 1
    arrays = dict(editor.store.arrays)
    for _ in range(100):
        snap = _churn(editor, inventory, rng, rng.sample(names, 30))
    assert snap.packed.n_shapes > 250  # nearly every node has a shape of its own
    assert all(editor.store.arrays[k] is a for k, a in arrays.items())
    assert _verdicts(snap) == _verdicts(Snapshot.build(inventory.nodes()))
