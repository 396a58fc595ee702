"""The schedulers' current releases (issue 28), the cases that need an inventory: each
translated from the upstream test named, at the tag named.

- koordinator v1.8.0 ``pkg/koordlet/statesinformer/impl/states_noderesourcetopology_test.go
  Test_applyNUMAReservationToZoneResources``: with ``node.koordinator.sh/enable-numa-reservation:
  "true"`` koordlet deducts ceil(kubelet reserved / NUMA count) from each zone's allocatable
  in the NRT (capacity unchanged); koord-scheduler reads the zones as reported, and so does
  numagate.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import objects as k8s
from tests.core.upstream_cases import run

GI = 2**30


def koord_reserved_node(allocatable_cpu: str) -> list[dict[str, Any]]:
    """Case "apply reservation to 2 numa nodes with cpu and memory": 48 CPUs and 120 GiB per
    NUMA node, kubelet reserved 4 CPUs and 2 GiB: koordlet reports 46 CPUs, 119 GiB."""
    memory = ("128849018880", "127775277056" if allocatable_cpu == "46" else "128849018880")
    zones = [k8s.zone(i, {"cpu": ("48", allocatable_cpu), "memory": memory}) for i in (0, 1)]
    attributes = {"topologyManagerPolicy": "single-numa-node", "cpuManagerPolicy": "static"}
    return [
        k8s.node("n", {"cpu": "96", "memory": "240Gi", "pods": "110"}),
        k8s.nrt("n", zones, attributes=attributes),
    ]


def guaranteed(cpu: str) -> dict[str, Any]:
    return k8s.pod("p", [k8s.container("c", {"cpu": cpu, "memory": "1Gi"})])


@pytest.mark.parametrize(
    ("allocatable", "cpu", "verdict"),
    [
        ("46", "46", "fits"),
        ("46", "47", "never-fits"),  # the reservation's share is gone from each NUMA node
        ("48", "47", "fits"),  # without the label koordlet reports the whole zone
    ],
)
def test_apply_numa_reservation_to_zone_resources(allocatable: str, cpu: str, verdict: str) -> None:
    outcome = run(guaranteed(cpu), koord_reserved_node(allocatable))
    assert outcome.errors == ()
    assert outcome.verdicts["n"].verdict == verdict
    zone = outcome.nodes["n"].zones[0]
    assert zone.capacity["cpu"] == 48_000 and zone.allocatable["cpu"] == int(allocatable) * 1000
