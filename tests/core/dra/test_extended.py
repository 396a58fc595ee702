"""Extended resources served by DRA (KEP-5004): the requests the scheduler builds are those
of upstream Test_createRequestsAndMappings_requests (kubernetes v1.36.3,
pkg/scheduler/framework/plugins/dynamicresources/extendeddynamicresources_test.go), the
class per resource name follows extendedresourcecache (newest class, then the smaller name),
and a node advertising the resource itself needs no claim (filterExtendedResources)."""

from __future__ import annotations

from typing import Any

import pytest

from core.dra.evaluate import evaluate_node
from core.dra.extended import (
    class_for_resource,
    extended_requests,
    is_dra_extended_name,
    node_claims,
)
from core.dra.inventory import read_inventory
from core.dra.objects import DeviceClass
from core.dra.pools import NodeRef
from core.dra.verdict import FITS, NEVER_FITS
from tests.core.dra.objects import DRIVER_A, device, device_class, resource_slice

ER = "example.com/gpu"
CLASSES = {
    "class": DeviceClass("class", (), ER),
    "class1": DeviceClass("class1", (), ER + "1"),
    "classInit": DeviceClass("classInit", (), ER + "init"),
}


def _c(requests: dict[str, str], **extra: Any) -> dict[str, Any]:
    return {"name": "c", "resources": {"requests": requests}, **extra}


POD1 = {"containers": [_c({ER: "1", ER + "1": "2"})]}
POD2 = {"containers": [_c({ER: "1"}), _c({ER + "1": "2"})]}
POD_INIT = {"initContainers": [_c({ER + "init": "2"})], "containers": [_c({ER: "1"})]}
POD_INIT2 = {
    "initContainers": [_c({ER + "init": "1"}), _c({ER + "init": "2"})],
    "containers": [_c({ER: "1"})],
}
POD_INIT3 = {
    "initContainers": [
        _c({ER + "init": "1"}),
        _c({ER + "init": "1"}, restartPolicy="Always"),
        _c({ER + "init": "2"}),
    ],
    "containers": [_c({ER: "1"})],
}


@pytest.mark.parametrize(
    ("spec", "needed", "want"),
    [
        (POD1, [ER], [("container-0-request-0", "class", 1)]),  # one resource match
        (
            POD1,
            [ER, ER + "1"],
            [("container-0-request-0", "class", 1), ("container-0-request-1", "class1", 2)],
        ),
        (
            POD2,
            [ER, ER + "1"],
            [("container-0-request-0", "class", 1), ("container-1-request-0", "class1", 2)],
        ),
        (
            POD_INIT,
            [ER, ER + "init"],
            [("container-0-request-0", "classInit", 2), ("container-1-request-0", "class", 1)],
        ),
        (
            POD_INIT2,
            [ER, ER + "init"],
            [("container-1-request-0", "classInit", 2), ("container-2-request-0", "class", 1)],
        ),
        (
            POD_INIT3,
            [ER, ER + "init"],
            [
                ("container-1-request-0", "classInit", 1),
                ("container-2-request-0", "classInit", 2),
                ("container-3-request-0", "class", 1),
            ],
        ),
    ],
    ids=[
        "one-resource",
        "two-resources",
        "two-containers",
        "init-and-regular",
        "two-inits",
        "inits-sidecar-regular",
    ],
)
def test_requests_as_upstream(
    spec: dict[str, Any], needed: list[str], want: list[tuple[str, str, int]]
) -> None:
    got = [(r.name, r.class_name, r.count) for r in extended_requests(spec, needed, CLASSES)]
    assert got == want


def test_class_for_resource() -> None:
    old = DeviceClass("b-old", (), ER, "2026-01-01T00:00:00Z")
    new = DeviceClass("z-new", (), ER, "2026-02-01T00:00:00Z")
    tie = DeviceClass("a-new", (), ER, "2026-02-01T00:00:00Z")
    classes = {c.name: c for c in (old, new)}
    assert class_for_resource(ER, classes) is new
    assert class_for_resource(ER, {**classes, "a-new": tie}) is tie
    assert class_for_resource("deviceclass.resource.kubernetes.io/b-old", classes) is old
    assert class_for_resource("example.com/other", classes) is None
    assert is_dra_extended_name(ER) and not is_dra_extended_name("cpu")
    assert not is_dra_extended_name("kubernetes.io/foo") and is_dra_extended_name(
        "deviceclass.resource.kubernetes.io/x"
    )


def test_a_plain_extended_resource_request_is_judged_through_dra() -> None:
    """nvidia.com/gpu: 2 on a node without that allocatable but one DRA GPU: never fits;
    a node advertising the resource itself needs no claim (the device plugin serves it)."""
    inv = read_inventory(
        [
            device_class("gpu", DRIVER_A, extendedResourceName=ER),
            resource_slice("s1", "node-1", "pool-1", DRIVER_A, device("gpu-0")),
        ]
    )
    pod = {"metadata": {"namespace": "default"}, "spec": {"containers": [_c({ER: "2"})]}}
    node = NodeRef("node-1", {})
    v = evaluate_node(node_claims(pod, inv, node), node, inv)
    assert (
        v.verdict == NEVER_FITS and "request extended-resources/container-0-request-0" in v.message
    )
    plugin_node = NodeRef("node-1", {}, {ER: 4})
    assert node_claims(pod, inv, plugin_node) == ()
    one = {"metadata": {"namespace": "default"}, "spec": {"containers": [_c({ER: "1"})]}}
    assert evaluate_node(node_claims(one, inv, node), node, inv).verdict == FITS
