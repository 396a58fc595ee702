"""Extended resources served by DRA (KEP-5004, DRAExtendedResource, beta and on in 1.36): a
container's ``example.com/gpu: 2`` is allocated through a DeviceClass whose
``extendedResourceName`` names it (or any class through ``deviceclass.resource.kubernetes.io/
<class>``) on every node that does not advertise the resource itself. The scheduler builds
one claim per pod and node for those (kubernetes v1.36.3,
pkg/scheduler/framework/plugins/dynamicresources/extendeddynamicresources.go,
filterExtendedResources and createRequestsAndMappings; the class per name from
k8s.io/dynamic-resource-allocation/deviceclass/extendedresourcecache: the newest class wins,
the smaller name on a tie)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final

from core.dra.evaluate import DraInventory, PodClaim, pod_claims
from core.dra.objects import ClaimRequest, ClaimSpec, DeviceClass, Request
from core.dra.pools import NodeRef
from core.errors import InvalidInput
from core.quantity import parse_quantity

DEVICE_CLASS_PREFIX: Final = "deviceclass.resource.kubernetes.io/"
CLAIM_NAME: Final = "extended-resources"  # how our messages name the scheduler's claim


def is_dra_extended_name(name: str) -> bool:
    """schedutil.IsDRAExtendedResourceName: an extended resource name (a domain outside
    kubernetes.io, not ``requests.``) or the implicit class prefix."""
    if name.startswith(DEVICE_CLASS_PREFIX):
        return True
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def class_for_resource(name: str, classes: Mapping[str, DeviceClass]) -> DeviceClass | None:
    if name.startswith(DEVICE_CLASS_PREFIX):
        return classes.get(name[len(DEVICE_CLASS_PREFIX) :])
    found = [c for c in classes.values() if c.extended_resource_name == name]
    if not found:
        return None
    newest = max(c.created for c in found)
    return min((c for c in found if c.created == newest), key=lambda c: c.name)


@dataclass(frozen=True, slots=True)
class _Container:
    index: int  # in initContainers + containers
    long_lived: bool  # a regular container or a sidecar (restartPolicy Always)
    requests: Mapping[str, Any]


def _containers(spec: Mapping[str, Any]) -> Iterator[_Container]:
    inits = spec.get("initContainers") or []
    for i, c in enumerate([*inits, *(spec.get("containers") or [])]):
        if not isinstance(c, Mapping):
            continue
        res = c.get("resources") or {}
        # extended resources: requests equal limits; only limits means requests = limits
        requests = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        sidecar = i < len(inits) and c.get("restartPolicy") == "Always"
        yield _Container(i, i >= len(inits) or sidecar, requests)


def requested_names(spec: Mapping[str, Any]) -> Iterator[str]:
    """The resource names the pod's containers request or limit (a fast scan for every
    review: no quantity is parsed; objects from JSON are dicts, an ABC check costs more)."""
    for key in ("initContainers", "containers"):
        for c in spec.get(key) or ():
            res = c.get("resources") if type(c) is dict else None
            if type(res) is dict:
                for part in ("limits", "requests"):
                    amounts = res.get(part)
                    if type(amounts) is dict:
                        yield from map(str, amounts)


def served_names(spec: Mapping[str, Any], classes: Mapping[str, DeviceClass]) -> set[str]:
    """The extended resources the pod requests (a positive integer) that a DeviceClass
    serves."""
    return {
        str(name)
        for c in _containers(spec)
        for name, value in c.requests.items()
        if is_dra_extended_name(str(name))
        and _count(value)
        and class_for_resource(str(name), classes) is not None
    }


def _count(value: Any) -> int:
    """The request as an integer (AsInt64); anything else requests no device."""
    try:
        q = parse_quantity(value)
    except InvalidInput:
        return 0
    return int(q) if isinstance(q, Fraction) and q.denominator == 1 and q > 0 else 0


def _request(
    c: _Container, name: str, cls: str, reusable: Sequence[Request | None]
) -> Request | None:
    """createResourceRequestAndMappings: the devices this container needs beyond the
    requests it may reuse, named container-<index>-request-<rank of the name>."""
    want = _count(c.requests.get(name)) if name in c.requests else 0
    if not want:
        return None
    have = 0
    for r in reusable:
        if r is not None:
            have += r.count
            if have >= want:
                return None
    rank = sorted(c.requests).index(name)
    return Request(f"container-{c.index}-request-{rank}", cls, count=want - have)


def extended_requests(
    spec: Mapping[str, Any], needed: Sequence[str], classes: Mapping[str, DeviceClass]
) -> tuple[Request, ...]:
    """createRequestsAndMappings for the resources ``needed`` through DRA."""
    containers = list(_containers(spec))
    out: list[Request] = []
    for name in sorted(needed):
        cls = class_for_resource(name, classes)
        if cls is None:
            continue
        long_lived: list[Request | None] = [None] * len(containers)
        for c in containers:
            if c.long_lived:
                long_lived[c.index] = _request(c, name, cls.name, ())
        biggest: Request | None = None
        for c in containers:
            if not c.long_lived:
                r = _request(c, name, cls.name, long_lived[c.index :])
                if r is not None and (biggest is None or biggest.count < r.count):
                    biggest = r
        if biggest is not None:
            out.append(biggest)
        out.extend(r for r in long_lived if r is not None)
    return tuple(sorted(out, key=lambda r: r.name))


def extended_claim(pod: Mapping[str, Any], inv: DraInventory, node: NodeRef) -> PodClaim | None:
    """The claim the scheduler would allocate on ``node`` for the pod's DRA-backed extended
    resources (those the node does not advertise in its allocatable), or None."""
    spec = pod.get("spec") or {}
    names = {
        name
        for c in _containers(spec)
        for name, value in c.requests.items()
        if is_dra_extended_name(str(name)) and _count(value)
    }
    needed = [
        n
        for n in names
        if class_for_resource(n, inv.classes) is not None and not node.allocatable.get(n, 0)
    ]
    requests = extended_requests(spec, needed, inv.classes)
    if not requests:
        return None
    claim = ClaimSpec(tuple(ClaimRequest(r.name, r) for r in requests))
    return PodClaim(CLAIM_NAME, claim)


def node_claims(pod: Mapping[str, Any], inv: DraInventory, node: NodeRef) -> tuple[PodClaim, ...]:
    """The pod's claims on ``node``: its resource claims and the extended-resource claim."""
    extra = extended_claim(pod, inv, node)
    return (*pod_claims(pod, inv), *((extra,) if extra else ()))
