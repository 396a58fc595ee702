"""The live DRA inventory (core/dra/inventory.py IncrementalDra) against the whole build
(read_inventory): any sequence of add/update/delete events (unreadable versions included),
flushed at any points, gives the view the whole build of the final objects gives, and the
same verdicts for generated pods; a view handed out earlier is never written afterwards.
Planted faults (usage not refreshed, a slice's old node not flushed, a view written in
place) are found by the same check, so it can fail."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

import core.dra.inventory as inventory_module
from core.dra.chunked import ChunkedMap
from core.dra.evaluate import evaluate_node, pod_claims
from core.dra.inventory import DraInventory, IncrementalDra, ObjectKey, parse_dra, read_inventory
from core.dra.pools import NodeRef
from tests.core.dra.objects import (
    allocated,
    claim,
    device,
    device_class,
    pod,
    request,
    resource_slice,
    template,
)

DRIVER = "gpu.example.com"
NODES = ("n0", "n1", "n2")
Event = tuple[ObjectKey, dict[str, Any] | None]  # the object's new version, None: deleted


@st.composite
def slices(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(["d0", "d1", "d2", "d3"]), unique=True, max_size=4))
    devices = []
    for n in names:
        d = device(n, numa=draw(st.integers(0, 1)))
        if draw(st.integers(0, 5)) == 0:
            d["allowMultipleAllocations"] = True
        devices.append(d)
    where: dict[str, Any] = draw(
        st.sampled_from([{"node": n} for n in NODES] + [{"node": None, "allNodes": True}])
    )
    node = where.pop("node")
    obj = resource_slice(
        draw(st.sampled_from(["s0", "s1", "s2", "s3"])),
        node,
        draw(st.sampled_from(["p0", "p1", "p2"])),
        DRIVER,
        *devices,
        generation=draw(st.integers(1, 2)),
        count=draw(st.integers(1, 2)),
        **where,
    )
    if draw(st.integers(0, 7)) == 0:
        obj["spec"]["devices"] = "many"  # unreadable: left out, its error kept
    return obj


@st.composite
def claims(draw: st.DrawFn) -> dict[str, Any]:
    obj = claim(
        draw(st.sampled_from(["k0", "k1", "k2"])),
        request("g", draw(st.sampled_from(["gpu", "numa0"])), draw(st.integers(1, 2))),
    )
    used = draw(
        st.lists(
            st.tuples(st.sampled_from(["p0", "p1", "p2"]), st.sampled_from(["d0", "d1", "d2"])),
            unique=True,
            max_size=3,
        )
    )
    if used:
        obj = allocated(obj, *(("g", DRIVER, p, d) for p, d in used))
    return obj


def classes(draw: st.DrawFn) -> dict[str, Any]:
    name = draw(st.sampled_from(["gpu", "numa0"]))
    extra = [f'device.attributes["{DRIVER}"].numa == {draw(st.integers(0, 1))}']
    return device_class(name, DRIVER, *(extra if name == "numa0" else []))


def templates(draw: st.DrawFn) -> dict[str, Any]:
    return template("t0", request("g", "gpu", draw(st.integers(1, 3))))


@st.composite
def events(draw: st.DrawFn) -> list[Event]:
    out: list[Event] = []
    for _ in range(draw(st.integers(1, 30))):
        kind = draw(st.sampled_from(["slice", "slice", "claim", "claim", "class", "template"]))
        if kind == "slice":
            obj = draw(slices())
        elif kind == "claim":
            obj = draw(claims())
        else:
            obj = (classes if kind == "class" else templates)(draw)
        meta = obj["metadata"]
        key = (obj["kind"], meta.get("namespace", ""), meta["name"])
        out.append((key, None if draw(st.integers(0, 4)) == 0 else obj))
    return out


POD = pod(("a", "claim", "k0"), ("b", "claim", "k1"), ("t", "template", "t0"))
NODE_REFS = tuple(NodeRef(n, {}) for n in NODES)


def verdicts(inv: DraInventory) -> list[tuple[str, str]]:
    claims_of_pod = pod_claims(POD, inv)
    return [
        (v.verdict, v.message) for v in (evaluate_node(claims_of_pod, n, inv) for n in NODE_REFS)
    ]


def replay(history: list[Event], flush_every: int) -> Iterator[tuple[DraInventory, DraInventory]]:
    """Apply ``history``, flushing every ``flush_every`` events and at the end; yield each
    flushed view with the whole build of the objects as they were then."""
    live = IncrementalDra()
    current: dict[ObjectKey, Mapping[str, Any]] = {}
    for i, (key, obj) in enumerate(history, 1):
        if obj is None:
            current.pop(key, None)
            live.apply(key, None)
        else:
            current[key] = obj
            parsed = parse_dra(obj)
            assert parsed is not None and parsed[0] == key
            live.apply(key, parsed[1])
        if i % flush_every == 0 or i == len(history):
            yield live.flush(), read_inventory(current.values())
    assert len(live) == len(current)


def holds(history: list[Event], flush_every: int) -> bool:
    seen = []
    for view, whole in replay(history, flush_every):
        if view != whole:
            return False
        seen.append((view, whole))
    if verdicts(seen[-1][0]) != verdicts(seen[-1][1]):
        return False
    # copy-on-write: every view handed out is still what it was
    return all(view == whole for view, whole in seen)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events(), st.integers(1, 4))
def test_any_event_sequence_gives_the_whole_build(history: list[Event], flush_every: int) -> None:
    assert holds(history, flush_every)


def test_a_view_lists_what_the_evaluation_reads() -> None:
    """One concrete sequence, spelled out: a slice moving node, a claim releasing its
    device, a class turning unreadable."""
    live = IncrementalDra()
    gpus = resource_slice("s0", "n0", "p0", DRIVER, device("d0", numa=0))
    used = allocated(claim("k0", request("g", "gpu")), ("g", DRIVER, "p0", "d0"))
    for obj in (gpus, used, device_class("gpu", DRIVER)):
        parsed = parse_dra(obj)
        assert parsed is not None
        live.apply(*parsed)
    first = live.flush()
    assert set(first.by_node) == {"n0"} and first.is_used((DRIVER, "p0", "d0"))
    moved = resource_slice("s0", "n1", "p0", DRIVER, device("d0", numa=0))
    for obj in (moved, claim("k0", request("g", "gpu"))):
        parsed = parse_dra(obj)
        assert parsed is not None
        live.apply(*parsed)
    live.apply(("DeviceClass", "", "gpu"), "DeviceClass 'gpu': spec.selectors is 1")
    second = live.flush()
    assert set(second.by_node) == {"n1"} and not second.in_use
    assert second.classes == {} and second.errors == ("DeviceClass 'gpu': spec.selectors is 1",)
    assert set(first.by_node) == {"n0"} and first.is_used((DRIVER, "p0", "d0"))  # untouched
    assert second.claims is not first.claims and second.templates is first.templates


def _no_usage_refresh(original: Callable[..., Any]) -> Callable[..., Any]:
    def fault(counters: Any, keys: Any, sign: int) -> set[Any]:
        original(counters, keys, sign)
        return set()

    return fault


def _old_groups_kept(original: Callable[..., Any]) -> Callable[..., Any]:
    def fault(groups: Any, touched: set[Any]) -> Any:
        return {k: v for k, v in original(groups, touched).items() if v is not None}

    return fault


def _written_in_place(original: Callable[..., Any]) -> Callable[..., Any]:
    def fault(self: ChunkedMap[Any, Any], changes: Any) -> Any:
        new = original(self, changes)
        object.__setattr__(self, "_chunks", new._chunks)
        object.__setattr__(self, "_len", new._len)
        return self

    return fault


@pytest.mark.parametrize(
    ("where", "name", "fault"),
    [
        (inventory_module, "_count", _no_usage_refresh),
        (inventory_module, "_slices_of", _old_groups_kept),
        (ChunkedMap, "edit", _written_in_place),
    ],
)
def test_the_check_finds_planted_faults(
    monkeypatch: pytest.MonkeyPatch, where: Any, name: str, fault: Callable[..., Any]
) -> None:
    monkeypatch.setattr(where, name, fault(getattr(where, name)))
    found = find(
        st.tuples(events(), st.integers(1, 4)),
        lambda case: not holds(*case),
        # no shrinking: the first counterexample is enough to show the check can fail
        settings=settings(max_examples=1000, deadline=None, database=None, phases=[Phase.generate]),
    )
    assert found  # a counterexample: the property test would fail on this fault
