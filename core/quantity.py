"""Kubernetes resource quantities (k8s.io/apimachinery resource.Quantity), parsed into the
core's integer units: millicores for ``cpu``, bytes for memory and hugepages, plain counts
for everything else (rounded up, as the API server does for integer resources)."""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction
from typing import Final

from core.errors import InvalidInput

_BINARY: Final = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL: Final = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_RE: Final = re.compile(
    r"^(?P<sign>[+-]?)(?P<num>\d+(?:\.\d*)?|\.\d+)"
    r"(?:(?P<exp>[eE][+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?)$"
)
# Largest value the compiled core accepts (int64); both implementations check it.
MAX_VALUE: Final = 2**62
# A quantity is a number and a suffix; longer texts are refused before any arithmetic
# (int() of a long digit string is quadratic and refused past 4,300 digits).
MAX_CHARS: Final = 128
# |exponent| past which a non-zero mantissa of at most MAX_CHARS digits is surely over
# MAX_VALUE (positive) or below one unit (negative): 10**exp is never computed for them.
_EXP_BOUND: Final = 4 * MAX_CHARS


def _shown(value: str) -> str:
    return repr(value) if len(value) <= 40 else f"{value[:40]!r}... ({len(value):,} characters)"


def parse_quantity(value: object) -> Fraction:
    """Parse a quantity (string or number) exactly. Raises InvalidInput naming the value."""
    if isinstance(value, bool):
        raise InvalidInput(f"quantity {value!r} is not a number")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInput(f"quantity {value!r} is not a finite number")
        return Fraction(str(value))
    if not isinstance(value, str):
        raise InvalidInput(f"quantity {_shown(str(value))} is not a string or a number")
    if len(value) > MAX_CHARS:
        raise InvalidInput(f"quantity {_shown(value)} is longer than {MAX_CHARS} characters")
    m = _RE.match(value.strip())
    if m is None:
        raise InvalidInput(
            f"quantity {value!r} does not parse (expected e.g. '2', '500m', '4Gi', '1.5G')"
        )
    number = Fraction(m["num"])
    if m["exp"]:
        exp = int(m["exp"][1:])
        if exp > _EXP_BOUND and number:
            raise InvalidInput(f"quantity {value!r} is too large")
        # zero stays zero; below -_EXP_BOUND the value stays under one unit (same ceiling)
        if number:
            number *= Fraction(10) ** max(exp, -_EXP_BOUND)
    suffix = m["suffix"] or ""
    number *= _BINARY[suffix] if suffix in _BINARY else _DECIMAL[suffix]
    return -number if m["sign"] == "-" else number


def to_core_units(resource: str, value: object) -> int:
    """Convert a quantity of ``resource`` into the core's integer unit (ceiling)."""
    if type(value) is str and type(resource) is str:
        # The same few strings ("2", "500m", "8Gi") recur in every review; exact Fraction
        # arithmetic is slow next to a dict hit. Only exact str keys are cached (True == 1
        # would share a cache entry with 1); errors are not cached and raise every time.
        return _str_to_core_units(resource, value)
    return _to_core_units(resource, value)


@functools.lru_cache(maxsize=4096)
def _str_to_core_units(resource: str, value: str) -> int:
    return _to_core_units(resource, value)


# The bounded memo itself, for callers that already know both arguments are exact str
# (core.intent.containers: a dozen quantities a review, one Python call fewer each).
str_to_core_units = _str_to_core_units


def _to_core_units(resource: str, value: object) -> int:
    q = parse_quantity(value)
    if q < 0:
        raise InvalidInput(f"quantity {value!r} of {resource} is negative")
    if resource == "cpu":
        q *= 1000
    units = -((-q.numerator) // q.denominator)  # ceiling
    if units > MAX_VALUE:
        raise InvalidInput(f"quantity {value!r} of {resource} is too large")
    return units


def is_whole_cpu(millicores: int) -> bool:
    """True when a CPU amount is a positive integer number of CPUs (kubelet guaranteedCPUs)."""
    return millicores > 0 and millicores % 1000 == 0


def format_quantity(resource: str, units: int) -> str:
    """Render core units back as a short quantity string, for messages and explain."""
    if resource == "cpu":
        return str(units // 1000) if units % 1000 == 0 else f"{units}m"
    if resource == "memory" or resource.startswith("hugepages-"):
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            if units and units % _BINARY[suffix] == 0:
                return f"{units // _BINARY[suffix]}{suffix}"
    return str(units)
