"""A pod's DRA claims against the NRT inventory's nodes: which pods have claims at all
(``uses_dra``: a pod without one is never judged here, so its verdict cannot change), the
nodes it may go to (``candidate_nodes``: nodeName, nodeSelector and required node
affinity, as the scheduler filters before the DRA plugin), the cluster verdict
(``judge_pod``) and the Topology Manager finding on the nodes where it could land
(``alignment``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from core.dra.cluster import IMPOSSIBLE, ClusterVerdict, evaluate_cluster
from core.dra.cpu_driver import (
    CPU_CAPACITY,
    DRIVER,
    Cpus,
    Finding,
    one_of,
    pod_findings,
    static_nodes,
)
from core.dra.evaluate import DraInventory, pod_claims, readable_problem
from core.dra.extended import is_dra_extended_name, requested_names, served_names
from core.dra.extended import node_claims as _node_claims
from core.dra.objects import ALL, NodeSelectorTerm, Requirement
from core.dra.pools import NodeRef, selector_matches
from core.dra.topology import ALIGNING_POLICIES, alignment_finding
from core.dra.verdict import FITS, NO_ROOM_NOW
from core.model import NodeTopology, PodIntent


def uses_dra(pod: Mapping[str, Any], inv: DraInventory) -> bool:
    """The pod has resource claims, or requests an extended resource a DeviceClass serves
    (KEP-5004): only such pods are judged by the DRA rules."""
    spec = pod.get("spec") or {}
    if not isinstance(spec, Mapping):
        return False
    if spec.get("resourceClaims"):
        return True
    if not inv.classes:
        return False
    # cpu, memory and the like have no "/": most pods stop at this scan
    if not any("/" in n and is_dra_extended_name(n) for n in requested_names(spec)):
        return False
    return bool(served_names(spec, inv.classes))


def _terms(intent: PodIntent) -> tuple[NodeSelectorTerm, ...]:
    return tuple(
        NodeSelectorTerm(
            tuple(Requirement(r.key, r.operator, r.values) for r in t.match_expressions),
            tuple(Requirement(r.key, r.operator, r.values) for r in t.match_fields),
        )
        for t in intent.required_terms
    )


def candidate_nodes(intent: PodIntent, nodes: Iterable[NodeTopology]) -> list[NodeTopology]:
    """The nodes the pod's nodeName, nodeSelector and required node affinity allow."""
    terms = _terms(intent)
    out = []
    for n in nodes:
        if intent.node_name and n.name != intent.node_name:
            continue
        if any(n.labels.get(k) != v for k, v in intent.node_selector.items()):
            continue
        if terms and not selector_matches(terms, NodeRef(n.name, n.labels)):
            continue
        out.append(n)
    return out


def node_ref(node: NodeTopology) -> NodeRef:
    return NodeRef(node.name, node.labels, node.allocatable)


def judge_pod(
    pod: Mapping[str, Any], intent: PodIntent, nodes: Sequence[NodeTopology], inv: DraInventory
) -> ClusterVerdict | None:
    """The pod's claims over the nodes it may go to; None when it has no DRA claim on any
    of them. No node allowed at all is left to the NRT checks (they name the selector)."""
    allowed = candidate_nodes(intent, nodes)
    if not allowed:
        return None
    return evaluate_cluster(pod, [node_ref(n) for n in allowed], inv)


@dataclass(frozen=True, slots=True)
class Alignment:
    """The Topology Manager finding: on how many candidate nodes it holds, the first
    node's policy and the full text (core.dra.topology.alignment_finding)."""

    nodes: int
    policy: str
    message: str


def alignment(
    pod: Mapping[str, Any],
    intent: PodIntent,
    verdict: ClusterVerdict,
    nodes: Sequence[NodeTopology],
    inv: DraInventory,
) -> Alignment | None:
    """For a Guaranteed pod with integer CPUs: the nodes where its claims fit (now or once
    devices free up) whose kubelet policy is restricted or single-numa-node."""
    if verdict.verdict == IMPOSSIBLE:
        return None
    guaranteed = intent.qos == "Guaranteed"
    integer_cpus = any(c.exclusive_cpus for c in intent.containers)
    if not (guaranteed and integer_cpus):
        return None
    first: tuple[str, str] | None = None
    count = 0
    for n in nodes:
        v = verdict.nodes.get(n.name)
        if (
            v is None
            or v.verdict not in (FITS, NO_ROOM_NOW)
            or n.tm_policy not in ALIGNING_POLICIES
        ):
            continue
        ref = node_ref(n)
        text = alignment_finding(
            guaranteed=guaranteed,
            integer_cpus=integer_cpus,
            policy=n.tm_policy,
            claims=_node_claims(pod, inv, ref),
            node=ref,
            inv=inv,
        )
        if text is None:
            continue
        count += 1
        first = first or (n.tm_policy, text)
    return None if first is None else Alignment(count, first[0], first[1])


def cpu_driver_findings(
    pod: Mapping[str, Any],
    intent: PodIntent,
    verdict: ClusterVerdict | None,
    nodes: Sequence[NodeTopology],
    inv: DraInventory,
    replicas: int = 1,
) -> list[Finding]:
    """The DRA CPU driver's rules (core.dra.cpu_driver): shared claims and requests that do
    not mirror the claims for the pod, and cpuManagerPolicy static on the candidate nodes
    that publish the driver's slices and where the claims fit now or later. ``replicas``:
    the pods of this template that run at once (core.dra.cpu_driver.concurrent_pods)."""
    hosts = [
        n
        for n in nodes
        if verdict is not None
        and (v := verdict.nodes.get(n.name)) is not None
        and v.verdict in (FITS, NO_ROOM_NOW)
    ]
    cpu, found = pod_findings(
        pod, pod_claims(pod, inv), intent.qos, inv, all_mode_cpus(pod, hosts, inv), replicas
    )
    if not cpu or verdict is None:
        return found
    hosts = [n for n in hosts if any(s.driver == DRIVER for s in inv.by_node.get(n.name, ()))]
    static = static_nodes((n.name, n.cpu_manager_policy) for n in hosts)
    return found if static is None else [*found, static]


def all_mode_cpus(
    pod: Mapping[str, Any], hosts: Sequence[NodeTopology], inv: DraInventory
) -> dict[tuple[str, str], Cpus]:
    """The CPUs each allocationMode All request (claim entry, request) yields, if CPUs, on the
    nodes where the claims fit now or later: every matching device, one CPU each in the
    driver's individual mode (dra_hooks.go prepareResourceClaim); unknown (None) when a
    device is a group of CPUs (capacity dra.cpu/cpu: grouped mode) or a node cannot be
    judged exactly."""
    counts: dict[tuple[str, str], list[Fraction | None]] = {}
    for n in hosts:
        ref = node_ref(n)
        for problem in readable_problem(_node_claims(pod, inv, ref), ref, inv):
            for alts in problem.requests:
                for alt in alts:
                    if alt.mode != ALL or alt.sub:
                        continue
                    grouped = any(CPU_CAPACITY in c.device.device.capacity for c in alt.candidates)
                    counts.setdefault((problem.name, alt.request), []).append(
                        None if grouped else Fraction(alt.count)
                    )
    return {k: one_of(v) for k, v in counts.items()}
