"""cpuset list strings (k8s.io/utils/cpuset Parse/String semantics)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import InvalidInput
from core.inventory.cpuset import MAX_CPU_ID, format_cpuset, parse_cpuset


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", set()),
        ("  ", set()),
        ("0", {0}),
        ("0-3", {0, 1, 2, 3}),
        ("2-15,18-31", set(range(2, 16)) | set(range(18, 32))),
        ("1,3,5", {1, 3, 5}),
        ("7-7", {7}),
        ("3,1-2", {1, 2, 3}),
        ("0-2,1-3", {0, 1, 2, 3}),  # overlaps are a union, as in cpuset.Parse
        (" 0-1 ", {0, 1}),
    ],
)
def test_parse(text: str, expected: set[int]) -> None:
    assert parse_cpuset(text) == frozenset(expected)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("5-3", "reversed"),
        ("1,,2", "'' is not a CPU id"),
        ("a", "'a' is not a CPU id"),
        ("-1", "'' is not a CPU id"),
        ("+1", "'+1' is not a CPU id"),
        ("1-", "'' is not a CPU id"),
        ("1 - 2", "'1 ' is not a CPU id"),
        ("0-3-5", "'3-5' is not a CPU id"),
        ("48Gi", "'48Gi' is not a CPU id"),
        (f"0-{MAX_CPU_ID + 1}", "larger than"),
    ],
)
def test_parse_rejects_with_the_string_and_element(text: str, fragment: str) -> None:
    with pytest.raises(InvalidInput) as exc:
        parse_cpuset(text)
    assert fragment in str(exc.value)
    assert repr(text) in str(exc.value)


def test_parse_rejects_non_strings() -> None:
    with pytest.raises(InvalidInput, match="not a string"):
        parse_cpuset(48)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("cpus", "text"),
    [
        ([], ""),
        ([0], "0"),
        ([0, 1, 2, 3], "0-3"),
        ([3, 1, 2, 8, 10, 11], "1-3,8,10-11"),
        ([0, 2, 4], "0,2,4"),
        ([5, 5, 6], "5-6"),
    ],
)
def test_format(cpus: list[int], text: str) -> None:
    assert format_cpuset(cpus) == text


@settings(max_examples=200)
@given(st.sets(st.integers(min_value=0, max_value=300)))
def test_format_then_parse_round_trips(cpus: set[int]) -> None:
    assert parse_cpuset(format_cpuset(cpus)) == frozenset(cpus)
