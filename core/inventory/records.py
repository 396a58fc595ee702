"""What every inventory reader shares (NRT, Node, Volcano Numatopology, bound Pods): the
error reporter, the caching quantity converter, and the mutable zone and settings records
a node is merged from."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Final

from core.quantity import to_core_units

_TRUE: Final = ("1", "t", "T", "TRUE", "true", "True")  # Go strconv.ParseBool
_FALSE: Final = ("0", "f", "F", "FALSE", "false", "False")


class Reporter:
    """Collects error strings that name the object and the field."""

    __slots__ = ("kind", "name", "sink")

    def __init__(self, kind: str, name: str, sink: list[str]) -> None:
        self.kind = kind
        self.name = name
        self.sink = sink

    def error(self, path: str, message: str) -> None:
        self.sink.append(f"{self.kind} {self.name}: {path}: {message}")


class Units:
    """to_core_units with a cache: clusters repeat the same few quantity strings, and
    exact Fraction parsing is the cost that dominates building 100,000 nodes."""

    __slots__ = ("_cpu", "_other")

    def __init__(self) -> None:
        # cpu has its own unit (millicores); every other resource rounds the same way
        self._cpu: dict[str | int, int] = {}
        self._other: dict[str | int, int] = {}

    def convert(self, resource: str, value: Any) -> int:
        """Raises InvalidInput for a value that does not parse."""
        kind = type(value)
        if kind is not str and kind is not int:
            return to_core_units(resource, value)
        cache = self._cpu if resource == "cpu" else self._other
        hit = cache.get(value)
        if hit is None:
            hit = cache[value] = to_core_units(resource, value)
        return hit


@dataclass(slots=True)
class ZoneRecord:
    """One NUMA zone while the inventory is being built (mutable; frozen later)."""

    capacity: dict[str, int] = field(default_factory=dict)
    allocatable: dict[str, int] = field(default_factory=dict)
    available: dict[str, int] = field(default_factory=dict)  # only what the source gave
    costs: dict[int, int] = field(default_factory=dict)


@dataclass(slots=True)
class Settings:
    """Kubelet settings one source reports; None means the source does not say."""

    tm_policy: str | None = None
    tm_scope: str | None = None
    max_numa_nodes: int | None = None
    prefer_closest: bool | None = None
    cpu_manager_policy: str | None = None
    full_pcpus_only: bool | None = None
    threads_per_core: int | None = None
    memory_manager_policy: str | None = None

    def fill_from(self, other: Settings) -> None:
        """Take every value this record lacks from ``other`` (lower precedence)."""
        for name in self.__slots__:
            if getattr(self, name) is None:
                setattr(self, name, getattr(other, name))


def parse_bool(text: object) -> bool | None:
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    return None


def json_object(text: object, path: str, report: Reporter) -> dict[str, Any] | None:
    """Parse an annotation holding a JSON object; report and return None otherwise."""
    try:
        data = json.loads(text) if isinstance(text, str) else None
    except ValueError as exc:
        report.error(path, f"not valid JSON: {exc}")
        return None
    if not isinstance(data, dict):
        report.error(path, f"{text!r} is not a JSON object")
        return None
    return data
