"""Random watch events of the four kinds the inventory reads (Nodes, NRTs, Volcano
Numatopologies, bound Pods) over a few node names: the property tests of the incremental
inventory and of the inventory process replay them."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from core.inventory.incremental import ObjectKey
from tests.builders.objects import (
    SINGLE_SPEC,
    cpu_detail,
    js,
    koord_status,
    node,
    nrt,
    numatopology,
    pod,
    two_zones,
    zone,
)

NAMES = ("a", "b", "c", "d", "e")
POLICIES = ("single-numa-node", "restricted", "best-effort", "none")

# koordlet's NRT annotations: the CPU topology (CPUs 0-31 on NUMA 0, 32-63 on NUMA 1) and
# the CPUs koord-scheduler holds back (core/inventory/koord_cpus.py).
_TOPOLOGY = {
    "node.koordinator.sh/cpu-topology": js(
        {
            "detail": [
                {"id": c, "core": c // 2, "socket": c // 32, "node": c // 32} for c in range(64)
            ]
        }
    )
}
KOORDLET = (
    None,
    _TOPOLOGY,
    {**_TOPOLOGY, "kubelet.koordinator.sh/cpu-manager-policy": js({"reservedCPUs": "0-1"})},
    {
        **_TOPOLOGY,
        "node.koordinator.sh/pod-cpu-allocs": js(
            [{"uid": "u", "cpuset": "2-9,40", "managedByKubelet": True}]
        ),
        "node.koordinator.sh/reservation": js({"reservedCPUs": "32-33"}),
        "node.koordinator.sh/system-qos-resource": js({"cpuset": "62-63"}),
    },
)


@st.composite
def objects(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["Node", "NodeResourceTopology", "Numatopology", "Pod"]))
    name = draw(st.sampled_from(NAMES))
    if kind == "Node":
        labels = {"zone": draw(st.sampled_from(["x", "y"]))}
        if draw(st.booleans()):
            labels["node.koordinator.sh/numa-topology-policy"] = "SingleNUMANode"
        cpu = draw(st.sampled_from(["64", "32", "bad"]))
        gpus = draw(st.sampled_from([None, "4", "8"]))
        alloc = {"cpu": cpu, "memory": "256Gi", **({"nvidia.com/gpu": gpus} if gpus else {})}
        return node(name, labels=labels, allocatable=alloc)
    if kind == "NodeResourceTopology":
        free = str(draw(st.integers(0, 31)))
        # With a free amount for every resource, a change of free amounts only takes the
        # inventory's usage-only path (incremental._with_usage), else merge's.
        memory = ("128Gi", "120Gi", *draw(st.sampled_from([("100Gi",), ("120Gi",), ()])))
        zones = [zone(i, {"cpu": ("32", "31", free), "memory": memory}) for i in (0, 1)]
        if draw(st.integers(0, 9)) == 0:
            zones = two_zones()
        policy = draw(st.sampled_from(POLICIES))
        # koord-scheduler takes the first topologyPolicies entry it maps
        policies = draw(st.sampled_from([None, ["SingleNUMANodeContainerLevel", "Restricted"]]))
        return nrt(
            name,
            zones,
            attributes={"topologyManagerPolicy": policy},
            policies=policies,
            annotations=draw(st.sampled_from(KOORDLET)),
        )
    if kind == "Numatopology":
        return numatopology(
            name, allocatable=draw(st.sampled_from(["0-15", "0-7"])), detail=cpu_detail(8)
        )
    numa = draw(
        st.sampled_from(
            [
                {0: {"cpu": "4"}},
                {1: {"cpu": "2"}},
                {0: {"cpu": "1"}, 1: {"cpu": "1"}},
                {3: {"cpu": "1"}},
            ]
        )
    )
    annotations = koord_status(numa, cpuset=draw(st.sampled_from(["", "1-2"])))
    if draw(st.booleans()):
        annotations.update(SINGLE_SPEC)
    phase = draw(st.sampled_from(["Running", "Running", "Succeeded"]))
    return pod(f"p{draw(st.integers(0, 5))}", node=name, annotations=annotations, phase=phase)


def object_key(obj: dict[str, Any]) -> ObjectKey:
    meta = obj["metadata"]
    return (obj["kind"], meta.get("namespace", ""), meta["name"])


# (delete?, object) pairs
events = st.lists(st.tuples(st.booleans(), objects()), min_size=1, max_size=40)
