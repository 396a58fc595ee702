"""The storage side of the test API server (tests/webhook/fake_apiserver.py): objects kept
as pre-serialized JSON (orjson), one global resourceVersion counter, the change history a
watch replays, compaction, and consistent paged lists, as etcd and the kube-apiserver's
storage layer provide them (kubernetes.io "API concepts": "Resource versions",
"Retrieving large results sets in chunks").

Objects are stored as bytes, not dicts: 100,000 nodes' objects as dicts would cost
gigabytes, and every list or watch would serialize them again. A change keeps the bytes of
the object before and after, so a field-selected watch can tell "entered" from "left" and a
list at an exact older resourceVersion can be rebuilt by undoing later changes.
"""

from __future__ import annotations

import base64
import bisect
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects
Selector = list[tuple[str, str, str]]

CONTINUE_TOO_OLD = (
    "The provided continue parameter is too old to display a consistent list result. You "
    "can start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted "
    "between the time the first chunk was returned and now may show up in the list."
)


@dataclass(frozen=True)
class FakeResource:
    plural: str
    group: str
    version: str
    kind: str
    namespaced: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def path(self) -> str:
        """The cluster-wide collection URL (all namespaces for namespaced kinds)."""
        if self.group:
            return f"/apis/{self.group}/{self.version}/{self.plural}"
        return f"/api/{self.version}/{self.plural}"

    @property
    def typed(self) -> bool:
        """Built-in kinds: their lists leave kind/apiVersion off each item (typed Go
        lists); custom resources' list items keep them (unstructured)."""
        return not self.group


@dataclass(frozen=True, slots=True)
class Entry:
    """One stored object: its list-item bytes and its full bytes (kind included)."""

    rv: int
    item: bytes
    full: bytes


@dataclass(frozen=True, slots=True)
class Change:
    rv: int
    resource: FakeResource
    type: str  # ADDED | MODIFIED | DELETED
    key: Key
    full: bytes
    prev: bytes | None

    def line(self, event_type: str | None = None) -> bytes:
        kind = (event_type or self.type).encode()
        return b'{"type":"' + kind + b'","object":' + self.full + b"}\n"


class Expired(Exception):
    """The requested version (or continue token) was compacted away: HTTP 410."""


class TooNew(Exception):
    """A resourceVersion newer than the store's: the apiserver times out (504)."""


# ----------------------------------------------------------------------------- selectors


def parse_field_selector(text: str) -> Selector:
    """``spec.nodeName!=,status.phase!=Failed`` -> [(field, op, value), ...]."""
    terms: Selector = []
    for part in filter(None, text.split(",")):
        for op in ("!=", "==", "="):
            if op in part:
                name, value = part.split(op, 1)
                terms.append((name.strip(), "!=" if op == "!=" else "=", value.strip()))
                break
        else:
            raise ValueError(f"invalid field selector term {part!r}")
    return terms


def field_value(obj: Mapping[str, Any], dotted: str) -> str:
    node: Any = obj
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return "" if node is None else str(node)


def matches(obj: Mapping[str, Any] | None, selector: Selector) -> bool:
    if obj is None:
        return False
    for name, op, value in selector:
        equal = field_value(obj, name) == value
        if equal != (op == "="):
            return False
    return True


def matches_bytes(raw: bytes | None, selector: Selector) -> bool:
    if not selector:
        return raw is not None
    return raw is not None and matches(orjson.loads(raw), selector)


def translate(change: Change, selector: Selector) -> str | None:
    """The event type of a change as seen through a field selector: objects entering the
    selection are ADDED, objects leaving it DELETED (the apiserver's watch filter)."""
    if not selector:
        return change.type
    now = change.type != "DELETED" and matches_bytes(change.full, selector)
    before = change.type != "ADDED" and matches_bytes(change.prev, selector)
    if now and before:
        return "MODIFIED"
    if now:
        return "ADDED"
    if before:
        return "DELETED"
    return None


def object_key(obj: Mapping[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta["name"]))


# ----------------------------------------------------------------------------- continue


def encode_continue(rv: int, start: Key) -> str:
    """An opaque token in the apiserver's shape: base64 of {"v", "rv", "start"}."""
    body = {"v": "meta.k8s.io/v1", "rv": rv, "start": "/".join(start) + "\x00"}
    return base64.urlsafe_b64encode(orjson.dumps(body)).decode()


def decode_continue(token: str) -> tuple[int, Key]:
    try:
        body = orjson.loads(base64.urlsafe_b64decode(token.encode()))
        namespace, name = str(body["start"]).rstrip("\x00").split("/", 1)
        return int(body["rv"]), (namespace, name)
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"invalid continue token {token[:40]!r}") from exc


# ----------------------------------------------------------------------------- store


@dataclass
class Page:
    rv: int
    items: list[bytes]
    next_token: str | None
    remaining: int


@dataclass
class Store:
    """All objects of all resources, the history since the last compaction, and the
    sorted snapshots that paged lists read from (keyed by resourceVersion)."""

    resources: tuple[FakeResource, ...]
    rv: int = 100
    compacted: int = 0
    objects: dict[str, dict[Key, Entry]] = field(default_factory=dict)
    history: list[Change] = field(default_factory=list)
    snapshots: dict[tuple[str, int], list[tuple[Key, bytes]]] = field(default_factory=dict)
    snapshot_times: dict[tuple[str, int], float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for resource in self.resources:
            self.objects.setdefault(resource.path, {})

    # ------------------------------------------------------------------ writes

    def resource_for(self, obj: Mapping[str, Any]) -> FakeResource:
        for resource in self.resources:
            if resource.kind == obj.get("kind") and resource.api_version == obj.get("apiVersion"):
                return resource
        raise ValueError(f"no fake resource for {obj.get('apiVersion')}/{obj.get('kind')}")

    def put(self, obj: dict[str, Any], uid: str) -> Change:
        """Create or replace ``obj`` (it is given its resourceVersion and uid here)."""
        resource = self.resource_for(obj)
        key = object_key(obj)
        store = self.objects[resource.path]
        prev = store.get(key)
        self.rv += 1
        meta = obj.setdefault("metadata", {})
        meta["resourceVersion"] = str(self.rv)
        if prev is not None and "uid" not in meta:
            meta["uid"] = orjson.loads(prev.full)["metadata"].get("uid", uid)
        meta.setdefault("uid", uid)
        full = orjson.dumps(obj)
        item = full
        if resource.typed:
            item = orjson.dumps({k: v for k, v in obj.items() if k not in ("kind", "apiVersion")})
        store[key] = Entry(self.rv, item, full)
        change = Change(
            self.rv, resource, "MODIFIED" if prev else "ADDED", key, full, prev and prev.full
        )
        self.history.append(change)
        return change

    def remove(self, resource: FakeResource, key: Key) -> Change:
        prev = self.objects[resource.path].pop(key)
        self.rv += 1
        gone = orjson.loads(prev.full)
        gone["metadata"]["resourceVersion"] = str(self.rv)
        change = Change(self.rv, resource, "DELETED", key, orjson.dumps(gone), prev.full)
        self.history.append(change)
        return change

    def compact(self, to_rv: int | None = None) -> None:
        """Forget history up to ``to_rv`` (default: now), as etcd's compaction does:
        watches and exact lists from older versions, and continue tokens issued at
        them, get 410 Expired."""
        target = self.rv if to_rv is None else min(to_rv, self.rv)
        if target <= self.compacted:
            return
        self.compacted = target
        cut = bisect.bisect_right(self.history, target, key=lambda c: c.rv)
        del self.history[:cut]
        for snap in [s for s in self.snapshots if s[1] <= target]:
            self.snapshots.pop(snap, None)
            self.snapshot_times.pop(snap, None)

    # ------------------------------------------------------------------ reads

    def changes_since(self, resource: FakeResource, since: int) -> Iterator[Change]:
        """Changes of ``resource`` after ``since``; Expired when compacted away."""
        if since < self.compacted:
            raise Expired(f"too old resource version: {since} ({self.compacted})")
        start = bisect.bisect_right(self.history, since, key=lambda c: c.rv)
        return (c for c in self.history[start:] if c.resource == resource)

    def state_at(self, resource: FakeResource, rv: int) -> dict[Key, bytes]:
        """Item bytes of every object of ``resource`` as of ``rv`` (Exact semantics)."""
        if rv < self.compacted:
            raise Expired(f"too old resource version: {rv} ({self.compacted})")
        if rv > self.rv:
            raise TooNew(f"Too large resource version: {rv}, current: {self.rv}")
        items = {k: e.item for k, e in self.objects[resource.path].items()}
        for change in reversed(self.history):
            if change.rv <= rv:
                break
            if change.resource != resource:
                continue
            if change.prev is None:
                items.pop(change.key, None)
            else:
                items[change.key] = self._item_of(resource, change.prev)
        return items

    @staticmethod
    def _item_of(resource: FakeResource, full: bytes) -> bytes:
        if not resource.typed:
            return full
        obj = orjson.loads(full)
        return orjson.dumps({k: v for k, v in obj.items() if k not in ("kind", "apiVersion")})

    def snapshot(
        self, resource: FakeResource, rv: int | None
    ) -> tuple[int, list[tuple[Key, bytes]]]:
        """A sorted, immutable view of ``resource`` at ``rv`` (None: now), kept for the
        continue tokens issued from it."""
        at = self.rv if rv is None else rv
        cached = self.snapshots.get((resource.path, at))
        if cached is not None:
            return at, cached
        if at == self.rv:
            items = {k: e.item for k, e in self.objects[resource.path].items()}
        else:
            items = self.state_at(resource, at)
        ordered = sorted(items.items())
        self.snapshots[(resource.path, at)] = ordered
        self.snapshot_times[(resource.path, at)] = time.monotonic()
        return at, ordered

    def page(
        self,
        resource: FakeResource,
        *,
        rv: int | None,
        limit: int,
        token: str | None,
        selector: Selector,
    ) -> Page:
        """One page of a list. ``token`` continues a previous page from its snapshot;
        Expired when that snapshot's version was compacted."""
        start: Key | None = None
        if token:
            token_rv, start = decode_continue(token)
            # -1: the token a 410 hands back, continuing from the latest version
            # A snapshot at the compacted version itself survives only if taken after.
            gone = token_rv == self.compacted and (resource.path, token_rv) not in self.snapshots
            if 0 <= token_rv < self.compacted or gone:
                raise Expired(CONTINUE_TOO_OLD)
            rv = None if token_rv < 0 else token_rv
        at, ordered = self.snapshot(resource, rv)
        first = 0
        if start is not None:
            first = bisect.bisect_left(ordered, start, key=lambda kv: kv[0])
        items: list[bytes] = []
        pos = first
        while pos < len(ordered) and (limit <= 0 or len(items) < limit):
            if matches_bytes(ordered[pos][1], selector):
                items.append(ordered[pos][1])
            pos += 1
        if pos < len(ordered):
            return Page(at, items, encode_continue(at, ordered[pos][0]), len(ordered) - pos)
        return Page(at, items, None, 0)

    def all_full(self, resource: FakeResource) -> Iterable[bytes]:
        return (e.full for _, e in sorted(self.objects[resource.path].items()))

    def drop_snapshots_older_than(self, seconds: float) -> None:
        cutoff = time.monotonic() - seconds
        for snap, made in list(self.snapshot_times.items()):
            if made < cutoff:
                self.snapshots.pop(snap, None)
                self.snapshot_times.pop(snap, None)
