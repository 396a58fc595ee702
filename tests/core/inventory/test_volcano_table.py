"""A Numatopology's cpuDetail read once per content (``volcano._cpu_table``) against the
checked reader of every entry: for any cpuDetail, the same record and the same errors,
whether the table was read before or not; a value that only compares equal to a cached
one (True == 1, 1.0 == 1) is never taken for it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.inventory import volcano
from core.inventory.records import Reporter, Units
from core.inventory.volcano import parse_numatopology
from tests.builders.objects import numatopology

# Mostly plain entries of a few shapes (so that tables repeat), now and then one off.
_INT = st.one_of(st.integers(0, 3), st.integers(0, 3), st.sampled_from([-1, 64, 70]))
_ODD = st.sampled_from([True, False, 1.0, "1", None, 2**70])
_ENTRY = st.one_of(
    st.fixed_dictionaries({"numa": _INT, "socket": _INT, "core": _INT}),
    st.fixed_dictionaries({"numa": _INT, "socket": _INT, "core": _INT}),
    st.fixed_dictionaries({"numa": _ODD, "socket": _INT, "core": _INT}),
    st.fixed_dictionaries({"numa": _INT}, optional={"socket": _INT, "core": _ODD}),
    st.fixed_dictionaries({"numa": _INT, "socket": _INT, "core": _INT, "thread": _INT}),
    st.sampled_from([None, 3, "x"]),
)
_ID = st.one_of(st.integers(0, 7).map(str), st.sampled_from(["x", "-1", "01"]))
_DETAIL = st.dictionaries(_ID, _ENTRY, max_size=8)


def _read(detail: dict[str, Any], cpus: str, reserved: str | None) -> tuple[Any, list[str]]:
    errors: list[str] = []
    obj = numatopology(
        "n", allocatable=cpus, detail=detail, reserved={"cpu": reserved} if reserved else None
    )
    data = parse_numatopology(obj, "n", Reporter("Numatopology", "n", errors), Units())
    return data, errors


def _checked(detail: dict[str, Any], cpus: str, reserved: str | None) -> tuple[Any, list[str]]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(volcano, "_plain_key", lambda detail: None)
        return _read(detail, cpus, reserved)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_DETAIL, min_size=1, max_size=4),
    st.sampled_from(["0-3", "0,2", "", "0-7", "9"]),
    st.sampled_from([None, "1", "2", "9"]),
)
def test_a_table_read_once_gives_what_the_checked_reader_gives(
    details: list[dict[str, Any]], cpus: str, reserved: str | None
) -> None:
    for detail in details:  # several in a row: later ones may hit the cache
        assert _read(detail, cpus, reserved) == _checked(detail, cpus, reserved)


@pytest.mark.parametrize("odd", [True, 1.0])
def test_a_value_equal_to_a_cached_one_but_not_an_int_is_reported(odd: object) -> None:
    plain = {"0": {"numa": 1, "socket": 0, "core": 0}}
    data, errors = _read(plain, "0", None)
    assert not errors and data.zones is not None and list(data.zones) == [1]
    data, errors = _read({"0": {"numa": odd, "socket": 0, "core": 0}}, "0", None)
    assert data.zones is None
    assert errors[0] == (
        f"Numatopology n: spec.cpuDetail[0].numa: {odd!r} is not a non-negative integer"
    )
