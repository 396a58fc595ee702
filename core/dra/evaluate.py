"""A pod's DRA claims judged on one node: ``fits`` (devices free now), ``no-room-now``
(would fit if allocated devices were free), ``never-fits`` (impossible on this node: the
message names the request or the constraint), ``unchecked`` (depends on something not known
exactly; never a denial).

The claims are those of pod.spec.resourceClaims, by ``resourceClaimName`` or by
``resourceClaimTemplateName`` (the claim generated for a template once
pod.status.resourceClaimStatuses names it, else the template's spec), as the scheduler's
dynamicresources plugin collects them; the devices are the node's pools (``pools``), the
allocation the allocator's search (``allocate``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from core.dra.allocate import (
    Alternative,
    Candidate,
    ClaimProblem,
    Key,
)
from core.dra.inventory import DraInventory
from core.dra.objects import (
    ALL,
    BLOCKING_EFFECTS,
    ClaimSpec,
    DeviceClass,
    DraError,
    Request,
    ResourceClaim,
    Taint,
    Toleration,
)
from core.dra.pools import NodeRef, Pool, PoolDevice, gather_pools, selector_matches
from core.dra.selectors import selectors_match
from core.dra.verdict import FITS, NEVER_FITS, UNCHECKED, judge

# resourceapi.AllocationResultsMaxSize: devices one claim may get
MAX_DEVICES_PER_CLAIM: Final = 32


@dataclass(frozen=True, slots=True)
class PodClaim:
    """One entry of pod.spec.resourceClaims: the claim to allocate (``spec``), or the
    existing claim (``claim``), or why neither is known (``missing``)."""

    name: str
    spec: ClaimSpec | None = None
    claim: ResourceClaim | None = None
    missing: str = ""


def pod_claims(pod: Mapping[str, Any], inv: DraInventory) -> tuple[PodClaim, ...]:
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    spec = pod.get("spec") or {}
    statuses = {
        s.get("name"): s.get("resourceClaimName")
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or ()
        if isinstance(s, Mapping)
    }
    out = []
    for entry in spec.get("resourceClaims") or ():
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            raise DraError(f"Pod: spec.resourceClaims entry {entry!r} has no name")
        name = entry["name"]
        claim_name, template = (
            entry.get("resourceClaimName"),
            entry.get("resourceClaimTemplateName"),
        )
        if template and name in statuses:
            claim_name = statuses[name]
            if not claim_name:
                continue  # the template was not needed (status names no claim)
        if claim_name:
            claim = inv.claims.get((namespace, claim_name))
            out.append(
                PodClaim(name, claim.spec, claim)
                if claim
                else PodClaim(name, missing=f"ResourceClaim {namespace}/{claim_name} not found")
            )
        elif template:
            t = inv.templates.get((namespace, template))
            out.append(
                PodClaim(name, t.spec)
                if t
                else PodClaim(
                    name, missing=f"ResourceClaimTemplate {namespace}/{template} not found"
                )
            )
    return tuple(out)


@dataclass(frozen=True, slots=True)
class NodeVerdict:
    node: str
    verdict: str
    message: str = ""
    allocation: tuple[tuple[str, Key], ...] = ()  # (claim/request, device) when it fits


class _Unknown(Exception):
    """This node's answer depends on something not evaluated exactly (the message says what)."""


def tolerates(t: Toleration, taint: Taint) -> bool:
    """resourceclaim.ToleratesTaint: effect (empty = any), key (empty with Exists = any),
    Exists ignores the value, Equal compares it."""
    if t.effect and t.effect != taint.effect:
        return False
    if t.key and t.key != taint.key:
        return False
    if not t.key and t.operator != "Exists":
        return False
    return t.operator == "Exists" or t.value == taint.value


def selectable(pd: PoolDevice, cls: DeviceClass, req: Request) -> bool | None:
    """isSelectable: False if a selector says no; None if a selector cannot be evaluated or
    the device needs what we do not model (counters, binding conditions)."""
    known = selectors_match((*cls.selectors, *req.selectors), pd.driver, pd.device)
    if known is False:
        return False
    if pd.device.consumes_counters or pd.device.binding_conditions:
        return None
    return known


def tainted(pd: PoolDevice, req: Request) -> bool:
    """allocateDevice's taint check: a NoSchedule/NoExecute taint the request does not
    tolerate makes the device unusable for it."""
    return any(
        taint.effect in BLOCKING_EFFECTS and not any(tolerates(t, taint) for t in req.tolerations)
        for taint in pd.device.taints
    )


def _alternative(
    req: Request, top: str, claim: str, pools: Sequence[Pool], inv: DraInventory
) -> Alternative:
    cls = inv.classes.get(req.class_name)
    if cls is None:
        raise _Unknown(f"DeviceClass {req.class_name!r} (request {claim}/{top}) not found")
    if req.capacity:
        raise _Unknown(f"request {claim}/{top} asks for consumable capacity")
    if req.mode == ALL:
        for p in pools:
            if p.incomplete or p.invalid:
                raise _Unknown(
                    f"request {claim}/{top} wants all devices; pool {p.name} is not usable now"
                )
    candidates, blocked = [], False
    for pool in pools:
        for pd in pool.devices:
            ok = selectable(pd, cls, req)
            if ok is False:
                continue
            if tainted(pd, req):
                blocked = True
                continue
            candidates.append(Candidate(pd, ok is True))
    if req.mode == ALL and not all(c.sure for c in candidates):
        raise _Unknown(f"request {claim}/{top} wants all devices and some are not known to match")
    return Alternative(
        top,
        req.name if req.name != top else "",
        req.mode,
        req.count if req.mode != ALL else len(candidates),
        req.admin_access,
        tuple(candidates),
        blocked=blocked and req.mode == ALL,
    )


def build_problem(
    claims: Sequence[PodClaim], node: NodeRef, inv: DraInventory
) -> list[ClaimProblem]:
    """The claims still to allocate, as search problems on ``node``; raises _Unknown or
    returns the never-fits message through NeverFits."""
    pools = gather_pools(inv.reaching(node.name), node, inv.pools)
    problems = []
    for pc in claims:
        if pc.missing:
            raise _Unknown(pc.missing)
        if pc.claim is not None and pc.claim.allocation is not None:
            nodes = pc.claim.allocation_nodes
            if nodes is not None and not selector_matches(nodes, node):
                raise NeverFits(f"claim {pc.name} is allocated to devices other nodes reach")
            continue
        spec = pc.spec
        assert spec is not None
        for c in spec.constraints:
            if c.distinct_attribute:
                raise _Unknown(f"claim {pc.name}: distinctAttribute constraints are not modelled")
        requests = tuple(
            tuple(_alternative(a, r.name, pc.name, pools, inv) for a in r.alternatives)
            for r in spec.requests
        )
        least = sum(min(a.count for a in alts) for alts in requests)
        if least > MAX_DEVICES_PER_CLAIM:
            raise NeverFits(
                f"claim {pc.name} needs {least} devices; one claim gets {MAX_DEVICES_PER_CLAIM} at most"
            )
        problems.append(ClaimProblem(pc.name, requests, spec.constraints))
    return problems


def readable_problem(
    claims: Sequence[PodClaim], node: NodeRef, inv: DraInventory
) -> list[ClaimProblem]:
    """build_problem, or no problem when a claim cannot be judged or placed on the node."""
    try:
        return build_problem(claims, node, inv)
    except (_Unknown, NeverFits):
        return []


class NeverFits(Exception):
    """The claims cannot be allocated on this node whatever is in use."""


def evaluate_node(claims: Sequence[PodClaim], node: NodeRef, inv: DraInventory) -> NodeVerdict:
    if not claims:
        return NodeVerdict(node.name, FITS)
    try:
        problems = build_problem(claims, node, inv)
    except _Unknown as e:
        return NodeVerdict(node.name, UNCHECKED, str(e))
    except NeverFits as e:
        verdict, message, allocation = NEVER_FITS, str(e), ()
    else:
        verdict, message, allocation = judge(problems, *inv.usage_on(node.name))
    if verdict == NEVER_FITS and inv.errors:
        return NodeVerdict(
            node.name, UNCHECKED, f"{message} (but {len(inv.errors)} DRA objects are unreadable)"
        )
    return NodeVerdict(node.name, verdict, message, allocation)
