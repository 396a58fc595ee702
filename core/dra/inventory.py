"""The DRA inventory a review reads, built whole (``read_inventory``: a file, a list) or kept
up to date object by object (``IncrementalDra``: the live watch), with the same result.

What the evaluation needs besides the objects: a node's slices (``by_node``, and
``unbound`` for those reaching nodes otherwise: selector, all nodes, per device, counters),
a pool's slices (``pools``: its generations, GatherPools), the devices allocated to any
claim (``in_use``; admin access takes none) and those several claims may share
(``shared``). A view is never written once built: the incremental path copies a mapping
before it changes an entry (copy-on-write), so a review holding the old view reads it whole."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from core.dra.allocate import Key
from core.dra.objects import (
    DeviceClass,
    DraError,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from core.dra.read import read_claim, read_class, read_slice, read_template

PoolKey = tuple[str, str]  # driver, pool
ObjectKey = tuple[str, str, str]  # kind, namespace ("" cluster-scoped), name
DraItem = ResourceSlice | DeviceClass | ResourceClaim | ResourceClaimTemplate


@dataclass(frozen=True, slots=True)
class DraInventory:
    classes: Mapping[str, DeviceClass] = field(default_factory=dict)
    claims: Mapping[tuple[str, str], ResourceClaim] = field(default_factory=dict)
    templates: Mapping[tuple[str, str], ResourceClaimTemplate] = field(default_factory=dict)
    errors: tuple[str, ...] = ()  # objects that could not be read (sorted)
    # every tuple of slices below is ordered by slice name, whatever the order of arrival
    by_node: Mapping[str, tuple[ResourceSlice, ...]] = field(default_factory=dict)
    unbound: tuple[ResourceSlice, ...] = ()
    pools: Mapping[PoolKey, tuple[ResourceSlice, ...]] = field(default_factory=dict)
    in_use: frozenset[Key] = frozenset()
    shared: frozenset[Key] = frozenset()

    def reaching(self, node: str) -> tuple[ResourceSlice, ...]:
        """The slices that may reach ``node``: its own and the unbound ones."""
        return (*self.by_node.get(node, ()), *self.unbound)

    @property
    def slices(self) -> tuple[ResourceSlice, ...]:
        return tuple(s for k in sorted(self.pools) for s in self.pools[k])


_READERS: Final = {
    "ResourceSlice": read_slice,
    "DeviceClass": read_class,
    "ResourceClaim": read_claim,
    "ResourceClaimTemplate": read_template,
}


def parse_dra(obj: Any) -> tuple[ObjectKey, DraItem | str] | None:
    """One object read: its key and the item, or the error naming the field (a string);
    None for a kind that is not DRA's or an object without a name."""
    kind = obj.get("kind") if isinstance(obj, Mapping) else None
    reader = _READERS.get(kind) if isinstance(kind, str) else None
    if reader is None:
        return None
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    key = (str(kind), str(meta.get("namespace") or ""), str(meta.get("name") or ""))
    try:
        return key, reader(obj)
    except DraError as e:
        return key, str(e)


def home(s: ResourceSlice) -> str:
    """The node a slice belongs to ("" when it reaches nodes otherwise)."""
    return s.node_name if s.node_name and not s.shared_counters else ""


def allocated(claim: ResourceClaim) -> Iterator[Key]:
    return ((d.driver, d.pool, d.device) for d in claim.allocation or () if not d.admin_access)


def multi(s: ResourceSlice) -> Iterator[Key]:
    return ((s.driver, s.pool, d.name) for d in s.devices if d.multiple_allocations)


def ordered(slices: Iterable[ResourceSlice]) -> tuple[ResourceSlice, ...]:
    return tuple(sorted(slices, key=lambda s: s.name))


def read_inventory(objects: Iterable[Any]) -> DraInventory:
    """The whole build: the DRA objects among ``objects`` (other kinds are ignored); an
    unreadable one is left out and its error kept: while a slice or class is unreadable no
    node is judged ``never-fits`` (core.dra.evaluate.evaluate_node)."""
    slices: list[ResourceSlice] = []
    classes: dict[str, DeviceClass] = {}
    claims: dict[tuple[str, str], ResourceClaim] = {}
    templates: dict[tuple[str, str], ResourceClaimTemplate] = {}
    errors: list[str] = []
    for obj in objects:
        parsed = parse_dra(obj)
        if parsed is None:
            continue
        item = parsed[1]
        if isinstance(item, str):
            errors.append(item)
        elif isinstance(item, ResourceSlice):
            slices.append(item)
        elif isinstance(item, DeviceClass):
            classes[item.name] = item
        elif isinstance(item, ResourceClaim):
            claims[(item.namespace, item.name)] = item
        else:
            templates[(item.namespace, item.name)] = item
    by_node: dict[str, list[ResourceSlice]] = {}
    pools: dict[PoolKey, list[ResourceSlice]] = {}
    for s in slices:
        by_node.setdefault(home(s), []).append(s)
        pools.setdefault((s.driver, s.pool), []).append(s)
    unbound = by_node.pop("", [])
    return DraInventory(
        classes,
        claims,
        templates,
        tuple(sorted(errors)),
        {k: ordered(v) for k, v in by_node.items()},
        ordered(unbound),
        {k: ordered(v) for k, v in pools.items()},
        frozenset(k for c in claims.values() for k in allocated(c)),
        frozenset(k for s in slices for k in multi(s)),
    )


class IncrementalDra:
    """The live DRA inventory: ``apply`` one object's new state (parsed, unreadable or
    deleted), ``flush`` a new view that recomputes only what the applied objects touched
    (their nodes' and pools' slices, their classes, claims, templates; the usage sets when
    an allocation or a shared device changed) and shares the rest with the previous view."""

    def __init__(self) -> None:
        self.view = DraInventory()
        self._items: dict[ObjectKey, DraItem] = {}
        self._errors: dict[ObjectKey, str] = {}
        self._node_slices: dict[str, dict[str, ResourceSlice]] = {}  # "" = unbound
        self._pool_slices: dict[PoolKey, dict[str, ResourceSlice]] = {}
        self._used: Counter[Key] = Counter()
        self._multi: Counter[Key] = Counter()
        self._touched: set[ObjectKey] = set()  # classes, claims, templates
        self._nodes: set[str] = set()
        self._pools: set[PoolKey] = set()
        self._usage = self._sharing = self._errored = False

    def __len__(self) -> int:
        """Objects held, unreadable ones included."""
        return len(self._items) + len(self._errors)

    def apply(self, key: ObjectKey, item: DraItem | str | None) -> None:
        """``key``'s object is now ``item``: parsed, unreadable (the error), or deleted.
        A kind that is not DRA's is ignored."""
        if key[0] not in _READERS:
            return
        old = self._items.pop(key, None)
        if old is not None:
            self._change(key, old, -1)
        if self._errors.pop(key, None) is not None:
            self._errored = True
        if isinstance(item, str):
            self._errors[key] = item
            self._errored = True
        elif item is not None:
            self._items[key] = item
            self._change(key, item, +1)
        if key[0] != "ResourceSlice":
            self._touched.add(key)

    def _change(self, key: ObjectKey, item: DraItem, sign: int) -> None:
        if isinstance(item, ResourceSlice):
            node, pool = home(item), (item.driver, item.pool)
            for group in (
                self._node_slices.setdefault(node, {}),
                self._pool_slices.setdefault(pool, {}),
            ):
                if sign > 0:
                    group[key[2]] = item
                else:
                    del group[key[2]]
            self._nodes.add(node)
            self._pools.add(pool)
            self._sharing |= _count(self._multi, multi(item), sign)
        elif isinstance(item, ResourceClaim):
            self._usage |= _count(self._used, allocated(item), sign)

    def flush(self) -> DraInventory:
        """The view with every applied change; the previous view is left as it was."""
        v = self.view
        before: dict[str, Mapping[Any, Any]] = {
            "DeviceClass": v.classes,
            "ResourceClaim": v.claims,
            "ResourceClaimTemplate": v.templates,
        }
        by_kind: dict[str, dict[Any, Any]] = {}
        for kind, ns, name in self._touched:
            item = self._items.get((kind, ns, name))
            if kind not in by_kind:
                by_kind[kind] = dict(before[kind])  # copy-on-write: the old view stays whole
            at = name if kind == "DeviceClass" else (ns, name)
            if item is None:
                by_kind[kind].pop(at, None)
            else:
                by_kind[kind][at] = item
        by_node = _patched(v.by_node, self._node_slices, self._nodes - {""})
        pools = _patched(v.pools, self._pool_slices, self._pools)
        self.view = DraInventory(
            by_kind.get("DeviceClass", v.classes),
            by_kind.get("ResourceClaim", v.claims),
            by_kind.get("ResourceClaimTemplate", v.templates),
            tuple(sorted(self._errors.values())) if self._errored else v.errors,
            by_node,
            ordered(self._node_slices.get("", {}).values()) if "" in self._nodes else v.unbound,
            pools,
            frozenset(self._used) if self._usage else v.in_use,
            frozenset(self._multi) if self._sharing else v.shared,
        )
        self._touched, self._nodes, self._pools = set(), set(), set()
        self._usage = self._sharing = self._errored = False
        return self.view


def _count(counter: Counter[Key], keys: Iterable[Key], sign: int) -> bool:
    """Add (or remove) ``keys``; True when the set of keys changed."""
    changed = False
    for k in keys:
        n = counter[k] + sign
        changed |= n == 0 or n == sign
        if n:
            counter[k] = n
        else:
            del counter[k]
    return changed


def _patched(
    old: Mapping[Any, tuple[ResourceSlice, ...]],
    groups: dict[Any, dict[str, ResourceSlice]],
    touched: set[Any],
) -> Mapping[Any, tuple[ResourceSlice, ...]]:
    """``old`` with the touched groups' slices again (a group left empty is dropped)."""
    if not touched:
        return old
    out = dict(old)
    for at in touched:
        group = groups.get(at)
        if group:
            out[at] = ordered(group.values())
        else:
            out.pop(at, None)
            groups.pop(at, None)
    return out
