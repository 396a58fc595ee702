"""``class_selection``: the selected nodes counted per topology class, the compiled pass
over ``shape_of`` against the reference's class bitsets, on snapshots built whole and
edited event by event (dead shapes, reused slots)."""

from __future__ import annotations

from array import array
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.errors import InvalidInput
from core.inventory.incremental import IncrementalInventory, parse_object
from core.snapshot.delta import SnapshotEditor
from core.snapshot.snapshot import Snapshot
from tests.builders.events import events, object_key
from tests.builders.model import cpu_node
from tests.conftest import IMPLS, PURE


def _expected(snap: Snapshot, selected: int) -> tuple[list[int], list[int], list[int]]:
    """From each class's member list, as the rule says."""
    members: list[list[int]] = [[] for _ in snap.topo_bits]
    for i, s in enumerate(snap.shape_of):
        members[snap.topo_of[s]].append(i)
    chosen = [[i for i in m if (selected >> i) & 1] for m in members]
    return (
        [len(c) for c in chosen],
        [len(m) - len(c) for m, c in zip(members, chosen, strict=True)],
        [c[0] if c else -1 for c in chosen],
    )


def _run(impl: ModuleType, snap: Snapshot, selected: int) -> tuple[list[int], ...]:
    out = impl.class_selection(selected, snap.topo_bits, snap.shape_of, snap.topo_of)
    return tuple(list(a) for a in out)


def _modules() -> list[ModuleType]:
    import importlib

    names = {"python": "_kernel_py", "cython": "_kernel_c"}
    return [importlib.import_module(f"core.feasibility.{names[i]}") for i in IMPLS]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    events=events, batch=st.integers(1, 6), picks=st.lists(st.integers(0, 2**48 - 1), max_size=4)
)
def test_both_implementations_count_as_the_rule_says(
    events: list[tuple[bool, dict[str, Any]]], batch: int, picks: list[int]
) -> None:
    inventory = IncrementalInventory()
    editor = SnapshotEditor(Snapshot.build(()))
    for n, (delete, obj) in enumerate(events, 1):
        if delete:
            inventory.delete(object_key(obj))
        else:
            inventory.set(parse_object(obj, inventory.units))
        if n % batch == 0 or n == len(events):
            snap = editor.apply(inventory.flush())
            every = snap.all_bits
            # all, none, random subsets, and bits past the last node (select nothing)
            for selected in [every, 0, *(p & every for p in picks), every | (1 << 70)]:
                want = _expected(snap, selected)
                for impl in _modules():
                    assert _run(impl, snap, selected) == want, impl.__name__


def test_large_inventory_and_sparse_selection(impl: ModuleType) -> None:
    nodes = [cpu_node([4 + i % 3, 4], [4, i % 5], name=f"n{i}") for i in range(300)]
    snap = Snapshot.build(nodes)
    for selected in (snap.all_bits, 1 << 299, (1 << 64) | (1 << 7), 0):
        assert _run(impl, snap, selected) == _expected(snap, selected)


def test_rejects_a_negative_bitset(impl: ModuleType) -> None:
    snap = Snapshot.build([cpu_node([4], [4])])
    with pytest.raises(InvalidInput, match="must not be negative"):
        impl.class_selection(-1, snap.topo_bits, snap.shape_of, snap.topo_of)


@pytest.mark.skipif(PURE, reason="only the compiled kernel reads shape_of")
def test_compiled_rejects_a_shape_without_class() -> None:
    from core.feasibility import _kernel_c  # type: ignore[attr-defined]

    snap = Snapshot.build([cpu_node([4], [4])])
    with pytest.raises(InvalidInput, match="shape 3 has no topology class"):
        _kernel_c.class_selection(1, snap.topo_bits, array("q", [3]), snap.topo_of)


@pytest.mark.skipif(PURE, reason="the compiled kernel reads the Demand's buffers")
def test_compiled_check_names_a_demand_column_that_is_not_int64() -> None:
    import dataclasses

    from core.feasibility import _kernel_c  # type: ignore[attr-defined]
    from core.snapshot.snapshot import Demand
    from tests.builders.model import container, pod

    snap = Snapshot.build([cpu_node([4], [4])])
    demand = Demand.build(pod(container(cpu=1)), snap)
    bad = dataclasses.replace(demand, unit_cpu=array("i", demand.unit_cpu))
    with pytest.raises(InvalidInput, match=r"demand.unit_cpu: expected a non-empty array\('q'\)"):
        snap.kernel(_kernel_c).check(bad, 0, 0, 0)
