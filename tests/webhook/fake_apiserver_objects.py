"""The small cluster the test API server, the live inventory and the fault tests use:
fixed shapes built with tests.builders.objects."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.builders import objects


def node(name: str, *, labels: Mapping[str, str] | None = None, cpu: str = "64") -> dict[str, Any]:
    """A 256Gi node with ``cpu`` CPUs (250Gi and 110 pods allocatable)."""
    return objects.node(
        name,
        {"cpu": cpu, "memory": "250Gi", "pods": "110"},
        capacity={"cpu": cpu, "memory": "256Gi", "pods": "110"},
        labels=labels,
    )


def nrt(
    name: str, *, policy: str = "SingleNUMANodeContainerLevel", zones: int = 2, free: int = 30
) -> dict[str, Any]:
    """An NRT of ``zones`` zones of 32 CPUs, ``free`` available in each, single-numa-node."""
    return objects.nrt(
        name,
        [objects.zone(i, {"cpu": ("32", "32", str(free))}) for i in range(zones)],
        attributes={"topologyManagerPolicy": "single-numa-node"},
        policies=[policy],
    )


def numatopology(name: str, *, policy: str = "single-numa-node") -> dict[str, Any]:
    """A Volcano Numatopology of 32 free CPUs under ``policy``."""
    return objects.numatopology(
        name,
        allocatable="0-31",
        detail=None,
        policies={"TopologyManagerPolicy": policy, "CPUManagerPolicy": "static"},
        extra_numares={"cpu": {"allocatable": "0-31", "capacity": 32}},
    )


def pod(
    name: str, namespace: str = "default", *, node_name: str = "", phase: str = "Running"
) -> dict[str, Any]:
    """A one-container pod, bound to ``node_name`` when given; its phase set either way."""
    obj = objects.pod(name, node=node_name or None, namespace=namespace, phase=phase)
    obj["status"] = {"phase": phase}
    return obj
