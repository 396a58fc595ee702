"""What the reflectors work with: the watched resource types, the listener they report
to, their timing, their errors, and small helpers on the objects of a list or watch."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from webhook.inventory.stream import Backoff

if TYPE_CHECKING:
    from kubernetes.client.exceptions import ApiException

Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects

HTTP_FORBIDDEN = 403
HTTP_NOT_FOUND = 404
HTTP_GONE = 410


@dataclass(frozen=True)
class WatchedResource:
    """A collection to list and watch. ``versions`` are tried in order on a 404, so a
    cluster that only serves an older version of a CRD is still read."""

    name: str
    kind: str
    group: str
    versions: tuple[str, ...]
    plural: str
    optional: bool = True
    field_selector: str | None = None
    # First list at resourceVersion=0: whole, from the apiserver's watch cache (custom
    # resources, whose paged lists from etcd cost the apiserver 5-7 times the CPU; not
    # Nodes: their whole list, decoded at once, tripled the inventory process's peak RSS).
    from_cache: bool = False

    def api_version(self, version: str) -> str:
        return f"{self.group}/{version}" if self.group else version


class Gone(Exception):
    """The resourceVersion (or continue token) was compacted away: relist."""


class Absent(Exception):
    """The resource is not served (CRD missing) or not readable (RBAC)."""


class WatchError(Exception):
    """An ERROR event other than 410, or a malformed stream: reconnect."""


class Listener(Protocol):
    """What a reflector tells its owner (called from the reflector's thread)."""

    def on_replaced(
        self,
        reflector: Any,  # the Reflector calling (not imported: no cycle)
        old: Mapping[Key, Any],
        new: Mapping[Key, dict[str, Any]],
        changed: bool,
    ) -> None: ...

    def on_event(self, reflector: Any, kind: str, key: Key, item: dict[str, Any]) -> None: ...

    def on_touch(self) -> None: ...


@dataclass(frozen=True)
class Timing:
    """A reflector's timeouts and retry delays (seconds), and its list page size."""

    watch_timeout: int = 60
    request_timeout: float = 30.0
    backoff_initial: float = 0.2
    backoff_max: float = 3.0
    absent_retry: float = 60.0
    # Objects per list page. A page's dicts exist until it is parsed, and the heap a first
    # list leaves behind keeps about that much free: 250 instead of client-go's 500 takes
    # ~8 MiB off a worker's RSS at 10,000 nodes, for no measurable CPU (issue 14).
    page_size: int = 250
    # A ``from_cache`` type is listed whole only up to this many objects: the whole list
    # is decoded at once, and 100,000 NRTs listed so held a replica at 1,679 MiB RSS (1
    # worker) against 887-912 MiB paged (docs/inventory.md).
    cache_list_max: int = 10_000

    def __post_init__(self) -> None:
        if self.watch_timeout < 1:
            raise ValueError(f"watch_timeout: {self.watch_timeout!r} must be at least 1 (seconds)")
        Backoff(self.backoff_initial, self.backoff_max)  # checks the bounds


def decode(data: bytes) -> Any:
    """A list page or watch event: orjson (far faster than the standard library on the
    apiserver's JSON, the bulk of a 10,000-node list's CPU; the file loader reads JSON
    with it too), the standard library for what only it accepts (NaN, Infinity, numbers
    out of the double range, escaped lone surrogates); ValueError if neither reads it."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def object_key(obj: Mapping[str, Any]) -> Key:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
        raise WatchError(f"object without metadata.name: {json.dumps(obj)[:200]}")
    return (str(meta.get("namespace") or ""), meta["name"])


def complete(raw: Any, resource: WatchedResource, api_version: str) -> dict[str, Any]:
    """List items come without kind/apiVersion (the List carries them): put them back,
    since the inventory builder dispatches on them."""
    if not isinstance(raw, dict):
        raise WatchError(f"{resource.plural}: item is not an object: {raw!r:.200}")
    item = dict(raw)
    item.setdefault("apiVersion", api_version)
    item.setdefault("kind", resource.kind)
    return item


def read_page(
    body: Any, resource: WatchedResource, version: str, resource_version: str | None
) -> tuple[dict[Key, dict[str, Any]], str | None]:
    """One decoded page of a list: its objects by key and the list's resourceVersion
    (``resource_version`` if the page has none). Its continue token:
    webhook/inventory/pages.py ``continue_token``."""
    if not isinstance(body, dict) or not isinstance(body.get("items", []), list):
        raise WatchError(f"list of {resource.plural}: response is not a List")
    api_version = body.get("apiVersion") or resource.api_version(version)
    items: dict[Key, dict[str, Any]] = {}
    for raw in body.get("items") or []:
        item = complete(raw, resource, api_version)
        items[object_key(item)] = item
    meta = body.get("metadata") or {}
    return items, meta.get("resourceVersion") or resource_version


def fingerprint(obj: Mapping[str, Any]) -> Any:
    """What tells two versions of an object apart: its resourceVersion (the object
    itself when it has none)."""
    return resource_version_of(obj) or obj


def resource_version_of(obj: Mapping[str, Any]) -> str | None:
    meta = obj.get("metadata")
    rv = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
    return rv if isinstance(rv, str) and rv else None


def status_text(status: Mapping[str, Any]) -> str:
    return f"{status.get('code')} {status.get('reason')}: {status.get('message')}"


def read_event(line: bytes, plural: str) -> tuple[str, dict[str, Any]]:
    """One watch event line as (type, object). An ERROR event raises: ``Gone`` for 410
    (relist), else ``WatchError``; so does a line that is not an event."""
    try:
        event = decode(line)
    except ValueError as exc:
        raise WatchError(f"watch {plural}: undecodable event {line[:200]!r}") from exc
    kind = event.get("type") if isinstance(event, dict) else None
    obj = event.get("object") if isinstance(event, dict) else None
    if not isinstance(obj, dict):
        raise WatchError(f"watch {plural}: event without object: {line[:200]!r}")
    if kind == "ERROR":
        if obj.get("code") == HTTP_GONE:
            raise Gone(status_text(obj))
        raise WatchError(f"watch {plural}: {status_text(obj)}")
    if kind not in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK"):
        raise WatchError(f"watch {plural}: unknown event type {kind!r}")
    return kind, obj


_FORBIDDEN = "403 Forbidden (grant list and watch on this resource to numagate's service account"


def api_error(exc: ApiException, *, installed: bool) -> Exception:
    """What a failed list or watch request means for the reflector: ``Gone`` (relist),
    ``Absent`` (not installed or not readable: retried slowly), a transient
    ``WatchError``, or ``exc`` itself. ``installed``: the type was readable before."""
    if exc.status == HTTP_GONE:
        return Gone(f"{exc.status} {exc.reason}")
    if exc.status == HTTP_NOT_FOUND:
        return Absent("404 Not Found (is the CRD installed?)")
    if exc.status == HTTP_FORBIDDEN and installed:
        # Readable before: a kube-apiserver that has just (re)started answers 403 for a
        # few seconds, until its RBAC authorizer has synced (tests/e2e,
        # test_live_inventory.py). A transient failure: keep the objects, retry with
        # backoff (a revoked grant shows as a stale type, not an empty one).
        return WatchError(f"{_FORBIDDEN}; a restarting apiserver refuses for a few seconds)")
    if exc.status == HTTP_FORBIDDEN:
        return Absent(f"{_FORBIDDEN})")
    return exc
