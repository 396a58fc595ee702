"""The DRA ground-truth table (tests/fixtures/dra/cases.yaml) turned into Kubernetes objects,
and numagate's verdict for each case from core/dra. Shared by test_ground_truth.py (no
cluster) and tests/e2e/test_dra.py (the real kube-scheduler on kwok nodes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from core.dra.cluster import evaluate_cluster
from core.dra.inventory import read_inventory
from core.dra.pools import NodeRef
from tests.paths import ROOT

CASES_FILE = ROOT / "tests" / "fixtures" / "dra" / "cases.yaml"
CASE_LABEL = "numagate.test/dra-case"


@dataclass(frozen=True)
class Case:
    name: str
    expect: str  # fits | impossible
    nodes: list[dict[str, Any]]
    objects: list[dict[str, Any]]  # classes, slices, claims, templates (creation order)
    pod: dict[str, Any]


def _node(case: str, name: str) -> dict[str, Any]:
    """A kwok node (kwok's documented shape: the fake annotation, its taint and label)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": f"{case}-{name}",
            "annotations": {"kwok.x-k8s.io/node": "fake"},
            "labels": {
                "type": "kwok",
                CASE_LABEL: case,
                "kubernetes.io/hostname": f"{case}-{name}",
            },
        },
        "spec": {
            "taints": [{"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}]
        },
        "status": {
            "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
            "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"},
        },
    }


def _device(raw: dict[str, Any]) -> dict[str, Any]:
    d: dict[str, Any] = {"name": raw["name"]}
    attrs = raw.get("attributes") or {}
    if attrs:
        d["attributes"] = {
            k: {"int": v} if isinstance(v, int) else {"string": str(v)} for k, v in attrs.items()
        }
    if raw.get("capacity"):
        d["capacity"] = {k: {"value": v} for k, v in raw["capacity"].items()}
    if raw.get("taints"):
        d["taints"] = raw["taints"]
    return d


def _claim_spec(case: str, spec: dict[str, Any]) -> dict[str, Any]:
    def cls(r: dict[str, Any]) -> dict[str, Any]:
        return {**r, "deviceClassName": f"{case}-{r['deviceClassName']}"}

    requests = []
    for r in spec["requests"]:
        if "exactly" in r:
            requests.append({**r, "exactly": cls(r["exactly"])})
        else:
            requests.append({**r, "firstAvailable": [cls(s) for s in r["firstAvailable"]]})
    devices: dict[str, Any] = {"requests": requests}
    if spec.get("constraints"):
        devices["constraints"] = spec["constraints"]
    return {"devices": devices}


def load_cases() -> list[Case]:
    data = yaml.safe_load(CASES_FILE.read_text())
    driver = data["driver"]
    out = []
    for c in data["cases"]:
        name = c["name"]
        nodes = [_node(name, n) for n in c["nodes"]]
        objects: list[dict[str, Any]] = []
        for cls_name, cls in c["classes"].items():
            # a class is its extra selectors, or {selectors: [...], extendedResourceName: ...}
            extra = cls if isinstance(cls, list) else cls.get("selectors", [])
            exprs = [f'device.driver == "{driver}"', *extra]
            spec: dict[str, Any] = {"selectors": [{"cel": {"expression": e}} for e in exprs]}
            if isinstance(cls, dict) and cls.get("extendedResourceName"):
                spec["extendedResourceName"] = cls["extendedResourceName"]
            objects.append(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "DeviceClass",
                    "metadata": {"name": f"{name}-{cls_name}"},
                    "spec": spec,
                }
            )
        for node_name, devices in c["nodes"].items():
            if not devices:
                continue  # the node has no devices of its own (network-attached cases)
            objects.append(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceSlice",
                    "metadata": {"name": f"{name}-{node_name}-{driver}"},
                    "spec": {
                        "driver": driver,
                        "nodeName": f"{name}-{node_name}",
                        "pool": {
                            "name": f"{name}-{node_name}",
                            "generation": 1,
                            "resourceSliceCount": 1,
                        },
                        "devices": [_device(d) for d in devices],
                    },
                }
            )
        if c.get("network"):  # one pool reaching the case's nodes by nodeSelector
            selector = {
                "matchExpressions": [{"key": CASE_LABEL, "operator": "In", "values": [name]}]
            }
            objects.append(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceSlice",
                    "metadata": {"name": f"{name}-network-{driver}"},
                    "spec": {
                        "driver": driver,
                        "nodeSelector": {"nodeSelectorTerms": [selector]},
                        "pool": {
                            "name": f"{name}-network",
                            "generation": 1,
                            "resourceSliceCount": 1,
                        },
                        "devices": [_device(d) for d in c["network"]],
                    },
                }
            )
        for kind, key in (("ResourceClaim", "claims"), ("ResourceClaimTemplate", "templates")):
            for obj_name, spec in (c.get(key) or {}).items():
                body = _claim_spec(name, spec)
                objects.append(
                    {
                        "apiVersion": "resource.k8s.io/v1",
                        "kind": kind,
                        "metadata": {"name": obj_name, "namespace": name},
                        "spec": {"spec": body} if key == "templates" else body,
                    }
                )
        entries = [
            {"name": e["name"], "resourceClaimName": e["claim"]}
            if "claim" in e
            else {"name": e["name"], "resourceClaimTemplateName": e["template"]}
            for e in c["pod"].get("claims", [])
        ]
        resources: dict[str, Any] = {}
        if entries:
            resources["claims"] = [{"name": e["name"]} for e in entries]
        if c["pod"].get("extended"):  # extended resources: requests equal limits
            amounts = {k: str(v) for k, v in c["pod"]["extended"].items()}
            resources["requests"] = amounts
            resources["limits"] = amounts
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "pod", "namespace": name},
            "spec": {
                "resourceClaims": entries,
                "nodeSelector": {CASE_LABEL: name},
                "tolerations": [
                    {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}
                ],
                "containers": [
                    {
                        "name": "c",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": resources,
                    }
                ],
            },
        }
        out.append(Case(name, c["expect"], nodes, objects, pod))
    return out


def numagate_verdict(case: Case) -> str:
    """core/dra's cluster verdict over the case's nodes (fits or impossible expected)."""
    inv = read_inventory(case.objects)
    # kwok nodes advertise no extended resource: DRA serves them
    nodes = [NodeRef(n["metadata"]["name"], n["metadata"]["labels"]) for n in case.nodes]
    result = evaluate_cluster(case.pod, nodes, inv)
    return "no DRA claim" if result is None else result.verdict
