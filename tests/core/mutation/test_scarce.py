"""Scarce-resource avoidance at admission: which pods get the anti-affinity, what it selects,
and that merging it into a real pod spec (JSONPatch applied with `jsonpatch`, the result
checked against the official Pod schema) is idempotent."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import jsonpatch
import kubernetes_validate
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import InvalidInput
from core.model import NodeSelectorRequirement, NodeSelectorTerm
from core.mutation.scarce import affinity_patch, merge_affinity, presence_label, scarce_affinity
from tests.fixtures.scoring.builders import container, intent

GPU = ["nvidia.com/gpu"]
CPU_ONLY = intent(containers=[container(requests={"cpu": 1000, "memory": 2**30})])
K8S = kubernetes_validate.utils.latest_version()


def pod(spec_extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    spec = {
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]
    }
    spec.update(spec_extra or {})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": spec,
    }


def _matches(requirement: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, op, values = requirement["key"], requirement["operator"], requirement.get("values", [])
    if op == "In":
        return labels.get(key) in values
    if op == "NotIn":
        return labels.get(key) not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    raise AssertionError(op)


def admits(affinity: Mapping[str, Any], labels: Mapping[str, str], name: str = "other") -> bool:
    """Kubernetes required node affinity: terms ORed, expressions and fields ANDed."""
    required = affinity.get("nodeAffinity", {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if not required:
        return True
    fields = {"metadata.name": name}
    return any(
        all(_matches(e, labels) for e in t.get("matchExpressions", []))
        and all(_matches(f, fields) for f in t.get("matchFields", []))
        for t in required["nodeSelectorTerms"]
    )


def preference_score(affinity: Mapping[str, Any], labels: Mapping[str, str]) -> int:
    terms = affinity.get("nodeAffinity", {}).get(
        "preferredDuringSchedulingIgnoredDuringExecution", []
    )
    return sum(
        t["weight"]
        for t in terms
        if all(_matches(e, labels) for e in t["preference"]["matchExpressions"])
    )


GPU_NODE = {"nvidia.com/gpu.present": "true", "kubernetes.io/hostname": "g"}
CPU_NODE = {"kubernetes.io/hostname": "c"}


# ------------------------------------------------------------------ which pods


def test_cpu_only_pod_prefers_nodes_without_gpus() -> None:
    fragment = scarce_affinity(CPU_ONLY, GPU, required=False)
    assert fragment == {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "preference": {
                        "matchExpressions": [
                            {
                                "key": "nvidia.com/gpu.present",
                                "operator": "NotIn",
                                "values": ["true"],
                            }
                        ]
                    },
                }
            ]
        }
    }
    # Same verdict as koordinator's ScarceResourceAvoidance: the non-GPU node is preferred.
    assert preference_score(fragment, CPU_NODE) > preference_score(fragment, GPU_NODE)
    assert admits(fragment, GPU_NODE)  # only preferred: still allowed


def test_required_mode_keeps_cpu_pods_off_gpu_nodes() -> None:
    fragment = scarce_affinity(CPU_ONLY, GPU, required=True)
    assert fragment is not None
    assert admits(fragment, CPU_NODE)
    assert not admits(fragment, GPU_NODE)
    assert admits(fragment, {"nvidia.com/gpu.present": "false"})


@pytest.mark.parametrize(
    "demand",
    [
        {"nvidia.com/gpu": 1},
        {"nvidia.com/gpumem": 4000},  # HAMi's webhook adds nvidia.com/gpu: 1 to these
        {"nvidia.com/gpucores": 30},
    ],
)
def test_pods_requesting_a_scarce_resource_are_left_alone(demand: dict[str, int]) -> None:
    gpu_pod = intent(
        containers=[container(requests={"cpu": 1000}, limits={"cpu": 1000, **demand})],
        pod_requests={"cpu": 1000},
    )
    assert scarce_affinity(gpu_pod, GPU, required=True) is None


def test_no_scarce_resources_or_bound_pod_or_explicit_selection_gives_nothing() -> None:
    assert scarce_affinity(CPU_ONLY, [], required=True) is None
    bound = intent(containers=CPU_ONLY.containers, node_name="gpu-1")
    assert scarce_affinity(bound, GPU, required=True) is None
    selecting = intent(
        containers=CPU_ONLY.containers, node_selector={"nvidia.com/gpu.present": "true"}
    )
    assert scarce_affinity(selecting, GPU, required=True) is None
    term = NodeSelectorTerm((NodeSelectorRequirement("nvidia.com/gpu.present", "Exists"),))
    affine = intent(containers=CPU_ONLY.containers, required_terms=(term,))
    assert scarce_affinity(affine, GPU, required=False) is None


def test_label_keys_and_several_resources() -> None:
    labels = {"amd.com/gpu": "feature.node.kubernetes.io/amd-gpu"}
    assert presence_label("nvidia.com/gpu") == "nvidia.com/gpu.present"
    assert presence_label("amd.com/gpu", labels) == "feature.node.kubernetes.io/amd-gpu"
    fragment = scarce_affinity(
        CPU_ONLY, ["nvidia.com/gpu", "amd.com/gpu"], required=True, label_keys=labels
    )
    assert fragment is not None
    (term,) = fragment["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert [e["key"] for e in term["matchExpressions"]] == [
        "feature.node.kubernetes.io/amd-gpu",
        "nvidia.com/gpu.present",
    ]
    assert not admits(fragment, {"feature.node.kubernetes.io/amd-gpu": "true"})


@pytest.mark.parametrize("weight", [0, 101])
def test_weight_out_of_range_is_an_error(weight: int) -> None:
    with pytest.raises(InvalidInput, match=f"weight {weight} is not allowed; expected 1..100"):
        scarce_affinity(CPU_ONLY, GPU, required=False, weight=weight)


# ------------------------------------------------------------------ merge and patch

EXISTING_AFFINITIES = [
    None,
    {"nodeAffinity": None},
    {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": {"app": "x"}},
                }
            ]
        }
    },
    {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 5,
                    "preference": {"matchExpressions": [{"key": "ssd", "operator": "Exists"}]},
                }
            ],
        }
    },
]


@pytest.mark.parametrize("required", [True, False])
@pytest.mark.parametrize("existing", EXISTING_AFFINITIES)
def test_patch_applies_validates_and_is_idempotent(existing: Any, required: bool) -> None:
    doc = pod({} if existing is None else {"affinity": existing})
    fragment = scarce_affinity(CPU_ONLY, GPU, required=required)
    ops = affinity_patch(doc["spec"], fragment)
    assert len(ops) == 1
    patched = jsonpatch.apply_patch(doc, ops)
    kubernetes_validate.validate(patched, K8S, strict=True)
    assert affinity_patch(patched["spec"], fragment) == []  # second application: no patch
    affinity = patched["spec"]["affinity"]
    if existing and existing.get("podAntiAffinity"):
        assert affinity["podAntiAffinity"] == existing["podAntiAffinity"]
    if required:
        terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ]
        assert all(
            {"key": "nvidia.com/gpu.present", "operator": "NotIn", "values": ["true"]}
            in t["matchExpressions"]
            for t in terms
        )
        assert not admits(affinity, {**GPU_NODE, "zone": "a"})
        if existing and existing.get("nodeAffinity"):
            assert admits(affinity, {**CPU_NODE, "zone": "a"})
            assert admits(affinity, CPU_NODE, name="n1")
            assert not admits(affinity, GPU_NODE, name="n1")
            assert not admits(
                affinity, {**CPU_NODE, "zone": "b"}
            )  # the user's own term still applies
    else:
        assert preference_score(affinity, CPU_NODE) >= 100


def test_patch_path_for_a_workload_template_and_no_fragment() -> None:
    deployment_spec: dict[str, Any] = {"template": {"spec": pod()["spec"]}}
    fragment = scarce_affinity(CPU_ONLY, GPU, required=True)
    ops = affinity_patch(deployment_spec["template"]["spec"], fragment, path="/spec/template/spec")
    assert ops[0]["op"] == "add" and ops[0]["path"] == "/spec/template/spec/affinity"
    assert affinity_patch(pod()["spec"], None) == []


def test_merge_does_not_touch_its_input() -> None:
    existing = copy.deepcopy(EXISTING_AFFINITIES[3])
    before = copy.deepcopy(existing)
    merge_affinity(existing, scarce_affinity(CPU_ONLY, GPU, required=True) or {})
    assert existing == before


_expr = st.fixed_dictionaries(
    {
        "key": st.sampled_from(["zone", "rack", "nvidia.com/gpu.present"]),
        "operator": st.just("In"),
        "values": st.lists(st.sampled_from(["a", "b", "true"]), min_size=1, max_size=2),
    }
)
_affinity = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {
            "nodeAffinity": st.fixed_dictionaries(
                {
                    "requiredDuringSchedulingIgnoredDuringExecution": st.fixed_dictionaries(
                        {
                            "nodeSelectorTerms": st.lists(
                                st.fixed_dictionaries(
                                    {"matchExpressions": st.lists(_expr, max_size=3)}
                                ),
                                min_size=1,
                                max_size=3,
                            )
                        }
                    )
                }
            )
        }
    ),
)


@settings(max_examples=60, deadline=None)
@given(existing=_affinity, required=st.booleans())
def test_merge_is_idempotent_for_any_existing_affinity(existing: Any, required: bool) -> None:
    fragment = scarce_affinity(CPU_ONLY, GPU, required=required)
    assert fragment is not None
    once = merge_affinity(existing, fragment)
    assert merge_affinity(once, fragment) == once
    if required:
        assert not admits(once, GPU_NODE)
