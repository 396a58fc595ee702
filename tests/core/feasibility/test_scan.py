"""``Kernel.scan``: the "node empty" run over topology classes in one call while each class
is never-fits, the compiled kernel against the reference and both against one
``Kernel.check`` per class; and the evaluation that uses it (first fit only) against the
full one, class by class, for pods that fit nowhere."""

from __future__ import annotations

import dataclasses
from array import array
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from core.errors import InvalidInput
from core.feasibility.codes import F_EMPTY, R_TOO_LARGE
from core.feasibility.verdicts import evaluate
from core.model import NodeTopology, PodIntent
from core.snapshot.snapshot import Demand, Snapshot
from tests.builders.model import container, cpu_node, intents, pod
from tests.builders.model import topology_nodes as nodes
from tests.conftest import IMPLS, PURE

SETTINGS = settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
clusters = st.lists(st.integers(), min_size=1, max_size=6).flatmap(
    lambda xs: st.tuples(*(nodes(f"n{i}") for i in range(len(xs))))
)


def _modules() -> list[ModuleType]:
    import importlib

    names = {"python": "_kernel_py", "cython": "_kernel_c"}
    return [importlib.import_module(f"core.feasibility.{names[i]}") for i in IMPLS]


def _columns(snap: Snapshot, impl: ModuleType, groups: list[int], mono: list[bool]) -> list[Any]:
    inside, outside, firsts = impl.class_selection(
        snap.all_bits, snap.topo_bits, snap.shape_of, snap.topo_of
    )
    n_topo = len(inside)
    group_of = array("q", [groups[t % len(groups)] for t in range(n_topo)])
    monotone = array("q", [mono[t % len(mono)] for t in range(n_topo)])
    return [inside, outside, firsts, snap.shape_of, group_of, monotone]


def _one_check_per_class(
    kernel: Any, demand: Demand, start: int, cols: list[Any], codes: array[int], flags: array[int]
) -> tuple[Any, ...]:
    """What the scan must return, from Kernel.check class by class."""
    inside, outside, firsts, shape_of, group_of, monotone = cols
    not_selected = never = 0
    near, near_result, usage = -1, None, []
    for t in range(start, len(inside)):
        if inside[t]:
            g = group_of[t]
            if codes[g] < 0 or not monotone[t]:
                return (t, not_selected, never, near, near_result, None, usage)
            result = kernel.check(demand, shape_of[firsts[t]], codes[g], flags[g] | F_EMPTY)
            if result.admitted or result.reason == R_TOO_LARGE:
                return (t, not_selected, never, near, near_result, result, usage)
            never += inside[t]
            usage.append(t)
            if near < 0 or firsts[t] < firsts[near]:
                near, near_result = t, result
        not_selected += outside[t]
    return (len(inside), not_selected, never, near, near_result, None, usage)


@SETTINGS
@given(
    cluster=clusters,
    intent=intents(),
    codes=st.lists(st.integers(-2, 3), min_size=1, max_size=3),
    flags=st.lists(st.integers(0, 63), min_size=3, max_size=3),
    groups=st.lists(st.integers(0, 2), min_size=1, max_size=4),
    mono=st.lists(st.booleans(), min_size=1, max_size=3),
    start=st.integers(0, 6),
)
def test_scan_is_one_check_per_class_in_both_kernels(
    cluster: tuple[NodeTopology, ...],
    intent: PodIntent,
    codes: list[int],
    flags: list[int],
    groups: list[int],
    mono: list[bool],
    start: int,
) -> None:
    snap = Snapshot.build(cluster)
    demand = Demand.build(intent, snap)
    codes_a = array("q", codes)
    flags_a = array("q", flags[: len(codes)])
    for impl in _modules():
        cols = _columns(snap, impl, [g % len(codes) for g in groups], mono)
        begin = min(start, len(cols[0]))
        kernel = snap.kernel(impl)
        got = kernel.scan(demand, begin, *cols[:5], codes_a, flags_a, cols[5])
        want = _one_check_per_class(kernel, demand, begin, cols, codes_a, flags_a)
        assert tuple(got[:6]) == want[:6], impl.__name__
        assert list(got.usage) == want[6], impl.__name__


def _args(snap: Snapshot, impl: ModuleType) -> list[Any]:
    cols = _columns(snap, impl, [0], [True])
    return [*cols[:5], array("q", [3]), array("q", [0]), cols[5]]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda a: a.__setitem__(4, array("q", [5])), r"class 0: group 5 is out of range 0..0"),
        (lambda a: a.__setitem__(2, array("q", [9])), r"class 0: node 9 is out of range 0..0"),
        (lambda a: a.__setitem__(3, array("q", [7])), r"shape 7 is out of range 0..0"),
        (lambda a: a.__setitem__(5, array("q", [4])), r"policy code 4 is not one of 0, 1, 2, 3"),
        (lambda a: a.__setitem__(1, array("q")), r"per-class columns must all have 1 items"),
        (lambda a: a.__setitem__(6, array("q")), r"1 group codes but 0 group flags"),
    ],
)
def test_scan_names_what_is_wrong(impl: ModuleType, edit: Any, message: str) -> None:
    snap = Snapshot.build([cpu_node([4], [4])])
    demand = Demand.build(pod(container(cpu=64)), snap)
    args = _args(snap, impl)
    edit(args)
    with pytest.raises(InvalidInput, match=message):
        snap.kernel(impl).scan(demand, 0, *args)
    with pytest.raises(InvalidInput, match=r"start 2 is out of range 0..1"):
        snap.kernel(impl).scan(demand, 2, *_args(snap, impl))


@pytest.mark.skipif(PURE, reason="the compiled kernel reads the columns' buffers")
def test_compiled_scan_names_a_column_that_is_not_int64() -> None:
    from core.feasibility import _kernel_c  # type: ignore[attr-defined]

    snap = Snapshot.build([cpu_node([4], [4])])
    demand = Demand.build(pod(container(cpu=64)), snap)
    args = _args(snap, _kernel_c)
    args[4] = [0]
    with pytest.raises(InvalidInput, match=r"scan: group_of must be an array\('q'\)"):
        snap.kernel(_kernel_c).scan(demand, 0, *args)


def _big(intent: PodIntent) -> PodIntent:
    """``intent`` with a first container that no generated node can hold."""
    return dataclasses.replace(intent, containers=(container(cpu=512), *intent.containers))


@SETTINGS
@given(cluster=clusters, intent=intents(), big=st.booleans())
def test_first_fit_evaluation_matches_the_full_one_when_nothing_fits(
    cluster: tuple[NodeTopology, ...], intent: PodIntent, big: bool
) -> None:
    snap = Snapshot.build(cluster)
    intent = _big(intent) if big else intent
    for impl in _modules():
        whole = evaluate(intent, snap, impl=impl)
        assume(not whole.counts["fits"])
        first = evaluate(intent, snap, full=False, impl=impl)
        assert first.counts == whole.counts
        assert first.near_miss == whole.near_miss
        assert first.unknown_compatible == whole.unknown_compatible
        assert first.usage_classes == whole.usage_classes


def test_the_classes_are_kept_per_snapshot(impl: ModuleType) -> None:
    a = Snapshot.build([cpu_node([4, 4], [4, 4], name="a"), cpu_node([8], [8], name="b")])
    b = Snapshot.build([cpu_node([8], [8], name="b")])
    huge = pod(container(cpu=64))
    assert snap_classes(a, impl) is None
    ev_a = evaluate(huge, a, full=False, impl=impl)
    kept = snap_classes(a, impl)
    assert kept is not None and list(kept.inside) == [1, 1]
    assert evaluate(huge, a, full=False, impl=impl) == ev_a
    assert snap_classes(a, impl) is kept  # built once for the snapshot
    ev_b = evaluate(huge, b, full=False, impl=impl)
    assert ev_b.counts["never-fits"] == 1 and ev_b.near_miss is not None
    assert ev_b.near_miss.name == "b"
    assert list(snap_classes(b, impl).inside) == [1]


def snap_classes(snap: Snapshot, impl: ModuleType) -> Any:
    return snap.kernel(impl).classes
