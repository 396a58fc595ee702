"""The feasibility kernel's vocabulary, defined once: policy, resource-kind, flag, shape-field,
unit-kind, hint-list and reason codes, and :class:`KernelResult`, what ``Kernel.check``
returns. The reference kernel (``_kernel_py.py``) and the verdict code (``verdicts.py``)
import them from here; the compiled kernel reads the same values from ``codes.pxd``, and
tests/core/feasibility/test_codes.py proves the two agree.
"""

from __future__ import annotations

from array import array
from typing import Final, NamedTuple

KERNEL_VERSION: Final = 2

# Policy codes (kubelet spellings in core.model; core.snapshot.snapshot.POLICY_CODES).
P_NONE: Final = 0
P_BEST_EFFORT: Final = 1
P_RESTRICTED: Final = 2
P_SINGLE: Final = 3

# Resource kinds (snapshot res_kind).
RES_CPU: Final = 0
RES_MEMORY: Final = 1  # memory and hugepages-*: memory manager
RES_DEVICE: Final = 2  # device-plugin and extended resources: device manager
RES_IGNORED: Final = 3  # ephemeral-storage, pods: no NUMA provider

# Call flags.
F_EMPTY: Final = 1  # evaluate the node as if empty (available := allocatable, idle NUMA)
F_POD_SCOPE: Final = 2  # topology manager scope pod
F_EXCLUSIVE: Final = 4  # Koordinator singleNUMANodeExclusive=Required
F_CPU_ONLY: Final = 8  # Volcano numa-aware: the CPU provider only
# koord-scheduler decides the alignment (the node's kubelet does not gate admission):
# hints sized from the NUMA combinations that fit now, Restricted CPU/memory hints all
# preferred (nodenumaresource resource_manager.go generateResourceHints, deviceshare
# topology_hint.go generateTopologyHints), no kubelet max-allowable-numa-nodes limit.
F_KOORD_HINTS: Final = 16
# koord-scheduler's FilterByNUMANode for a pod that binds no CPUs (under Restricted or
# SingleNUMANode): the pod-level requests, CPU in millicores rounded up to CPUs, memory and
# hugepages whatever the kubelet's memory manager, must fit the NUMA nodes it aligns
# (resource_manager.go GetTopologyHints, generateResourceHints).
F_KOORD_REQUESTS: Final = 32

# Shape fields (stride SHAPE_FIELDS in Packed.shape_info). A shape's zone offset is in
# Packed.zone_off: it is the one field that usage churn rewrites.
SF_N: Final = 0
# Where the shape's topology block starts in Packed.topology. A block (n zones, n_res
# resources) holds what only the topology fixes, shared by every shape of a topology
# class: node allocatable (n_res; -1 unknown), unaligned devices (n_res), then per
# (zone, resource) capacity and allocatable (n * n_res * 2), then the distances (n * n).
SF_TOPO_OFF: Final = 1
SF_MAX_NUMA: Final = 2
SF_PREFER_CLOSEST: Final = 3
SF_CPU_STATIC: Final = 4
SF_FULL_PCPUS: Final = 5
SF_THREADS: Final = 6
SF_MEM_STATIC: Final = 7
SHAPE_FIELDS: Final = 8


def topology_size(n: int, n_res: int) -> int:
    """The length of a topology block of n zones and n_res resources (SF_TOPO_OFF)."""
    return 2 * n_res + 2 * n * n_res + n * n


# Unit kinds (containers in kubelet order; the pod-level unit is an app).
U_INIT: Final = 0
U_SIDECAR: Final = 1
U_APP: Final = 2

# Hint list kinds after filterProvidersHints (topologymanager policy.go).
L_DONTCARE: Final = 0  # [{nil, true}]: nil list or empty map
L_IMPOSSIBLE: Final = 1  # [{nil, false}]: empty, non-nil list
L_HINTS: Final = 2

# Reason codes (KernelResult.reason); core/feasibility/verdicts.py renders them.
R_OK: Final = 0
R_TOO_MANY_NUMA: Final = 1  # need = NUMA count, limit = max-allowable-numa-nodes
R_NODE_SHORT: Final = 2  # resource; need, limit = node allocatable
R_NOT_PREFERRED: Final = 3  # resource (-1: resources disagree); need = width needed
R_SINGLE_NO_HINT: Final = 4  # resource; need = width needed
R_CPU_SHORT: Final = 5  # need, limit = free exclusive CPUs
R_SMT: Final = 6  # need, limit = threads per core
R_DEVICE_SHORT: Final = 7  # resource; need, limit = free
R_MEMORY_SHORT: Final = 8  # resource; need, limit = free (memory manager Allocate)
R_EXCLUSIVE: Final = 9  # Koordinator exclusivity removed every candidate
R_TOO_LARGE: Final = 10  # more NUMA nodes than the kernel enumerates: need = count

# Enumerating 2^n masks per list is what the kubelet does; beyond this many NUMA nodes the
# node is left to the kubelet (the verdicts report it, never deny on it).
MAX_ENUM_NUMA: Final = 12
UNLIMITED: Final = 2**62


class KernelResult(NamedTuple):
    """One ``Kernel.check`` answer. ``mask`` is over NUMA positions (0 when the admitted
    hint is nil); ``unit`` is the container (or the pod-level unit) and ``resource`` the
    resource index a failure is about (-1: none); ``need`` and ``limit`` are the figures
    the reason code names (see the R_* comments)."""

    admitted: int
    mask: int
    preferred: int
    reason: int
    unit: int
    resource: int
    need: int
    limit: int


def ok(mask: int, preferred: int, unit: int = -1) -> KernelResult:
    """An admission."""
    return KernelResult(1, mask, preferred, R_OK, unit, -1, 0, 0)


def fail(reason: int, unit: int, resource: int, need: int = 0, limit: int = 0) -> KernelResult:
    """A rejection with its reason code and figures."""
    return KernelResult(0, 0, 0, reason, unit, resource, need, limit)


class ScanResult(NamedTuple):
    """One ``Kernel.scan`` answer: the topology classes from ``start`` up to ``stop`` (the
    number of classes when it went through all of them) were never-fits on the "node
    empty" run or had no selected node. ``not_selected`` and ``never_fits`` count their
    nodes, ``usage`` lists the never-fits classes in order, ``near`` is the one of them
    whose first selected node comes first (-1: none) with its run's result
    ``near_result``; ``stop_result`` is the "node empty" run of class ``stop`` when the
    scan made it (it fits, is too large, or the class is not monotone), else None."""

    stop: int
    not_selected: int
    never_fits: int
    near: int
    near_result: KernelResult | None
    stop_result: KernelResult | None
    usage: array[int]
