"""Koordinator's own scoring, for `explain`: the pod-level NUMA score of the proposal
(seed 000), and the v1.6 score plugins NodeResourcesFitPlus and ScarceResourceAvoidance
(seed 004; research upstream-schedulers §1.3).

All amounts are in core units (cpu millicores, memory bytes, devices counts), which are the
units koord-scheduler computes in (MilliCPU, bytes, scalar ``Value()``), so the integer
arithmetic below gives the scheduler's own numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from core.model import ContainerDemand, NodeTopology
from core.quantity import format_quantity

MAX_NODE_SCORE: Final = 100  # framework.MaxNodeScore
MOST_ALLOCATED: Final = "MostAllocated"
LEAST_ALLOCATED: Final = "LeastAllocated"
FIT_TYPES: Final = (MOST_ALLOCATED, LEAST_ALLOCATED)
# k8s.io/kubernetes/pkg/scheduler/util: requests assumed for containers that set none.
DEFAULT_MILLI_CPU_REQUEST: Final = 100
DEFAULT_MEMORY_REQUEST: Final = 200 * 1024 * 1024
# Resources koord-scheduler's NodeInfo tracks besides scalar (extended) resources.
_NATIVE_TRACKED: Final = ("cpu", "memory", "ephemeral-storage")


@dataclass(frozen=True, slots=True)
class FitPlusResource:
    """One entry of ``NodeResourcesFitPlusArgs.resources``."""

    name: str
    type: str
    weight: int


# ---------------------------------------------------------------------------- node usage


def node_used(node: NodeTopology, resource: str) -> int:
    """What is in use on the node: allocatable minus available, summed over the NUMA zones
    that report the resource (NodeResourceTopology is the inventory's usage source)."""
    return sum(
        max(0, z.allocatable[resource] - z.available.get(resource, z.allocatable[resource]))
        for z in node.zones
        if resource in z.allocatable
    )


def node_allocatable(node: NodeTopology, resource: str) -> int:
    """Node allocatable, else the sum over zones when the Node object did not give it."""
    if resource in node.allocatable:
        return node.allocatable[resource]
    return sum(z.allocatable.get(resource, 0) for z in node.zones)


# ---------------------------------------------------------------------------- NUMA score


def numa_score(numa_nodes: int, requested: int, allocated: int) -> int:
    """Pod-level NUMA proposal: ``(100 - numaNodes*10) + 10*(requested/allocated)``.
    The utilisation term is integer-divided (Go int64) and capped at 10."""
    utilisation = 0 if allocated <= 0 else 10 * min(requested, allocated) // allocated
    return (MAX_NODE_SCORE - numa_nodes * 10) + utilisation


def cpu_utilisation(node: NodeTopology, pod_cpu: int) -> tuple[int, int]:
    """``(requested, allocated)`` for the NUMA score: CPU millicores, requested = the node's
    CPU in use (over its NUMA zones) plus the pod's CPU request, allocated = node allocatable."""
    return node_used(node, "cpu") + pod_cpu, node_allocatable(node, "cpu")


# ---------------------------------------------------------------------------- FitPlus


def _nonzero_request(resource: str, requests: Mapping[str, int]) -> int:
    # GetNonzeroRequestForResource: unset (not zero) cpu/memory count as the defaults.
    if resource in requests:
        return requests[resource]
    if resource == "cpu":
        return DEFAULT_MILLI_CPU_REQUEST
    if resource == "memory":
        return DEFAULT_MEMORY_REQUEST
    return 0


def fitplus_pod_request(containers: Sequence[ContainerDemand], resource: str) -> int:
    """KEP-753 pod request as FitPlus computes it: the sum over app containers, then in order
    each sidecar (restartPolicy Always) init container is added and each regular init
    container raises the total to its own request if larger (``calculatePodResourceRequest``)."""
    total = sum(_nonzero_request(resource, c.requests) for c in containers if c.kind == "app")
    for c in containers:
        value = _nonzero_request(resource, c.requests)
        if c.kind == "sidecar":
            total += value
        elif c.kind == "init":
            total = max(total, value)
    return total


def most_allocated(requested: int, capacity: int) -> int:
    if capacity == 0:
        return 0
    return min(requested, capacity) * MAX_NODE_SCORE // capacity


def least_allocated(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


def fitplus_score(
    resources: Iterable[FitPlusResource],
    requested: Mapping[str, int],
    allocatable: Mapping[str, int],
) -> int:
    """``Σ(score·weight)/Σweight`` over the configured resources present in ``requested``
    (the pod's requested resource names); 100 when none is configured or every weight is 0.
    Upstream quirk kept: a ``type`` other than Most/LeastAllocated scores 0 but its weight still
    counts in the denominator (``resourceScorer`` switch has no default)."""
    score = weight_sum = 0
    for res in resources:
        if res.name not in requested:
            continue
        if res.type == MOST_ALLOCATED:
            value = most_allocated(requested[res.name], allocatable.get(res.name, 0))
        elif res.type == LEAST_ALLOCATED:
            value = least_allocated(requested[res.name], allocatable.get(res.name, 0))
        else:
            value = 0
        score += value * res.weight
        weight_sum += res.weight
    return MAX_NODE_SCORE if weight_sum == 0 else score // weight_sum


def pod_nonzero_requests(containers: Sequence[ContainerDemand]) -> dict[str, int]:
    """One bound pod as kube-scheduler's NodeInfo counts it: cpu and memory with the
    100m / 200Mi defaults for a container that sets none (``NonZeroRequested``), every other
    requested resource as requested (``Requested``), by the KEP-753 pod formula."""
    names = {"cpu", "memory"} | {r for c in containers for r in c.requests}
    return {r: fitplus_pod_request(containers, r) for r in sorted(names)}


def node_requested(node: NodeTopology, resource: str) -> tuple[int, str]:
    """What FitPlus counts as requested on the node before the pod, and from where: the
    bound pods' requests (``nodeInfo.GetNonZeroRequested``) when the inventory holds bound
    pods for the node, else what its NodeResourceTopology shows taken."""
    if node.bound_requests is not None:
        return node.bound_requests.get(resource, 0), "bound pods"
    return node_used(node, resource), "NRT allocatable-available"


def fitplus_parts(
    resources: Sequence[FitPlusResource],
    containers: Sequence[ContainerDemand],
    pod_requests: Mapping[str, int],
    node: NodeTopology,
) -> tuple[int, str]:
    """FitPlus score of ``node`` and the formula with its numbers: for each resource the pod
    requests (> 0), requested = the node's requested + the pod's (non-zero-defaulted) request,
    against node allocatable (``calculateResourceAllocatableRequest``)."""
    names = [r for r, v in pod_requests.items() if v > 0]
    requested: dict[str, int] = {}
    terms = []
    source = ""
    for r in names:
        held, source = node_requested(node, r)
        requested[r] = held + fitplus_pod_request(containers, r)
    allocatable = {r: node_allocatable(node, r) for r in names}
    score = fitplus_score(resources, requested, allocatable)
    for res in resources:
        if res.name in requested:
            one = fitplus_score([FitPlusResource(res.name, res.type, 1)], requested, allocatable)
            amounts = (
                format_quantity(res.name, v) for v in (requested[res.name], allocatable[res.name])
            )
            terms.append(f"{res.name} {res.type} {'/'.join(amounts)}={one}x{res.weight}")
    if not terms:
        return score, "no configured resource requested = 100"
    return score, f"Σscore*w/Σw ({', '.join(terms)}; node's requested from {source}) = {score}"


def fitplus_for_node(
    resources: Sequence[FitPlusResource],
    containers: Sequence[ContainerDemand],
    pod_requests: Mapping[str, int],
    node: NodeTopology,
) -> int:
    """FitPlus score of ``node`` (:func:`fitplus_parts` without the text)."""
    return fitplus_parts(resources, containers, pod_requests, node)[0]


# ---------------------------------------------------------------------------- scarce


def _tracked(resource: str) -> bool:
    # NodeInfo tracks cpu, memory, ephemeral-storage and scalar resources (extended resources,
    # hugepages, attachable volumes); "pods" and others are not resource names it scores.
    return (
        resource in _NATIVE_TRACKED
        or resource.startswith(("hugepages-", "attachable-volumes-"))
        or "/" in resource
    )


def scarce_score(
    pod_requested: Iterable[str], node_allocatable_names: Iterable[str], scarce: Iterable[str]
) -> int:
    """ScarceResourceAvoidance: diff = node resource names - pod-requested names, hit = diff ∩
    scarce; ``(|diff| - |hit|) * 100 / |diff|``, 100 when diff or hit is empty."""
    diff = set(node_allocatable_names) - set(pod_requested)
    hit = diff & set(scarce)
    if not diff or not hit:
        return MAX_NODE_SCORE
    return (len(diff) - len(hit)) * MAX_NODE_SCORE // len(diff)


def scarce_for_node(
    scarce: Sequence[str], pod_requests: Mapping[str, int], node: NodeTopology
) -> int:
    return scarce_parts(scarce, pod_requests, node)[0]


def scarce_parts(
    scarce: Sequence[str], pod_requests: Mapping[str, int], node: NodeTopology
) -> tuple[int, str]:
    """ScarceResourceAvoidance score of ``node`` and the formula with its numbers."""
    pod_names = [r for r, v in pod_requests.items() if v > 0 and _tracked(r)]
    node_names = [r for r, v in node.allocatable.items() if v > 0 and _tracked(r)]
    score = scarce_score(pod_names, node_names, scarce)
    diff = set(node_names) - set(pod_names)
    hit = diff & set(scarce)
    if not diff or not hit:
        return score, f"no scarce resource the pod leaves unused = {score}"
    return score, f"(|diff| {len(diff)} - |hit| {len(hit)} {sorted(hit)})*100/{len(diff)} = {score}"
