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
from core.dra.chunked import ChunkedMap
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
    claims: Mapping[tuple[str, str], ResourceClaim] = field(default_factory=ChunkedMap)
    templates: Mapping[tuple[str, str], ResourceClaimTemplate] = field(default_factory=ChunkedMap)
    errors: tuple[str, ...] = ()  # objects that could not be read (sorted)
    # every tuple of slices below is ordered by slice name, whatever the order of arrival
    by_node: Mapping[str, tuple[ResourceSlice, ...]] = field(default_factory=ChunkedMap)
    unbound: tuple[ResourceSlice, ...] = ()
    pools: Mapping[PoolKey, tuple[ResourceSlice, ...]] = field(default_factory=ChunkedMap)
    # per pool: its devices allocated to a claim, and those several claims may share
    in_use: Mapping[PoolKey, frozenset[Key]] = field(default_factory=ChunkedMap)
    shared: Mapping[PoolKey, frozenset[Key]] = field(default_factory=ChunkedMap)

    def reaching(self, node: str) -> tuple[ResourceSlice, ...]:
        """The slices that may reach ``node``: its own and the unbound ones."""
        return (*self.by_node.get(node, ()), *self.unbound)

    def usage_on(self, node: str) -> tuple[frozenset[Key], frozenset[Key]]:
        """The devices in use and the shareable ones among the pools reaching ``node``."""
        pools = {(s.driver, s.pool) for s in self.reaching(node)}
        return (
            frozenset().union(*(self.in_use.get(p, _NONE) for p in pools)),
            frozenset().union(*(self.shared.get(p, _NONE) for p in pools)),
        )

    def is_used(self, key: Key) -> bool:
        return key in self.in_use.get(key[:2], _NONE)

    @property
    def slices(self) -> tuple[ResourceSlice, ...]:
        return tuple(s for k in sorted(self.pools) for s in self.pools[k])


_NONE: Final[frozenset[Key]] = frozenset()
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
        ChunkedMap.of(claims),
        ChunkedMap.of(templates),
        tuple(sorted(errors)),
        ChunkedMap.of((k, ordered(v)) for k, v in by_node.items()),
        ordered(unbound),
        ChunkedMap.of((k, ordered(v)) for k, v in pools.items()),
        _per_pool(k for c in claims.values() for k in allocated(c)),
        _per_pool(k for s in slices for k in multi(s)),
    )


def _per_pool(keys: Iterable[Key]) -> ChunkedMap[PoolKey, frozenset[Key]]:
    found: dict[PoolKey, set[Key]] = {}
    for k in keys:
        found.setdefault(k[:2], set()).add(k)  # type: ignore[arg-type]
    return ChunkedMap.of((p, frozenset(v)) for p, v in found.items())


class IncrementalDra:
    """The live DRA inventory: ``apply`` one object's new state (parsed, unreadable or
    deleted), ``flush`` a new view that recomputes only what the applied objects touched
    (their nodes' and pools' slices and usage, their classes, claims, templates) and
    shares the rest with the previous view (ChunkedMap: only the touched chunks copied)."""

    def __init__(self) -> None:
        self.view = DraInventory()
        self._items: dict[ObjectKey, DraItem] = {}
        self._errors: dict[ObjectKey, str] = {}
        self._node_slices: dict[str, dict[str, ResourceSlice]] = {}  # "" = unbound
        self._pool_slices: dict[PoolKey, dict[str, ResourceSlice]] = {}
        self._used: dict[PoolKey, Counter[Key]] = {}
        self._multi: dict[PoolKey, Counter[Key]] = {}
        self._touched: set[ObjectKey] = set()  # classes, claims, templates
        self._nodes: set[str] = set()
        self._pools: set[PoolKey] = set()
        self._used_pools: set[PoolKey] = set()
        self._multi_pools: set[PoolKey] = set()
        self._errored = False

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
            self._multi_pools |= _count(self._multi, multi(item), sign)
        elif isinstance(item, ResourceClaim):
            self._used_pools |= _count(self._used, allocated(item), sign)

    def flush(self) -> DraInventory:
        """The view with every applied change; the previous view is left as it was."""
        v = self.view
        changes: dict[str, dict[Any, Any]] = {
            "DeviceClass": {},
            "ResourceClaim": {},
            "ResourceClaimTemplate": {},
        }
        for kind, ns, name in self._touched:
            at = name if kind == "DeviceClass" else (ns, name)
            changes[kind][at] = self._items.get((kind, ns, name))
        classes: Mapping[str, DeviceClass] = v.classes
        if changes["DeviceClass"]:
            copied = dict(v.classes)  # copy-on-write: the old view stays whole (classes are few)
            for name, item in changes["DeviceClass"].items():
                if item is None:
                    copied.pop(name, None)
                else:
                    copied[name] = item
            classes = copied
        self.view = DraInventory(
            classes,
            _edit(v.claims, changes["ResourceClaim"]),
            _edit(v.templates, changes["ResourceClaimTemplate"]),
            tuple(sorted(self._errors.values())) if self._errored else v.errors,
            _edit(v.by_node, _slices_of(self._node_slices, self._nodes - {""})),
            ordered(self._node_slices.get("", {}).values()) if "" in self._nodes else v.unbound,
            _edit(v.pools, _slices_of(self._pool_slices, self._pools)),
            _edit(v.in_use, _keys_of(self._used, self._used_pools)),
            _edit(v.shared, _keys_of(self._multi, self._multi_pools)),
        )
        self._touched, self._nodes, self._pools = set(), set(), set()
        self._used_pools, self._multi_pools = set(), set()
        self._errored = False
        return self.view


def _edit(old: Mapping[Any, Any], changes: Mapping[Any, Any]) -> Mapping[Any, Any]:
    return old.edit(changes) if isinstance(old, ChunkedMap) else ChunkedMap.of(old).edit(changes)


def _count(counters: dict[PoolKey, Counter[Key]], keys: Iterable[Key], sign: int) -> set[PoolKey]:
    """Add (or remove) ``keys``; the pools whose set of keys changed."""
    changed: set[PoolKey] = set()
    for k in keys:
        pool: PoolKey = k[:2]  # type: ignore[assignment]
        counter = counters.setdefault(pool, Counter())
        n = counter[k] + sign
        if n == 0 or n == sign:
            changed.add(pool)
        if n:
            counter[k] = n
        else:
            del counter[k]
    return changed


def _keys_of(
    counters: dict[PoolKey, Counter[Key]], touched: set[PoolKey]
) -> dict[PoolKey, frozenset[Key] | None]:
    """The touched pools' keys again (None: none left, the pool dropped)."""
    out: dict[PoolKey, frozenset[Key] | None] = {}
    for pool in touched:
        found = counters.get(pool)
        out[pool] = frozenset(found) if found else None
        if not found:
            counters.pop(pool, None)
    return out


def _slices_of(
    groups: dict[Any, dict[str, ResourceSlice]], touched: set[Any]
) -> dict[Any, tuple[ResourceSlice, ...] | None]:
    """The touched groups' slices again (None: a group left empty, dropped)."""
    out: dict[Any, tuple[ResourceSlice, ...] | None] = {}
    for at in touched:
        group = groups.get(at)
        out[at] = ordered(group.values()) if group else None
        if not group:
            groups.pop(at, None)
    return out
