"""Value types shared by every part of the core: what a pod asks for (PodIntent), what a
node offers (NodeTopology), and what numagate concludes (Finding, NodeVerdict, Decision).

Units, everywhere in the core: ``cpu`` in millicores, ``memory`` and ``hugepages-*`` in
bytes, every other resource (devices, extended resources) as a plain count.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeGuard

from core.frozen import fast_init


def is_map(value: Any) -> TypeGuard[Mapping[str, Any]]:
    """``isinstance(value, Mapping)``, fast for the plain dicts JSON and YAML give: the ABC
    check (slow, also for None) runs many times per review and per inventory object."""
    return type(value) is dict or (value is not None and isinstance(value, Mapping))


Severity = Literal["error", "warning", "info"]
Scheduler = Literal["koordinator", "volcano", "hami", "default"]
ContainerKind = Literal["init", "sidecar", "app"]
Verdict = Literal[
    "fits", "no-room-now", "never-fits", "policy-mismatch", "not-selected", "unknown-topology"
]

# Kubelet spellings, the internal vocabulary (docs/contracts.md: Policy semantics, research upstream-schedulers §5).
POLICY_NONE = "none"
POLICY_BEST_EFFORT = "best-effort"
POLICY_RESTRICTED = "restricted"
POLICY_SINGLE_NUMA_NODE = "single-numa-node"
POLICIES: tuple[str, ...] = (
    POLICY_NONE,
    POLICY_BEST_EFFORT,
    POLICY_RESTRICTED,
    POLICY_SINGLE_NUMA_NODE,
)

# Verdicts in the order explain shows them (useful rows first).
VERDICTS: tuple[str, ...] = (
    "fits",
    "no-room-now",
    "never-fits",
    "policy-mismatch",
    "not-selected",
    "unknown-topology",
)


@fast_init
@dataclass(frozen=True, slots=True)
class Finding:
    """One problem found in an object. ``path`` is the field path as lint prints it,
    e.g. ``metadata.annotations[volcano.sh/numa-topology-policy]``."""

    path: str
    severity: Severity
    code: str
    message: str


@fast_init
@dataclass(frozen=True, slots=True)
class ContainerDemand:
    """One container's requests, in core units, in kubelet order (init, then app).

    ``exclusive_cpus`` is the kubelet's guaranteedCPUs: the integer CPU count when the
    pod is Guaranteed and the request is a positive integer, else 0.
    """

    name: str
    kind: ContainerKind
    requests: Mapping[str, int]
    limits: Mapping[str, int]
    exclusive_cpus: int = 0


@fast_init
@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist, Gt, Lt
    values: tuple[str, ...] = ()


@fast_init
@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()


@fast_init
@dataclass(frozen=True, slots=True)
class PodIntent:
    """Everything numagate needs to know about a pod, normalized across dialects."""

    scheduler: Scheduler
    scheduler_name: str
    policy: str | None  # kubelet spelling; None when the pod sets no policy
    exclusive: Literal["required", "preferred"] | None  # Koordinator singleNUMANodeExclusive
    scope: Literal["container", "pod"] | None  # None: the node's scope decides
    qos: Literal["Guaranteed", "Burstable", "BestEffort"]
    containers: tuple[ContainerDemand, ...]
    pod_requests: Mapping[str, int]  # effective pod-level requests (kubelet formula)
    cpu_bind_policy: str | None = None  # Koordinator required/preferred CPU bind policy
    hami_node_policy: str | None = None
    hami_gpu_policy: tuple[str, ...] = ()
    # the pod's hami.io/device-scoring-weights (slot, core, memory); None: not given
    hami_weights: tuple[int, int, int] | None = None
    node_name: str | None = None
    node_selector: Mapping[str, str] = field(default_factory=dict)
    required_terms: tuple[NodeSelectorTerm, ...] = ()  # required node affinity (ORed terms)


@dataclass(frozen=True, slots=True)
class NumaZone:
    """One NUMA node of a node. ``costs`` maps NUMA id -> distance (10 for itself)."""

    id: int
    capacity: Mapping[str, int]
    allocatable: Mapping[str, int]
    available: Mapping[str, int]
    costs: Mapping[int, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NodeTopology:
    """One node as the inventory sees it. ``zones`` empty means no NUMA data."""

    name: str
    labels: Mapping[str, str]
    allocatable: Mapping[str, int]
    capacity: Mapping[str, int]
    zones: tuple[NumaZone, ...] = ()
    annotations: Mapping[str, str] = field(default_factory=dict)  # Node annotations (HAMi GPUs)
    tm_policy: str = POLICY_NONE  # kubelet topology manager policy, kubelet spelling
    tm_scope: Literal["container", "pod"] = "container"
    max_numa_nodes: int = 8
    prefer_closest: bool = False
    cpu_manager_policy: Literal["static", "none"] = "static"
    full_pcpus_only: bool = False
    threads_per_core: int = 1
    memory_manager_policy: Literal["Static", "None"] = "None"
    koord_policy: str | None = (
        None  # label node.koordinator.sh/numa-topology-policy, kubelet spelling
    )
    volcano_policy: str | None = None  # Numatopology spec.policies.TopologyManagerPolicy, verbatim
    volcano_cpu_manager_policy: str | None = None  # Numatopology spec.policies.CPUManagerPolicy
    # Devices reported by the node without NUMA affinity: allocatable minus the zones' sum.
    unaligned_devices: Mapping[str, int] = field(default_factory=dict)
    # Koordinator NUMA node states for singleNUMANodeExclusive: "idle" | "shared" | "single",
    # aligned with ``zones``.
    numa_states: tuple[str, ...] = ()
    # CPUs koord-scheduler holds back per NUMA node, aligned with ``zones`` (empty: none):
    # (kubelet reserved, kubelet-managed pods, node reservation, system QoS); the zones'
    # cpu amounts already exclude them (core/inventory/koord_cpus.py).
    koord_held: tuple[tuple[int, int, int, int], ...] = ()
    sources: tuple[str, ...] = ()  # which objects built it, e.g. ("Node", "NodeResourceTopology")
    # Sum of the bound pods' requests as kube-scheduler's NodeInfo counts them
    # (GetNonZeroRequested: 100m cpu / 200Mi memory for a container that sets none);
    # None when the inventory holds no bound pod for the node.
    bound_requests: Mapping[str, int] | None = None
    # HAMi card usage from bound pods' hami.io/vgpu-devices-allocated:
    # card id -> (slots, memory MiB, cores percent).
    gpu_usage: Mapping[str, tuple[int, int, int]] = field(default_factory=dict)

    def __setstate__(self, state: list[Any]) -> None:
        # Unpickled (a worker's Whole, a Batch's records): the policy strings are shared.
        # As parsed, every record held its own copies: ~10 MiB in a worker at 100,000
        # nodes (docs/inventory.md, "Where a worker's memory goes").
        for name, value in zip(_NODE_FIELDS, state, strict=True):
            if name in _POLICY_FIELDS and value is not None:
                value = sys.intern(value)
            object.__setattr__(self, name, value)


_NODE_FIELDS = tuple(NodeTopology.__dataclass_fields__)
_POLICY_FIELDS = frozenset(
    {
        "tm_policy",
        "tm_scope",
        "cpu_manager_policy",
        "memory_manager_policy",
        "koord_policy",
        "volcano_policy",
        "volcano_cpu_manager_policy",
    }
)


@fast_init
@dataclass(frozen=True, slots=True)
class NodeVerdict:
    name: str
    verdict: Verdict
    numa: tuple[int, ...] = ()  # sorted NUMA ids of the admitted hint (fits / no-room-now)
    preferred: bool = False
    score: int | None = None
    reason: str = ""


Outcome = Literal["fits", "no-room-now", "impossible", "unchecked"]
Unchecked = Literal[
    "",
    "empty-inventory",
    "stale-inventory",
    "no-inventory",
    "deadline",
    "no-numa-data",
    "not-selected",
]


@fast_init
@dataclass(frozen=True, slots=True)
class Decision:
    """The cluster-level answer for one pod (docs/contracts.md: Verdicts), made once by
    core.feasibility.decision and read as is by the webhook and lint: ``outcome`` is what
    was decided, ``unchecked`` why nothing was (empty or stale inventory, the deadline,
    no NUMA data, nothing selected), ``message`` the denial (impossible only),
    ``warnings`` what to tell the user, ``counts`` the nodes per verdict."""

    outcome: Outcome
    message: str = ""
    warnings: tuple[str, ...] = ()
    counts: Mapping[str, int] = field(default_factory=dict)
    unchecked: Unchecked = ""

    @property
    def allowed(self) -> bool:
        """Only an impossible pod is denied: never on missing data or a busy cluster."""
        return self.outcome != "impossible"
