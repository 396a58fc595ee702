"""Small Kubernetes objects for tests of the test API server and the live inventory."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def node(name: str, *, labels: Mapping[str, str] | None = None, cpu: str = "64") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "status": {
            "capacity": {"cpu": cpu, "memory": "256Gi", "pods": "110"},
            "allocatable": {"cpu": cpu, "memory": "250Gi", "pods": "110"},
        },
    }


def nrt(
    name: str, *, policy: str = "SingleNUMANodeContainerLevel", zones: int = 2
) -> dict[str, Any]:
    return {
        "apiVersion": "topology.node.k8s.io/v1alpha2",
        "kind": "NodeResourceTopology",
        "metadata": {"name": name},
        "attributes": [{"name": "topologyManagerPolicy", "value": "single-numa-node"}],
        "topologyPolicies": [policy],
        "zones": [
            {
                "name": f"node-{i}",
                "type": "Node",
                "resources": [
                    {"name": "cpu", "capacity": "32", "allocatable": "32", "available": "30"}
                ],
            }
            for i in range(zones)
        ],
    }


def numatopology(name: str, *, policy: str = "single-numa-node") -> dict[str, Any]:
    return {
        "apiVersion": "nodeinfo.volcano.sh/v1alpha1",
        "kind": "Numatopology",
        "metadata": {"name": name},
        "spec": {
            "policies": {"TopologyManagerPolicy": policy, "CPUManagerPolicy": "static"},
            "numares": {"cpu": {"allocatable": "0-31", "capacity": 32}},
        },
    }


def pod(
    name: str, namespace: str = "default", *, node_name: str = "", phase: str = "Running"
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
        "status": {"phase": phase},
    }
