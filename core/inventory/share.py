"""Sharing of equal per-node values between nodes (the inventory's memory footprint)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.inventory.records import Settings
from core.model import NumaZone


class Sharer:
    """Shares equal per-node values between nodes: label keys and values, resource maps,
    NUMA zones. A 10,000-node cluster has a few hundred distinct zone tables, and YAML and
    JSON parsers return a new string object for every occurrence of a key ("cpu",
    "kubernetes.io/hostname"); sharing them roughly halves the inventory's memory in
    every server worker. Safe because nothing mutates a NodeTopology's mappings."""

    def __init__(self, *, usage: bool = True) -> None:
        # ``usage``: share free amounts (and so whole zones) too. A whole build finds many
        # equal ones; watch events rarely do (free memory is per node): see
        # IncrementalInventory.share_usage.
        self.usage = usage
        self._strings: dict[str, str] = {}
        # Content hash -> the shared map (a list of them on a collision). Keyed by the
        # hash, not by the content: a key holding the items (as tuples) would keep a
        # second copy of every map, and most label maps are one node's own (its
        # hostname): 5.4 MiB of 10,000 nodes' inventory (docs/benchmarks.md, round 9).
        self._maps: dict[int, dict[Any, Any] | list[dict[Any, Any]]] = {}
        self._zones: dict[tuple[Any, ...], NumaZone] = {}
        self._tuples: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self._zone_tuples: dict[tuple[int, ...], tuple[NumaZone, ...]] = {}
        # id -> map, for the maps this sharer returned (it holds them, so their ids stay
        # theirs): a map shared already is recognised without building its key.
        self._own: dict[int, dict[Any, Any]] = {}
        # Int-valued maps by content (``amounts``): zone tables repeat across nodes.
        self._amounts: dict[tuple[Any, ...], dict[Any, int]] = {}
        self._settings: dict[tuple[Any, ...], Settings] = {}
        self._empty: dict[Any, Any] = {}

    def __len__(self) -> int:
        """Entries held (the incremental inventory starts a new sharer past a bound)."""
        return (
            len(self._strings)
            + len(self._maps)
            + len(self._zones)
            + len(self._tuples)
            + len(self._amounts)
            + len(self._settings)
        )

    def share_usage(self, on: bool) -> None:
        """Share free amounts, and so whole zones, or stop. Stopped, the whole-zone tables
        are never read again: dropped (at 100,000 nodes ~135,000 keys of object ids)."""
        self.usage = on
        if not on:
            self._zones.clear()
            self._zone_tuples.clear()

    def forget(self, shared: dict[Any, Any]) -> None:
        """Drop ``shared``, a map this sharer returned, from its tables (the map itself stays
        as it is); one that is also a table of amounts (``amounts``) stays known."""
        if self._own.get(id(shared)) is not shared:
            return  # not held (or forgotten already: many zones share one)
        items = tuple(shared.items())
        if self._amounts.get(items) is shared:
            return
        del self._own[id(shared)]
        key = hash(items)
        held = self._maps.get(key)
        if held is shared:
            del self._maps[key]
        elif type(held) is list:
            rest = [m for m in held if m is not shared]
            self._maps[key] = rest[0] if len(rest) == 1 else rest

    def text(self, value: str) -> str:
        return self._strings.setdefault(value, value)

    def mapping(self, raw: Mapping[Any, Any]) -> dict[Any, Any]:
        if not raw:
            return self._empty  # a node without labels, devices, bound pods
        if self._own.get(id(raw)) is raw:
            return raw  # type: ignore[return-value]
        items = tuple(raw.items())
        key = hash(items)
        held = self._maps.get(key)
        if held is not None:
            for got in held if type(held) is list else (held,):
                # Types are part of the content: True == 1, and a map holding True must
                # stay distinct. Order too: {a, b} and {b, a} are not merged. The types
                # are compared on a hit only (most label maps are a miss: one node's own).
                if tuple(got.items()) == items and _types(got) == _types(raw):
                    return got
        return self._keep(key, held, raw)

    def _keep(self, key: int, held: Any, raw: Mapping[Any, Any]) -> dict[Any, Any]:
        text = self.text
        got = {
            text(k) if type(k) is str else k: text(v) if type(v) is str else v
            for k, v in raw.items()
        }
        if held is None:
            self._maps[key] = got
        elif type(held) is list:
            held.append(got)
        else:
            self._maps[key] = [held, got]
        self._own[id(got)] = got
        return got

    def amounts(self, raw: dict[Any, int]) -> dict[Any, int]:
        """``mapping`` of a map whose values are all ``int`` (a zone's amounts and
        distances, as the parsers make them): no types to tell apart, so the content alone
        is the key, and a hit costs one lookup (the first list shares ~12 such maps per
        NRT: the most frequent call of the build)."""
        if self._own.get(id(raw)) is raw:
            return raw
        items = tuple(raw.items())
        got = self._amounts.get(items)
        if got is None:
            got = self._amounts[items] = self.mapping(raw)
        return got

    def settings(self, settings: Settings) -> Settings:
        """One Settings per content (the types are part of it: True == 1): most nodes of a
        cluster report the same kubelet settings. Safe: parsed settings are only read."""
        values = tuple(getattr(settings, name) for name in Settings.__slots__)
        return self._settings.setdefault((values, tuple(map(type, values))), settings)

    def zone(self, zone: NumaZone) -> NumaZone:
        if not self.usage:
            return NumaZone(
                zone.id,
                self.mapping(zone.capacity),
                self.mapping(zone.allocatable),
                zone.available,
                self.mapping(zone.costs),
            )
        maps = [
            self.mapping(m) for m in (zone.capacity, zone.allocatable, zone.available, zone.costs)
        ]
        # Shared maps are unique per content, so their identities are a content key.
        key = (zone.id, *map(id, maps))
        got = self._zones.get(key)
        if got is None:
            got = self._zones[key] = NumaZone(zone.id, *maps)
        return got

    def items(self, values: tuple[Any, ...]) -> tuple[Any, ...]:
        return self._tuples.setdefault(values, values)

    def zones(self, zones: tuple[NumaZone, ...]) -> tuple[NumaZone, ...]:
        shared = tuple(self.zone(z) for z in zones)
        if not self.usage:
            return shared
        # Shared zones are unique per content, so their identities are a content key.
        return self._zone_tuples.setdefault(tuple(map(id, shared)), shared)


def _types(raw: Mapping[Any, Any]) -> tuple[type, ...]:
    return tuple(map(type, raw.values()))
