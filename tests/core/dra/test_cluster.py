"""The cluster verdict over the nodes a pod may go to: one node fitting is enough; a node
not known exactly keeps the pod from being called no-room-now or impossible; impossible
only when every node never fits, naming the commonest reason."""

from __future__ import annotations

from core.dra.cluster import IMPOSSIBLE, evaluate_cluster
from core.dra.inventory import read_inventory
from core.dra.pools import NodeRef
from core.dra.verdict import FITS, NO_ROOM_NOW, UNCHECKED
from tests.core.dra.objects import (
    DRIVER_A,
    allocated,
    claim,
    device,
    device_class,
    request,
    resource_slice,
    template,
)
from tests.core.dra.objects import pod as make_pod

NODES = [NodeRef("n1", {}), NodeRef("n2", {}), NodeRef("n3", {})]
BASE = [
    device_class("gpu", DRIVER_A),
    template("two", request("g", "gpu", 2)),
    resource_slice("s1", "n1", "p1", DRIVER_A, device("a"), device("b")),
    resource_slice("s2", "n2", "p2", DRIVER_A, device("a")),
    resource_slice("s3", "n3", "p3", DRIVER_A, device("a")),
]
POD = make_pod(("gpus", "template", "two"))


def test_one_node_fitting_is_enough() -> None:
    result = evaluate_cluster(POD, NODES, read_inventory(BASE))
    assert result is not None and result.verdict == FITS
    assert result.nodes["n1"].verdict == FITS and result.nodes["n2"].verdict != FITS


def test_no_room_now_when_the_fitting_node_is_busy() -> None:
    busy = allocated(claim("other", request("g", "gpu")), ("g", DRIVER_A, "p1", "a"))
    result = evaluate_cluster(POD, NODES, read_inventory([*BASE, busy]))
    assert result is not None and result.verdict == NO_ROOM_NOW
    assert result.message == "1 of the 2 matching devices are allocated to other claims"


def test_impossible_names_the_commonest_reason() -> None:
    result = evaluate_cluster(POD, NODES[1:], read_inventory(BASE))
    assert result is not None and result.verdict == IMPOSSIBLE
    assert (
        result.message
        == "on 2 of 2 nodes: request gpus/g: g needs 2 matching device(s), the node has 1"
    )


def test_an_unknown_node_keeps_it_unchecked() -> None:
    regex = template("two", request("g", "gpu", 2, 'device.attributes["driver-a"].m.matches("x")'))
    objects = [*BASE[:1], regex, *BASE[2:]]
    result = evaluate_cluster(POD, NODES, read_inventory(objects))
    assert result is not None and result.verdict == UNCHECKED


def test_a_pod_without_claims_has_no_dra_verdict() -> None:
    assert evaluate_cluster(make_pod(), NODES, read_inventory(BASE)) is None
