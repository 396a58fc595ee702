"""The inventory kept up to date object by object (docs/inventory.md, "The data flow").

``set``/``delete`` keep one object's parsed parts and mark the node name it touches;
``flush`` merges the marked names and returns their new records (None: the name is gone).
The result equals ``build_inventory`` of the final objects but for the order of errors and
duplicates of one kind and name, which cannot happen here (the key is the name). Objects
may be parsed (``parse_object``) in one thread and set and flushed in another, as long as
those calls do not overlap.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.inventory.build import SLOTS, Identified, Parsed, attach, identify, parse
from core.inventory.merge import Parts, merge
from core.inventory.node import NodeInfo
from core.inventory.nrt import NrtData
from core.inventory.records import Units
from core.inventory.share import Sharer
from core.inventory.usage import PodUsage
from core.inventory.usage_only import share_unchanged, usage_only, with_available
from core.inventory.volcano import VolcanoData
from core.model import NodeTopology

ObjectKey = tuple[str, str, str]  # (kind, namespace, name)
# The sharer is replaced when it holds more than this many entries plus so many per node.
SHARE_LIMIT = 100_000
SHARE_PER_RECORD = 16


@dataclass(frozen=True, slots=True)
class ParsedObject:
    """One object read on its own: its key, what it contributes, its errors."""

    key: ObjectKey
    data: Parsed
    errors: tuple[str, ...]
    ignored: bool = False


def object_key_of(obj: Mapping[str, Any], kind: str) -> ObjectKey:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return (kind, str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def parse_object(obj: Mapping[str, Any], units: Units) -> ParsedObject:
    """Identify and parse one object (no shared state but the ``units`` cache, which
    only grows: safe to share between threads under the GIL)."""
    errors: list[str] = []
    found = identify(0, obj, errors)
    kind = str(obj.get("kind") or "") if isinstance(obj, Mapping) else ""
    key = object_key_of(obj, kind) if isinstance(obj, Mapping) else ("", "", "")
    if not isinstance(found, Identified):
        return ParsedObject(key, None, tuple(errors), ignored=isinstance(found, str))
    data = parse(found, obj, units)
    # Pods: the errors that the merge adds (NUMA ids the node lacks) are added later.
    return ParsedObject(key, data, tuple(errors))


class IncrementalInventory:
    """Parsed objects by key, the node name each belongs to, and the names to merge."""

    def __init__(self) -> None:
        self.units = Units()
        self.share = Sharer()
        # A Node, NRT or Numatopology is held in its name's Parts alone (one copy of each
        # fact, and no object per object: at 100,000 nodes ~34 MiB and 400,000 objects
        # for the collector); here only pods and objects that give nothing but errors.
        self._objects: dict[ObjectKey, ParsedObject] = {}
        self._errors: dict[ObjectKey, tuple[str, ...]] = {}  # every object's, in order set
        self._parts: dict[str, Parts] = {}
        self._dirty: set[str] = set()  # names to merge whole
        # Names whose only change since their last merge is their NRT's free amounts
        # (``_usage_only``): merged by ``_with_usage``, not whole.
        self._usage: set[str] = set()
        self._merge_errors: dict[str, tuple[str, ...]] = {}
        self.records: dict[str, NodeTopology] = {}
        self.errors_changed = False  # since the last ``errors()``
        # The names of the last ``flush`` whose new record differs from the one before
        # only in free amounts (``_with_usage``): what a compact delta can carry.
        self.usage_flushed: list[str] = []

    def __len__(self) -> int:
        return len(self.records)

    def share_usage(self, on: bool) -> None:
        """Share free amounts (and so zones) between nodes: worth it for a whole list, where
        many are equal; not for watch events, where they rarely are and each lookup costs
        (a sixth of the event loop under churn, py-spy). The server turns it off after the
        first build. Then the first list's free amounts leave the sharer's tables: no
        lookup reads them again, and most are one node's own (~160 bytes of keys each)."""
        self.share.share_usage(on)
        if on:
            return
        for parts in self._parts.values():
            for data in (parts.nrt, parts.volcano):
                for zone in (data.zones or {}).values() if data is not None else ():
                    self.share.forget(zone.available)

    def set(self, parsed: ParsedObject) -> None:
        """Add or replace the object ``parsed.key``."""
        old = self._held(parsed.key)
        if old is not None and parsed.key[0] != "Pod":
            if old == parsed:
                return  # the same content again (a relist, a no-op update): nothing to merge
            name = parsed.key[2]
            parts = self._parts.get(name)
            if (
                parts is not None
                and old.errors == parsed.errors
                and _usage_only(old.data, parsed.data)
            ):
                # Most watch events under churn (NFD rewrites free amounts every minute).
                parts.nrt = parsed.data  # type: ignore[assignment]
                if name not in self._dirty:
                    self._usage.add(name)
                return
        self.delete(parsed.key)
        if parsed.ignored:
            return
        _share_parts(parsed.data, self.share)
        kind = parsed.key[0]
        if parsed.errors:
            self._errors[parsed.key] = parsed.errors
            self.errors_changed = True
        name = _node_of(parsed)
        if kind not in SLOTS or parsed.data is None or name is None:
            self._objects[parsed.key] = parsed
        if name is None:
            return
        parts = self._parts.get(name)
        if parts is None:
            parts = self._parts[name] = Parts()
        attach(parts, kind, parsed.data)
        self._dirty.add(name)

    def delete(self, key: ObjectKey) -> None:
        old = self._objects.pop(key, None) or self._held(key)
        if old is None:
            return
        if self._errors.pop(key, None):
            self.errors_changed = True
        name = _node_of(old)
        parts = self._parts.get(name) if name is not None else None
        if parts is None or name is None:
            return
        self._usage.discard(name)
        if key[0] == "Pod":
            parts.pods = [p for p in parts.pods if p is not old.data]
        else:
            setattr(parts, SLOTS[key[0]], None)
        self._dirty.add(name)

    def flush(self) -> dict[str, NodeTopology | None]:
        """Merge every touched node name; its new record, or None when it is gone."""
        out: dict[str, NodeTopology | None] = {}
        usage_flushed = self.usage_flushed = []
        for name in self._usage:
            if name in self._dirty:
                continue
            old = self.records.get(name)
            nrt = self._parts[name].nrt
            record = _with_usage(old, nrt) if old is not None and nrt is not None else None
            if record is None:
                self._dirty.add(name)  # the rules of merge are needed: merged whole
            elif record is not old:
                self.records[name] = out[name] = record
                usage_flushed.append(name)
        self._usage.clear()
        for name in self._dirty:
            parts = self._parts.get(name)
            if parts is None or _empty(parts):
                self._parts.pop(name, None)
                if self._merge_errors.pop(name, None):
                    self.errors_changed = True
                if self.records.pop(name, None) is not None:
                    out[name] = None
                continue
            sink: list[str] = []
            record = merge(name, _with_sink(parts, sink), self.share)
            if tuple(sink) != self._merge_errors.get(name, ()):
                self.errors_changed = True
            if sink:
                self._merge_errors[name] = tuple(sink)
            else:
                self._merge_errors.pop(name, None)
            if self.records.get(name) != record:
                self.records[name] = record
                out[name] = record
        self._dirty.clear()
        if len(self.share) > SHARE_LIMIT + SHARE_PER_RECORD * len(self.records):
            # Usage churn makes new distinct maps forever (free memory, NUMA states):
            # start afresh; records made before keep what they share, later ones share anew.
            self.share = Sharer(usage=self.share.usage)
        return out

    def errors(self) -> tuple[str, ...]:
        self.errors_changed = False
        found = [e for errors in self._errors.values() for e in errors]
        for errors in self._merge_errors.values():
            found.extend(errors)
        return tuple(found)

    def _held(self, key: ObjectKey) -> ParsedObject | None:
        """The object held under ``key``, if any (one of a name's Parts made up again)."""
        held = self._objects.get(key)
        slot = SLOTS.get(key[0])
        if held is not None or slot is None:
            return held
        parts = self._parts.get(key[2])
        data = getattr(parts, slot) if parts is not None else None
        return None if data is None else ParsedObject(key, data, self._errors.get(key, ()))

    def nodes(self) -> tuple[NodeTopology, ...]:
        """Every record, sorted by name (what ``build_inventory`` returns)."""
        return tuple(self.records[k] for k in sorted(self.records))


def _node_of(parsed: ParsedObject) -> str | None:
    if parsed.key[0] == "Pod":
        data = parsed.data
        return data.node if isinstance(data, PodUsage) else None
    return parsed.key[2] or None


def _share_parts(data: Parsed, share: Sharer) -> None:
    """Kept parts hold shared maps (equal tables of equal machines, label keys and
    values): the incremental inventory keeps every object's parts, so this is most of its
    memory. Safe: parts are not mutated after parsing (merge copies what it changes)."""
    if isinstance(data, NodeInfo):
        data.labels = share.mapping(data.labels)
        data.annotations = share.mapping(data.annotations)
        data.allocatable = share.mapping(data.allocatable)
        data.capacity = share.mapping(data.capacity)
    elif isinstance(data, NrtData | VolcanoData):
        data.settings = share.settings(data.settings)
        if isinstance(data, NrtData):
            # Mostly empty (no koordlet annotations): one empty map, not two per NRT.
            data.cpu_numa = data.cpu_numa or share.mapping(data.cpu_numa)
            data.koord_held = data.koord_held or share.mapping(data.koord_held)
        for zone in (data.zones or {}).values():
            # Int amounts and distances: by content (``amounts``); the free amounts too
            # would keep a key per node (free memory differs from node to node).
            zone.capacity = share.amounts(zone.capacity)
            zone.allocatable = share.amounts(zone.allocatable)
            if share.usage:
                zone.available = share.mapping(zone.available)
            zone.costs = share.amounts(zone.costs)


def _usage_only(old: Parsed, new: Parsed) -> bool:
    """``new`` is the NRT ``old`` with other usage only (core/inventory/usage_only.py:
    every other field of the NRT and of its zones equal). Then ``new`` and its zones take
    ``old``'s values, which are shared already (``_share_parts``)."""
    if not (type(old) is NrtData and type(new) is NrtData and old.zones and new.zones):
        return False
    if not usage_only(old, new):
        return False
    share_unchanged(old, new)
    for i, zone in new.zones.items():
        share_unchanged(old.zones[i], zone)
    return True


def _with_usage(record: NodeTopology, nrt: NrtData) -> NodeTopology | None:
    """``record`` with the free amounts of ``nrt`` (``_usage_only`` of the NRT it was
    merged from): what merge gives when the NRT reports a free amount for every
    allocatable resource of every zone (else merge derives some from the bound pods, and
    None is returned). ``record`` itself when no amount changed."""
    zones, records = record.zones, nrt.zones
    if not zones or records is None or len(zones) != len(records):
        return None  # e.g. an untrusted Node: merge left the zones out
    if nrt.koord_held:
        return None  # merge takes the CPUs koord-scheduler holds back from the free amounts
    available = []
    for zone in zones:
        rec = records.get(zone.id)
        if rec is None or rec.available.keys() != rec.allocatable.keys():
            return None
        available.append(rec.available)
    return with_available(record, available)


def _empty(parts: Parts) -> bool:
    return parts.node is None and parts.nrt is None and parts.volcano is None and not parts.pods


def _with_sink(parts: Parts, sink: list[str]) -> Parts:
    """The parts with every pod reporting into ``sink`` (merge adds errors about pods;
    kept per node, so a node merged again does not repeat them)."""
    if not parts.pods:
        return parts
    pods = []
    for pod in parts.pods:
        report = type(pod.report)(pod.report.kind, pod.report.name, sink)
        pods.append(dataclasses.replace(pod, report=report))
    return Parts(parts.node, parts.nrt, parts.volcano, pods)
