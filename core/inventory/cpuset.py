"""Linux cpuset list strings ("0-3,8,10-11"), as the kubelet and Volcano's
resource-exporter write them (k8s.io/utils/cpuset Parse / String).

Volcano's Numatopology carries ``spec.numares.cpu.allocatable`` in this form, and
Koordinator's ``resource-status`` annotation carries the pod's ``cpuset`` in it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from core.errors import InvalidInput

# A guard against "0-4000000000" building a huge set; real machines stay far below it.
MAX_CPU_ID: Final = 65535


def _parse_id(text: str, whole: str) -> int:
    # Go's strconv.Atoi (used by cpuset.Parse) accepts a sign; a CPU id never has one.
    if not text.isdigit() or not text.isascii():
        raise InvalidInput(
            f"cpuset {whole!r}: {text!r} is not a CPU id (expected e.g. '0-3,8,10-11')"
        )
    value = int(text)
    if value > MAX_CPU_ID:
        raise InvalidInput(f"cpuset {whole!r}: CPU id {value} is larger than {MAX_CPU_ID}")
    return value


def parse_cpuset(text: str) -> frozenset[int]:
    """Parse a cpuset list. The empty string is the empty set, as in cpuset.Parse.

    Raises InvalidInput naming the string and the bad element: reversed ranges
    ("5-3"), empty elements ("1,,2"), signs, spaces inside elements.
    """
    if not isinstance(text, str):
        raise InvalidInput(f"cpuset {text!r} is not a string (expected e.g. '0-3,8,10-11')")
    whole = text
    text = text.strip()
    if not text:
        return frozenset()
    cpus: set[int] = set()
    for element in text.split(","):
        low_text, dash, high_text = element.partition("-")
        low = _parse_id(low_text, whole)
        if not dash:
            cpus.add(low)
            continue
        high = _parse_id(high_text, whole)
        if high < low:
            raise InvalidInput(f"cpuset {whole!r}: range {element!r} is reversed")
        cpus.update(range(low, high + 1))
    return frozenset(cpus)


def format_cpuset(cpus: Iterable[int]) -> str:
    """The canonical list form: sorted, ranges collapsed ("0-3,8")."""
    ordered = sorted(set(cpus))
    parts: list[str] = []
    start = prev = -2
    for cpu in ordered:
        if cpu == prev + 1:
            prev = cpu
            continue
        if start >= 0:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = cpu
    if start >= 0:
        parts.append(str(start) if start == prev else f"{start}-{prev}")
    return ",".join(parts)
