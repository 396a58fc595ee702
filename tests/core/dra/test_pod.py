"""core/dra/pod.py: which pods the DRA rules judge, over which nodes, and the Topology
Manager finding (KEP-4381: DRA devices give the kubelet no topology hints)."""

from __future__ import annotations

from typing import Any

from core.dra.inventory import read_inventory
from core.dra.pod import alignment, candidate_nodes, judge_pod, uses_dra
from core.intent.read import read_intent
from core.intent.workloads import pod_templates
from core.inventory.build import build_inventory
from core.model import PodIntent
from tests.webhook.dra.objects import claim, inventory, pod, request

OBJECTS = inventory([claim("two", [request("gpus", 2)]), claim("five", [request("gpus", 5)])])
INV = read_inventory(OBJECTS)
NODES = build_inventory(OBJECTS).nodes


def _intent(p: dict[str, Any]) -> PodIntent:
    return read_intent(pod_templates(p)[0]).intent


def test_only_pods_with_claims_or_dra_served_extended_resources_are_judged() -> None:
    assert uses_dra(pod("p", {"g": "two"}), INV)
    assert not uses_dra(pod("p", {}), INV)
    extended = pod("p", {})
    extended["spec"]["containers"][0]["resources"] = {"limits": {"example.com/gpu": "1"}}
    assert not uses_dra(extended, INV)  # no class serves example.com/gpu
    implicit = pod("p", {})
    implicit["spec"]["containers"][0]["resources"] = {
        "limits": {"deviceclass.resource.kubernetes.io/gpu": "1"}
    }
    assert uses_dra(implicit, INV)  # KEP-5004: every class under its implicit name


def test_candidates_follow_node_name_selector_and_required_affinity() -> None:
    assert [n.name for n in candidate_nodes(_intent(pod("p", {})), NODES)] == ["gpu-a", "gpu-b"]
    chosen = pod("p", {}, node_selector={"kubernetes.io/hostname": "gpu-b"})
    assert [n.name for n in candidate_nodes(_intent(chosen), NODES)] == ["gpu-b"]
    affinity = pod("p", {})
    affinity["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": "kubernetes.io/hostname",
                                "operator": "NotIn",
                                "values": ["gpu-b"],
                            }
                        ]
                    }
                ]
            }
        }
    }
    assert [n.name for n in candidate_nodes(_intent(affinity), NODES)] == ["gpu-a"]


def test_judged_only_over_the_allowed_nodes() -> None:
    p = pod("p", {"g": "five"}, node_selector={"kubernetes.io/hostname": "gpu-a"})
    verdict = judge_pod(p, _intent(p), NODES, INV)
    assert verdict is not None and verdict.verdict == "impossible"
    assert list(verdict.nodes) == ["gpu-a"] and verdict.message.startswith("on 1 of 1 nodes")
    nowhere = pod("p", {"g": "five"}, node_selector={"kubernetes.io/hostname": "other"})
    assert judge_pod(nowhere, _intent(nowhere), NODES, INV) is None  # the NRT checks say why


def test_alignment_needs_guaranteed_integer_cpus_and_an_aligning_policy() -> None:
    guaranteed = pod("p", {"g": "two"}, cpu="2", guaranteed=True)
    verdict = judge_pod(guaranteed, _intent(guaranteed), NODES, INV)
    assert verdict is not None and verdict.verdict == "fits"
    found = alignment(guaranteed, _intent(guaranteed), verdict, NODES, INV)
    assert found is not None and found.nodes == 2 and found.policy == "single-numa-node"
    assert "resource.kubernetes.io/pcieRoot" in found.message and "numaNode" in found.message
    for other in (
        pod("p", {"g": "two"}, cpu="2"),  # Burstable
        pod("p", {"g": "two"}, cpu="1500m", guaranteed=True),  # no exclusive CPUs
    ):
        assert alignment(other, _intent(other), verdict, NODES, INV) is None
    impossible = pod("p", {"g": "five"}, cpu="2", guaranteed=True)
    never = judge_pod(impossible, _intent(impossible), NODES, INV)
    assert (
        never is not None and alignment(impossible, _intent(impossible), never, NODES, INV) is None
    )
