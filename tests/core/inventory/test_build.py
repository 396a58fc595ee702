"""The inventory model built from real Kubernetes objects (docs/contracts.md: Inventory input, issue 4 part A).

Facts come from research/upstream-schedulers.md §1.1-1.2, §2.2, §4.1-4.2 and
research/kubelet-topology-manager.md §7; file fixtures from seed 001 (CCE tables)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.inventory.build import build_inventory
from core.model import NodeTopology
from schemas import load as load_schema
from tests.builders.objects import (
    SINGLE_SPEC,
    cpu_detail,
    koord_status,
    node,
    nrt,
    numatopology,
    pod,
    two_zones,
    zone,
)
from tests.paths import ROOT
from webhook.inventory.loader import load_objects

DEMO = ROOT / "webhook" / "data" / "demo-inventory.yaml"
FIXTURES = ROOT / "tests" / "fixtures" / "inventory"
GI = 2**30


def only(objects: list[dict[str, Any]]) -> tuple[NodeTopology, tuple[str, ...]]:
    result = build_inventory(objects)
    assert len(result.nodes) == 1, result.nodes
    return result.nodes[0], result.errors


def one(objects: list[dict[str, Any]]) -> NodeTopology:
    got, errors = only(objects)
    assert errors == ()
    return got


# -- NodeResourceTopology v1alpha2 ---------------------------------------------------------


def test_nrt_v1alpha2_zones_in_core_units_with_costs() -> None:
    got = one(
        [
            nrt(
                "w1",
                [
                    zone(
                        0,
                        {
                            "cpu": ("32", "30", "12"),
                            "memory": ("64Gi", "62Gi", "40Gi"),
                            "nvidia.com/gpu": ("4", "4", "2"),
                            "hugepages-2Mi": ("128Mi", "128Mi", "64Mi"),
                        },
                        costs={"node-0": 10, "node-1": 20},
                    ),
                    zone(1, {"cpu": ("32", "32", "32")}, costs={"node-0": 20, "node-1": 10}),
                ],
                attributes={"topologyManagerPolicy": "single-numa-node"},
            )
        ]
    )
    assert got.name == "w1"
    assert [z.id for z in got.zones] == [0, 1]
    z0 = got.zones[0]
    assert z0.capacity == {
        "cpu": 32000,
        "memory": 64 * GI,
        "nvidia.com/gpu": 4,
        "hugepages-2Mi": 128 * 2**20,
    }
    assert z0.allocatable["cpu"] == 30000 and z0.allocatable["memory"] == 62 * GI
    assert z0.available == {
        "cpu": 12000,
        "memory": 40 * GI,
        "nvidia.com/gpu": 2,
        "hugepages-2Mi": 64 * 2**20,
    }
    assert z0.costs == {0: 10, 1: 20}
    assert got.zones[1].costs == {0: 20, 1: 10}
    assert got.tm_policy == "single-numa-node"
    assert got.sources == ("NodeResourceTopology",)
    # Without a Node object the node totals are the zones' sums.
    assert got.allocatable == {
        "cpu": 62000,
        "memory": 62 * GI,
        "nvidia.com/gpu": 4,
        "hugepages-2Mi": 128 * 2**20,
    }
    assert got.capacity["cpu"] == 64000


def test_nrt_defaults_when_it_says_nothing() -> None:
    got = one([nrt("w", two_zones())])
    assert (got.tm_policy, got.tm_scope, got.max_numa_nodes) == ("none", "container", 8)
    assert (got.cpu_manager_policy, got.memory_manager_policy) == ("static", "None")
    assert (got.prefer_closest, got.full_pcpus_only, got.threads_per_core) == (False, False, 1)
    # koord-scheduler reads no NRT attributes: it sees no node policy here.
    assert got.koord_policy == "none" and got.volcano_policy is None


@pytest.mark.parametrize(
    ("attributes", "field", "expected"),
    [
        ({"topologyManagerPolicy": "none"}, "tm_policy", "none"),
        ({"topologyManagerPolicy": "best-effort"}, "tm_policy", "best-effort"),
        ({"topologyManagerPolicy": "restricted"}, "tm_policy", "restricted"),
        ({"topologyManagerPolicy": "single-numa-node"}, "tm_policy", "single-numa-node"),
        ({"topologyManagerScope": "pod"}, "tm_scope", "pod"),
        ({"topologyManagerScope": "container"}, "tm_scope", "container"),
        ({"topologyManagerMaxNUMANodes": "16"}, "max_numa_nodes", 16),
        (
            {"topologyManagerPolicyOptions": "prefer-closest-numa-nodes=true"},
            "prefer_closest",
            True,
        ),
        (
            {"topologyManagerPolicyOptions": "prefer-closest-numa-nodes=false"},
            "prefer_closest",
            False,
        ),
        (
            {"topologyManagerPolicyOptions": "max-allowable-numa-nodes=16"},
            "max_numa_nodes",
            16,
        ),
        ({"cpuManagerPolicy": "none"}, "cpu_manager_policy", "none"),
        ({"cpuManagerPolicy": "static"}, "cpu_manager_policy", "static"),
        ({"cpuManagerPolicyOptions": "full-pcpus-only=true"}, "full_pcpus_only", True),
        (
            {"cpuManagerPolicyOptions": "distribute-cpus-across-numa=true,full-pcpus-only=True"},
            "full_pcpus_only",
            True,
        ),
        ({"memoryManagerPolicy": "Static"}, "memory_manager_policy", "Static"),
        ({"memoryManagerPolicy": "None"}, "memory_manager_policy", "None"),
        ({"cpuThreadsPerCore": "2"}, "threads_per_core", 2),
    ],
)
def test_every_attribute(attributes: dict[str, str], field: str, expected: object) -> None:
    got = one([nrt("w", two_zones(), attributes=attributes)])
    assert getattr(got, field) == expected


def test_both_policy_options_together() -> None:
    got = one(
        [
            nrt(
                "w",
                two_zones(),
                attributes={
                    "topologyManagerPolicyOptions": "prefer-closest-numa-nodes=true,max-allowable-numa-nodes=16"
                },
            )
        ]
    )
    assert got.prefer_closest is True and got.max_numa_nodes == 16


@pytest.mark.parametrize(
    ("attributes", "fragments"),
    [
        (
            {"topologyManagerPolicy": "SingleNUMANode"},
            ["attributes[0].value", "'SingleNUMANode'", "none, best-effort, restricted"],
        ),
        ({"topologyManagerScope": "Pod"}, ["attributes[0].value", "'Pod'", "container, pod"]),
        ({"topologyManagerMaxNUMANodes": "many"}, ["'many'", "integer"]),
        ({"cpuManagerPolicy": "Static"}, ["'Static'", "static, none"]),
        ({"memoryManagerPolicy": "static"}, ["'static'", "Static, None"]),
        ({"cpuThreadsPerCore": "0"}, ["'0'", "integer"]),
        (
            {"cpuManagerPolicyOptions": "full-pcpu-only=true"},
            ["unknown option 'full-pcpu-only'", "full-pcpus-only"],
        ),
        (
            {"topologyManagerPolicyOptions": "prefer-closest=true"},
            ["unknown option 'prefer-closest'", "prefer-closest-numa-nodes"],
        ),
        (
            {"topologyManagerPolicyOptions": "prefer-closest-numa-nodes=yes"},
            ["prefer-closest-numa-nodes must be true or false"],
        ),
        ({"cpuManagerPolicyOptions": "full-pcpus-only"}, ["'full-pcpus-only' is not key=value"]),
    ],
)
def test_bad_attribute_is_reported_and_default_kept(
    attributes: dict[str, str], fragments: list[str]
) -> None:
    got, errors = only([nrt("w", two_zones(), attributes=attributes)])
    assert len(errors) == 1, errors
    assert errors[0].startswith("NodeResourceTopology w: attributes[0].value")
    for fragment in fragments:
        assert fragment in errors[0]
    defaults = NodeTopology(name="w", labels={}, allocatable={}, capacity={})
    for field in ("tm_policy", "tm_scope", "max_numa_nodes", "cpu_manager_policy"):
        assert getattr(got, field) == getattr(defaults, field)
    assert got.zones  # the zones still load


def test_max_numa_nodes_disagreement_is_reported() -> None:
    got, errors = only(
        [
            nrt(
                "w",
                two_zones(),
                attributes={
                    "topologyManagerMaxNUMANodes": "12",
                    "topologyManagerPolicyOptions": "max-allowable-numa-nodes=16",
                },
            )
        ]
    )
    assert got.max_numa_nodes == 12
    assert len(errors) == 1 and "disagrees" in errors[0]


# -- v1alpha1 and the deprecated topologyPolicies ----------------------------------------

V1ALPHA1_TABLE = [
    ("None", "none", "container"),
    ("BestEffort", "best-effort", "container"),
    ("BestEffortContainerLevel", "best-effort", "container"),
    ("BestEffortPodLevel", "best-effort", "pod"),
    ("Restricted", "restricted", "container"),
    ("RestrictedContainerLevel", "restricted", "container"),
    ("RestrictedPodLevel", "restricted", "pod"),
    ("SingleNUMANode", "single-numa-node", "container"),  # the API's own example uses it
    ("SingleNUMANodeContainerLevel", "single-numa-node", "container"),
    ("SingleNUMANodePodLevel", "single-numa-node", "pod"),
]


@pytest.mark.parametrize(("value", "policy", "scope"), V1ALPHA1_TABLE)
def test_v1alpha1_topology_policies_mapping(value: str, policy: str, scope: str) -> None:
    got = one([nrt("w", two_zones(), policies=[value], version="v1alpha1")])
    assert (got.tm_policy, got.tm_scope) == (policy, scope)
    assert got.sources == ("NodeResourceTopology",)


def test_v1alpha1_unknown_topology_policy_lists_the_allowed_values() -> None:
    got, errors = only([nrt("w", two_zones(), policies=["single-numa-node"], version="v1alpha1")])
    assert got.tm_policy == "none"
    assert len(errors) == 1
    assert errors[0].startswith("NodeResourceTopology w: topologyPolicies[0]: unknown policy")
    assert "SingleNUMANodePodLevel" in errors[0]


def test_attributes_override_topology_policies() -> None:
    got = one(
        [
            nrt(
                "w",
                two_zones(),
                policies=["SingleNUMANodePodLevel"],
                attributes={"topologyManagerPolicy": "restricted"},
            )
        ]
    )
    # The policy comes from the attribute; the scope the attributes do not give stays
    # what topologyPolicies said.
    assert (got.tm_policy, got.tm_scope) == ("restricted", "pod")


@pytest.mark.parametrize(
    ("value", "koord"),
    [
        ("BestEffort", "best-effort"),
        ("Restricted", "restricted"),
        ("SingleNUMANodePodLevel", "single-numa-node"),
        # koord-scheduler's convertToNUMATopologyPolicy maps nothing else.
        ("SingleNUMANodeContainerLevel", "none"),
        ("RestrictedPodLevel", "none"),
        ("None", "none"),
    ],
)
def test_koordinator_reads_only_three_nrt_policies(value: str, koord: str | None) -> None:
    got = one([nrt("w", two_zones(), policies=[value], version="v1alpha1")])
    assert got.koord_policy == koord


def test_koordlet_annotations_on_the_nrt() -> None:
    topology = {
        "detail": [
            {"id": i, "core": i % 4, "socket": 0, "node": 0 if i % 4 < 2 else 1} for i in range(8)
        ]
    }
    got = one(
        [
            nrt(
                "w",
                two_zones(),
                policies=["SingleNUMANodePodLevel"],
                annotations={
                    "kubelet.koordinator.sh/cpu-manager-policy": json.dumps(
                        {
                            "policy": "static",
                            "options": {"full-pcpus-only": "true"},
                            "reservedCPUs": "0-1",
                        }
                    ),
                    "node.koordinator.sh/cpu-topology": json.dumps(topology),
                },
            )
        ]
    )
    assert got.full_pcpus_only is True
    assert got.cpu_manager_policy == "static"
    assert got.threads_per_core == 2


# -- zone names and malformed zones ---------------------------------------------------------

VALID_ZONE_NAMES = [("node-0", 0), ("node-7", 7), ("node-63", 63)]
INVALID_ZONE_NAMES = [
    "node--1",
    "cell-1",
    "Node-1",
    "NODE-2",
    "node_3",
    "node 4",
    "node-5-1",
    "node6",
    "--node-7",
    "numa-node-0",  # scheduler-plugins README demo spelling
    "node-",
    "node-01",
    "",
]


@pytest.mark.parametrize(("name", "numa"), VALID_ZONE_NAMES)
def test_valid_zone_names(name: str, numa: int) -> None:
    got = one([nrt("w", [zone(name, {"cpu": ("4", "4")})])])
    assert [z.id for z in got.zones] == [numa]


@pytest.mark.parametrize("name", INVALID_ZONE_NAMES)
def test_invalid_zone_names_reject_the_object(name: str) -> None:
    result = build_inventory(
        [
            node("w", allocatable={"cpu": "8"}),
            nrt("w", [zone(0, {"cpu": ("4", "4")}), zone(name, {"cpu": ("4", "4")})]),
        ]
    )
    (got,) = result.nodes
    assert got.zones == ()  # unknown-topology: never grounds for a denial
    assert got.sources == ("Node",)
    assert result.errors[0].startswith("NodeResourceTopology w: zones[1].name: ")
    assert repr(name) in result.errors[0] and "node-<id>" in result.errors[0]
    assert "this object is not used" in result.errors[-1]


@pytest.mark.parametrize("name", ["node-64", "node-65535"])
def test_numa_ids_above_63_are_rejected(name: str) -> None:
    # node-65535 is a valid NRT name; the kernel's 64-bit NUMA masks stop at 63.
    _, errors = only([node("w"), nrt("w", [zone(name, {"cpu": ("4", "4")})])])
    assert "larger than 63" in errors[0] and errors[0].startswith(
        "NodeResourceTopology w: zones[0].name"
    )


def test_non_numa_zone_types_are_skipped() -> None:
    got = one(
        [
            nrt(
                "w",
                [
                    zone("socket-0", {"cpu": ("64", "64")}, type_="Socket"),
                    zone(0, {"cpu": ("32", "32")}),
                    zone(1, {"cpu": ("32", "32")}),
                ],
            )
        ]
    )
    assert [z.id for z in got.zones] == [0, 1]


@pytest.mark.parametrize(
    ("value", "key"),
    [("32 cores", "capacity"), ("-4", "capacity"), ("1.5x", "capacity"), (True, "capacity")],
)
def test_bad_zone_quantity_names_the_field(value: object, key: str) -> None:
    bad = zone(1, {"cpu": ("32", "32")})
    bad["resources"][0][key] = value
    result = build_inventory(
        [nrt("w", [zone(0, {"cpu": ("32", "32")}), bad]), nrt("ok", two_zones())]
    )
    assert [n.name for n in result.nodes] == ["ok", "w"]
    assert result.nodes[1].zones == ()
    assert result.errors[0].startswith(
        f"NodeResourceTopology w: zones[1].resources[0].{key}: quantity {value!r}"
    )


def test_duplicate_zone_and_duplicate_resource() -> None:
    _, errors = only([nrt("w", [zone(0, {"cpu": ("4", "4")}), zone(0, {"cpu": ("4", "4")})])])
    assert "zones[1].name: NUMA zone 'node-0' listed twice" in errors[0]
    z = zone(0, {"cpu": ("4", "4")})
    z["resources"].append({"name": "cpu", "capacity": "4", "allocatable": "4"})
    _, errors = only([nrt("w", [z])])
    assert "zones[0].resources[1].name: resource 'cpu' listed twice" in errors[0]


def test_bad_costs_reject_the_object() -> None:
    z = zone(0, {"cpu": ("4", "4")}, costs={"numa-1": 20})
    _, errors = only([nrt("w", [z])])
    assert "zones[0].costs[0].name: 'numa-1' is not a NUMA zone name" in errors[0]
    z = zone(0, {"cpu": ("4", "4")})
    z["costs"] = [{"name": "node-1", "value": "far"}]
    _, errors = only([nrt("w", [z])])
    assert "zones[0].costs[0].value: 'far'" in errors[0]


def test_capacity_and_allocatable_stand_in_for_each_other() -> None:
    z = {
        "name": "node-0",
        "type": "Node",
        "resources": [{"name": "cpu", "allocatable": "8"}, {"name": "memory", "capacity": "4Gi"}],
    }
    got = one([nrt("w", [z])])
    assert got.zones[0].capacity == {"cpu": 8000, "memory": 4 * GI}
    assert got.zones[0].allocatable == {"cpu": 8000, "memory": 4 * GI}
    # no `available` and no bound pods: everything allocatable is available
    assert got.zones[0].available == {"cpu": 8000, "memory": 4 * GI}
    z["resources"].append({"name": "nvidia.com/gpu"})
    _, errors = only([nrt("w", [z])])
    assert "'nvidia.com/gpu' has neither capacity nor allocatable" in errors[0]


def test_zones_missing_is_an_error() -> None:
    obj = nrt("w", [])
    del obj["zones"]
    got, errors = only([obj])
    assert got.zones == () and "zones: must be a list" in errors[0]


# -- Node ------------------------------------------------------------------------------------


def test_node_fields_and_merge_with_nrt() -> None:
    got = one(
        [
            node(
                "w",
                labels={"kubernetes.io/hostname": "w", "zone": "a"},
                annotations={"hami.io/node-nvidia-register": "GPU-0,..."},
                allocatable={"cpu": "62", "memory": "250Gi", "pods": "110"},
                capacity={"cpu": "64", "memory": "256Gi", "pods": "110"},
            ),
            nrt("w", two_zones(("32", "31"), ("128Gi", "125Gi"))),
        ]
    )
    assert got.labels == {"kubernetes.io/hostname": "w", "zone": "a"}
    assert got.annotations == {"hami.io/node-nvidia-register": "GPU-0,..."}
    assert got.allocatable == {"cpu": 62000, "memory": 250 * GI, "pods": 110}
    assert got.capacity == {"cpu": 64000, "memory": 256 * GI, "pods": 110}
    assert got.sources == ("Node", "NodeResourceTopology")
    assert len(got.zones) == 2


def test_node_without_numa_data_has_no_zones() -> None:
    got = one([node("plain", allocatable={"cpu": "8"})])
    assert got.zones == () and got.numa_states == () and got.sources == ("Node",)


def test_node_with_bad_quantity_loses_its_zones_but_stays() -> None:
    result = build_inventory(
        [
            node("w", allocatable={"cpu": "8 cores", "memory": "8Gi"}),
            nrt("w", two_zones(("4", "4"))),
            node("ok", allocatable={"cpu": "8"}),
        ]
    )
    w = next(n for n in result.nodes if n.name == "w")
    assert w.zones == ()
    assert w.allocatable == {"memory": 8 * GI}
    assert result.errors[0].startswith("Node w: status.allocatable[cpu]: quantity '8 cores'")
    assert any("the node's NUMA data is not used" in e for e in result.errors)
    assert [n.name for n in result.nodes] == ["ok", "w"]


@pytest.mark.parametrize(
    ("label", "koord"),
    [
        ("SingleNUMANode", "single-numa-node"),
        ("Restricted", "restricted"),
        ("BestEffort", "best-effort"),
        ("", "restricted"),  # an empty label falls back to the NRT (getNUMATopologyPolicy)
    ],
)
def test_koordinator_label_in_kubelet_spelling(label: str, koord: str | None) -> None:
    got = one(
        [
            node("w", labels={"node.koordinator.sh/numa-topology-policy": label}),
            # a non-empty label wins over what koord-scheduler reads from the NRT
            nrt("w", two_zones(), policies=["Restricted"], version="v1alpha1"),
        ]
    )
    assert got.koord_policy == koord
    assert got.labels["node.koordinator.sh/numa-topology-policy"] == label


@pytest.mark.parametrize(
    ("labels", "koord"),
    [
        ({"node.koordinator.sh/numa-topology-policy": "SingleNUMANode"}, "single-numa-node"),
        ({"node.koordinator.sh/numa-topology-policy": ""}, "none"),
        ({}, None),  # no label, no NRT: Koordinator finds no NUMA resources
    ],
)
def test_koordinator_view_without_an_nrt(labels: dict[str, str], koord: str | None) -> None:
    assert one([node("w", labels=labels)]).koord_policy == koord


@pytest.mark.parametrize("label", ["None", "single-numa-node", "singleNUMANode"])
def test_unknown_koordinator_label_is_reported_and_matches_nothing(label: str) -> None:
    got, errors = only([node("w", labels={"node.koordinator.sh/numa-topology-policy": label})])
    assert got.koord_policy == f"unknown:{label}"
    assert errors[0].startswith(
        "Node w: metadata.labels[node.koordinator.sh/numa-topology-policy]: unknown policy"
    )
    assert "'SingleNUMANode'" in errors[0]


def test_unaligned_devices() -> None:
    gpu = {"cpu": ("32", "32"), "nvidia.com/gpu": ("2", "2")}
    got = one(
        [
            node(
                "g",
                allocatable={
                    "cpu": "64",
                    "nvidia.com/gpu": "6",
                    "example.com/nic": "2",
                    "hugepages-1Gi": "4Gi",
                    "memory": "8Gi",
                },
            ),
            nrt("g", [zone(0, gpu), zone(1, gpu)]),
        ]
    )
    # 6 GPUs on the node, 2 + 2 in the zones: 2 have no NUMA affinity. The NIC has no
    # topology at all. Native resources (memory, hugepages) are never devices.
    assert got.unaligned_devices == {"nvidia.com/gpu": 2, "example.com/nic": 2}


def test_no_unaligned_devices_when_zones_hold_all() -> None:
    gpu = {"cpu": ("32", "32"), "nvidia.com/gpu": ("4", "4")}
    got = one(
        [node("g", allocatable={"nvidia.com/gpu": "8"}), nrt("g", [zone(0, gpu), zone(1, gpu)])]
    )
    assert got.unaligned_devices == {}


# -- Volcano Numatopology ------------------------------------------------------------------


def test_numatopology_cpuset_mapped_to_numa_nodes() -> None:
    detail = cpu_detail(16)  # NUMA 0: CPUs 0-15, NUMA 1: 16-31
    got = one([numatopology("v", allocatable="2-15,18-31", detail=detail)])
    assert [z.id for z in got.zones] == [0, 1]
    for z in got.zones:
        assert z.capacity == {"cpu": 16000}  # every CPU of the NUMA node
        # numares.cpu.allocatable is the FREE cpuset now (resource-exporter cpunumainfo.go):
        # it sets what is available; allocatable comes from cpuDetail, which never shrinks.
        assert z.allocatable == {"cpu": 16000}
        assert z.available == {"cpu": 14000}
    assert got.volcano_policy == "restricted" and got.volcano_cpu_manager_policy == "static"
    assert got.tm_policy == "restricted"
    assert got.sources == ("Numatopology",)
    assert got.threads_per_core == 1


def test_numatopology_threads_per_core_and_reserved_cpus() -> None:
    detail = cpu_detail(32, threads=2)  # 2 x 16 cores x 2 threads; siblings 32-63
    got = one([numatopology("v", allocatable="0-63", detail=detail, reserved={"cpu": "1500m"})])
    assert got.threads_per_core == 2
    # ceil(1.5) = 2 CPUs reserved: a whole core, and Volcano's takeByTopology selects a core
    # by its id alone, which repeats in each socket: CPUs 0, 32 and 16, 48 (volcano_cpus.py).
    assert [z.allocatable["cpu"] for z in got.zones] == [30000, 30000]
    assert [z.capacity["cpu"] for z in got.zones] == [32000, 32000]


def test_numatopology_policies_are_kept_verbatim() -> None:
    got, errors = only(
        [
            numatopology(
                "v",
                allocatable="0-3",
                detail=cpu_detail(2),
                policies={"CPUManagerPolicy": "static", "TopologyManagerPolicy": "SingleNUMANode"},
            )
        ]
    )
    assert got.volcano_policy == "SingleNUMANode"  # Volcano compares case-sensitively
    assert got.tm_policy == "none"
    assert errors[0].startswith(
        "Numatopology v: spec.policies[TopologyManagerPolicy]: 'SingleNUMANode' is not a kubelet policy"
    )


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"allocatable": "48"}, "spec.numares.cpu.allocatable: CPUs 48 are not in spec.cpuDetail"),
        ({"allocatable": "0-3,x"}, "spec.numares.cpu.allocatable: cpuset '0-3,x'"),
        ({"detail": None}, "spec.cpuDetail: missing or empty"),
        ({"detail": {"0": {"numa": 64}}}, "spec.cpuDetail[0].numa: NUMA id 64 is larger than 63"),
        ({"detail": {"x": {}}}, "spec.cpuDetail[x]: key 'x' is not a CPU id"),
        ({"detail": {"0": {"core": -1}}}, "spec.cpuDetail[0].core: -1"),
        ({"reserved": {"cpu": "two"}}, "spec.resReserved[cpu]: quantity 'two'"),
    ],
)
def test_bad_numatopology_fields(change: dict[str, Any], fragment: str) -> None:
    args: dict[str, Any] = {"allocatable": "0-3", "detail": cpu_detail(2)}
    args.update(change)
    result = build_inventory(
        [numatopology("v", **args), numatopology("ok", allocatable="0-3", detail=cpu_detail(2))]
    )
    assert [n.name for n in result.nodes] == ["ok", "v"]
    assert any(e.startswith("Numatopology v: " + fragment) for e in result.errors), result.errors
    ok = result.nodes[0]
    assert len(ok.zones) == 2


def test_numatopology_without_cpu_detail_still_gives_its_policies() -> None:
    got, errors = only([numatopology("v", allocatable="0-3", detail=None)])
    assert got.zones == ()
    assert got.volcano_policy == "restricted" and got.tm_policy == "restricted"
    assert "only the policies are used" in errors[-1]


def test_numatopology_non_cpu_numares_is_reported() -> None:
    got, errors = only(
        [
            numatopology(
                "v",
                allocatable="0-3",
                detail=cpu_detail(2),
                extra_numares={"memory": {"allocatable": "256Gi", "capacity": 1}},
            )
        ]
    )
    assert len(got.zones) == 2
    assert errors == (
        "Numatopology v: spec.numares[memory]: only cpu is placed on NUMA nodes by Volcano's "
        "Numatopology (cpuDetail); this entry is not used",
    )


def test_numatopology_unknown_policy_key() -> None:
    _, errors = only(
        [
            numatopology(
                "v", allocatable="0-3", detail=cpu_detail(2), policies={"topologyPolicy": "x"}
            )
        ]
    )
    assert errors[0].startswith("Numatopology v: spec.policies[topologyPolicy]: unknown key")


def test_nrt_zones_win_over_numatopology_and_both_policies_are_kept() -> None:
    got = one(
        [
            node("m", allocatable={"cpu": "64"}),
            nrt("m", two_zones(("32", "32")), attributes={"topologyManagerPolicy": "best-effort"}),
            numatopology(
                "m",
                allocatable="0-31",
                detail=cpu_detail(16),
                policies={
                    "CPUManagerPolicy": "static",
                    "TopologyManagerPolicy": "single-numa-node",
                },
            ),
        ]
    )
    assert [z.capacity["cpu"] for z in got.zones] == [32000, 32000]
    assert got.tm_policy == "best-effort"
    assert got.volcano_policy == "single-numa-node"
    assert got.sources == ("Node", "NodeResourceTopology", "Numatopology")


# -- bound pods: usage and Koordinator NUMA states ------------------------------------------


def test_available_from_koordinator_resource_status() -> None:
    got = one(
        [
            nrt("k", two_zones(("32", "31"), ("128Gi", "125Gi"))),
            pod(
                "a",
                node="k",
                annotations=koord_status({0: {"cpu": "8", "memory": "32Gi"}}, cpuset="1-8"),
            ),
            pod(
                "b",
                node="k",
                annotations=koord_status({0: {"cpu": "4"}, 1: {"cpu": "4", "memory": "1Gi"}}),
            ),
        ]
    )
    assert got.zones[0].available == {"cpu": 19000, "memory": 93 * GI}
    assert got.zones[1].available == {"cpu": 27000, "memory": 124 * GI}
    assert got.zones[0].allocatable == {"cpu": 31000, "memory": 125 * GI}
    assert got.sources == ("NodeResourceTopology", "Pod")


def test_volcano_topology_decision_is_not_subtracted() -> None:
    # Volcano writes it at bind (job_info.go SetPodResourceDecision) and never reads it for
    # capacity: the exporter's free cpuset already excludes the pinned CPUs.
    got = one(
        [
            numatopology("v", allocatable="0-15,28-31", detail=cpu_detail(16)),
            pod(
                "a",
                node="v",
                annotations={"volcano.sh/topology-decision": '{"numa":{"1":{"cpu":"12"}}}'},
            ),
        ]
    )
    assert [z.available["cpu"] for z in got.zones] == [16000, 4000]
    assert [z.allocatable["cpu"] for z in got.zones] == [16000, 16000]


def test_source_available_is_not_reduced_by_pods() -> None:
    # An NRT exporter's `available` already accounts for running pods.
    got = one(
        [
            nrt("k", two_zones(("32", "31", "20"))),
            pod("a", node="k", annotations=koord_status({0: {"cpu": "8"}})),
        ]
    )
    assert [z.available["cpu"] for z in got.zones] == [20000, 20000]


def test_available_never_negative_and_unbound_or_finished_pods_ignored() -> None:
    got = one(
        [
            nrt("k", two_zones(("4", "4"))),
            pod("big", node="k", annotations=koord_status({0: {"cpu": "6"}})),
            pod("pending", node=None, annotations=koord_status({1: {"cpu": "4"}})),
            pod("done", node="k", annotations=koord_status({1: {"cpu": "4"}}), phase="Succeeded"),
            pod("failed", node="k", annotations=koord_status({1: {"cpu": "4"}}), phase="Failed"),
            pod("plain", node="k", annotations={}),
        ]
    )
    assert [z.available["cpu"] for z in got.zones] == [0, 4000]


@pytest.mark.parametrize(
    ("pods", "states"),
    [
        ([], ("idle", "idle")),
        # an LS pod: SingleNUMANode spec, no cpuset -> marks nothing (node_allocation.go
        # addPodAllocation classifies only a cpuset).
        ([(SINGLE_SPEC, {0: {"cpu": "4"}}, "")], ("idle", "idle")),
        # a pod with an exclusive cpuset on one NUMA node -> single (nodeallocation.go).
        ([({}, {1: {"cpu": "4"}}, "16-19")], ("idle", "single")),
        # a pod spread over both NUMA nodes -> shared on each.
        ([({}, {0: {"cpu": "4"}, 1: {"cpu": "4"}}, "0-3,16-19")], ("shared", "shared")),
        # shared wins over single (NUMANodeSharedStatus).
        (
            [
                (SINGLE_SPEC, {0: {"cpu": "4"}}, ""),
                ({}, {0: {"cpu": "2"}, 1: {"cpu": "2"}}, "4-5,20-21"),
            ],
            ("shared", "shared"),
        ),
        # a pod without a cpuset or a SingleNUMANode spec leaves the state alone.
        ([({}, {0: {"cpu": "500m"}}, "")], ("idle", "idle")),
    ],
)
def test_koordinator_numa_states(pods: list, states: tuple[str, ...]) -> None:
    objects = [nrt("k", two_zones(("16", "16")))]
    for i, (spec, numa, cpuset) in enumerate(pods):
        objects.append(pod(f"p{i}", node="k", annotations={**spec, **koord_status(numa, cpuset)}))
    got = one(objects)
    assert got.numa_states == states


def test_pod_annotation_errors_name_the_pod_and_field() -> None:
    result = build_inventory(
        [
            nrt("k", two_zones(("16", "16"))),
            pod(
                "bad-json",
                node="k",
                annotations={"scheduling.koordinator.sh/resource-status": "{cpuset: 1}"},
            ),
            pod(
                "bad-qty",
                node="k",
                annotations=koord_status({0: {"cpu": "lots"}}),
                namespace="team",
            ),
            pod("bad-numa", node="k", annotations=koord_status({99: {"cpu": "1"}})),
            pod("far", node="k", annotations=koord_status({5: {"cpu": "1"}})),
            pod("good", node="k", annotations=koord_status({0: {"cpu": "2"}})),
        ]
    )
    errors = "\n".join(result.errors)
    assert (
        "Pod default/bad-json: metadata.annotations[scheduling.koordinator.sh/resource-status]: not valid JSON"
        in errors
    )
    assert (
        "Pod team/bad-qty: metadata.annotations[scheduling.koordinator.sh/resource-status]"
        ".numaNodeResources[0].resources[cpu]: quantity 'lots'" in errors
    )
    assert "Pod default/bad-numa: " in errors and "99 is not a NUMA id" in errors
    assert "Pod default/far: metadata.annotations: uses NUMA node(s) [5]" in errors
    (k,) = result.nodes
    assert [z.available["cpu"] for z in k.zones] == [14000, 16000]  # only the good pod


# -- the whole-input contract ----------------------------------------------------------------


def test_other_kinds_are_counted_and_ignored() -> None:
    result = build_inventory(
        [
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "y"}},
            {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}},
            {"metadata": {"name": "no-kind"}},
            node("n"),
        ]
    )
    assert result.errors == ()
    assert result.ignored == {"ConfigMap": 2, "Deployment": 1, "<no kind>": 1}
    assert [n.name for n in result.nodes] == ["n"]


def test_wrong_api_version_and_missing_name() -> None:
    bad_version = nrt("w", two_zones(), version="v1beta1")
    no_name = node("x")
    del no_name["metadata"]["name"]
    result = build_inventory([bad_version, no_name, "not an object", node("ok")])  # type: ignore[list-item]
    assert result.errors == (
        "NodeResourceTopology w: apiVersion: 'topology.node.k8s.io/v1beta1' is not supported "
        "(allowed: topology.node.k8s.io/v1alpha2, topology.node.k8s.io/v1alpha1)",
        "Node objects[1]: metadata.name: missing",
        "objects[2]: is a str, not an object",
    )
    assert [n.name for n in result.nodes] == ["ok"]


def test_duplicates_keep_the_first() -> None:
    result = build_inventory(
        [nrt("w", two_zones(("8", "8"))), nrt("w", two_zones(("4", "4"))), node("w"), node("w")]
    )
    assert [z.capacity["cpu"] for z in result.nodes[0].zones] == [8000, 8000]
    assert result.errors == (
        "NodeResourceTopology w: metadata.name: listed twice; the first one is used",
        "Node w: metadata.name: listed twice; the first one is used",
    )


def test_errors_collected_while_good_objects_load() -> None:
    objects = [
        node("a", allocatable={"cpu": "8"}),
        nrt("a", [zone("numa-node-0", {"cpu": ("4", "4")})]),
        nrt("b", two_zones(("16", "16")), attributes={"topologyManagerPolicy": "single-numa-node"}),
        numatopology("c", allocatable="0-3,9", detail=cpu_detail(2)),
        node("d", allocatable={"cpu": "1.2.3"}),
        nrt("e", two_zones(("16", "16"))),
    ]
    result = build_inventory(objects)
    assert [n.name for n in result.nodes] == ["a", "b", "c", "d", "e"]
    by_name = {n.name: n for n in result.nodes}
    assert by_name["a"].zones == () and by_name["b"].tm_policy == "single-numa-node"
    assert len(by_name["e"].zones) == 2
    kinds = {e.split(":")[0] for e in result.errors}
    assert kinds == {"NodeResourceTopology a", "Numatopology c", "Node d"}


def test_result_is_immutable_and_sorted() -> None:
    result = build_inventory([node("b"), node("a"), nrt("c", two_zones())])
    assert [n.name for n in result.nodes] == ["a", "b", "c"]
    assert isinstance(result.nodes, tuple) and isinstance(result.errors, tuple)
    with pytest.raises(AttributeError):
        result.nodes = ()  # type: ignore[misc]


_json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 70),
    st.text(max_size=8),
    st.sampled_from(["node-0", "4Gi", "0-3", "Node"]),
)
_json = st.recursive(
    _json_leaf,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "kind": st.sampled_from(["Node", "NodeResourceTopology", "Numatopology", "Pod"]),
                "metadata": st.fixed_dictionaries(
                    {"name": st.sampled_from(["a", "b"])},
                    optional={"labels": _json, "annotations": _json},
                ),
            },
            optional={
                "zones": _json,
                "attributes": _json,
                "topologyPolicies": _json,
                "spec": _json,
                "status": _json,
            },
        ),
        max_size=4,
    )
)
def test_never_raises_on_garbage(objects: list[dict[str, Any]]) -> None:
    result = build_inventory(objects)
    assert all(isinstance(e, str) and e for e in result.errors)
    assert [n.name for n in result.nodes] == sorted(n.name for n in result.nodes)


_qty = st.one_of(_json_leaf, st.sampled_from(["32", "500m", "4Gi", "-1", "1e3", "0x10", 3, 2.5]))
_near_zone = st.fixed_dictionaries(
    {
        "name": st.sampled_from(["node-0", "node-1", "node-63", "node-64", "numa-node-0", 7]),
        "type": st.sampled_from(["Node", "Socket", None]),
    },
    optional={
        "resources": st.lists(
            st.fixed_dictionaries(
                {"name": st.sampled_from(["cpu", "memory", "nvidia.com/gpu", 5])},
                optional={"capacity": _qty, "allocatable": _qty, "available": _qty},
            )
            | _json,
            max_size=3,
        ),
        "costs": st.lists(
            st.fixed_dictionaries(
                {"name": st.sampled_from(["node-0", "node-1", "x"]), "value": _json_leaf}
            ),
            max_size=2,
        )
        | _json,
    },
)
_annotation_json = st.builds(
    json.dumps,
    st.fixed_dictionaries(
        {},
        optional={
            "cpuset": st.sampled_from(["0-3", "x", "", 4]),
            "numaNodeResources": st.lists(
                st.fixed_dictionaries({}, optional={"node": _json_leaf, "resources": _json}),
                max_size=2,
            )
            | _json,
            "numa": st.dictionaries(st.sampled_from(["0", "1", "70", "x"]), _json, max_size=2)
            | _json,
            "numaTopologyPolicy": _json_leaf,
        },
    ),
)


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(
    zones=st.lists(_near_zone, max_size=3),
    annotations=st.dictionaries(
        st.sampled_from(
            [
                "scheduling.koordinator.sh/resource-status",
                "volcano.sh/topology-decision",
                "scheduling.koordinator.sh/numa-topology-spec",
            ]
        ),
        _annotation_json | st.text(max_size=5),
        max_size=3,
    ),
    detail=st.dictionaries(
        st.sampled_from(["0", "1", "2", "x"]),
        st.fixed_dictionaries({}, optional={"numa": _json_leaf, "core": _json_leaf}) | _json,
        max_size=3,
    ),
    allocatable=st.sampled_from(["0-2", "0-9", "x", "", "2-1"]) | _json_leaf,
    reserved=_json,
)
def test_never_raises_on_near_valid_objects(
    zones: list, annotations: dict, detail: dict, allocatable: object, reserved: object
) -> None:
    volcano = numatopology("a", allocatable="0-1", detail=detail)
    volcano["spec"]["numares"]["cpu"]["allocatable"] = allocatable
    volcano["spec"]["resReserved"] = reserved
    result = build_inventory(
        [
            nrt("a", zones),
            volcano,
            pod("p", node="a", annotations=annotations),
            pod("q", node="b", annotations=annotations),
        ]
    )
    assert all(isinstance(e, str) and e for e in result.errors)
    for n in result.nodes:
        for z in n.zones:
            assert 0 <= z.id <= 63
            assert all(v >= 0 for v in z.available.values())


# -- the demo inventory and the seed fixtures -------------------------------------------------


def _load(path: Path) -> list[dict[str, Any]]:
    return [item.obj for item in load_objects(str(path))]


def test_demo_inventory_loads_with_zero_errors_and_shows_every_case() -> None:
    result = build_inventory(_load(DEMO))
    assert result.errors == ()
    assert result.ignored == {}
    nodes = {n.name: n for n in result.nodes}
    assert 8 <= len(nodes) <= 12
    koord = {
        n.koord_policy
        for n in nodes.values()
        if "node.koordinator.sh/numa-topology-policy" in n.labels
    }
    assert koord == {"single-numa-node", "restricted", "none"}
    nrt_policies = {
        (n.tm_policy, n.tm_scope) for n in nodes.values() if "NodeResourceTopology" in n.sources
    }
    assert {
        ("best-effort", "container"),
        ("restricted", "pod"),
        ("single-numa-node", "container"),
    } <= nrt_policies
    assert any(n.volcano_policy and n.zones for n in nodes.values())
    assert any(n.full_pcpus_only and n.threads_per_core == 2 for n in nodes.values())
    assert any(n.prefer_closest for n in nodes.values())
    assert any(n.memory_manager_policy == "Static" for n in nodes.values())
    assert any(
        all(z.capacity.get("nvidia.com/gpu", 0) > 0 for z in n.zones) and n.zones
        for n in nodes.values()
    )
    assert any(n.unaligned_devices for n in nodes.values())
    assert any(not n.zones for n in nodes.values())
    assert {"single", "shared"} <= {s for n in nodes.values() for s in n.numa_states}
    for n in nodes.values():
        for z in n.zones:  # realistic 2-socket figures: 32 CPUs per NUMA node
            assert z.capacity["cpu"] == 32000
            assert all(z.available[r] <= z.allocatable[r] <= z.capacity[r] for r in z.allocatable)


def test_demo_inventory_is_v1alpha1_aware() -> None:
    text = DEMO.read_text()
    assert "topology.node.k8s.io/v1alpha1" in text and "topologyPolicies" in text


@pytest.mark.parametrize("path", [DEMO, *sorted(FIXTURES.glob("*.yaml"))], ids=lambda p: p.name)
def test_files_match_the_inventory_schema(path: Path) -> None:
    validator = jsonschema.Draft202012Validator(load_schema("inventory"))
    for obj in _load(path):
        errors = [e.message for e in validator.iter_errors(obj)]
        assert errors == [], (obj["kind"], obj["metadata"]["name"], errors)


@pytest.mark.parametrize("path", [DEMO, *sorted(FIXTURES.glob("*.yaml"))], ids=lambda p: p.name)
def test_nodes_and_pods_match_the_official_schema(path: Path) -> None:
    for obj in _load(path):
        if obj["kind"] in ("Node", "Pod"):
            kubernetes_validate.validate(obj, "1.30", strict=True)


def test_schema_rejects_what_the_builder_rejects() -> None:
    validator = jsonschema.Draft202012Validator(load_schema("inventory"))
    assert validator.is_valid(nrt("w", two_zones()))
    assert not validator.is_valid(nrt("w", [zone("numa-node-0", {"cpu": ("4", "4")})]))
    assert not validator.is_valid(nrt("w", [zone(64, {"cpu": ("4", "4")})]))
    # third-party docs show `allocatable: "256Gi"`: not a cpuset list
    assert not validator.is_valid(numatopology("v", allocatable="256Gi", detail=cpu_detail(2)))
    bad_qty = nrt("w", [zone(0, {"cpu": ("32 cores", "4")})])
    assert not validator.is_valid(bad_qty)
    assert not validator.is_valid(
        node("n", labels={"node.koordinator.sh/numa-topology-policy": "None"})
    )


def _cpu_table(path: Path) -> dict[str, tuple[str | None, list[tuple[int, int, int]]]]:
    result = build_inventory(_load(path))
    assert result.errors == ()
    return {
        n.name: (
            n.volcano_policy,
            [(z.capacity["cpu"], z.allocatable["cpu"], z.available["cpu"]) for z in n.zones],
        )
        for n in result.nodes
    }


def test_cce_volcano_first_table() -> None:
    full = [(16000, 16000, 16000)] * 2
    assert _cpu_table(FIXTURES / "cce-volcano.yaml") == {
        "node-1": ("best-effort", full),
        "node-2": ("restricted", full),
        "node-3": ("restricted", full),
        "node-4": ("single-numa-node", full),
    }


def test_cce_volcano_busy_variant() -> None:
    busy = [(16000, 16000, 8000)] * 2
    table = _cpu_table(FIXTURES / "cce-volcano-busy.yaml")
    assert table["node-1"] == ("best-effort", busy)
    assert table["node-2"] == ("restricted", busy)
    assert table["node-3"] == ("restricted", busy)
    assert table["node-4"] == ("single-numa-node", [(16000, 16000, 16000)] * 2)


def test_cce_volcano_second_table() -> None:
    assert _cpu_table(FIXTURES / "cce-volcano-2.yaml") == {
        "node-1": ("single-numa-node", [(16000, 16000, 16000)] * 2),
        "node-2": ("best-effort", [(16000, 16000, 16000)] * 2),
        "node-3": ("best-effort", [(20000, 20000, 20000)] * 2),
    }
