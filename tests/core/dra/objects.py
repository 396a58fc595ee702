"""Plain resource.k8s.io/v1 objects for the DRA tests (the shapes upstream's
allocatortesting builders make: class(name, driver) selects the driver by CEL)."""

from __future__ import annotations

from typing import Any

DRIVER_A = "driver-a"
DRIVER_B = "driver-b"


def attr(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    if isinstance(value, str) and value.startswith("v:"):
        return {"version": value[2:]}
    return {"string": value}


def device(name: str, capacity: dict[str, str] | None = None, **attributes: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"name": name}
    if attributes:
        d["attributes"] = {k.replace("__", "/"): attr(v) for k, v in attributes.items()}
    if capacity:
        d["capacity"] = {k: {"value": v} for k, v in capacity.items()}
    return d


def resource_slice(
    name: str,
    node: str | None,
    pool: str,
    driver: str,
    *devices: dict[str, Any],
    generation: int = 1,
    count: int = 1,
    **spec: Any,
) -> dict[str, Any]:
    s: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
        "devices": list(devices),
        **spec,
    }
    if node:
        s["nodeName"] = node
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": s,
    }


def device_class(name: str, driver: str, *selectors: str, **spec: Any) -> dict[str, Any]:
    exprs = [f'device.driver == "{driver}"', *selectors]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": e}} for e in exprs], **spec},
    }


def request(name: str, cls: str, count: int = 1, *selectors: str, **extra: Any) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": cls, **extra}
    if extra.get("allocationMode") != "All":
        exactly["count"] = count
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"name": name, "exactly": exactly}


def claim_spec(
    *requests: dict[str, Any], constraints: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    return {"devices": devices}


def claim(
    name: str, *requests: dict[str, Any], namespace: str = "default", **kw: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": claim_spec(*requests, constraints=kw.get("constraints")),
    }


def allocated(obj: dict[str, Any], *devices: tuple[str, str, str, str]) -> dict[str, Any]:
    """``obj`` with status.allocation naming (request, driver, pool, device) results."""
    results = [{"request": r, "driver": d, "pool": p, "device": n} for r, d, p, n in devices]
    return {**obj, "status": {"allocation": {"devices": {"results": results}}}}


def template(
    name: str, *requests: dict[str, Any], namespace: str = "default", **kw: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": claim_spec(*requests, constraints=kw.get("constraints"))},
    }


def pod(*claims: tuple[str, str, str], namespace: str = "default") -> dict[str, Any]:
    """A pod with resourceClaims entries (name, 'claim'|'template', object name)."""
    entries = [
        {"name": n, ("resourceClaimName" if k == "claim" else "resourceClaimTemplateName"): o}
        for n, k, o in claims
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": namespace},
        "spec": {"resourceClaims": entries, "containers": [{"name": "c", "image": "x"}]},
    }


def cpu_slice(node: str) -> dict[str, Any]:
    """The DRA CPU driver's slice in individual mode (kubernetes-sigs/dra-driver-cpu v0.2.0,
    pkg/driver/dra_hooks.go): one device per CPU, 8 CPUs, 4 per NUMA node."""
    devices = [
        {"name": f"cpu{i:03d}", "attributes": {"dra.cpu/numaNodeID": {"int": i // 4}}}
        for i in range(8)
    ]
    return resource_slice(f"{node}-dra.cpu", node, f"{node}-cpu", "dra.cpu", *devices)
