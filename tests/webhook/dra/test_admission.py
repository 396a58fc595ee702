"""/validate with DRA claims, through the real server over TLS (tests/launch.py) and the
apiserver-like harness: a claim no node can ever allocate is denied (naming the claim, the
request or the constraint), one that fits once devices free up is warned about, one that
cannot be judged exactly is never denied, and a pod without claims is answered as
before. Rules: core/dra (k8s.io/dynamic-resource-allocation/structured v0.36.3)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from certs.authority import CertPaths
from tests.webhook.dra.objects import NAMESPACE, claim, inventory, pod, request
from tests.webhook.dra.serving import served, write_inventory
from tests.webhook.harness import ApiServer

NUMA1 = 'device.attributes["gpu.example.com"].numaNode == 1'
# holds the NUMA-1 GPUs of both nodes: a request for those has no room now
HOLDER = claim(
    "holder",
    [request("held", 4, NUMA1)],
    allocated=[(n, d) for n in ("gpu-a", "gpu-b") for d in ("gpu-2", "gpu-3")],
)
CLAIMS = [
    HOLDER,
    claim("two", [request("gpus", 2)]),
    claim("five", [request("gpus", 5)]),
    claim(
        "three-on-one-numa",
        [request("gpus", 3)],
        constraints=[{"matchAttribute": "gpu.example.com/numaNode"}],
    ),
    claim("numa1", [request("gpus", 2, NUMA1)]),
    claim("tpus", [{"name": "t", "exactly": {"deviceClassName": "tpu"}}]),
    claim("tmpl-five", [request("gpus", 5)], kind="ResourceClaimTemplate"),
]


@pytest.fixture(scope="module")
def inventory_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_inventory(tmp_path_factory.mktemp("dra"), inventory(CLAIMS))


@pytest.fixture
async def api(certs: CertPaths, inventory_file: Path, tmp_path: Path) -> AsyncIterator[ApiServer]:
    async with served(certs, inventory_file, tmp_path) as client:
        yield client


def _dra(warnings: list[str]) -> list[str]:
    return [w for w in warnings if "DRA" in w]


async def test_claims_that_fit_are_allowed_without_a_dra_warning(api: ApiServer) -> None:
    result = await api.admit(pod("p", {"gpus": "two"}))
    assert result.allowed, result.validate and result.validate.message
    assert _dra(result.warnings) == []


async def test_too_many_devices_is_denied_naming_the_claim_and_request(api: ApiServer) -> None:
    result = await api.admit(pod("p", {"gpus": "five"}))
    assert not result.allowed
    assert result.validate is not None
    message = result.validate.message
    assert "DRA claims: no node can ever allocate them" in message
    assert "request gpus/gpus" in message and "needs 5 matching device(s)" in message
    assert "on 2 of 2 nodes" in message


async def test_unsatisfiable_match_attribute_is_denied_naming_the_constraint(
    api: ApiServer,
) -> None:
    result = await api.admit(pod("p", {"gpus": "three-on-one-numa"}))
    assert not result.allowed
    assert result.validate is not None
    assert "constraint matchAttribute 'gpu.example.com/numaNode'" in result.validate.message
    assert "of claim gpus" in result.validate.message


async def test_a_template_is_judged_by_its_spec(api: ApiServer) -> None:
    result = await api.admit(pod("p", {"gpus": "template:tmpl-five"}))
    assert not result.allowed
    assert result.validate is not None and "needs 5" in result.validate.message


async def test_devices_allocated_elsewhere_are_no_room_now_a_warning(api: ApiServer) -> None:
    result = await api.admit(pod("p", {"gpus": "numa1"}))
    assert result.allowed  # modes.noRoomNow defaults to warn
    warned = _dra(result.warnings)
    assert warned and "no node has the devices free now" in warned[0]


async def test_what_cannot_be_judged_is_never_denied(api: ApiServer) -> None:
    for claims in ({"t": "tpus"}, {"x": "not-created-yet"}, {"x": "template:absent"}):
        result = await api.admit(pod("p", claims))
        assert result.allowed, claims
        assert any("DRA claims not checked" in w for w in result.warnings), result.warnings


async def test_a_pod_without_claims_gets_no_dra_answer(api: ApiServer) -> None:
    result = await api.admit(pod("p", {}, cpu="2", guaranteed=True))
    assert result.allowed
    assert _dra(result.warnings) == []


async def test_topology_manager_does_not_align_dra_devices(api: ApiServer) -> None:
    """KEP-4381: DRA devices give the Topology Manager no hints."""
    result = await api.admit(pod("p", {"gpus": "two"}, cpu="2", guaranteed=True))
    assert result.allowed
    warned = _dra(result.warnings)
    assert any(
        "topologyManagerPolicy single-numa-node on 2 node(s)" in w
        and "DRA devices not aligned with exclusive CPUs" in w
        for w in warned
    ), warned
    assert any("DRA CPU driver" in w and "matchAttribute" in w for w in warned), warned
    # Burstable, or fractional CPUs: no exclusive CPUs to align with
    plain = await api.admit(pod("p", {"gpus": "two"}, cpu="1500m", guaranteed=True))
    assert not any("not aligned" in w for w in plain.warnings)


async def test_a_workload_template_is_judged_too(api: ApiServer) -> None:
    template: dict[str, Any] = pod("p", {"gpus": "five"})
    deploy = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": NAMESPACE},
        "spec": {
            "selector": {"matchLabels": {"app": "d"}},
            "template": {"metadata": {"labels": {"app": "d"}}, "spec": template["spec"]},
        },
    }
    result = await api.admit(deploy)
    assert not result.allowed
    assert result.validate is not None
    assert "spec.template" in result.validate.message and "needs 5" in result.validate.message
