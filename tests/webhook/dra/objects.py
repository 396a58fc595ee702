"""A small DRA cluster for the webhook tests: two nodes with NUMA data (kubelet policies
single-numa-node and restricted), each with four GPUs of driver gpu.example.com, two per
NUMA node (attribute numaNode, PCIe root per NUMA node), a DeviceClass ``gpu``, and claims
in namespace ``ml``; plus pods that use them."""

from __future__ import annotations

from typing import Any

from tests.builders.objects import node, nrt, zone
from tests.webhook.fake_apiserver import FakeResource

DRIVER = "gpu.example.com"
NAMESPACE = "ml"
NODES = ("gpu-a", "gpu-b")
POLICIES = {"gpu-a": "single-numa-node", "gpu-b": "restricted"}
# the four resource.k8s.io types, for the list/watch test apiserver
DRA_FAKES = (
    FakeResource("resourceslices", "resource.k8s.io", "v1", "ResourceSlice"),
    FakeResource("deviceclasses", "resource.k8s.io", "v1", "DeviceClass"),
    FakeResource("resourceclaims", "resource.k8s.io", "v1", "ResourceClaim", namespaced=True),
    FakeResource(
        "resourceclaimtemplates",
        "resource.k8s.io",
        "v1",
        "ResourceClaimTemplate",
        namespaced=True,
    ),
)


def gpu_slice(node_name: str) -> dict[str, Any]:
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": {
                "numaNode": {"int": i // 2},
                "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{i // 2:02x}"},
                "model": {"string": "h100"},
            },
        }
        for i in range(4)
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def gpu_class() -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }


def request(name: str, count: int, selector: str | None = None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": "gpu", "count": count}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {"name": name, "exactly": exactly}


def claim(
    name: str,
    requests: list[dict[str, Any]],
    *,
    constraints: list[dict[str, Any]] | None = None,
    allocated: list[tuple[str, str]] | None = None,
    kind: str = "ResourceClaim",
) -> dict[str, Any]:
    """A claim (or template); ``allocated``: (node, device) pairs it holds."""
    devices: dict[str, Any] = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    spec: dict[str, Any] = {"devices": devices}
    obj: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"spec": spec} if kind == "ResourceClaimTemplate" else spec,
    }
    if allocated:
        obj["status"] = {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": requests[0]["name"], "driver": DRIVER, "pool": n, "device": d}
                        for n, d in allocated
                    ]
                }
            }
        }
    return obj


def inventory(extra: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Nodes, NRTs (8 free CPUs per NUMA node), slices, the class and ``extra`` objects."""
    objects: list[dict[str, Any]] = []
    for n in NODES:
        res = {"cpu": ("8", "8", "8"), "memory": ("32Gi", "32Gi", "32Gi")}
        objects.append(
            node(
                n,
                {"cpu": "16", "memory": "64Gi", "pods": "110"},
                labels={"kubernetes.io/hostname": n},
            )
        )
        objects.append(
            nrt(n, [zone(0, res), zone(1, res)], attributes={"topologyManagerPolicy": POLICIES[n]})
        )
        objects.append(gpu_slice(n))
    objects.append(gpu_class())
    return objects + list(extra or [])


def pod(
    name: str,
    claims: dict[str, str],
    *,
    cpu: str = "500m",
    guaranteed: bool = False,
    node_selector: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A pod whose ``claims`` map entry name -> claim name (or ``template:<name>``)."""
    entries = [
        {"name": k, "resourceClaimTemplateName": v.split(":", 1)[1]}
        if v.startswith("template:")
        else {"name": k, "resourceClaimName": v}
        for k, v in claims.items()
    ]
    requests = {"cpu": cpu, "memory": "1Gi"}
    resources: dict[str, Any] = {"requests": requests}
    if guaranteed:
        resources["limits"] = dict(requests)
    if entries:
        resources["claims"] = [{"name": k} for k in claims]
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": resources}]
    }
    if entries:
        spec["resourceClaims"] = entries
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }


# The DRA CPU driver (kubernetes-sigs/dra-driver-cpu v0.2.0): its class, a node's CPUs, claims
CPU_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "dra.cpu"},
    "spec": {"selectors": [{"cel": {"expression": 'device.driver == "dra.cpu"'}}]},
}


def cpu_claim(name: str, cpus: int, reserved_for: str | None = None) -> dict[str, Any]:
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


def cpu_container(name: str, cpu: str | None) -> dict[str, Any]:
    res: dict[str, Any] = {"claims": [{"name": "c"}]}
    if cpu:
        res["requests"] = res["limits"] = {"cpu": cpu, "memory": "1Gi"}
    return {"name": name, "image": "registry.k8s.io/pause:3.10", "resources": res}


def cpu_pod(claim: str, *containers: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": NAMESPACE},
        "spec": {
            "resourceClaims": [{"name": "c", "resourceClaimName": claim}],
            "containers": list(containers),
        },
    }
