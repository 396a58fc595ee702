"""Builders of Kubernetes objects as the API server serves them (plain dicts): Node,
NodeResourceTopology, Volcano Numatopology, Pod, container, and the AdmissionReview the
API server sends for an object.

Unit convention: quantities are Kubernetes quantity strings, as in a manifest ("4", "500m",
"16Gi"); nothing is converted here, so the tests exercise the real quantity parsing.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from tests.paths import FIXTURES

MANIFESTS = FIXTURES / "manifests"
SMALL = MANIFESTS / "inventory-small.yaml"
KOORD_SPEC = "scheduling.koordinator.sh/numa-topology-spec"


def js(value: Any) -> str:
    """Compact JSON, as annotations carry it."""
    return json.dumps(value, separators=(",", ":"))


def manifest(name: str) -> dict[str, Any]:
    """A manifest from tests/fixtures/manifests."""
    return yaml.safe_load((MANIFESTS / f"{name}.yaml").read_text())


def node(
    name: str,
    allocatable: Mapping[str, Any] | None = None,
    *,
    labels: Mapping[str, str] | None = None,
    capacity: Mapping[str, Any] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A Node; ``status`` carries only the quantities given (the inventory reads a missing
    capacity as the allocatable and the other way round)."""
    metadata: dict[str, Any] = {"name": name, "labels": dict(labels or {})}
    if annotations:
        metadata["annotations"] = dict(annotations)
    status: dict[str, Any] = {}
    if allocatable is not None:
        status["allocatable"] = dict(allocatable)
    if capacity is not None:
        status["capacity"] = dict(capacity)
    return {"apiVersion": "v1", "kind": "Node", "metadata": metadata, "status": status}


def zone(
    name: str | int,
    resources: Mapping[str, tuple[Any, ...]],
    *,
    type_: str = "Node",
    costs: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """resources: name -> (capacity, allocatable[, available])."""
    entries = []
    for res, values in resources.items():
        entry: dict[str, Any] = {"name": res, "capacity": values[0], "allocatable": values[1]}
        if len(values) > 2:
            entry["available"] = values[2]
        entries.append(entry)
    out: dict[str, Any] = {
        "name": f"node-{name}" if isinstance(name, int) else name,
        "type": type_,
        "resources": entries,
    }
    if costs is not None:
        out["costs"] = [{"name": k, "value": v} for k, v in costs.items()]
    return out


def nrt(
    name: str,
    zones: list[dict[str, Any]],
    *,
    attributes: Mapping[str, str] | None = None,
    policies: list[str] | None = None,
    version: str = "v1alpha2",
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A NodeResourceTopology with the given zone objects."""
    obj: dict[str, Any] = {
        "apiVersion": f"topology.node.k8s.io/{version}",
        "kind": "NodeResourceTopology",
        "metadata": {"name": name},
        "zones": zones,
    }
    if annotations:
        obj["metadata"]["annotations"] = dict(annotations)
    if attributes is not None:
        obj["attributes"] = [{"name": k, "value": v} for k, v in attributes.items()]
    if policies is not None:
        obj["topologyPolicies"] = policies
    return obj


def two_zones(cpu: tuple[Any, ...] = ("32", "31"), memory: tuple[Any, ...] | None = None) -> list:
    """Zones node-0 and node-1 with the same cpu (and memory) values."""
    res: dict[str, tuple[Any, ...]] = {"cpu": cpu}
    if memory is not None:
        res["memory"] = memory
    return [zone(0, res), zone(1, res)]


def cpu_detail(per_numa: int, threads: int = 1, numas: int = 2) -> dict[str, dict[str, int]]:
    """A Numatopology cpuDetail in Linux numbering: first thread of every core, then the siblings."""
    detail: dict[str, dict[str, int]] = {}
    cores = per_numa // threads
    cpu = 0
    for _thread in range(threads):
        for numa in range(numas):
            for core in range(cores):
                entry = {"numa": numa, "socket": numa, "core": core}
                detail[str(cpu)] = {k: v for k, v in entry.items() if v}  # omitempty
                cpu += 1
    return detail


def numatopology(
    name: str,
    *,
    allocatable: str,
    detail: Mapping[str, Any] | None,
    policies: Mapping[str, str] | None = None,
    reserved: Mapping[str, str] | None = None,
    extra_numares: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "policies": dict(
            policies or {"CPUManagerPolicy": "static", "TopologyManagerPolicy": "restricted"}
        ),
        "numares": {"cpu": {"allocatable": allocatable, "capacity": len(detail or {})}},
    }
    if detail is not None:
        spec["cpuDetail"] = dict(detail)
    if reserved is not None:
        spec["resReserved"] = dict(reserved)
    if extra_numares:
        spec["numares"].update(extra_numares)
    return {
        "apiVersion": "nodeinfo.volcano.sh/v1alpha1",
        "kind": "Numatopology",
        "metadata": {"name": name},
        "spec": spec,
    }


def container(
    name: str = "c",
    requests: Mapping[str, str] | None = None,
    limits: Mapping[str, str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A container; ``limits`` default to ``requests`` (Guaranteed) unless given."""
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = dict(requests)
    lim = requests if limits is None else limits
    if lim:
        resources["limits"] = dict(lim)
    return {"name": name, "image": "busybox", "resources": resources, **extra}


def pod(
    name: str,
    containers: Sequence[Mapping[str, Any]] | None = None,
    *,
    node: str | None = None,
    annotations: Mapping[str, str] | None = None,
    scheduler: str | None = None,
    init: Sequence[Mapping[str, Any]] = (),
    phase: str | None = "Running",
    namespace: str = "default",
    spec: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A Pod (one plain busybox container unless given, ``spec`` fields added); a bound pod
    (``node``) gets ``status.phase``."""
    pod_spec: dict[str, Any] = {
        "containers": [dict(c) for c in containers]
        if containers is not None
        else [{"name": "c", "image": "busybox"}]
    }
    if init:
        pod_spec["initContainers"] = [dict(c) for c in init]
    if node:
        pod_spec["nodeName"] = node
    if scheduler:
        pod_spec["schedulerName"] = scheduler
    pod_spec.update(spec or {})
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "annotations": dict(annotations or {})},
        "spec": pod_spec,
    }
    if node and phase:
        obj["status"] = {"phase": phase}
    return obj


def koord_status(numa: Mapping[int, Mapping[str, str]], cpuset: str = "") -> dict[str, str]:
    """The annotation koord-scheduler writes on a bound pod (NUMA resources, cpuset)."""
    data: dict[str, Any] = {
        "numaNodeResources": [{"node": k, "resources": dict(v)} for k, v in numa.items()]
    }
    if cpuset:
        data["cpuset"] = cpuset
    return {"scheduling.koordinator.sh/resource-status": json.dumps(data)}


SINGLE_SPEC = {KOORD_SPEC: '{"numaTopologyPolicy":"SingleNUMANode"}'}


def koord_pod(cpu: str) -> dict[str, Any]:
    """The koord-pod fixture manifest with ``cpu`` requested and limited (1Gi memory)."""
    obj = manifest("koord-pod")
    obj["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": cpu, "memory": "1Gi"},
        "limits": {"cpu": cpu, "memory": "1Gi"},
    }
    return obj


# -- AdmissionReview -------------------------------------------------------------------------

RESOURCES = {
    "Pod": "pods",
    "Deployment": "deployments",
    "StatefulSet": "statefulsets",
    "DaemonSet": "daemonsets",
    "ReplicaSet": "replicasets",
    "Job": "jobs",
    "CronJob": "cronjobs",
}


def gvk(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    api_version = str(obj.get("apiVersion", "v1"))
    group, _, version = api_version.rpartition("/")
    return group, version, str(obj.get("kind", ""))


def build_review(
    obj: Mapping[str, Any] | None,
    *,
    operation: str = "CREATE",
    old: Mapping[str, Any] | None = None,
    dry_run: bool = False,
    namespace: str | None = None,
    user: str = "kubernetes-admin",
) -> dict[str, Any]:
    """The AdmissionReview the apiserver would send for ``operation`` on ``obj``."""
    source = obj if obj is not None else old
    assert source is not None
    group, version, kind = gvk(source)
    meta = source.get("metadata") if isinstance(source.get("metadata"), dict) else {}
    options_kind = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}
    resource = {
        "group": group,
        "version": version,
        "resource": RESOURCES.get(kind, kind.lower() + "s"),
    }
    request: dict[str, Any] = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": dict(resource),
        "requestKind": {"group": group, "version": version, "kind": kind},
        "requestResource": dict(resource),
        "name": meta.get("name", ""),
        "namespace": namespace if namespace is not None else meta.get("namespace", "default"),
        "operation": operation,
        "userInfo": {"username": user, "groups": ["system:masters", "system:authenticated"]},
        "object": copy.deepcopy(dict(obj)) if obj is not None else None,
        "oldObject": copy.deepcopy(dict(old)) if old is not None else None,
        "dryRun": dry_run,
        "options": {
            "apiVersion": "meta.k8s.io/v1",
            "kind": options_kind.get(operation, "CreateOptions"),
        },
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def replica(review: dict[str, Any], n: int) -> dict[str, Any]:
    """The review the apiserver sends for another pod of the same ReplicaSet: new request
    uid and name, and the object's own name, uid, creation time and managedFields time."""
    out = copy.deepcopy(review)
    req = out["request"]
    req["uid"] = f"{req['uid'][:-4]}{n:04d}"
    req["name"] = f"web-7d4b9c-{n:05d}"
    meta = req["object"].setdefault("metadata", {})
    meta.update(
        name=f"web-7d4b9c-{n:05d}",
        uid=f"0c0ffee0-0000-4000-8000-{n:012d}",
        creationTimestamp=f"2026-11-21T10:{n % 60:02d}:00Z",
        resourceVersion=str(1000 + n),
        generation=1,
        managedFields=[
            {
                "manager": "kube-controller-manager",
                "operation": "Update",
                "apiVersion": "v1",
                "time": f"2026-11-21T10:{n % 60:02d}:00Z",
            }
        ],
    )
    return out
