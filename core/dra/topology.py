"""DRA and the kubelet's Topology Manager. The Topology Manager aligns what its hint
providers (CPU, memory and device managers) report; DRA devices report no hints, so a
``restricted`` or ``single-numa-node`` policy puts a Guaranteed pod's exclusive CPUs on one
NUMA node and its DRA devices wherever the allocator chose them. Only the allocator can align
them: one claim holding the device requests and the CPUs (from a DRA CPU driver) with a
``matchAttribute`` constraint over a topology attribute every one of those devices carries
(KEP-4381; k8s.io/api/resource/v1 DeviceConstraint.MatchAttribute). At v0.36.3 the standard
topology attributes are ``resource.kubernetes.io/pcieRoot`` and ``pciBusID``
(k8s.io/dynamic-resource-allocation/deviceattribute); a NUMA node attribute is a driver's
own (e.g. ``dra.example.com/numaNode``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from core.dra.allocate import Key
from core.dra.evaluate import DraInventory, PodClaim, readable_problem
from core.dra.objects import AttributeValue
from core.dra.pools import NodeRef

ALIGNING_POLICIES: Final = frozenset({"restricted", "single-numa-node"})
PCIE_ROOT: Final = "resource.kubernetes.io/pcieRoot"


def is_topology_attribute(name: str) -> bool:
    """The PCIe root, or a driver's NUMA node / socket attribute (by its id)."""
    ident = name.rpartition("/")[2].lower()
    return ident == "pcieroot" or "numa" in ident or "socket" in ident


@dataclass(frozen=True, slots=True)
class Placement:
    device: Key
    topology: Mapping[str, AttributeValue]  # the device's topology attributes
    sure: bool  # False: the device may not match (a selector not evaluated exactly)
    free: bool = True  # not allocated to a claim now


@dataclass(frozen=True, slots=True)
class RequestPlacements:
    """Which devices of one node could serve one request (or subrequest), with their NUMA
    node / PCIe root: what ``explain`` shows per node and request."""

    request: str  # claim/request[/subrequest]
    count: int  # devices needed (All: every match)
    devices: tuple[Placement, ...]

    def groups(self, *, free_only: bool = False) -> dict[str, int]:
        """``attribute=value`` -> matching devices there (devices without one: ``-``)."""
        out: dict[str, int] = {}
        for p in self.devices:
            if free_only and not p.free:
                continue
            labels = [f"{k}={v}" for k, v in sorted(p.topology.items())] or ["-"]
            for label in labels:
                out[label] = out.get(label, 0) + 1
        return out


def placements(
    claims: Sequence[PodClaim], node: NodeRef, inv: DraInventory
) -> tuple[RequestPlacements, ...]:
    """Per request of the claims still to allocate, the node's devices that could serve
    it (empty when the claims cannot be read on this node)."""
    out = []
    for claim in readable_problem(claims, node, inv):
        for alts in claim.requests:
            for alt in alts:
                out.append(
                    RequestPlacements(
                        f"{claim.name}/{alt.label}",
                        alt.count,
                        tuple(
                            Placement(
                                c.device.key,
                                {
                                    k if "/" in k else f"{c.device.driver}/{k}": v
                                    for k, v in c.device.device.attributes.items()
                                    if is_topology_attribute(k)
                                },
                                c.sure,
                                not inv.is_used(c.device.key),
                            )
                            for c in alt.candidates
                        ),
                    )
                )
    return tuple(out)


def alignment_finding(
    *,
    guaranteed: bool,
    integer_cpus: bool,
    policy: str,
    claims: Sequence[PodClaim],
    node: NodeRef,
    inv: DraInventory,
) -> str | None:
    """The finding for a Guaranteed pod with integer CPUs and DRA devices on a node whose
    kubelet policy aligns resources: the kubelet will not align those devices, and what would."""
    if not (guaranteed and integer_cpus and policy in ALIGNING_POLICIES):
        return None
    found = placements(claims, node, inv)
    if not found:
        return None
    names = sorted({r.request for r in found})
    seen = sorted({k for r in found for p in r.devices for k in p.topology})
    attributes = ", ".join(repr(a) for a in seen) if seen else repr(PCIE_ROOT)
    return (
        f"the kubelet's Topology Manager (policy {policy}) aligns the pod's exclusive CPUs but "
        f"gets no NUMA hint for DRA devices: {', '.join(names)} will not be aligned with them. "
        f"What aligns them: take the CPUs from a DRA CPU driver in the same claim as the "
        f"devices and add a constraint matchAttribute over a topology attribute all of them "
        f"carry (on this node: {attributes}); a device without that attribute is never chosen"
    )
