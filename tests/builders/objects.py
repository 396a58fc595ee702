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
    allocatable: Mapping[str, str] | None = None,
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A Node whose capacity equals its allocatable (no status without allocatable)."""
    status = (
        {"allocatable": dict(allocatable), "capacity": dict(allocatable)} if allocatable else {}
    )
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": dict(labels or {}),
            "annotations": dict(annotations or {}),
        },
        "status": status,
    }


def nrt_zone(i: int, resources: Mapping[str, str]) -> dict[str, Any]:
    """An NRT zone ``node-i`` whose resources have capacity = allocatable (no available)."""
    return {
        "name": f"node-{i}",
        "type": "Node",
        "resources": [{"name": r, "capacity": v, "allocatable": v} for r, v in resources.items()],
    }


def nrt(
    name: str,
    zones: Sequence[Mapping[str, Any]],
    *,
    attributes: Mapping[str, str] | None = None,
    policies: Sequence[str] | None = None,
) -> dict[str, Any]:
    """A NodeResourceTopology v1alpha2 with the given zone objects."""
    obj: dict[str, Any] = {
        "apiVersion": "topology.node.k8s.io/v1alpha2",
        "kind": "NodeResourceTopology",
        "metadata": {"name": name},
    }
    if attributes is not None:
        obj["attributes"] = [{"name": k, "value": v} for k, v in attributes.items()]
    if policies is not None:
        obj["topologyPolicies"] = list(policies)
    obj["zones"] = [dict(z) for z in zones]
    return obj


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
    containers: Sequence[Mapping[str, Any]],
    *,
    node: str | None = None,
    annotations: Mapping[str, str] | None = None,
    scheduler: str | None = None,
    init: Sequence[Mapping[str, Any]] = (),
    phase: str | None = "Running",
) -> dict[str, Any]:
    """A Pod in namespace default; a bound pod (``node``) gets ``status.phase``."""
    spec: dict[str, Any] = {"containers": [dict(c) for c in containers]}
    if init:
        spec["initContainers"] = [dict(c) for c in init]
    if node:
        spec["nodeName"] = node
    if scheduler:
        spec["schedulerName"] = scheduler
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "annotations": dict(annotations or {})},
        "spec": spec,
    }
    if node and phase:
        obj["status"] = {"phase": phase}
    return obj


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
