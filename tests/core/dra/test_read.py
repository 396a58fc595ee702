"""Bad DRA objects are errors naming kind, object, field and value (never a crash), and
read_inventory keeps them out while saying why; while one is unreadable no node is judged
never-fits (k8s.io/api/resource/v1 field names, v0.36.3)."""

from __future__ import annotations

from typing import Any

import pytest

from core.dra.evaluate import evaluate_node, pod_claims
from core.dra.inventory import read_inventory
from core.dra.objects import DraError
from core.dra.pools import NodeRef
from core.dra.read import read_claim, read_class, read_slice
from core.dra.verdict import NEVER_FITS, UNCHECKED
from tests.core.dra.objects import DRIVER_A, claim, device, device_class, request, resource_slice
from tests.core.dra.objects import pod as make_pod


def _with(obj: dict[str, Any], path: list[Any], value: Any) -> dict[str, Any]:
    import copy

    out = copy.deepcopy(obj)
    at: Any = out
    for p in path[:-1]:
        at = at[p]
    at[path[-1]] = value
    return out


SLICE = resource_slice(
    "s1", "node-1", "pool-1", DRIVER_A, device("dev-1", {"memory": "1Gi"}, numa=0)
)


@pytest.mark.parametrize(
    ("path", "value", "words"),
    [
        (["spec", "driver"], 7, ["ResourceSlice 's1'", "spec.driver", "7"]),
        (["spec", "pool", "generation"], -1, ["spec.pool.generation", "-1", "integer >= 0"]),
        (
            ["spec", "devices", 0, "attributes", "numa"],
            {"int": "zero"},
            ["spec.devices[0].attributes['numa'].int", "'zero'"],
        ),
        (
            ["spec", "devices", 0, "attributes", "numa"],
            {"int": 1, "string": "x"},
            ["exactly one of int, bool, string, version"],
        ),
        (
            ["spec", "devices", 0, "capacity", "memory", "value"],
            "lots",
            ["spec.devices[0].capacity['memory'].value", "'lots'"],
        ),
        (["spec", "devices"], {"a": 1}, ["spec.devices", "a list"]),
    ],
)
def test_slice_errors_name_the_field(path: list[Any], value: Any, words: list[str]) -> None:
    with pytest.raises(DraError) as e:
        read_slice(_with(SLICE, path, value))
    for w in words:
        assert w in str(e.value)


def test_claim_errors_name_the_field() -> None:
    c = claim("c0", request("r", "class-a"))
    with pytest.raises(
        DraError,
        match=r"ResourceClaim 'default/c0': spec.devices.requests\[0\].exactly.allocationMode is 'Some'; allowed: ExactCount or All",
    ):
        read_claim(
            _with(c, ["spec", "devices", "requests", 0, "exactly", "allocationMode"], "Some")
        )
    with pytest.raises(DraError, match=r"count is 0; allowed: an integer >= 1"):
        read_claim(_with(c, ["spec", "devices", "requests", 0, "exactly", "count"], 0))
    with pytest.raises(DraError, match="exactly one of exactly, firstAvailable"):
        read_claim(_with(c, ["spec", "devices", "requests", 0], {"name": "r"}))
    with pytest.raises(DraError, match="exactly one of matchAttribute, distinctAttribute"):
        read_claim(_with(c, ["spec", "devices", "constraints"], [{"requests": ["r"]}]))
    with pytest.raises(DraError, match=r"DeviceClass 'x': spec.selectors\[0\].cel.expression"):
        read_class(
            {"kind": "DeviceClass", "metadata": {"name": "x"}, "spec": {"selectors": [{"cel": {}}]}}
        )


def test_defaults_follow_the_api() -> None:
    """allocationMode defaults to ExactCount with count 1; attributes without a domain
    belong to the driver."""
    c = read_claim(claim("c0", {"name": "r", "exactly": {"deviceClassName": "x"}}))
    req = c.spec.requests[0].exactly
    assert req is not None and (req.mode, req.count) == ("ExactCount", 1)


def test_an_unreadable_slice_never_makes_a_node_never_fit() -> None:
    bad = _with(SLICE, ["spec", "driver"], 7)
    objects = [device_class("class-a", DRIVER_A), claim("c0", request("r", "class-a", 2)), SLICE]
    node = NodeRef("node-1", {})
    inv = read_inventory(objects)
    pcs = pod_claims(make_pod(("x", "claim", "c0")), inv)
    assert evaluate_node(pcs, node, inv).verdict == NEVER_FITS
    inv = read_inventory([*objects, bad])
    assert len(inv.errors) == 1 and "spec.driver" in inv.errors[0]
    v = evaluate_node(pod_claims(make_pod(("x", "claim", "c0")), inv), node, inv)
    assert v.verdict == UNCHECKED and "unreadable" in v.message
