"""The DRA CPU driver's rules (kubernetes-sigs/dra-driver-cpu, checked at tag v0.2.0). Its
driver and DeviceClass are both named ``dra.cpu`` (cmd/dracpu/app.go ``driverName``;
manifests/base/deviceclass-dracpu.part.yaml); a request counts CPUs as devices
(``--cpu-device-mode=individual``: ``count``) or as the capacity ``dra.cpu/cpu``
(``grouped``, the default: ``capacity.requests``). Three rules, each a ``Finding``:

- ``draCpuSharedClaim``: the driver binds a claim to one container of one pod
  (pkg/store/claim_tracker.go ``SetOwner``, called from pkg/driver/nri_hooks.go
  ``CreateContainer``); a second running container fails with CreateContainerError while
  the first one holds it. Within one pod (two long-lived containers listing the claim) the
  pod never starts: ``error``. A claim another pod already reserves, or a claim by name in
  the template of several concurrent pods (replicas, parallelism): ``no-room-now``.
- ``draCpuNotMirrored``: the kubelet computes QoS and cgroups and the scheduler counts CPUs
  from the pod's ``requests``/``limits`` only, not from claims (README "Workload
  Configuration Requirements": requests and limits MUST mirror the claim, per container or
  as pod-level resources): ``warning``. What a claim yields: in individual mode one CPU per
  allocated device (pkg/driver/dra_hooks.go ``prepareResourceClaim``), so ``count``, or
  for ``allocationMode: All`` every matching device of the node (core.dra.pod counts them
  per candidate node); in grouped mode the consumed capacity ``dra.cpu/cpu``
  (``prepareGroupedResourceClaim``); for ``firstAvailable`` the subrequest the scheduler's
  allocator picks, the first that can be allocated: any of them, depending on the node.
- ``draCpuStaticPolicy``: the driver and the kubelet's CPU manager are mutually
  incompatible; the node must run ``cpuManagerPolicy: none`` (README "Configuration"):
  ``warning`` per node it holds on."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final

from core.dra.evaluate import DraInventory, PodClaim
from core.dra.objects import EXACT_COUNT, ClaimSpec, DeviceClass, Request
from core.errors import InvalidInput
from core.quantity import parse_quantity

DRIVER: Final = "dra.cpu"
CPU_CAPACITY: Final = "dra.cpu/cpu"
ERROR: Final = "error"
NO_ROOM_NOW: Final = "no-room-now"
WARNING: Final = "warning"


@dataclass(frozen=True, slots=True)
class Finding:
    """``summary`` names the field and value, ``fix`` what works (each short enough for
    one admission warning); ``message`` is the whole text."""

    code: str
    severity: str  # error | no-room-now | warning
    summary: str
    why: str
    fix: str

    @property
    def message(self) -> str:
        return f"{self.summary}: {self.why}; {self.fix}"


def is_cpu_class(name: str, classes: Mapping[str, DeviceClass]) -> bool:
    """The class selects the driver's devices: its selectors name ``dra.cpu`` as the
    driver, or (class not known) it carries the driver's own class name."""
    cls = classes.get(name)
    if cls is None:
        return name == DRIVER
    return any(
        "device.driver" in s and (f'"{DRIVER}"' in s or f"'{DRIVER}'" in s) for s in cls.selectors
    )


# CPUs a request yields: known, one of several (firstAvailable, or All over nodes that
# differ), or None when not known before allocation
Cpus = Fraction | frozenset[Fraction] | None


def _request_cpus(req: Request) -> Fraction | None:
    """CPUs one request asks for; None when not known before allocation (allocationMode
    All: the node's matching devices, see core.dra.pod.all_mode_cpus)."""
    for name, amount in req.capacity_requests:
        if name == CPU_CAPACITY:
            return amount
    return Fraction(req.count) if req.mode == EXACT_COUNT else None


def one_of(counts: Iterable[Fraction | None]) -> Cpus:
    """Several possible CPU counts as one ``Cpus``: None if any is unknown."""
    found = set(counts)
    if None in found or not found:
        return None
    return found.pop() if len(found) == 1 else frozenset(found)  # type: ignore[return-value]


def cpu_requests(spec: ClaimSpec, inv: DraInventory) -> dict[str, Cpus]:
    """The claim's requests served by the CPU driver -> their CPUs. A firstAvailable
    request is CPU when any subrequest is; it yields the CPUs of whichever subrequest the
    allocator picks (0 for a subrequest of another driver)."""
    out: dict[str, Cpus] = {}
    for cr in spec.requests:
        alts = cr.alternatives
        cpu = [is_cpu_class(a.class_name, inv.classes) for a in alts]
        if not any(cpu):
            continue
        if cr.exactly is not None:
            out[cr.name] = _request_cpus(cr.exactly)
        else:
            out[cr.name] = one_of(
                _request_cpus(a) if is_cpu else Fraction(0)
                for a, is_cpu in zip(alts, cpu, strict=True)
            )
    return out


def long_lived(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Containers that run together: the app containers and the sidecars (init containers
    with restartPolicy Always); a plain init container stops before the next starts."""
    init = [
        c for c in spec.get("initContainers") or () if isinstance(c, Mapping)
        and c.get("restartPolicy") == "Always"
    ]  # fmt: skip
    return init + [c for c in spec.get("containers") or () if isinstance(c, Mapping)]


def _uses(container: Mapping[str, Any]) -> list[tuple[str, str | None]]:
    """(claim entry, request or None) of the container's resources.claims."""
    claims = (container.get("resources") or {}).get("claims") or ()
    return [
        (str(c["name"]), c.get("request") or None)
        for c in claims
        if isinstance(c, Mapping) and c.get("name")
    ]


def _cpus(value: object) -> Fraction | None:
    try:
        return None if value is None else parse_quantity(value)
    except InvalidInput:
        return None  # the API server refuses it; the intent check names it


def _text(n: Cpus) -> str:
    if n is None:
        return "unset"
    if isinstance(n, frozenset):
        return " or ".join(_text(v) for v in sorted(n))
    return str(n.numerator) if n.denominator == 1 else str(float(n))


def _add(a: Cpus, b: Cpus) -> Cpus:
    """The CPUs of two requests together (every combination when either varies)."""
    if a is None or b is None:
        return None
    left = a if isinstance(a, frozenset) else (a,)
    right = b if isinstance(b, frozenset) else (b,)
    return one_of(x + y for x in left for y in right)


def shared_in_pod(spec: Mapping[str, Any], cpu: Mapping[str, Any]) -> list[Finding]:
    """Two long-lived containers listing the same CPU claim: the second never starts."""
    owners: dict[str, list[str]] = {}
    for c in long_lived(spec):
        for entry in {e for e, _ in _uses(c) if e in cpu}:
            owners.setdefault(entry, []).append(str(c.get("name")))
    return [
        Finding(
            "draCpuSharedClaim",
            ERROR,
            f"CPU claim {entry!r} in resources.claims of containers {', '.join(names)}",
            f"the DRA CPU driver binds a claim to one container: {names[1]!r} fails with "
            f"CreateContainerError",
            f"give each container its own {DRIVER} claim",
        )
        for entry, names in owners.items()
        if len(names) > 1
    ]


def reserved_elsewhere(
    pod_name: str, claims: Sequence[PodClaim], cpu: Mapping[str, Any]
) -> list[Finding]:
    """A CPU claim by name that other pods already reserve (status.reservedFor)."""
    out = []
    for pc in claims:
        if pc.name not in cpu or pc.claim is None:
            continue
        others = [p for p in pc.claim.reserved_for if p != pod_name]
        if others:
            out.append(
                Finding(
                    "draCpuSharedClaim",
                    NO_ROOM_NOW,
                    f"CPU claim {pc.name!r} (ResourceClaim {pc.claim.namespace}/"
                    f"{pc.claim.name}) is reserved for pod {others[0]}",
                    "the DRA CPU driver gives a claim to one pod: this one fails with "
                    "CreateContainerError while that one runs",
                    f"use a ResourceClaimTemplate for {DRIVER} claims (one claim per pod)",
                )
            )
    return out


def concurrent_pods(workload: Mapping[str, Any] | None) -> int:
    """How many pods of the workload's template may run at once, as its controller creates
    them: a Deployment's, ReplicaSet's or StatefulSet's ``replicas``, a Job's (or a
    CronJob's job template's) ``parallelism``; 1 otherwise (a Pod, a DaemonSet, which puts
    its pods on different nodes, a Volcano Job)."""
    if not isinstance(workload, Mapping):
        return 1
    kind, api = workload.get("kind"), str(workload.get("apiVersion") or "")
    spec = workload.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    if kind in ("Deployment", "ReplicaSet", "StatefulSet") and api.startswith("apps/"):
        value = spec.get("replicas", 1)
    elif kind == "Job" and api == "batch/v1":
        value = spec.get("parallelism", 1)
    elif kind == "CronJob" and api == "batch/v1":
        job = (spec.get("jobTemplate") or {}).get("spec") or {}
        value = job.get("parallelism", 1) if isinstance(job, Mapping) else 1
    else:
        return 1
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 1 else 1


def shared_by_replicas(
    claims: Sequence[PodClaim], cpu: Mapping[str, Any], replicas: int
) -> list[Finding]:
    """A CPU claim by name in a template of several concurrent pods: the controller creates
    them together, none is in status.reservedFor yet, the scheduler reserves the claim for
    each (up to 256) and the driver gives it to the first container only."""
    if replicas < 2:
        return []
    return [
        Finding(
            "draCpuSharedClaim",
            NO_ROOM_NOW,
            f"CPU claim {pc.name!r} (ResourceClaim {pc.claim.namespace}/{pc.claim.name}) "
            f"shared by {replicas} concurrent pods",
            f"the template of {replicas} concurrent pods names it; the DRA CPU driver gives a "
            f"claim to one pod: the other {replicas - 1} fail with CreateContainerError while "
            "it runs",
            f"use a ResourceClaimTemplate for {DRIVER} claims (one claim per pod)",
        )
        for pc in claims
        if pc.name in cpu and pc.claim is not None
    ]


def _container_cpus(c: Mapping[str, Any], cpu: Mapping[str, Mapping[str, Cpus]]) -> Cpus:
    total: Cpus = Fraction(0)
    for entry, request in _uses(c):
        for name, n in (cpu.get(entry) or {}).items():
            if request is None or request == name:
                total = _add(total, n)
    return total


def _mirrors(req: Fraction | None, lim: Fraction | None, n: Cpus) -> bool:
    """requests = limits = the CPUs, whichever the claims yield."""
    return req == lim and (n == req if not isinstance(n, frozenset) else False)


_VARIES: Final = (
    " (firstAvailable or allocationMode All: the count depends on the node; an ExactCount "
    "request gives one)"
)


def not_mirrored(
    spec: Mapping[str, Any], qos: str, cpu: Mapping[str, Mapping[str, Cpus]]
) -> list[Finding]:
    """Requests and limits that do not mirror the claims' CPUs (container level, or pod
    level when spec.resources sets cpu)."""
    users = [(c, n) for c in long_lived(spec) if (n := _container_cpus(c, cpu))]
    if not users:
        return []
    pod_res = spec.get("resources") or {}
    pod_req = _cpus((pod_res.get("requests") or {}).get("cpu"))
    pod_lim = _cpus((pod_res.get("limits") or {}).get("cpu"))
    why = (
        "the kubelet sets the QoS class and cgroups, and the scheduler counts CPUs, from "
        "requests/limits only, never from claims"
    )
    if pod_req is not None or pod_lim is not None:
        total: Cpus = Fraction(0)
        for _, n in users:
            total = _add(total, n)
        most = max(total) if isinstance(total, frozenset) else total
        if most is None or (pod_req is not None and pod_req == pod_lim and pod_req >= most):
            return []
        return [
            Finding(
                "draCpuNotMirrored",
                WARNING,
                f"spec.resources cpu requests {_text(pod_req)} / limits {_text(pod_lim)}, "
                f"{_text(total)} CPUs from {DRIVER} claims (QoS {qos})",
                why,
                f"set spec.resources requests.cpu = limits.cpu >= {_text(most)} (the claims' "
                f"CPUs plus the other containers')",
            )
        ]
    out = []
    for c, n in users:
        res = c.get("resources") or {}
        lim = _cpus((res.get("limits") or {}).get("cpu"))
        req = _cpus((res.get("requests") or {}).get("cpu"))
        req = lim if req is None else req  # the API defaults requests to limits
        if _mirrors(req, lim, n):
            continue
        varies = isinstance(n, frozenset)
        out.append(
            Finding(
                "draCpuNotMirrored",
                WARNING,
                f"container {c.get('name')!r}: cpu requests {_text(req)} / limits {_text(lim)}, "
                f"{_text(n)} CPUs from {DRIVER} claims (QoS {qos})",
                why + (_VARIES if varies else ""),
                f"set container {c.get('name')!r} requests.cpu and limits.cpu to "
                + (f"the claims' CPUs, one count ({_text(n)} now)" if varies else _text(n))
                + " (or use pod-level spec.resources)",
            )
        )
    return out


def static_nodes(nodes: Iterable[tuple[str, str]]) -> Finding | None:
    """(node, cpuManagerPolicy) of the nodes the CPU claims may be allocated on."""
    static = sorted(name for name, policy in nodes if policy == "static")
    if not static:
        return None
    return Finding(
        "draCpuStaticPolicy",
        WARNING,
        f"cpuManagerPolicy static on {len(static)} node(s) (first: {static[0]}) for the "
        f"{DRIVER} claims",
        "the DRA CPU driver and the kubelet's CPU manager are mutually incompatible "
        "(numagate takes static where a node's NRT does not report the policy)",
        f"run the {DRIVER} driver's nodes with cpuManagerPolicy none, reported as the NRT "
        f"attribute cpuManagerPolicy",
    )


def pod_findings(
    pod: Mapping[str, Any],
    claims: Sequence[PodClaim],
    qos: str,
    inv: DraInventory,
    all_mode: Mapping[tuple[str, str], Cpus] | None = None,
    replicas: int = 1,
) -> tuple[dict[str, dict[str, Cpus]], list[Finding]]:
    """The pod's CPU claims (claim entry -> request -> CPUs) and the findings that need no
    node: shared claims and requests that do not mirror them. ``all_mode``: the CPUs of
    the allocationMode All requests (claim entry, request) over the candidate nodes."""
    cpu: dict[str, dict[str, Cpus]] = {}
    for pc in claims:
        spec = pc.claim.spec if pc.claim is not None else pc.spec
        if spec is not None and (found := cpu_requests(spec, inv)):
            for request in found:
                if (pc.name, request) in (all_mode or {}):
                    found[request] = (all_mode or {})[(pc.name, request)]
            cpu[pc.name] = found
    if not cpu:
        return cpu, []
    name = str((pod.get("metadata") or {}).get("name") or "")
    spec = pod.get("spec") or {}
    return cpu, [
        *shared_in_pod(spec, cpu),
        *reserved_elsewhere(name, claims, cpu),
        *shared_by_replicas(claims, cpu, replicas),
        *not_mirrored(spec, qos, cpu),
    ]
