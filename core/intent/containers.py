"""Container resources, the pod's QoS class and requests, per-container demands, and the
exclusive-CPU checks of a NUMA policy."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from core.errors import InvalidInput
from core.intent import dialects as d
from core.intent.findings import Ctx
from core.intent.hami import hami_ranges
from core.intent.limits import DEFAULT, clip, over
from core.intent.rules import not_guaranteed_message, volcano_cpu_message, whole_cpu_message
from core.model import (
    ContainerDemand,
    is_map,
)
from core.quantity import format_quantity, is_whole_cpu, str_to_core_units, to_core_units

QoS = Literal["Guaranteed", "Burstable", "BestEffort"]
QOS_RESOURCES = ("cpu", "memory")
_HAMI_PERCENT = frozenset(d.HAMI_PERCENT_RESOURCES)


@dataclass(slots=True)  # private to one read_intent call; not frozen: a cheaper __init__
class RawContainer:
    name: str
    kind: Literal["init", "sidecar", "app"]
    path: str  # relative to the object
    requests: dict[str, int]
    limits: dict[str, int]
    requests_given: bool  # requests map non-empty as written (Volcano's rule)
    written_requests: dict[str, int]  # before defaulting from limits


@dataclass(slots=True)
class _Scan:
    """What one walk over the containers has seen: resource names, and the entries left
    before ``limits.resources`` (None once over it: the walk stops)."""

    names: set[str]
    left: int | None


def _quantities(res: Any, field_name: str, cpath: str, ctx: Ctx, scan: _Scan) -> dict[str, int]:
    """Core units of ``resources.<field_name>``; every resource name seen goes to
    ``scan.names`` (even when its value is bad: scheduler detection looks at names as
    written)."""
    out: dict[str, int] = {}
    if res is None or scan.left is None:
        return out
    if not (type(res) is dict or isinstance(res, Mapping)):
        path = f"{cpath}.resources.{field_name}"
        ctx.add(
            path, "error", "invalid-value", f"{field_name} must be a map, got {clip(repr(res))}"
        )
        return out
    scan.left -= len(res)
    if scan.left < 0:
        cap = ctx.limits.resources
        found = f"{cap - scan.left:,} requests and limits in the pod so far"
        scan.left = None
        ctx.too_large(
            f"{cpath}.resources.{field_name}", over(f"resources.{field_name}", found, cap)
        )
        return out
    names = scan.names
    for name, value in res.items():
        rname = name if type(name) is str else str(name)
        names.add(rname)
        try:
            # "2", "500m", "8Gi": the bounded memo of core.quantity, called directly
            out[rname] = (
                str_to_core_units(rname, value)
                if type(value) is str
                else to_core_units(rname, value)
            )
        except InvalidInput as exc:
            path = f"{cpath}.resources.{field_name}[{clip(rname)}]"
            ctx.add(path, "error", "invalid-quantity", f"{clip(rname)}: {exc}")
    return out


def _container(
    c: Mapping[str, Any], i: int, init: bool, cpath: str, ctx: Ctx, scan: _Scan
) -> RawContainer:
    kind: Literal["init", "sidecar", "app"] = "app"
    if init:
        # A restartable init container is a sidecar (KEP-753).
        kind = "sidecar" if c.get("restartPolicy") == "Always" else "init"
    res = c.get("resources")
    if not (type(res) is dict or isinstance(res, Mapping)):
        res = {}
    raw_requests = res.get("requests")
    requests = _quantities(raw_requests, "requests", cpath, ctx, scan)
    limits = _quantities(res.get("limits"), "limits", cpath, ctx, scan)
    given = is_map(raw_requests) and bool(raw_requests)
    # API defaulting: a request left unset takes the limit's value.
    merged = {**limits, **requests} if limits else dict(requests)
    name = c.get("name", _NO_NAME)
    if name is _NO_NAME:
        name = f"#{i}"
    elif type(name) is not str:
        name = str(name)
    return RawContainer(name, kind, cpath, merged, limits, given, requests)


def container_lists(spec: Mapping[str, Any], ctx: Ctx | None) -> Iterator[tuple[str, list[Any]]]:
    """(name, items) of spec.initContainers and spec.containers that are lists of at most
    ``limits.containers`` entries; the others are reported (when ``ctx`` is given) and
    skipped."""
    cap = DEFAULT.containers if ctx is None else ctx.limits.containers
    for list_name in ("initContainers", "containers"):
        items = spec.get(list_name)
        if items is None:
            continue
        if not isinstance(items, list):
            if ctx is not None:
                ctx.add(
                    ctx.path(f"spec.{list_name}"),
                    "error",
                    "invalid-value",
                    f"spec.{list_name} must be a list",
                )
            continue
        if len(items) > cap:
            if ctx is not None:
                found = f"{len(items):,} containers"
                ctx.too_large(ctx.path(f"spec.{list_name}"), over(f"spec.{list_name}", found, cap))
            continue
        yield list_name, items


def scan_containers(spec: Mapping[str, Any], ctx: Ctx) -> tuple[list[RawContainer], set[str]]:
    """One walk over the containers: their quantities and every resource name they ask for
    (as written, even if its value is bad). The HAMi range checks walk them again only
    when a HAMi percentage resource was named; their findings come after the others."""
    out: list[RawContainer] = []
    scan = _Scan(set(), ctx.limits.resources)
    for list_name, items in container_lists(spec, ctx):
        init = list_name == "initContainers"
        for i, c in enumerate(items):
            cpath = ctx.path(f"spec.{list_name}[{i}]")
            if not (type(c) is dict or isinstance(c, Mapping)):
                ctx.add(cpath, "error", "invalid-value", f"container {i} is not an object")
                continue
            out.append(_container(c, i, init, cpath, ctx, scan))
    if not _HAMI_PERCENT.isdisjoint(scan.names):
        hami_ranges(_lists_again(spec, ctx.limits.containers), ctx)
    return out, scan.names


def _lists_again(spec: Mapping[str, Any], cap: int) -> Iterator[tuple[str, list[Any]]]:
    """The container lists scan_containers read (reported once already)."""
    for list_name in ("initContainers", "containers"):
        items = spec.get(list_name)
        if isinstance(items, list) and len(items) <= cap:
            yield list_name, items


_NO_NAME = object()


def pod_qos(containers: list[RawContainer]) -> QoS:
    """Kubernetes QoS class (pkg/apis/core/helper/qos GetPodQOS), init containers included,
    over cpu and memory only (QOS_RESOURCES, unrolled: the sums of the positive requests
    and limits; GetPodQOS's maps are equal exactly when both sums are)."""
    req_cpu = req_mem = lim_cpu = lim_mem = 0
    guaranteed = True
    for c in containers:
        creq, clim = c.requests, c.limits
        if creq:
            v = creq.get("cpu", 0)
            if v > 0:
                req_cpu += v
            v = creq.get("memory", 0)
            if v > 0:
                req_mem += v
        if not clim:
            guaranteed = False
            continue
        v = clim.get("cpu", 0)
        if v > 0:
            lim_cpu += v
        else:
            guaranteed = False
        v = clim.get("memory", 0)
        if v > 0:
            lim_mem += v
        else:
            guaranteed = False
    if not (req_cpu or req_mem or lim_cpu or lim_mem):
        return "BestEffort"
    if guaranteed and req_cpu == lim_cpu and req_mem == lim_mem:
        return "Guaranteed"
    return "Burstable"


def pod_requests(containers: list[RawContainer] | tuple[ContainerDemand, ...]) -> dict[str, int]:
    """Effective pod-level requests, per resource, the kubelet way (podGuaranteedCPUs,
    getPodRequestedResources, resourcehelper.PodRequests): max(largest regular init
    container plus the sidecars started before it, sum(app) + sum(sidecars))."""
    total: dict[str, int] = {}
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for c in containers:
        if c.kind == "app":
            for r, v in c.requests.items():
                total[r] = total.get(r, 0) + v
        elif c.kind == "sidecar":
            for r, v in c.requests.items():
                total[r] = total.get(r, 0) + v
                sidecars[r] = sidecars.get(r, 0) + v
            for r, v in sidecars.items():
                init_peak[r] = max(init_peak.get(r, 0), v)
        elif sidecars:
            for r in set(c.requests) | set(sidecars):
                v = c.requests.get(r, 0) + sidecars.get(r, 0)
                init_peak[r] = max(init_peak.get(r, 0), v)
        else:  # no sidecar started before it: its own requests (the same, without sets)
            for r, v in c.requests.items():
                peak = init_peak.get(r)
                if peak is None or v > peak:
                    init_peak[r] = v
    for r, v in init_peak.items():
        total[r] = max(total.get(r, 0), v)
    return total


def demands(containers: list[RawContainer], qos: QoS) -> tuple[ContainerDemand, ...]:
    # The raw containers are private to one read_intent call: their maps are handed over
    # without copying.
    guaranteed = qos == "Guaranteed"
    out = []
    for c in containers:
        cpu = c.requests.get("cpu", 0)
        exclusive = cpu // 1000 if guaranteed and is_whole_cpu(cpu) else 0
        out.append(ContainerDemand(c.name, c.kind, c.requests, c.limits, exclusive))
    return tuple(out)


def _volcano_cpu(c: RawContainer) -> tuple[int, str]:
    """Volcano's Job webhook rule (admit_job.go validateTaskTopoPolicy): the CPU request,
    or the limit when the requests map is empty."""
    if c.requests_given:
        return c.written_requests.get("cpu", 0), "requests"
    return c.limits.get("cpu", 0), "limits"


def check_exclusive_cpus(
    policy: str,
    policy_path: str,
    containers: list[RawContainer],
    qos: QoS,
    strict: bool,
    ctx: Ctx,
) -> None:
    if strict:
        # Volcano's Job webhook denies a task whose containers lack integer CPUs.
        for c in containers:
            cpu, section = _volcano_cpu(c)
            if not is_whole_cpu(cpu):
                shown = format_quantity("cpu", cpu) if cpu else "0 (unset)"
                ctx.add(
                    f"{c.path}.resources.{section}[cpu]",
                    "error",
                    "fractional-cpu",
                    volcano_cpu_message(repr(c.name), section, shown, repr(policy)),
                )
    if qos != "Guaranteed":
        ctx.add(
            policy_path,
            "warning",
            "not-guaranteed",
            not_guaranteed_message(repr(policy), qos),
        )
        return
    if strict:
        return
    for c in containers:
        cpu = c.requests.get("cpu", 0)
        if not is_whole_cpu(cpu):
            ctx.add(
                f"{c.path}.resources.requests[cpu]",
                "warning",
                "fractional-cpu",
                whole_cpu_message(repr(c.name), format_quantity("cpu", cpu), repr(policy)),
            )
