"""core.quantity.to_core_units caches string conversions (issue 7): the cache must never
change an answer: bool is not 1, errors are raised every time, unhashable input is
still a clear error."""

from __future__ import annotations

import pytest

from core.errors import InvalidInput
from core.quantity import _str_to_core_units, to_core_units


def test_cached_strings_give_the_same_units() -> None:
    _str_to_core_units.cache_clear()
    for _ in range(3):
        assert to_core_units("cpu", "2") == 2000
        assert to_core_units("cpu", "500m") == 500
        assert to_core_units("memory", "8Gi") == 8 * 2**30
        assert to_core_units("nvidia.com/gpu", "1.5") == 2  # counts round up
    info = _str_to_core_units.cache_info()
    assert info.hits >= 8 and info.currsize == 4


def test_resource_is_part_of_the_key() -> None:
    assert to_core_units("memory", "2") == 2
    assert to_core_units("cpu", "2") == 2000


def test_numbers_bypass_the_cache_and_bool_is_never_one() -> None:
    assert to_core_units("cpu", 1) == 1000
    assert to_core_units("cpu", "1") == 1000
    with pytest.raises(InvalidInput, match="True"):
        to_core_units("cpu", True)
    assert to_core_units("cpu", 0.5) == 500


@pytest.mark.parametrize("value", ["-1", "2x", "9" * 40, ""])
def test_errors_are_raised_every_time(value: str) -> None:
    for _ in range(2):
        with pytest.raises(InvalidInput, match="quantity"):
            to_core_units("cpu", value)


@pytest.mark.parametrize("value", [["2"], {"a": 1}, None])
def test_unhashable_or_odd_values_are_clear_errors(value: object) -> None:
    with pytest.raises(InvalidInput, match="not a string or a number"):
        to_core_units("cpu", value)
