"""Which nodes a pod's scheduler considers compatible, and how each node is simulated
(docs/contracts.md: Policy semantics; research upstream-schedulers.md 1.2, 2.3, 5)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from core.model import (
    POLICIES,
    POLICY_BEST_EFFORT,
    POLICY_NONE,
    POLICY_RESTRICTED,
    POLICY_SINGLE_NUMA_NODE,
    NodeSelectorRequirement,
    NodeTopology,
    PodIntent,
)

KOORDINATOR_SPELLING = {
    POLICY_BEST_EFFORT: "BestEffort",
    POLICY_RESTRICTED: "Restricted",
    POLICY_SINGLE_NUMA_NODE: "SingleNUMANode",
}
_NON_NONE = (POLICY_BEST_EFFORT, POLICY_RESTRICTED, POLICY_SINGLE_NUMA_NODE)


@dataclass(frozen=True, slots=True)
class Simulation:
    """How to run the kernel for a compatible node: the topology manager policy to
    simulate, the scope, Koordinator exclusivity, Volcano's CPU-only provider, or ``skip``
    (a reason the scheduler admits the pod without any NUMA check), or Koordinator's own
    hint rules (``koord_hints``) where the node's kubelet does not gate admission."""

    policy: str
    scope: Literal["container", "pod"]
    exclusive: bool = False
    cpu_only: bool = False
    skip: str = ""
    koord_hints: bool = False  # koord-scheduler, not the kubelet, decides the alignment
    # koord-scheduler aligns the requests of a pod that binds no CPUs (Burstable, fractional
    # CPU) under Restricted / SingleNUMANode too, whatever the kubelet does
    koord_requests: bool = False


def _pod_policy(intent: PodIntent) -> str | None:
    return None if intent.policy in (None, POLICY_NONE) else intent.policy


def koordinator_node_policy(node: NodeTopology) -> str:
    """Node label node.koordinator.sh/numa-topology-policy, else the NRT policy (util.go
    getNUMATopologyPolicy)."""
    return node.koord_policy if node.koord_policy is not None else node.tm_policy


def volcano_node_policy(node: NodeTopology) -> str:
    """Numatopology spec.policies.TopologyManagerPolicy (verbatim), else the NRT's."""
    return node.volcano_policy if node.volcano_policy is not None else node.tm_policy


def _volcano_cpu_policy(node: NodeTopology) -> str:
    if node.volcano_cpu_manager_policy is not None:
        return node.volcano_cpu_manager_policy
    return node.cpu_manager_policy


def _volcano_skips(intent: PodIntent) -> bool:
    """Volcano's numaaware predicateFn returns before anything else for a pod that is not
    Guaranteed (volcano-sh/volcano pkg/scheduler/plugins/numaaware/numaaware.go): its
    policy annotation is never compared with the node's."""
    return intent.scheduler == "volcano" and intent.qos != "Guaranteed"


def compat_key(intent: PodIntent) -> tuple[str, str | None, bool]:
    """The intent fields :func:`compatible` and :func:`affinity_requirement` read: a memo
    key for callers that cache the compatible nodes."""
    return intent.scheduler, intent.policy, _volcano_skips(intent)


def plan_key(intent: PodIntent) -> tuple[object, ...]:
    """Every intent field :func:`compatible` and :func:`simulation` read: intents with
    equal keys get the same answers on any node."""
    return intent.scheduler, intent.policy, intent.qos, intent.scope, intent.exclusive


def node_key(node: NodeTopology) -> tuple[object, ...]:
    """Every node field :func:`compatible` and :func:`simulation` read (and whether the
    node has NUMA data): nodes with equal keys get the same answers for any pod."""
    return (
        bool(node.zones),
        node.tm_policy,
        node.tm_scope,
        node.cpu_manager_policy,
        node.koord_policy,
        node.volcano_policy,
        node.volcano_cpu_manager_policy,
    )


def compatible(intent: PodIntent, node: NodeTopology) -> tuple[bool, str]:
    """Per-scheduler policy compatibility; the str says why not."""
    pod = None if _volcano_skips(intent) else _pod_policy(intent)
    if intent.scheduler == "koordinator" and pod is not None:
        # mergeTopologyPolicy: pod X fits node X or a node without policy
        node_policy = koordinator_node_policy(node)
        if node_policy not in (pod, POLICY_NONE, ""):
            return False, f"Koordinator: pod policy {pod} does not match node policy {node_policy}"
    if intent.scheduler == "volcano" and pod is not None:
        # numa-aware: the pod's string must equal the node's exactly; CPU manager static
        node_policy = volcano_node_policy(node)
        if node_policy != pod:
            return False, f"Volcano: pod policy {pod} is different from node policy {node_policy}"
        cpu = _volcano_cpu_policy(node)
        if cpu != "static":
            return False, f"Volcano: CPU manager policy is {cpu}, not static"
    return True, ""


def _scope(intent: PodIntent, node: NodeTopology) -> Literal["container", "pod"]:
    return intent.scope if intent.scope is not None else node.tm_scope


def simulation(intent: PodIntent, node: NodeTopology) -> Simulation:
    """The kernel run that decides a compatible node."""
    pod = _pod_policy(intent)
    scope = _scope(intent, node)
    if intent.scheduler == "koordinator":
        effective = pod if pod is not None else koordinator_node_policy(node)
        if effective not in POLICIES:
            effective = POLICY_NONE
        # singleNUMANodeExclusive defaults to Required when the pod sets a policy
        # (plugin.go); only the exact Required is enforced (checkExclusivePolicy)
        exclusive = intent.exclusive == "required" or (intent.exclusive is None and pod is not None)
        # A kubelet with policy none or best-effort admits whatever koord-scheduler chose:
        # koord-scheduler's own hint rules decide there.
        koord = node.tm_policy not in (POLICY_RESTRICTED, POLICY_SINGLE_NUMA_NODE)
        return Simulation(
            effective, scope, exclusive=exclusive, koord_hints=koord, koord_requests=True
        )
    if intent.scheduler == "volcano":
        if intent.qos != "Guaranteed":
            return Simulation(POLICY_NONE, scope, skip="Volcano checks only Guaranteed pods")
        if pod is not None:
            return Simulation(pod, scope, cpu_only=True)
        node_policy = volcano_node_policy(node)
        if _volcano_cpu_policy(node) == "static" and node_policy in _NON_NONE:
            return Simulation(node_policy, scope, cpu_only=True)
        return Simulation(POLICY_NONE, scope, skip="Volcano: no policy to check on this node")
    # kubelet only (default scheduler) and HAMi: the node's kubelet decides
    policy = node.tm_policy if node.tm_policy in POLICIES else POLICY_NONE
    return Simulation(policy, scope)


def affinity_requirement(
    intent: PodIntent, *, label_key: str, spelling: Literal["koordinator", "kubelet"]
) -> NodeSelectorRequirement | None:
    """The expression that selects exactly the compatible nodes by ``label_key``, or None
    when every node is compatible."""
    pod = None if _volcano_skips(intent) else _pod_policy(intent)
    if pod is None:
        return None
    if intent.scheduler == "koordinator":
        # pod X: node X or no policy; NotIn also matches nodes without the label
        others = [p for p in _NON_NONE if p != pod]
        values = tuple(KOORDINATOR_SPELLING[p] if spelling == "koordinator" else p for p in others)
        return NodeSelectorRequirement(key=label_key, operator="NotIn", values=values)
    if intent.scheduler == "volcano":
        value = KOORDINATOR_SPELLING[pod] if spelling == "koordinator" else pod
        return NodeSelectorRequirement(key=label_key, operator="In", values=(value,))
    return None
