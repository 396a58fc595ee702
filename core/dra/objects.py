"""The DRA objects of resource.k8s.io/v1 (k8s.io/api/resource/v1/types.go at v0.36.3) read
as the core keeps them (``read`` builds them from plain objects). Only what allocation
needs is kept."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final

from core.errors import InvalidInput

EXACT_COUNT: Final = "ExactCount"
ALL: Final = "All"
# DeviceTaintEffect values that stop allocation (allocator_stable.go taintPreventsAllocation)
BLOCKING_EFFECTS: Final = frozenset({"NoSchedule", "NoExecute"})


class DraError(InvalidInput):
    """A DRA object the core cannot read (the message names kind/name, field and value)."""


@dataclass(frozen=True, slots=True)
class Version:
    """A ``version`` attribute (semver 2.0, compared as such by CEL and by matchAttribute)."""

    text: str


# int, bool, str, Version; a list attribute (DRAListTypeAttributes, alpha) is a tuple
AttributeValue = int | bool | str | Version | tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    expressions: tuple[Requirement, ...]
    fields: tuple[Requirement, ...]


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str  # Equal (default) or Exists
    value: str
    effect: str  # "" tolerates every effect


@dataclass(frozen=True, slots=True)
class Device:
    name: str
    attributes: Mapping[str, AttributeValue]
    capacity: Mapping[str, Fraction]
    taints: tuple[Taint, ...] = ()
    node_name: str = ""
    all_nodes: bool = False
    node_selector: tuple[NodeSelectorTerm, ...] | None = None
    consumes_counters: bool = False
    binding_conditions: bool = False
    multiple_allocations: bool = False


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int
    node_name: str
    all_nodes: bool
    node_selector: tuple[NodeSelectorTerm, ...] | None
    per_device_node_selection: bool
    shared_counters: bool
    devices: tuple[Device, ...]


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...]
    extended_resource_name: str | None = None
    created: str = ""  # metadata.creationTimestamp (RFC 3339: compares as text)


@dataclass(frozen=True, slots=True)
class Request:
    """A request (``exactly``) or one of its ``firstAvailable`` subrequests."""

    name: str
    class_name: str
    selectors: tuple[str, ...] = ()
    mode: str = EXACT_COUNT
    count: int = 1
    admin_access: bool = False
    tolerations: tuple[Toleration, ...] = ()
    capacity: bool = False  # consumable capacity requests (DRAConsumableCapacity)
    # those requests' amounts (capacity name, quantity), e.g. (("dra.cpu/cpu", 10),)
    capacity_requests: tuple[tuple[str, Fraction], ...] = ()


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    name: str
    exactly: Request | None
    first_available: tuple[Request, ...] = ()

    @property
    def alternatives(self) -> tuple[Request, ...]:
        return (self.exactly,) if self.exactly is not None else self.first_available


@dataclass(frozen=True, slots=True)
class Constraint:
    requests: tuple[str, ...]
    match_attribute: str | None
    distinct_attribute: str | None = None


@dataclass(frozen=True, slots=True)
class ClaimSpec:
    requests: tuple[ClaimRequest, ...]
    constraints: tuple[Constraint, ...] = ()


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool = False


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    namespace: str
    name: str
    spec: ClaimSpec
    allocation: tuple[AllocatedDevice, ...] | None = None
    allocation_nodes: tuple[NodeSelectorTerm, ...] | None = None
    reserved_for: tuple[str, ...] = ()  # status.reservedFor: the names of the pods using it


@dataclass(frozen=True, slots=True)
class ResourceClaimTemplate:
    namespace: str
    name: str
    spec: ClaimSpec
