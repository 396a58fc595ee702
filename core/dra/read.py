"""resource.k8s.io/v1 objects read from plain Kubernetes objects (field names as in
k8s.io/api/resource/v1/types.go at v0.36.3). A malformed field is a ``DraError`` naming the
kind, the object, the field path and the value, never a crash."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any, Final

from core.dra.objects import (
    ALL,
    EXACT_COUNT,
    AllocatedDevice,
    AttributeValue,
    ClaimRequest,
    ClaimSpec,
    Constraint,
    Device,
    DeviceClass,
    DraError,
    NodeSelectorTerm,
    Request,
    Requirement,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    Taint,
    Toleration,
    Version,
)
from core.errors import InvalidInput
from core.quantity import parse_quantity


class _Reader:
    """Reads one object's fields, naming ``kind 'ns/name'`` and the field path on error."""

    def __init__(self, kind: str, obj: Any) -> None:
        if not isinstance(obj, Mapping):
            raise DraError(f"{kind}: expected an object, got {type(obj).__name__}")
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        self.namespace = str(meta.get("namespace") or "")
        self.name = str(meta.get("name") or "")
        self.kind = kind
        if not self.name:
            raise DraError(f"{kind}: metadata.name is missing")

    def fail(self, path: str, value: Any, allowed: str) -> DraError:
        shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:80] + "..."
        who = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return DraError(f"{self.kind} {who!r}: {path} is {shown}; allowed: {allowed}")

    def obj(self, obj: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
        value = obj.get(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.fail(f"{path}.{key}", value, "an object")
        return value

    def seq(self, obj: Mapping[str, Any], key: str, path: str) -> list[Any]:
        value = obj.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(f"{path}.{key}", value, "a list")
        return value

    def text(self, obj: Mapping[str, Any], key: str, path: str, *, required: bool = False) -> str:
        value = obj.get(key)
        if value is None and not required:
            return ""
        if not isinstance(value, str) or (required and not value):
            raise self.fail(
                f"{path}.{key}", value, "a non-empty string" if required else "a string"
            )
        return value

    def flag(self, obj: Mapping[str, Any], key: str, path: str) -> bool:
        value = obj.get(key)
        if value is None:
            return False
        if not isinstance(value, bool):
            raise self.fail(f"{path}.{key}", value, "true or false")
        return value

    def number(self, obj: Mapping[str, Any], key: str, path: str, default: int, low: int) -> int:
        value = obj.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise self.fail(f"{path}.{key}", value, f"an integer >= {low}")
        return value

    def quantity(self, value: Any, path: str) -> Fraction:
        try:
            return parse_quantity(value)
        except InvalidInput as e:
            raise self.fail(path, value, f"a quantity ({e})") from None

    def item(self, value: Any, path: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(path, value, "an object")
        return value


_ATTRIBUTE_KINDS: Final = {"int": int, "bool": bool, "string": str, "version": str}
_LIST_KINDS: Final = {"ints": int, "bools": bool, "strings": str, "versions": str}


def _attribute(r: _Reader, value: Any, path: str) -> AttributeValue:
    item = r.item(value, path)
    present = [k for k in (*_ATTRIBUTE_KINDS, *_LIST_KINDS) if item.get(k) is not None]
    if len(present) != 1:
        raise r.fail(path, dict(item), "exactly one of int, bool, string, version (or a list)")
    kind = present[0]
    raw = item[kind]
    if kind in _LIST_KINDS:
        if not isinstance(raw, list) or not all(_is(v, _LIST_KINDS[kind]) for v in raw):
            raise r.fail(f"{path}.{kind}", raw, f"a list of {kind}")
        return tuple(Version(v) for v in raw) if kind == "versions" else tuple(raw)
    if not _is(raw, _ATTRIBUTE_KINDS[kind]):
        raise r.fail(f"{path}.{kind}", raw, f"a {kind} value")
    return Version(raw) if kind == "version" else raw


def _is(value: Any, kind: type) -> bool:
    return isinstance(value, kind) and (kind is bool or not isinstance(value, bool))


def _requirements(r: _Reader, items: list[Any], path: str) -> tuple[Requirement, ...]:
    out = []
    for i, raw in enumerate(items):
        item = r.item(raw, f"{path}[{i}]")
        values = r.seq(item, "values", f"{path}[{i}]")
        if not all(isinstance(v, str) for v in values):
            raise r.fail(f"{path}[{i}].values", values, "a list of strings")
        op = r.text(item, "operator", f"{path}[{i}]", required=True)
        if op not in ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"):
            raise r.fail(f"{path}[{i}].operator", op, "In, NotIn, Exists, DoesNotExist, Gt, Lt")
        out.append(
            Requirement(r.text(item, "key", f"{path}[{i}]", required=True), op, tuple(values))
        )
    return tuple(out)


def node_selector(r: _Reader, raw: Any, path: str) -> tuple[NodeSelectorTerm, ...] | None:
    """A core/v1 NodeSelector (terms ORed, requirements within a term ANDed)."""
    if raw is None:
        return None
    terms = r.seq(r.item(raw, path), "nodeSelectorTerms", path)
    out = []
    for i, t in enumerate(terms):
        term = r.item(t, f"{path}.nodeSelectorTerms[{i}]")
        p = f"{path}.nodeSelectorTerms[{i}]"
        out.append(
            NodeSelectorTerm(
                _requirements(r, r.seq(term, "matchExpressions", p), f"{p}.matchExpressions"),
                _requirements(r, r.seq(term, "matchFields", p), f"{p}.matchFields"),
            )
        )
    return tuple(out)


def _taints(r: _Reader, items: list[Any], path: str) -> tuple[Taint, ...]:
    out = []
    for i, raw in enumerate(items):
        t = r.item(raw, f"{path}[{i}]")
        p = f"{path}[{i}]"
        out.append(
            Taint(r.text(t, "key", p, required=True), r.text(t, "value", p), r.text(t, "effect", p))
        )
    return tuple(out)


def _device(r: _Reader, raw: Any, path: str) -> Device:
    d = r.item(raw, path)
    attributes = r.obj(d, "attributes", path)
    capacity = r.obj(d, "capacity", path)
    caps = {}
    for k, v in capacity.items():
        cap = r.item(v, f"{path}.capacity[{k!r}]")
        caps[str(k)] = r.quantity(cap.get("value"), f"{path}.capacity[{k!r}].value")
    return Device(
        name=r.text(d, "name", path, required=True),
        attributes={
            str(k): _attribute(r, v, f"{path}.attributes[{k!r}]") for k, v in attributes.items()
        },
        capacity=caps,
        taints=_taints(r, r.seq(d, "taints", path), f"{path}.taints"),
        node_name=r.text(d, "nodeName", path),
        all_nodes=r.flag(d, "allNodes", path),
        node_selector=node_selector(r, d.get("nodeSelector"), f"{path}.nodeSelector"),
        consumes_counters=bool(r.seq(d, "consumesCounters", path)),
        binding_conditions=bool(r.seq(d, "bindingConditions", path)),
        multiple_allocations=r.flag(d, "allowMultipleAllocations", path),
    )


def read_slice(obj: Any) -> ResourceSlice:
    r = _Reader("ResourceSlice", obj)
    spec = r.obj(obj, "spec", "")
    pool = r.obj(spec, "pool", "spec")
    if not pool:
        raise r.fail("spec.pool", spec.get("pool"), "an object with name, generation")
    return ResourceSlice(
        name=r.name,
        driver=r.text(spec, "driver", "spec", required=True),
        pool=r.text(pool, "name", "spec.pool", required=True),
        generation=r.number(pool, "generation", "spec.pool", 0, 0),
        slice_count=r.number(pool, "resourceSliceCount", "spec.pool", 1, 1),
        node_name=r.text(spec, "nodeName", "spec"),
        all_nodes=r.flag(spec, "allNodes", "spec"),
        node_selector=node_selector(r, spec.get("nodeSelector"), "spec.nodeSelector"),
        per_device_node_selection=r.flag(spec, "perDeviceNodeSelection", "spec"),
        shared_counters=bool(r.seq(spec, "sharedCounters", "spec")),
        devices=tuple(
            _device(r, d, f"spec.devices[{i}]")
            for i, d in enumerate(r.seq(spec, "devices", "spec"))
        ),
    )


def _selectors(r: _Reader, items: list[Any], path: str) -> tuple[str, ...]:
    out = []
    for i, raw in enumerate(items):
        cel = r.obj(r.item(raw, f"{path}[{i}]"), "cel", f"{path}[{i}]")
        out.append(r.text(cel, "expression", f"{path}[{i}].cel", required=True))
    return tuple(out)


def read_class(obj: Any) -> DeviceClass:
    r = _Reader("DeviceClass", obj)
    spec = r.obj(obj, "spec", "")
    return DeviceClass(
        name=r.name,
        selectors=_selectors(r, r.seq(spec, "selectors", "spec"), "spec.selectors"),
        extended_resource_name=r.text(spec, "extendedResourceName", "spec") or None,
        created=str((obj.get("metadata") or {}).get("creationTimestamp") or ""),
    )


def _tolerations(r: _Reader, items: list[Any], path: str) -> tuple[Toleration, ...]:
    out = []
    for i, raw in enumerate(items):
        t = r.item(raw, f"{path}[{i}]")
        p = f"{path}[{i}]"
        op = r.text(t, "operator", p) or "Equal"
        if op not in ("Equal", "Exists"):
            raise r.fail(f"{p}.operator", op, "Equal or Exists")
        out.append(
            Toleration(r.text(t, "key", p), op, r.text(t, "value", p), r.text(t, "effect", p))
        )
    return tuple(out)


def _request(r: _Reader, item: Mapping[str, Any], name: str, path: str) -> Request:
    mode = r.text(item, "allocationMode", path) or EXACT_COUNT
    if mode not in (EXACT_COUNT, ALL):
        raise r.fail(f"{path}.allocationMode", mode, "ExactCount or All")
    amounts = r.obj(r.obj(item, "capacity", path), "requests", f"{path}.capacity")
    return Request(
        name=name,
        class_name=r.text(item, "deviceClassName", path, required=True),
        selectors=_selectors(r, r.seq(item, "selectors", path), f"{path}.selectors"),
        mode=mode,
        count=r.number(item, "count", path, 1, 1) if mode == EXACT_COUNT else 0,
        admin_access=r.flag(item, "adminAccess", path),
        tolerations=_tolerations(r, r.seq(item, "tolerations", path), f"{path}.tolerations"),
        capacity=bool(amounts),
        capacity_requests=tuple(
            (str(k), r.quantity(v, f"{path}.capacity.requests[{k!r}]")) for k, v in amounts.items()
        ),
    )


def _claim_spec(r: _Reader, spec: Mapping[str, Any], path: str) -> ClaimSpec:
    devices = r.obj(spec, "devices", path)
    p = f"{path}.devices"
    requests = []
    for i, raw in enumerate(r.seq(devices, "requests", p)):
        q = f"{p}.requests[{i}]"
        item = r.item(raw, q)
        name = r.text(item, "name", q, required=True)
        exactly, first = item.get("exactly"), r.seq(item, "firstAvailable", q)
        if (exactly is None) == (not first):
            raise r.fail(q, dict(item), "exactly one of exactly, firstAvailable")
        subs = []
        for j, s in enumerate(first):
            sub = r.item(s, f"{q}.firstAvailable[{j}]")
            sub_name = r.text(sub, "name", f"{q}.firstAvailable[{j}]", required=True)
            subs.append(_request(r, sub, sub_name, f"{q}.firstAvailable[{j}]"))
        requests.append(
            ClaimRequest(
                name,
                _request(r, r.item(exactly, f"{q}.exactly"), name, f"{q}.exactly")
                if exactly is not None
                else None,
                tuple(subs),
            )
        )
    constraints = []
    for i, raw in enumerate(r.seq(devices, "constraints", p)):
        q = f"{p}.constraints[{i}]"
        c = r.item(raw, q)
        names = r.seq(c, "requests", q)
        if not all(isinstance(n, str) for n in names):
            raise r.fail(f"{q}.requests", names, "a list of request names")
        match, distinct = r.text(c, "matchAttribute", q), r.text(c, "distinctAttribute", q)
        if bool(match) == bool(distinct):
            raise r.fail(q, dict(c), "exactly one of matchAttribute, distinctAttribute")
        constraints.append(Constraint(tuple(names), match or None, distinct or None))
    return ClaimSpec(tuple(requests), tuple(constraints))


def read_claim(obj: Any) -> ResourceClaim:
    r = _Reader("ResourceClaim", obj)
    spec = _claim_spec(r, r.obj(obj, "spec", ""), "spec")
    status = r.obj(obj, "status", "")
    raw = status.get("allocation")
    if raw is None:
        return ResourceClaim(r.namespace, r.name, spec)
    allocation = r.item(raw, "status.allocation")
    results = []
    p = "status.allocation.devices"
    for i, res in enumerate(r.seq(r.obj(allocation, "devices", "status.allocation"), "results", p)):
        q = f"{p}.results[{i}]"
        item = r.item(res, q)
        results.append(
            AllocatedDevice(
                request=r.text(item, "request", q, required=True),
                driver=r.text(item, "driver", q, required=True),
                pool=r.text(item, "pool", q, required=True),
                device=r.text(item, "device", q, required=True),
                admin_access=r.flag(item, "adminAccess", q),
            )
        )
    nodes = node_selector(r, allocation.get("nodeSelector"), "status.allocation.nodeSelector")
    users = tuple(
        str(u.get("name"))
        for u in r.seq(status, "reservedFor", "status")
        if isinstance(u, Mapping) and u.get("resource") == "pods" and u.get("name")
    )
    return ResourceClaim(r.namespace, r.name, spec, tuple(results), nodes, users)


def read_template(obj: Any) -> ResourceClaimTemplate:
    r = _Reader("ResourceClaimTemplate", obj)
    spec = r.obj(r.obj(obj, "spec", ""), "spec", "spec")
    return ResourceClaimTemplate(r.namespace, r.name, _claim_spec(r, spec, "spec.spec"))
