"""PackedStore: the packed arrays of the incremental inventory grow in place, and no
snapshot handed out earlier ever sees a write (appends land past its prefix; a freed
slot is rewritten in place only after ``reuse_after`` seconds, else on a copy)."""

from __future__ import annotations

import random
from typing import Any

from core.feasibility.delta import SnapshotEditor
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


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


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


def _run(clock: Clock | None, reuse_after: float) -> int:
    """200 batches of usage churn; every snapshot is checked against its own verdicts
    (taken when it was made) after every later batch."""
    rng = random.Random(3)
    inventory = IncrementalInventory()
    editor = SnapshotEditor(Snapshot.build(()), clock=clock, reuse_after=reuse_after)
    kept: list[tuple[Snapshot, list[dict[str, Any]]]] = []
    for step in range(200):
        if clock is not None:
            clock.now += 0.1
        snap = _churn(editor, inventory, rng, NAMES if not step else rng.sample(NAMES, 3))
        kept.append((snap, _verdicts(snap)))
        kept = kept[-KEPT:]  # the readers still around: the last KEPT snapshots
        for old, verdicts in kept:
            assert _verdicts(old) == verdicts
    assert _verdicts(kept[-1][0]) == _verdicts(Snapshot.build(inventory.nodes()))
    return editor.snapshot.packed.n_shapes


def test_without_a_clock_every_earlier_snapshot_stays_as_it_was() -> None:
    _run(None, 0.0)


def test_in_place_reuse_waits_for_the_readers_to_be_gone() -> None:
    # 0.1 s per batch, readers kept KEPT batches: slots reused after that are never read
    shapes = _run(Clock(), KEPT * 0.1 + 0.05)
    assert shapes < 10 + 3 * (KEPT + 30)  # slots were reused: not one new slot per event


def test_appends_and_late_reuse_do_not_copy_the_arrays() -> None:
    rng = random.Random(4)
    inventory = IncrementalInventory()
    clock = Clock()
    editor = SnapshotEditor(Snapshot.build(()), clock=clock, reuse_after=1.0)
    _churn(editor, inventory, rng, NAMES)
    first = _churn(editor, inventory, rng, NAMES[:3]).packed.zones  # grown once here
    for _ in range(100):
        clock.now += 0.05
        snap = _churn(editor, inventory, rng, rng.sample(NAMES, 2))
    assert snap.packed.zones is first or len(snap.packed.zones) > len(first)
    assert editor.store.free  # some slots still wait for their readers


def test_dead_shapes_stay_a_small_part_of_each_class() -> None:
    # Every review that scans a class walks its dead shapes: under churn (every event a
    # new shape) they must not pile up to the size of the class.
    rng = random.Random(5)
    inventory = IncrementalInventory()
    editor = SnapshotEditor(Snapshot.build(()), clock=Clock(), reuse_after=1.0)
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
