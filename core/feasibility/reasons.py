"""Human reasons for the kernel's reason codes (core/feasibility/codes.py R_*)."""

from __future__ import annotations

from core.feasibility.codes import (
    R_CPU_SHORT,
    R_DEVICE_SHORT,
    R_EXCLUSIVE,
    R_MEMORY_SHORT,
    R_NODE_SHORT,
    R_NOT_PREFERRED,
    R_SINGLE_NO_HINT,
    R_SMT,
    R_TOO_MANY_NUMA,
    RES_MEMORY,
    KernelResult,
)
from core.model import NodeTopology, PodIntent
from core.quantity import format_quantity
from core.snapshot.snapshot import Demand, resource_kind


def _unit_name(intent: PodIntent, unit: int) -> str:
    if 0 <= unit < len(intent.containers):
        return f"container {intent.containers[unit].name}"
    return "the pod"


def _amount(resource: str, units: int) -> str:
    return format_quantity(resource, units)


def _per_numa(node: NodeTopology, resource: str, *, empty: bool) -> tuple[str, str]:
    zones = sorted(node.zones, key=lambda z: z.id)
    scale = 1000 if resource == "cpu" else 1
    caps = [z.capacity.get(resource, 0) // scale for z in zones]
    free = [(z.allocatable if empty else z.available).get(resource, 0) // scale for z in zones]
    if resource != "cpu" and resource not in ("pods",) and not resource.count("/"):
        cap_s = "/".join(format_quantity(resource, c) for c in caps)
        free_s = "/".join(format_quantity(resource, f) for f in free)
    else:
        cap_s = "/".join(map(str, caps))
        free_s = "/".join(map(str, free))
    return cap_s, free_s


def render_reason(
    result: KernelResult,
    *,
    policy: str,
    intent: PodIntent,
    demand: Demand,
    node: NodeTopology,
    names: tuple[str, ...],
    empty: bool,
) -> str:
    """A short human string for a kernel reason code."""
    code, unit, res, a, b = result.reason, result.unit, result.resource, result.need, result.limit
    rname = names[res] if 0 <= res < len(names) else ""
    who = _unit_name(intent, unit)
    if code == R_TOO_MANY_NUMA:
        return f"kubelet refuses {policy} on {a} NUMA nodes (max-allowable-numa-nodes {b})"
    if code == R_NODE_SHORT:
        return f"node allocatable {rname} {_amount(rname, b)} < requested {_amount(rname, a)}"
    if code == R_CPU_SHORT:
        return f"not enough exclusive CPUs: {who} needs {a}, free {b}"
    if code == R_SMT:
        return f"full-pcpus-only: {who} asks {a} CPUs, not a multiple of {b} threads per core"
    if code == R_DEVICE_SHORT:
        return f"not enough {rname}: {who} needs {a}, free {b}"
    if code == R_MEMORY_SHORT:
        return (
            f"memory manager cannot allocate {rname} {_amount(rname, a)} for {who} "
            f"(free in hint {_amount(rname, b)})"
        )
    if code == R_EXCLUSIVE:
        return "Koordinator exclusivity Required: every NUMA placement conflicts (single/shared)"
    if code in (R_NOT_PREFERRED, R_SINGLE_NO_HINT):
        if not rname:
            return f"{policy}: no preferred hint for {who}: resources prefer different NUMA nodes"
        if resource_kind(rname) == RES_MEMORY:
            res = _deciding_memory(demand, unit, node, names, empty=empty)
            rname = names[res]
        if rname == "cpu":
            # exclusive CPUs, else (koord-scheduler, a pod binding none) the CPU request
            need = demand.unit_cpu[unit] or -(-_unit_amount(demand, unit, 0, names) // 1000)
            need_s = str(need)
        else:
            need_s = _amount(rname, _unit_amount(demand, unit, res, names))
        caps, free = _per_numa(node, rname, empty=empty)
        width = f"{a} NUMA node" + ("s" if a != 1 else "")
        state = "allocatable" if empty else "free"
        return (
            f"{policy}: no preferred hint: {rname} {need_s} needs {width} "
            f"(capacity {caps}), {state} {free}"
        )
    return f"reason code {code}"


def _widest_need(node: NodeTopology, resource: str, need: int, empty: bool) -> int:
    """The fewest NUMA nodes whose amounts hold ``need`` of ``resource`` (taking the
    largest first); one more than the node has when they cannot."""
    amounts = sorted(
        ((z.allocatable if empty else z.available).get(resource, 0) for z in node.zones),
        reverse=True,
    )
    total = 0
    for count, amount in enumerate(amounts, 1):
        total += amount
        if total >= need:
            return count
    return len(amounts) + 1


def _deciding_memory(
    demand: Demand, unit: int, node: NodeTopology, names: tuple[str, ...], *, empty: bool
) -> int:
    """The memory type that decided a memory hint: the kernel's hint list is one for every
    requested type (memory, hugepages-*) and carries the first; the reason names the type
    that needs the most NUMA nodes (the first of equals)."""
    requested = [
        (r, _unit_amount(demand, unit, r, names))
        for r, name in enumerate(names)
        if resource_kind(name) == RES_MEMORY and _unit_amount(demand, unit, r, names) > 0
    ]
    if not requested:
        return names.index("memory") if "memory" in names else 0
    return max(requested, key=lambda t: (_widest_need(node, names[t[0]], t[1], empty), -t[0]))[0]


def _unit_amount(demand: Demand, unit: int, res: int, names: tuple[str, ...]) -> int:
    return demand.unit_res[unit * len(names) + res]
