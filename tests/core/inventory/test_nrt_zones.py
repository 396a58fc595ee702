"""The NRT zone reader's fast path (``_plain_zone``) against the checked one
(``_read_zone``): for any zone the fast path accepts, the same record and no error; the
rest it leaves to the checked path, whose messages stay the only ones."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from core.inventory.nrt import _plain_zone, _read_zone
from core.inventory.records import Reporter, Units

# Mostly amounts that parse, so that the fast path accepts many zones.
_GOOD = st.one_of(
    st.sampled_from(["4", "64", "0", "31500m", "128Gi", "1.5", "1e3"]), st.integers(0, 10**12)
)
_AMOUNT = st.one_of(
    _GOOD, _GOOD, _GOOD, st.sampled_from(["-2", "x", "", None, True, 1.5, float("nan"), -3])
)
_NAME = st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "cpu", "memory", 3])
_RESOURCE = st.one_of(
    st.fixed_dictionaries(
        {"name": _NAME, "capacity": _AMOUNT, "allocatable": _AMOUNT},
        optional={"available": _AMOUNT},
    ),
    st.fixed_dictionaries(
        {"name": _NAME},
        optional={"capacity": _AMOUNT, "allocatable": _AMOUNT, "available": _AMOUNT},
    ),
    st.sampled_from(["cpu", None, 1]),
)
_COST = st.one_of(
    st.fixed_dictionaries(
        {"name": st.sampled_from(["node-0", "node-1"]), "value": st.integers(0, 30)}
    ),
    st.fixed_dictionaries(
        {},
        optional={
            "name": st.sampled_from(["node-0", "node-1", "node-63", "node-64", "numa-0", 0]),
            "value": st.one_of(st.integers(-2, 30), st.sampled_from(["10", True, 1.0, -1])),
        },
    ),
    st.just("node-0"),
)
_ZONE = st.fixed_dictionaries(
    {
        "name": st.one_of(
            st.sampled_from(["node-0", "node-7", "node-63"]),
            st.sampled_from(["node-0", "node-64", "node-01", "Node-1", 5]),
        )
    },
    optional={
        "resources": st.one_of(
            st.lists(_RESOURCE, max_size=3),
            st.lists(_RESOURCE, max_size=3),
            st.none(),
            st.just("cpu"),
        ),
        "costs": st.one_of(st.lists(_COST, max_size=3), st.none(), st.just({})),
    },
)


@settings(max_examples=600, deadline=None)
@given(zone=_ZONE)
def test_the_fast_path_agrees_with_the_checked_one(zone: dict[str, Any]) -> None:
    errors: list[str] = []
    checked = _read_zone(zone, "zones[0]", Reporter("NodeResourceTopology", "n", errors), Units())
    fast = _plain_zone(zone, Units())
    if fast is not None:
        assert not errors and checked == fast
    event(f"fast path: {fast is not None}")


def test_the_usual_zone_takes_the_fast_path() -> None:
    zone = {
        "name": "node-1",
        "type": "Node",
        "costs": [{"name": "node-0", "value": 21}, {"name": "node-1", "value": 10}],
        "resources": [
            {"name": "cpu", "capacity": "32", "allocatable": "31", "available": "7"},
            {"name": "memory", "capacity": "128Gi", "allocatable": "125Gi", "available": "1Gi"},
        ],
    }
    got = _plain_zone(zone, Units())
    assert got is not None
    numa, record = got
    assert numa == 1 and record.costs == {0: 21, 1: 10}
    assert record.capacity == {"cpu": 32_000, "memory": 128 * 2**30}
    assert record.available == {"cpu": 7_000, "memory": 2**30}


def _good() -> dict[str, Any]:
    return {
        "name": "node-1",
        "costs": [{"name": "node-0", "value": 21}, {"name": "node-1", "value": 10}],
        "resources": [
            {"name": "cpu", "capacity": "32", "allocatable": "31", "available": "7"},
            {"name": "memory", "capacity": "128Gi", "allocatable": "125Gi"},
        ],
    }


def _cost(**changed: Any) -> dict[str, Any]:
    zone = _good()
    zone["costs"][0].update(changed)
    return zone


def _resource(**changed: Any) -> dict[str, Any]:
    zone = _good()
    zone["resources"][0].update(changed)
    return zone


@pytest.mark.parametrize(
    "zone",
    [
        _cost(value=-1),
        _cost(value=True),
        _cost(value=1.0),
        _cost(name="node-64"),
        _cost(name="numa-0"),
        {**_good(), "name": "node-64"},
        {**_good(), "name": "node-01"},
        {**_good(), "costs": {}},
        {**_good(), "costs": ["node-0"]},
        _resource(name="memory"),
        _resource(name=3),
        _resource(capacity=None),
        _resource(allocatable=None),
        _resource(available="-1"),
        _resource(capacity="x"),
        _resource(allocatable=True),
        {**_good(), "resources": "cpu"},
        {**_good(), "resources": ["cpu"]},
    ],
)
def test_an_unusual_zone_is_left_to_the_checked_path(zone: dict[str, Any]) -> None:
    """Each differs from a zone the fast path takes in one field; the checked path reads
    it (with a message where it is wrong), the fast path does not."""
    assert _plain_zone(_good(), Units()) is not None
    assert _plain_zone(zone, Units()) is None
