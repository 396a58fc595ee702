"""Scarce-resource avoidance at admission: which pods get the anti-affinity, what it selects,
and that its operations on a real pod spec (core.mutation.affinity.scarce_ops; JSONPatch
applied with `jsonpatch`, the result checked against the official Pod schema) are
idempotent."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jsonpatch
import kubernetes_validate
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import InvalidInput
from core.model import NodeSelectorRequirement, NodeSelectorTerm, PodIntent
from core.mutation.affinity import ScarceSettings, scarce_ops
from core.mutation.scarce import avoidance, presence_label
from tests.builders import objects as k8s
from tests.builders.model import container, intent

GPU = ["nvidia.com/gpu"]
CPU_ONLY = intent(containers=[container(requests={"cpu": 1000, "memory": 2**30})])
K8S = kubernetes_validate.utils.latest_version()


def pod(spec_extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return k8s.pod("p", [k8s.container("c", {"cpu": "1"}, limits={})], spec=spec_extra)


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
    # "A null or empty node selector term matches no objects" (core/v1 NodeSelectorTerm)
    return any(
        (t.get("matchExpressions") or t.get("matchFields"))
        and all(_matches(e, labels) for e in t.get("matchExpressions", []))
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


def scarce_affinity(
    pod_intent: PodIntent,
    scarce: list[str],
    *,
    required: bool,
    label_keys: Mapping[str, str] | None = None,
    spec: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """The pod's affinity after the scarce operations (applied with jsonpatch), or None
    when there are none."""
    doc = {"spec": dict(spec or {})}
    settings = ScarceSettings(tuple(scarce), required=required, label_keys=dict(label_keys or {}))
    ops = scarce_ops(pod_intent, doc["spec"], settings)
    if not ops:
        return None
    affinity: dict[str, Any] = jsonpatch.apply_patch(doc, ops)["spec"]["affinity"]
    return affinity


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
        ScarceSettings(tuple(GPU), weight=weight)


def test_avoidance_returns_requirements() -> None:
    assert avoidance(CPU_ONLY, GPU) == (
        NodeSelectorRequirement("nvidia.com/gpu.present", "NotIn", ("true",)),
    )


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


def _ops(spec: Mapping[str, Any], required: bool) -> list[dict[str, Any]]:
    return scarce_ops(CPU_ONLY, spec, ScarceSettings(tuple(GPU), required=required))


@pytest.mark.parametrize("required", [True, False])
@pytest.mark.parametrize("existing", EXISTING_AFFINITIES)
def test_patch_applies_validates_and_is_idempotent(existing: Any, required: bool) -> None:
    doc = pod({} if existing is None else {"affinity": existing})
    ops = _ops(doc["spec"], required)
    assert ops
    patched = jsonpatch.apply_patch(doc, ops)
    kubernetes_validate.validate(patched, K8S, strict=True)
    assert _ops(patched["spec"], required) == []  # second application: no patch
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


def test_no_operations_when_off_and_input_untouched() -> None:
    assert scarce_ops(CPU_ONLY, pod()["spec"], None) == []
    spec = pod({"affinity": EXISTING_AFFINITIES[3]})["spec"]
    before = repr(spec)
    _ops(spec, True)
    assert repr(spec) == before


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
def test_operations_are_idempotent_for_any_existing_affinity(existing: Any, required: bool) -> None:
    doc = pod({} if existing is None else {"affinity": existing})
    once = jsonpatch.apply_patch(doc, _ops(doc["spec"], required))
    assert _ops(once["spec"], required) == []
    if required:
        assert not admits(once["spec"]["affinity"], GPU_NODE)
