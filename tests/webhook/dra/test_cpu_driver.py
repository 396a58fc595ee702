"""/validate and the DRA CPU driver's rules (kubernetes-sigs/dra-driver-cpu v0.2.0; core
rules and their upstream sources: tests/core/dra/test_cpu_driver.py), through the real
server over TLS and the apiserver-like harness: a CPU claim two containers share is denied,
one another pod reserves and requests that do not mirror the claim are warnings."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from certs.authority import CertPaths
from tests.core.dra.objects import cpu_slice
from tests.webhook.dra.objects import CPU_CLASS, inventory
from tests.webhook.dra.objects import cpu_claim as _claim
from tests.webhook.dra.objects import cpu_container as _ctr
from tests.webhook.dra.objects import cpu_pod as _pod
from tests.webhook.dra.serving import served, write_inventory
from tests.webhook.harness import ApiServer


@pytest.fixture(scope="module")
def inventory_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    extra = [CPU_CLASS, cpu_slice("gpu-a"), _claim("cpus", 2), _claim("taken", 1, "first")]
    return write_inventory(tmp_path_factory.mktemp("dra-cpu"), inventory(extra))


@pytest.fixture
async def api(certs: CertPaths, inventory_file: Path, tmp_path: Path) -> AsyncIterator[ApiServer]:
    async with served(certs, inventory_file, tmp_path) as client:
        yield client


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


async def test_a_deployment_sharing_a_cpu_claim_by_name_is_no_room_now(api: ApiServer) -> None:
    """Replicas created together: none holds the claim yet, all but one will fail (core
    rule and sources: tests/core/dra/test_cpu_driver.py)."""
    pod = _pod("cpus", _ctr("a", "2"))
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": pod["metadata"]["namespace"]},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "d"}},
            "template": {"metadata": {"labels": {"app": "d"}}, "spec": pod["spec"]},
        },
    }
    result = await api.admit(deployment)
    assert result.allowed  # modes.noRoomNow defaults to warn
    assert any(
        "CPU claim 'c' (ResourceClaim ml/cpus) shared by 2 concurrent pods" in w
        for w in result.warnings
    ), result.warnings
    deployment["spec"]["replicas"] = 1
    result = await api.admit(deployment)
    assert not any("concurrent pods" in w for w in result.warnings), result.warnings
