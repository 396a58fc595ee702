"""The one usage-only rule (core/inventory/usage_only.py), over every field of the records
it is asked about: a node record and its zones (the snapshot editor), a parsed NRT and its
zones (the incremental inventory). The fields come from the dataclasses, so a field added
later is covered here without a change: it must break usage-only unless it is usage."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.feasibility.verdicts import evaluate
from core.inventory.incremental import IncrementalInventory, _usage_only, parse_object
from core.inventory.nrt import NrtData
from core.inventory.records import Settings, Units, ZoneRecord
from core.inventory.usage_only import USAGE_FIELDS, usage_only
from core.model import NodeTopology, NumaZone
from core.snapshot.delta import SnapshotEditor
from core.snapshot.rows import resource_names
from core.snapshot.snapshot import Snapshot, _topology_key
from tests.builders.model import container, intent
from tests.builders.objects import nrt, zone


def _other(value: Any, same_keys: bool = False) -> Any:
    """A different value of the same kind (a map with one more key, or ``same_keys`` its
    values changed; a tuple with one more item or a record less, a record with its first
    field changed)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, str):
        return value + "-other"
    if value is None:
        return "other"
    if isinstance(value, dict) and same_keys and value:
        return {k: _other(v) for k, v in value.items()}
    if isinstance(value, dict):
        key: Any = 99 if value and isinstance(next(iter(value)), int) else "other.io/thing"
        return {**value, key: 1}
    if isinstance(value, tuple):
        if value and dataclasses.is_dataclass(value[0]):
            return value[:-1]
        return (*value, value[0] if value else "other")
    if dataclasses.is_dataclass(value):
        first = dataclasses.fields(value)[0].name
        return dataclasses.replace(value, **{first: _other(getattr(value, first))})
    raise AssertionError(f"no other value for {value!r}: teach _other this kind")


def _zone(i: int, free: int) -> NumaZone:
    return NumaZone(
        i,
        {"cpu": 32000, "memory": 128 << 30},
        {"cpu": 31000, "memory": 120 << 30},
        {"cpu": free * 1000, "memory": 60 << 30},
        {0: 10 if i == 0 else 21, 1: 10 if i == 1 else 21},
    )


def _record(
    free: tuple[int, int] = (20, 10), states: tuple[str, ...] = ("idle", "shared")
) -> NodeTopology:
    return NodeTopology(
        name="n1",
        labels={"kubernetes.io/hostname": "n1"},
        allocatable={"cpu": 62000, "memory": 240 << 30, "nvidia.com/gpu": 2},
        capacity={"cpu": 64000, "memory": 256 << 30, "nvidia.com/gpu": 2},
        zones=(_zone(0, free[0]), _zone(1, free[1])),
        annotations={"a": "b"},
        tm_policy="single-numa-node",
        koord_policy="SingleNUMANode",
        volcano_policy="single-numa-node",
        volcano_cpu_manager_policy="static",
        unaligned_devices={"nvidia.com/gpu": 2},
        numa_states=states,
        sources=("Node", "NodeResourceTopology"),
        bound_requests={"cpu": 100},
        gpu_usage={"gpu-0": (1, 1024, 10)},
    )


NODE_FIELDS = [f.name for f in dataclasses.fields(NodeTopology)]
ZONE_FIELDS = [f.name for f in dataclasses.fields(NumaZone)]


@pytest.mark.parametrize("name", NODE_FIELDS)
def test_every_node_field_but_usage_breaks_usage_only(name: str) -> None:
    old = _record()
    new = dataclasses.replace(old, **{name: _other(getattr(old, name))})
    assert usage_only(old, new) is (name in USAGE_FIELDS)


@pytest.mark.parametrize("name", ZONE_FIELDS)
def test_every_zone_field_but_usage_breaks_usage_only(name: str) -> None:
    old = _record()
    z0 = old.zones[0]
    if name in USAGE_FIELDS:  # new values of the same resources: usage only
        value: Any = {k: v // 2 for k, v in z0.available.items()}
        assert usage_only(
            old,
            dataclasses.replace(
                old, zones=(dataclasses.replace(z0, **{name: value}), old.zones[1])
            ),
        )
    changed = dataclasses.replace(z0, **{name: _other(getattr(z0, name))})
    # Another usage key is a resource new to the packed table: not usage only either.
    assert not usage_only(old, dataclasses.replace(old, zones=(changed, old.zones[1])))


def _nrt_data(free: int = 20) -> NrtData:
    zones = [
        zone(i, {"cpu": ("32", "31", str(free)), "memory": ("128Gi", "120Gi", "60Gi")})
        for i in (0, 1)
    ]
    obj = nrt("n1", zones, attributes={"topologyManagerPolicy": "single-numa-node"})
    data = parse_object(obj, Units()).data
    assert isinstance(data, NrtData)
    return data


@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(NrtData)])
def test_every_nrt_field_breaks_the_incremental_short_path(name: str) -> None:
    old, new = _nrt_data(), _nrt_data()
    assert _usage_only(old, new)
    value = getattr(new, name)
    if name == "zones":
        value = {**value, 7: ZoneRecord()}
    elif name == "settings":
        value = dataclasses.replace(value, tm_scope="pod")
    setattr(new, name, value if name in ("zones", "settings") else _other(value))
    assert not _usage_only(old, new)


@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(ZoneRecord)])
def test_every_nrt_zone_field_but_usage_breaks_the_incremental_short_path(name: str) -> None:
    old, new = _nrt_data(), _nrt_data(free=3)
    assert _usage_only(old, new)  # the free amounts alone differ
    assert new.zones[0].capacity is old.zones[0].capacity  # shared from now on
    new = _nrt_data(free=3)
    setattr(new.zones[0], name, _other(getattr(new.zones[0], name)))
    assert not _usage_only(old, new)


def test_a_settings_field_is_compared() -> None:
    assert [f.name for f in dataclasses.fields(Settings)]  # nested records too
    old, new = _nrt_data(), _nrt_data()
    new.settings = dataclasses.replace(new.settings, max_numa_nodes=2)
    assert not _usage_only(old, new)


PODS = [intent(scheduler_name="", containers=[container(cpu=c, memory=2**30)]) for c in (4, 12, 30)]


def _verdicts(snap: Snapshot) -> list[list[tuple[Any, ...]]]:
    return [
        [(v.name, v.verdict, v.numa, v.reason) for v in evaluate(p, snap).verdicts] for p in PODS
    ]


@settings(max_examples=200, deadline=None)
@given(
    free=st.tuples(st.integers(0, 40), st.integers(0, 40)),
    states=st.tuples(*[st.sampled_from(["idle", "shared", "single"])] * 2),
    field=st.sampled_from([*NODE_FIELDS, *(f"zones.{z}" for z in ZONE_FIELDS), None]),
    same_keys=st.booleans(),
)
def test_what_usage_only_lets_through_keeps_the_class_and_the_verdicts(
    free: tuple[int, int], states: tuple[str, ...], field: str | None, same_keys: bool
) -> None:
    """Whatever a record becomes (new usage, maybe one other field changed): when
    ``usage_only`` says so, the topology key and the resource table stay, and the editor's
    short path gives the whole build's verdicts."""
    old = _record()
    new = _record(free, states)
    if field is not None and field.startswith("zones."):
        name = field.split(".")[1]
        z0 = new.zones[0]
        new = dataclasses.replace(
            new,
            zones=(
                dataclasses.replace(z0, **{name: _other(getattr(z0, name), same_keys)}),
                new.zones[1],
            ),
        )
    elif field is not None:
        new = dataclasses.replace(new, **{field: _other(getattr(new, field), same_keys)})
    if not usage_only(old, new):
        return
    assert _topology_key(old) == _topology_key(new)
    assert resource_names([old]) == resource_names([new])
    other = dataclasses.replace(_record((5, 5)), name="n2")
    editor = SnapshotEditor(Snapshot.build([old, other]))
    assert editor.usage_only({"n1": new}) == {"n1"}
    assert _verdicts(editor.apply({"n1": new})) == _verdicts(Snapshot.build([new, other]))


def test_the_incremental_short_path_is_taken_for_free_amounts_only() -> None:
    inventory = IncrementalInventory()
    obj = nrt("n1", [zone(i, {"cpu": ("32", "31", "20")}) for i in (0, 1)])
    inventory.set(parse_object(obj, inventory.units))
    inventory.flush()
    obj = nrt("n1", [zone(i, {"cpu": ("32", "31", "7")}) for i in (0, 1)])
    inventory.set(parse_object(obj, inventory.units))
    assert inventory.flush() and inventory.usage_flushed == ["n1"]
