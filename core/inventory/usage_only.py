"""What a usage-only change is, once for every kind of record (docs/inventory.md,
"Usage-only events, a shorter path"): every field but USAGE_FIELDS equal, nested records
compared the same way, and a usage map keeping its keys (the packed resource table is made
of them). A field added to a record later is compared unless named in USAGE_FIELDS.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Mapping, Sequence
from dataclasses import fields, is_dataclass
from operator import attrgetter
from typing import Any

from core.model import NodeTopology, NumaZone

USAGE_FIELDS = frozenset({"available", "numa_states"})

# A record class's fields in three groups: the plain ones (compared at once, in C, through
# one attrgetter), those whose type holds records with usage in them (compared record by
# record), the usage ones.
_Plan = tuple[Any, tuple[str, ...], tuple[str, ...]]


@functools.cache
def _plan(cls: type) -> _Plan:
    hints = typing.get_type_hints(cls)
    plain, nested, usage = [], [], []
    for f in fields(cls):
        if f.name in USAGE_FIELDS:
            usage.append(f.name)
        elif _has_usage(hints[f.name]):
            nested.append(f.name)
        else:
            plain.append(f.name)
    getter = attrgetter(*plain) if plain else None
    return getter, tuple(nested), tuple(usage)


def _has_usage(tp: Any, seen: frozenset[Any] = frozenset()) -> bool:
    """Whether type ``tp`` is, or holds, a record with a usage field at some depth."""
    if tp in seen:
        return False
    if is_dataclass(tp) and isinstance(tp, type):
        hints = typing.get_type_hints(tp)
        return any(
            f.name in USAGE_FIELDS or _has_usage(hints[f.name], seen | {tp}) for f in fields(tp)
        )
    return any(_has_usage(arg, seen) for arg in typing.get_args(tp))


def usage_only(old: Any, new: Any) -> bool:
    """Record ``new`` differs from record ``old`` at most in usage: USAGE_FIELDS values (a
    map keeping its keys), at any depth of nested records (tuples of them, maps of them)."""
    if old is new:
        return True
    cls = type(old)
    if type(new) is not cls:
        return False
    plain, nested, usage = _plan(cls)
    if plain is not None and plain(old) != plain(new):
        return False
    for name in usage:
        a, b = getattr(old, name), getattr(new, name)
        if _is_map(a) and not (_is_map(b) and a.keys() == b.keys()):
            return False
    for name in nested:
        a, b = getattr(old, name), getattr(new, name)
        if a is b:
            continue
        if isinstance(a, tuple):
            if not (isinstance(b, tuple) and len(a) == len(b) and all(map(usage_only, a, b))):
                return False
        elif _is_map(a):
            if not (_is_map(b) and a.keys() == b.keys()):
                return False
            if not all(usage_only(v, b[k]) for k, v in a.items()):
                return False
        elif a is None or b is None or not usage_only(a, b):
            return False
    return True


def _is_map(value: Any) -> bool:
    return type(value) is dict or isinstance(value, Mapping)  # a dict without the ABC check


def share_unchanged(old: Any, new: Any) -> None:
    """After ``usage_only(old, new)`` of two mutable records (an NRT, its zones): ``new``
    takes ``old``'s values of every field that holds no usage, so that equal maps stay
    one object (the inventory shares them across nodes: memory, and identity makes the
    next comparison cheap)."""
    for name in _kept(type(old)):
        setattr(new, name, getattr(old, name))


@functools.cache
def _kept(cls: type) -> tuple[str, ...]:
    _, nested, usage = _plan(cls)
    return tuple(f.name for f in fields(cls) if f.name not in nested and f.name not in usage)


def with_available(
    record: NodeTopology,
    available: Sequence[Mapping[str, int]],
    states: tuple[str, ...] | None = None,
) -> NodeTopology:
    """``record`` with zone ``k``'s free amounts replaced by ``available[k]`` (one per
    zone, in order) and, given, its NUMA states by ``states``; ``record`` itself when
    nothing changed. The inventory process sends a worker these for a usage-only change
    instead of the record (webhook/inventory/feed.py)."""
    fresh = []
    changed = states is not None and states != record.numa_states
    for zone, free in zip(record.zones, available, strict=True):
        if free == zone.available:
            fresh.append(zone)
        else:
            fresh.append(NumaZone(zone.id, zone.capacity, zone.allocatable, free, zone.costs))
            changed = True
    if not changed:
        return record
    # Positional, not dataclasses.replace: that looks the fields up on every call (an
    # eighth of the event loop under churn, py-spy).
    values = list(_FIELDS(record))
    values[_ZONES] = tuple(fresh)
    if states is not None:
        values[_STATES] = states
    return NodeTopology(*values)


_FIELDS = attrgetter(*NodeTopology.__dataclass_fields__)
_ZONES = list(NodeTopology.__dataclass_fields__).index("zones")
_STATES = list(NodeTopology.__dataclass_fields__).index("numa_states")
