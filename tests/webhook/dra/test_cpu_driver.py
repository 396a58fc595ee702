"""/validate and the DRA CPU driver's rules (kubernetes-sigs/dra-driver-cpu v0.2.0; core
rules and their upstream sources: tests/core/dra/test_cpu_driver.py), through the real
server over TLS and the apiserver-like harness: a CPU claim two containers share is denied,
one another pod reserves and requests that do not mirror the claim are warnings."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from certs.authority import CertPaths
from tests.webhook.dra.objects import NAMESPACE, inventory
from tests.webhook.dra.serving import served, write_inventory
from tests.webhook.harness import ApiServer

CPU_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "dra.cpu"},
    "spec": {"selectors": [{"cel": {"expression": 'device.driver == "dra.cpu"'}}]},
}


def _cpu_slice(node: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-dra.cpu"},
        "spec": {
            "driver": "dra.cpu",
            "nodeName": node,
            "pool": {"name": f"{node}-cpu", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"cpu{i:03d}"} for i in range(8)],
        },
    }


def _claim(name: str, cpus: int, reserved_for: str | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "devices": {
                "requests": [
                    {"name": "cpus", "exactly": {"deviceClassName": "dra.cpu", "count": cpus}}
                ]
            }
        },
    }
    if reserved_for:
        result = {"request": "cpus", "driver": "dra.cpu", "pool": "gpu-a-cpu", "device": "cpu000"}
        obj["status"] = {
            "allocation": {"devices": {"results": [result]}},
            "reservedFor": [{"resource": "pods", "name": reserved_for, "uid": "u"}],
        }
    return obj


@pytest.fixture(scope="module")
def inventory_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    extra = [CPU_CLASS, _cpu_slice("gpu-a"), _claim("cpus", 2), _claim("taken", 1, "first")]
    return write_inventory(tmp_path_factory.mktemp("dra-cpu"), inventory(extra))


@pytest.fixture
async def api(certs: CertPaths, inventory_file: Path, tmp_path: Path) -> AsyncIterator[ApiServer]:
    async with served(certs, inventory_file, tmp_path) as client:
        yield client


def _ctr(name: str, cpu: str | None) -> dict[str, Any]:
    res: dict[str, Any] = {"claims": [{"name": "c"}]}
    if cpu:
        res["requests"] = res["limits"] = {"cpu": cpu, "memory": "1Gi"}
    return {"name": name, "image": "registry.k8s.io/pause:3.10", "resources": res}


def _pod(claim: str, *containers: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": NAMESPACE},
        "spec": {
            "resourceClaims": [{"name": "c", "resourceClaimName": claim}],
            "containers": list(containers),
        },
    }


async def test_a_cpu_claim_shared_by_two_containers_is_denied(api: ApiServer) -> None:
    result = await api.admit(_pod("cpus", _ctr("a", "2"), _ctr("b", "2")))
    assert not result.allowed
    assert result.validate is not None
    message = result.validate.message
    assert "CPU claim 'c' in resources.claims of containers a, b" in message
    assert "give each container its own dra.cpu claim" in message


async def test_mirrored_requests_on_a_cpu_claim_are_allowed_with_the_static_warning(
    api: ApiServer,
) -> None:
    result = await api.admit(_pod("cpus", _ctr("a", "2")))
    assert result.allowed, result.validate and result.validate.message
    cpu = [w for w in result.warnings if "dra.cpu" in w or "cpuManagerPolicy" in w]
    # the test nodes' NRTs report no cpuManagerPolicy: numagate takes static (core/model.py)
    assert any("cpuManagerPolicy static on 1 node(s) (first: gpu-a)" in w for w in cpu), cpu
    assert not any("limits" in w for w in cpu), cpu


async def test_requests_that_do_not_mirror_the_claim_are_a_warning(api: ApiServer) -> None:
    result = await api.admit(_pod("cpus", _ctr("a", None)))
    assert result.allowed
    assert any(
        "container 'a': cpu requests unset / limits unset, 2 CPUs from dra.cpu claims "
        "(QoS BestEffort)" in w
        for w in result.warnings
    ), result.warnings
    assert any("requests.cpu and limits.cpu to 2" in w for w in result.warnings)


async def test_a_cpu_claim_another_pod_reserves_is_no_room_now(api: ApiServer) -> None:
    result = await api.admit(_pod("taken", _ctr("a", "1")))
    assert result.allowed  # modes.noRoomNow defaults to warn
    assert any("is reserved for pod first" in w for w in result.warnings), result.warnings
