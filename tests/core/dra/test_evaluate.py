"""The allocator's rules, case by case, translated from upstream's table
k8s.io/dynamic-resource-allocation/structured/internal/allocatortesting/allocator_testing.go
(v0.36.3, TestAllocator; the case name is in each test's docstring). Upstream's
"expectResults: nil" is our never-fits (nothing in use) or no-room-now (devices in use)."""

from __future__ import annotations

from typing import Any

from core.dra.evaluate import NodeVerdict, evaluate_node, pod_claims
from core.dra.inventory import read_inventory
from core.dra.pools import NodeRef
from core.dra.verdict import FITS, NEVER_FITS, NO_ROOM_NOW, UNCHECKED
from tests.core.dra.objects import (
    DRIVER_A,
    DRIVER_B,
    allocated,
    claim,
    device,
    device_class,
    request,
    resource_slice,
    template,
)
from tests.core.dra.objects import pod as make_pod

NODE = NodeRef("node-1", {"region": "r1"})


def judge(
    *objects: dict[str, Any], claims: tuple[str, ...] = ("c0",), node: NodeRef = NODE
) -> NodeVerdict:
    inv = read_inventory(objects)
    assert not inv.errors
    pod = make_pod(*((f"r{i}", "claim", c) for i, c in enumerate(claims)))
    return evaluate_node(pod_claims(pod, inv), node, inv)


CLASSES = (device_class("class-a", DRIVER_A), device_class("class-b", DRIVER_B))


def test_simple() -> None:
    """simple: one device of the class on the node."""
    v = judge(
        *CLASSES,
        claim("c0", request("req-0", "class-a")),
        resource_slice("s1", "node-1", "pool-1", DRIVER_A, device("dev-1")),
    )
    assert v.verdict == FITS and v.allocation == (("r0/req-0", (DRIVER_A, "pool-1", "dev-1")),)


def test_other_node() -> None:
    """other-node: the only device is on another node."""
    v = judge(
        *CLASSES,
        claim("c0", request("req-0", "class-a")),
        resource_slice("s1", "node-2", "pool-1", DRIVER_A, device("dev-1")),
    )
    assert v.verdict == NEVER_FITS
    assert (
        "request r0/req-0" in v.message
        and "needs 1 matching device(s), the node has 0" in v.message
    )


def test_small_and_large_backtrack_requests() -> None:
    """small-and-large-backtrack-requests: the large device first taken by the small
    request must be given back."""
    c = claim(
        "c0",
        request(
            "small",
            "class-a",
            1,
            f'device.capacity["{DRIVER_A}"].memory.compareTo(quantity("1Gi")) >= 0',
        ),
        request(
            "large",
            "class-a",
            1,
            f'device.capacity["{DRIVER_A}"].memory.compareTo(quantity("2Gi")) >= 0',
        ),
    )
    s = resource_slice(
        "s1",
        "node-1",
        "pool-1",
        DRIVER_A,
        device("dev-2", {"memory": "2Gi"}),
        device("dev-1", {"memory": "1Gi"}),
    )
    v = judge(*CLASSES, c, s)
    assert v.verdict == FITS
    assert dict(v.allocation) == {
        "r0/small": (DRIVER_A, "pool-1", "dev-1"),
        "r0/large": (DRIVER_A, "pool-1", "dev-2"),
    }


def test_obsolete_slice() -> None:
    """obsolete-slice: the newer generation has one of its two slices: incomplete pool."""
    v = judge(
        *CLASSES,
        claim("c0", request("req-0", "class-a")),
        resource_slice("s1", "node-1", "pool-1", DRIVER_A, device("dev-1"), count=2),
        resource_slice("s1b", "node-1", "pool-1", DRIVER_A, device("dev-2"), count=2, generation=2),
    )
    assert v.verdict == NEVER_FITS


def test_devices_split_across_slices() -> None:
    """devices-split-across-different-slices: a pool of two slices, two devices wanted."""
    v = judge(
        *CLASSES,
        claim("c0", request("req-0", "class-a", 2)),
        resource_slice("s1", "node-1", "pool-1", DRIVER_A, device("dev-1"), count=2),
        resource_slice("s2", "node-1", "pool-1", DRIVER_A, device("dev-2"), count=2),
    )
    assert v.verdict == FITS and len(v.allocation) == 2


def test_duplicate_device_names_make_the_pool_invalid() -> None:
    """duplicate-slice: two slices of one pool list the same device: the pool is invalid."""
    v = judge(
        *CLASSES,
        claim("c0", request("req-0", "class-a")),
        resource_slice("s1", "node-1", "pool-1", DRIVER_A, device("dev-1"), count=2),
        resource_slice("s2", "node-1", "pool-1", DRIVER_A, device("dev-1"), count=2),
    )
    assert v.verdict == NEVER_FITS


def test_not_enough_suitable_devices() -> None:
    """not-enough-suitable-devices: two wanted, one there."""
    v = judge(
        *CLASSES,
        claim("c0", request("req-0", "class-a", 2)),
        resource_slice("s1", "node-1", "pool-1", DRIVER_A, device("dev-1")),
    )
    assert v.verdict == NEVER_FITS and "needs 2 matching device(s), the node has 1" in v.message


def test_unknown_class_is_unchecked() -> None:
    """unknown-class: upstream fails while the class is missing; it may be created later,
    so this is never a denial."""
    v = judge(
        claim("c0", request("req-0", "class-a")),
        resource_slice("s1", "node-1", "pool-1", DRIVER_A, device("dev-1")),
    )
    assert v.verdict == UNCHECKED and "class-a" in v.message


def test_all_devices_plus_another() -> None:
    """all-devices-plus-another: All of driver A, then one of driver B."""
    c0 = claim("c0", request("req-0", "class-a", allocationMode="All"))
    c1 = claim("c1", request("req-0", "class-b"))
    v = judge(
        *CLASSES,
        c0,
        c1,
        resource_slice("s1", "node-1", "pool-1", DRIVER_A, device("dev-1")),
        resource_slice("s1b", "node-1", "pool-1", DRIVER_B, device("dev-1")),
        claims=("c0", "c1"),
    )
    assert v.verdict == FITS and len(v.allocation) == 2


def test_all_devices_some_allocated() -> None:
    """all-devices-some-allocated: one of the devices is allocated: no room now."""
    other = allocated(claim("other", request("x", "class-a")), ("x", DRIVER_A, "pool-1", "dev-1"))
    v = judge(
        *CLASSES,
        claim("c0", request("req-0", "class-a", allocationMode="All")),
        other,
        resource_slice("s1", "node-1", "pool-1", DRIVER_A, device("dev-1"), device("dev-2")),
    )
    assert v.verdict == NO_ROOM_NOW


def test_all_devices_no_slices() -> None:
    """all-devices-no-slices: All needs at least one device."""
    v = judge(*CLASSES, claim("c0", request("req-0", "class-a", allocationMode="All")))
    assert v.verdict == NEVER_FITS


def test_all_devices_of_the_incomplete_pool_is_unchecked() -> None:
    """all-devices-of-the-incomplete-pool: upstream fails while the pool is being updated."""
    v = judge(
        *CLASSES,
        claim("c0", request("req-0", "class-a", allocationMode="All")),
        resource_slice("s1", "node-1", "pool-1", DRIVER_A, device("dev-1"), count=2),
    )
    assert v.verdict == UNCHECKED


def test_count_devices_some_allocated_admin_access() -> None:
    """count-devices-some-allocated-admin-access: admin access may use allocated devices."""
    other = allocated(claim("other", request("x", "class-a")), ("x", DRIVER_A, "pool-1", "dev-1"))
    s = resource_slice("s1", "node-1", "pool-1", DRIVER_A, device("dev-1"))
    assert (
        judge(*CLASSES, claim("c0", request("req-0", "class-a")), other, s).verdict == NO_ROOM_NOW
    )
    admin = claim("c0", request("req-0", "class-a", adminAccess=True))
    assert judge(*CLASSES, admin, other, s).verdict == FITS


def test_already_allocated_devices() -> None:
    """already-allocated-devices: the only device is allocated to another claim."""
    other = allocated(claim("other", request("x", "class-a")), ("x", DRIVER_A, "pool-1", "dev-1"))
    v = judge(
        *CLASSES,
        claim("c0", request("req-0", "class-a")),
        other,
        resource_slice("s1", "node-1", "pool-1", DRIVER_A, device("dev-1")),
    )
    assert v.verdict == NO_ROOM_NOW


def test_network_attached_device() -> None:
    """network-attached-device / unsuccessful-allocation-network-attached-device: a slice
    reaches nodes by nodeSelector."""
    selector = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "region", "operator": "In", "values": ["r1"]}]}
        ]
    }
    s = resource_slice("s1", None, "pool-1", DRIVER_A, device("dev-1"), nodeSelector=selector)
    c = claim("c0", request("req-0", "class-a"))
    assert judge(*CLASSES, c, s).verdict == FITS
    assert judge(*CLASSES, c, s, node=NodeRef("node-2", {"region": "r2"})).verdict == NEVER_FITS
    everywhere = resource_slice("s1", None, "pool-1", DRIVER_A, device("dev-1"), allNodes=True)
    assert judge(*CLASSES, c, everywhere, node=NodeRef("node-9", {})).verdict == FITS


def test_with_constraint_non_existent_attribute() -> None:
    """with-constraint-non-existent-attribute: a device without the attribute is never chosen."""
    c = claim(
        "c0", request("req-0", "class-a"), constraints=[{"matchAttribute": "driver-a/no-such"}]
    )
    v = judge(*CLASSES, c, resource_slice("s1", "node-1", "pool-1", DRIVER_A, device("dev-1")))
    assert v.verdict == NEVER_FITS
    assert (
        "matchAttribute 'driver-a/no-such'" in v.message
        and "1 of 1 matching devices lack it" in v.message
    )


def test_with_constraint_not_matching_int_attribute() -> None:
    """with-constraint-not-matching-int-attribute: two devices on different NUMA nodes."""
    c = claim(
        "c0", request("req-0", "class-a", 2), constraints=[{"matchAttribute": "driver-a/numa"}]
    )
    s = resource_slice(
        "s1", "node-1", "pool-1", DRIVER_A, device("dev-1", numa=1), device("dev-2", numa=2)
    )
    v = judge(*CLASSES, c, s)
    assert (
        v.verdict == NEVER_FITS
        and "constraint matchAttribute 'driver-a/numa' of claim r0" in v.message
    )
    s = resource_slice(
        "s1", "node-1", "pool-1", DRIVER_A, device("dev-1", numa=1), device("dev-2", numa=1)
    )
    assert judge(*CLASSES, c, s).verdict == FITS


def test_constraint_types_must_agree() -> None:
    """with-constraint-not-matching-string/bool/version-attribute: one value of one type."""
    c = claim("c0", request("req-0", "class-a", 2), constraints=[{"matchAttribute": "driver-a/x"}])
    for a, b, ok in (
        ("s", "s", True),
        ("s", "t", False),
        (True, False, False),
        ("v:1.0.0", "v:1.0.0", True),
        ("v:1.0.0", "v:2.0.0", False),
        (1, True, False),
    ):
        s = resource_slice(
            "s1", "node-1", "pool-1", DRIVER_A, device("dev-1", x=a), device("dev-2", x=b)
        )
        assert (judge(*CLASSES, c, s).verdict == FITS) is ok, (a, b)


def test_with_constraint_for_request_retry() -> None:
    """with-constraint-for-request-retry: the first device breaks the second constraint."""
    c = claim(
        "c0",
        request("req-0", "class-a"),
        request("req-1", "class-a"),
        constraints=[
            {"requests": ["req-0"], "matchAttribute": "driver-a/driverVersion"},
            {"matchAttribute": "driver-a/stringAttribute"},
        ],
    )
    s = resource_slice(
        "s1",
        "node-1",
        "pool-1",
        DRIVER_A,
        device("dev-1", driverVersion="v:1.0.0", stringAttribute="a"),
        device("dev-2", driverVersion="v:2.0.0", stringAttribute="b"),
        device("dev-3", driverVersion="v:3.0.0", stringAttribute="b"),
    )
    v = judge(*CLASSES, c, s)
    assert v.verdict == FITS
    assert dict(v.allocation) == {
        "r0/req-0": (DRIVER_A, "pool-1", "dev-2"),
        "r0/req-1": (DRIVER_A, "pool-1", "dev-3"),
    }


def test_prioritized_list_first_unavailable() -> None:
    """prioritized-list-first-unavailable: the first subrequest cannot be met, the second can."""
    req = {
        "name": "req-0",
        "firstAvailable": [
            {"name": "sub-0", "deviceClassName": "class-b", "count": 1},
            {"name": "sub-1", "deviceClassName": "class-a", "count": 1},
        ],
    }
    c = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c0", "namespace": "default"},
        "spec": {"devices": {"requests": [req]}},
    }
    v = judge(*CLASSES, c, resource_slice("s1", "node-1", "pool-1", DRIVER_A, device("dev-1")))
    assert v.verdict == FITS and v.allocation == (
        ("r0/req-0/sub-1", (DRIVER_A, "pool-1", "dev-1")),
    )


def test_tainted_devices() -> None:
    """tainted-two-devices / tainted-two-devices-tolerated / tainted-no-effect."""
    taint = {"key": "example.com/taint", "value": "x", "effect": "NoSchedule"}
    tainted = {**device("dev-1"), "taints": [taint]}
    s = resource_slice("s1", "node-1", "pool-1", DRIVER_A, tainted)
    assert judge(*CLASSES, claim("c0", request("req-0", "class-a")), s).verdict == NEVER_FITS
    tolerating = request(
        "req-0", "class-a", tolerations=[{"key": "example.com/taint", "operator": "Exists"}]
    )
    assert judge(*CLASSES, claim("c0", tolerating), s).verdict == FITS
    no_effect = resource_slice(
        "s1",
        "node-1",
        "pool-1",
        DRIVER_A,
        {**device("dev-1"), "taints": [{**taint, "effect": "None"}]},
    )
    assert judge(*CLASSES, claim("c0", request("req-0", "class-a")), no_effect).verdict == FITS


def test_too_many_devices_total() -> None:
    """too-many-devices-total: one claim gets 32 devices at most."""
    c = claim("c0", request("a", "class-a", 20), request("b", "class-a", 20))
    v = judge(
        *CLASSES,
        c,
        resource_slice("s1", "node-1", "pool-1", DRIVER_A, *(device(f"d{i}") for i in range(40))),
    )
    assert v.verdict == NEVER_FITS and "32 at most" in v.message


def test_a_selector_we_cannot_evaluate_is_never_a_denial() -> None:
    """A selector outside the exact subset (here a regex) leaves the node unchecked."""
    c = claim(
        "c0", request("req-0", "class-a", 1, 'device.attributes["driver-a"].model.matches("^a1")')
    )
    v = judge(
        *CLASSES,
        c,
        resource_slice("s1", "node-1", "pool-1", DRIVER_A, device("dev-1", model="a100")),
    )
    assert v.verdict == UNCHECKED


def test_template_and_generated_claim() -> None:
    """A template's spec is judged before its claim exists (pod creation)."""
    inv = read_inventory(
        [
            *CLASSES,
            template("t", request("g", "class-a", 2)),
            resource_slice("s1", "node-1", "pool-1", DRIVER_A, device("dev-1")),
        ]
    )
    v = evaluate_node(pod_claims(make_pod(("gpu", "template", "t")), inv), NODE, inv)
    assert v.verdict == NEVER_FITS and "request gpu/g" in v.message


def test_a_missing_claim_is_unchecked() -> None:
    inv = read_inventory([*CLASSES])
    v = evaluate_node(pod_claims(make_pod(("gpu", "claim", "nope")), inv), NODE, inv)
    assert v.verdict == UNCHECKED and "ResourceClaim default/nope not found" in v.message


def test_with_constraint_not_matching_int_attribute_all_devices() -> None:
    """with-constraint-not-matching-int-attribute-all-devices: All must take both devices,
    the constraint rejects the second: upstream errors (no backtracking)."""
    c = claim(
        "c0",
        request("req-0", "class-a", allocationMode="All"),
        constraints=[{"matchAttribute": "driver-a/numa"}],
    )
    s = resource_slice(
        "s1", "node-1", "pool-1", DRIVER_A, device("dev-1", numa=1), device("dev-2", numa=2)
    )
    assert judge(*CLASSES, c, s).verdict == NEVER_FITS


def test_all_devices_abort_does_not_backtrack() -> None:
    """allocateDevice(must=true): a constraint failing on an All request ends the attempt,
    even where another device for an earlier request would have let it succeed; whether
    upstream meets that device first depends on its (Go map) order: unchecked."""
    c = claim(
        "c0",
        request("one", "class-b"),
        request("every", "class-a", allocationMode="All"),
        constraints=[{"matchAttribute": "numa"}],
    )
    s_a = resource_slice("s1", "node-1", "pool-1", DRIVER_A, device("a-1", numa__x=0))
    s_b = resource_slice(
        "s2", "node-1", "pool-2", DRIVER_B, device("b-1", numa__x=1), device("b-2", numa__x=0)
    )
    c["spec"]["devices"]["constraints"] = [{"matchAttribute": "numa/x"}]
    v = judge(*CLASSES, c, s_a, s_b)
    assert v.verdict == UNCHECKED and "order" in v.message


def test_tainted_all_devices_single() -> None:
    """tainted-all-devices-single: All lists the tainted device too, so it cannot succeed."""
    taint = {"key": "example.com/taint", "value": "x", "effect": "NoSchedule"}
    s = resource_slice(
        "s1", "node-1", "pool-1", DRIVER_A, {**device("dev-1"), "taints": [taint]}, device("dev-2")
    )
    assert (
        judge(*CLASSES, claim("c0", request("req-0", "class-a", allocationMode="All")), s).verdict
        == NEVER_FITS
    )
