"""Builders of core.model values (zones, nodes, containers, pod intents, verdicts) for the
core tests: real model values, nothing mocked.

Unit convention: every resource mapping is in the model's own units (cpu in millicores,
memory and hugepages in bytes, devices as counts). The two CPU shortcuts take a count of
whole CPUs, like the model's ``exclusive_cpus``: ``container(cpu=N)`` (N CPUs requested, and
exclusive unless ``exclusive=False``) and ``cpu_node(caps, free)`` (CPUs per zone).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

from hypothesis import strategies as st

from core.model import ContainerDemand, NodeTopology, NodeVerdict, NumaZone, PodIntent
from core.snapshot.rows import ShapeRows
from core.snapshot.snapshot import POLICY_CODES, Demand, Snapshot

GI = 2**30
MI = 2**20


def zone(
    i: int,
    cap: Mapping[str, int],
    free: Mapping[str, int] | None = None,
    alloc: Mapping[str, int] | None = None,
    costs: Mapping[int, int] | None = None,
) -> NumaZone:
    """A NUMA zone; allocatable defaults to the capacity and available to allocatable."""
    allocatable = alloc if alloc is not None else cap
    return NumaZone(
        id=i,
        capacity=dict(cap),
        allocatable=dict(allocatable),
        available=dict(free if free is not None else allocatable),
        costs=dict(costs or {}),
    )


def node(
    name: str = "n",
    zones: Sequence[NumaZone] = (),
    *,
    policy: str = "best-effort",
    labels: Mapping[str, str] | None = None,
    allocatable: Mapping[str, int] | None = None,
    capacity: Mapping[str, int] | None = None,
    annotations: Mapping[str, str] | None = None,
    **kw: Any,
) -> NodeTopology:
    return NodeTopology(
        name=name,
        labels=dict(labels or {}),
        allocatable=dict(allocatable or {}),
        capacity=dict(capacity or {}),
        zones=tuple(zones),
        tm_policy=policy,
        annotations=dict(annotations or {}),
        **kw,
    )


def plain_node(
    name: str,
    allocatable: Mapping[str, int],
    zones: Sequence[NumaZone] = (),
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> NodeTopology:
    """A node whose capacity equals its allocatable, under the model's default topology
    manager policy (none): the shape the scoring and mutation tests rank."""
    return NodeTopology(
        name=name,
        labels=dict(labels or {}),
        allocatable=dict(allocatable),
        capacity=dict(allocatable),
        zones=tuple(zones),
        annotations=dict(annotations or {}),
    )


def cpu_node(
    caps: Sequence[int], free: Sequence[int], *, name: str = "n", **kw: Any
) -> NodeTopology:
    """A node of CPU-only zones; caps and free are counts of whole CPUs per zone."""
    pairs = zip(caps, free, strict=False)
    return node(
        name,
        [zone(i, {"cpu": c * 1000}, {"cpu": f * 1000}) for i, (c, f) in enumerate(pairs)],
        **kw,
    )


def container(
    name: str = "c",
    kind: str = "app",
    requests: Mapping[str, int] | None = None,
    limits: Mapping[str, int] | None = None,
    *,
    cpu: int = 0,
    exclusive: bool = True,
    **res: int,
) -> ContainerDemand:
    """``requests``/``limits`` in model units (limits default to the requests); ``cpu`` is a
    count of whole CPUs; other resources as keyword arguments (hugepages_1Gi style names are
    mapped: '_' -> '-', 'nvidia_com__gpu' -> 'nvidia.com/gpu')."""
    req: dict[str, int] = dict(requests or {})
    if cpu:
        req["cpu"] = cpu * 1000
    for k, v in res.items():
        req[k.replace("__", "/").replace("_com", ".com").replace("_", "-")] = v
    return ContainerDemand(
        name=name,
        kind=kind,  # type: ignore[arg-type]
        requests=req,
        limits=dict(limits if limits is not None else req),
        exclusive_cpus=cpu if exclusive else 0,
    )


def pod(
    *containers: ContainerDemand,
    scheduler: str = "default",
    policy: str | None = None,
    qos: str = "Guaranteed",
    scope: str | None = None,
    exclusive: str | None = None,
    **kw: Any,
) -> PodIntent:
    """The intent the kernel tests check: containers only, no pod-level totals."""
    return PodIntent(
        scheduler=scheduler,  # type: ignore[arg-type]
        scheduler_name="",
        policy=policy,
        exclusive=exclusive,  # type: ignore[arg-type]
        scope=scope,  # type: ignore[arg-type]
        qos=qos,  # type: ignore[arg-type]
        containers=tuple(containers),
        pod_requests={},
        **kw,
    )


def intent(
    scheduler: str = "default",
    *,
    policy: str | None = None,
    containers: Sequence[ContainerDemand] = (),
    qos: str = "Guaranteed",
    pod_requests: Mapping[str, int] | None = None,
    **extra: Any,
) -> PodIntent:
    """The intent the scoring tests rank: pod totals summed from the app containers unless
    given, scheduler name default-scheduler."""
    if pod_requests is None:
        totals: dict[str, int] = {}
        for c in containers:
            if c.kind != "init":
                for k, v in c.requests.items():
                    totals[k] = totals.get(k, 0) + v
        pod_requests = totals
    return PodIntent(
        scheduler=scheduler,  # type: ignore[arg-type]
        scheduler_name=extra.pop("scheduler_name", "default-scheduler"),
        policy=policy,
        exclusive=None,
        scope=None,
        qos=qos,  # type: ignore[arg-type]
        containers=tuple(containers),
        pod_requests=dict(pod_requests),
        **extra,
    )


def fits(
    name: str, numa: Sequence[int] = (0,), preferred: bool = True, reason: str = ""
) -> NodeVerdict:
    return NodeVerdict(name, "fits", tuple(numa), preferred, None, reason)


def run(
    impl: ModuleType,
    n: NodeTopology,
    intent: PodIntent,
    policy: str | None = None,
    flags: int = 0,
) -> tuple[int, ...]:
    """Check one pod on one node with the kernel ``impl``; returns the kernel result."""
    snap = Snapshot.build([n])
    demand = Demand.build(intent, snap)
    code = POLICY_CODES[policy or n.tm_policy]
    if n.tm_scope == "pod":
        flags |= impl.F_POD_SCOPE
    return snap.kernel(impl).check(demand, 0, code, flags)


def ids(mask: int) -> set[int]:
    """The NUMA ids set in a kernel mask."""
    return {i for i in range(64) if (mask >> i) & 1}


GPU = "nvidia.com/gpu"
HP = "hugepages-1Gi"


@st.composite
def intents(draw: st.DrawFn) -> PodIntent:
    """Any pod intent the kernels must agree on (a hypothesis strategy)."""
    guaranteed = draw(st.booleans())
    cs = []
    for i in range(draw(st.integers(1, 3))):
        cpu = draw(st.integers(0, 10))
        # a pod that binds no CPUs may ask for millicores (koord-scheduler rounds them up)
        milli = 0 if guaranteed else draw(st.sampled_from([0, 0, 1, 500, 999]))
        req = {"cpu": cpu * 1000 + milli, "memory": draw(st.integers(0, 8)) * GI // 2}
        if draw(st.booleans()):
            req[GPU] = draw(st.integers(0, 5))
        if draw(st.booleans()):
            req[HP] = draw(st.integers(0, 2)) * GI
        cs.append(
            ContainerDemand(
                name=f"c{i}",
                kind=draw(st.sampled_from(["init", "sidecar", "app", "app"])),
                requests=req,
                limits=req,
                exclusive_cpus=cpu if guaranteed else 0,
            )
        )
    return PodIntent(
        scheduler=draw(st.sampled_from(["default", "koordinator", "volcano", "hami"])),
        scheduler_name="",
        policy=draw(
            st.sampled_from([None, "none", "best-effort", "restricted", "single-numa-node"])
        ),
        exclusive=draw(st.sampled_from([None, "required", "preferred"])),
        scope=draw(st.sampled_from([None, "container", "pod"])),
        qos="Guaranteed" if guaranteed else "Burstable",
        containers=tuple(cs),
        pod_requests={},
    )


@st.composite
def numa_zones(draw: st.DrawFn, n: int) -> tuple[NumaZone, ...]:
    """``n`` random zones of CPU, memory, GPUs and hugepages (the differential suite's)."""
    out = []
    for i in range(n):
        cpu = draw(st.integers(0, 8))
        mem = draw(st.integers(0, 6)) * GI
        gpu = draw(st.integers(0, 3))
        hp = draw(st.integers(0, 2)) * GI
        cap = {"cpu": cpu * 1000, "memory": mem, GPU: gpu, HP: hp}
        free = {k: draw(st.integers(0, v // (1000 if k == "cpu" else 1))) for k, v in cap.items()}
        free["cpu"] *= 1000
        free["memory"] = free["memory"] // GI * GI
        free[HP] = free[HP] // GI * GI
        costs = {j: 10 if j == i else draw(st.sampled_from([11, 12, 20, 30])) for j in range(n)}
        out.append(NumaZone(id=i, capacity=cap, allocatable=cap, available=free, costs=costs))
    return tuple(out)


@st.composite
def topology_nodes(draw: st.DrawFn, name: str) -> NodeTopology:
    """A random node: 1-4 zones (or none), any policy, scope and manager settings."""
    n = draw(st.integers(1, 4))
    return NodeTopology(
        name=name,
        labels={"pool": draw(st.sampled_from(["a", "b"]))},
        allocatable=draw(st.sampled_from([{}, {"cpu": 64000, "memory": 64 * GI, GPU: 8}])),
        capacity={},
        zones=draw(st.one_of(st.just(()), numa_zones(n)))
        if draw(st.booleans()) and n == 1
        else draw(numa_zones(n)),
        tm_policy=draw(st.sampled_from(["none", "best-effort", "restricted", "single-numa-node"])),
        tm_scope=draw(st.sampled_from(["container", "pod"])),
        max_numa_nodes=draw(st.sampled_from([8, 3])),
        prefer_closest=draw(st.booleans()),
        cpu_manager_policy=draw(st.sampled_from(["static", "static", "none"])),
        full_pcpus_only=draw(st.booleans()),
        threads_per_core=draw(st.sampled_from([1, 2])),
        memory_manager_policy=draw(st.sampled_from(["Static", "None"])),
        unaligned_devices={GPU: draw(st.integers(0, 2))},
        numa_states=tuple(draw(st.sampled_from(["idle", "shared", "single"])) for _ in range(n)),
    )


def listed_rows(rows: ShapeRows) -> list[list[int]]:
    """A shape's packed rows as lists (arrays and lists alike), its storage offset left out."""
    return [[rows.n], *(list(x) for x in (rows.info, rows.topology, rows.available, rows.states))]
