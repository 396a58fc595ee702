"""core.mutation.patch: minimal, idempotent JSONPatch operations, applied with the real jsonpatch
library (what the apiserver does is RFC 6902; jsonpatch implements the same RFC)."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.model import NodeSelectorRequirement
from core.mutation.patch import (
    affinity_ops,
    annotation_ops,
    apply_ops,
    escape_pointer_token,
    node_name_ops,
    preferred_ops,
)

REQ = NodeSelectorRequirement(
    "node.koordinator.sh/numa-topology-policy", "NotIn", ("Restricted", "BestEffort")
)
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def apply(doc: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    return jsonpatch.JsonPatch(ops).apply(copy.deepcopy(doc))


def terms(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return pod["spec"]["affinity"]["nodeAffinity"][REQUIRED]["nodeSelectorTerms"]


@pytest.mark.parametrize(
    ("key", "escaped"),
    [("a/b", "a~1b"), ("a~b", "a~0b"), ("~/", "~0~1"), ("plain", "plain"), ("~1", "~01")],
)
def test_pointer_escaping(key: str, escaped: str) -> None:
    assert escape_pointer_token(key) == escaped
    # and the real library resolves it back to the key
    doc = {"m": {key: "v"}}
    assert jsonpatch.JsonPointer(f"/m/{escaped}").resolve(doc) == "v"


def test_annotation_ops_add_replace_remove_per_key() -> None:
    pod = {
        "metadata": {
            "annotations": {
                "keep": "1",
                "volcano.sh/numa-topology-policy": "Single-Numa-Node",
                "old": "x",
            }
        }
    }
    desired = {"keep": "1", "volcano.sh/numa-topology-policy": "single-numa-node", "new/key~": "y"}
    ops = annotation_ops(pod["metadata"], desired)
    assert {o["op"] for o in ops} == {"replace", "add", "remove"}
    assert all(o["path"] != "/metadata/annotations" for o in ops)  # never the whole map
    assert apply(pod, ops)["metadata"]["annotations"] == desired
    assert annotation_ops(apply(pod, ops)["metadata"], desired) == []


@pytest.mark.parametrize(
    "metadata",
    [None, {}, {"annotations": None}, {"name": "p"}],
    ids=["no-meta", "empty", "null", "no-ann"],
)
def test_annotation_ops_create_map(metadata: dict[str, Any] | None) -> None:
    pod: dict[str, Any] = {"spec": {}}
    if metadata is not None:
        pod["metadata"] = metadata
    ops = annotation_ops(pod.get("metadata"), {"a/b": "c"})
    assert len(ops) == 1
    assert apply(pod, ops)["metadata"]["annotations"] == {"a/b": "c"}


@pytest.mark.parametrize(
    "spec",
    [
        {},
        {"affinity": None},
        {"affinity": {}},
        {"affinity": {"podAntiAffinity": {"x": 1}}},
        {"affinity": {"nodeAffinity": {}}},
        {"affinity": {"nodeAffinity": {REQUIRED: {}}}},
        {"affinity": {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": []}}}},
    ],
    ids=[
        "no-affinity",
        "null",
        "empty",
        "pod-anti",
        "empty-node-aff",
        "empty-required",
        "no-terms",
    ],
)
def test_affinity_creates_a_term_when_none(spec: dict[str, Any]) -> None:
    pod = {"spec": spec}
    ops = affinity_ops(spec, REQ)
    out = apply(pod, ops)
    assert terms(out) == [
        {
            "matchExpressions": [
                {"key": REQ.key, "operator": "NotIn", "values": ["Restricted", "BestEffort"]}
            ]
        }
    ]
    if spec.get("affinity") and "podAntiAffinity" in spec["affinity"]:
        assert out["spec"]["affinity"]["podAntiAffinity"] == {"x": 1}
    assert affinity_ops(out["spec"], REQ) == []


def test_affinity_is_anded_into_every_term_keeping_user_terms() -> None:
    user = [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
        {},  # matches nothing: must stay empty
    ]
    spec = {"affinity": {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": copy.deepcopy(user)}}}}
    ops = affinity_ops(spec, REQ)
    assert all(o["op"] == "add" for o in ops)
    assert all(o["path"].startswith("/spec/affinity/nodeAffinity/") for o in ops)
    out = apply({"spec": spec}, ops)
    t = terms(out)
    assert t[0]["matchExpressions"][0] == user[0]["matchExpressions"][0]
    assert t[0]["matchExpressions"][1]["key"] == REQ.key
    assert t[1]["matchFields"] == user[1]["matchFields"]
    assert t[1]["matchExpressions"][0]["key"] == REQ.key
    assert t[2] == {}
    assert affinity_ops(out["spec"], REQ) == []


def test_exists_has_no_values_and_match_fields_target() -> None:
    req = NodeSelectorRequirement("k", "Exists")
    out = apply({"spec": {}}, affinity_ops({}, req, field="matchFields"))
    assert terms(out) == [{"matchFields": [{"key": "k", "operator": "Exists"}]}]


def test_node_name_ops_one_name_per_term_and_cross_product() -> None:
    user = [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
    spec = {"affinity": {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": user}}}}
    ops = node_name_ops(spec, ["n2", "n1"])
    out = apply({"spec": spec}, ops)
    t = terms(out)
    assert len(t) == 2
    for term, name in zip(t, ["n1", "n2"], strict=True):
        assert term["matchExpressions"] == user[0]["matchExpressions"]
        assert term["matchFields"] == [{"key": "metadata.name", "operator": "In", "values": [name]}]
    assert node_name_ops(out["spec"], ["n1", "n2"]) == []


def test_node_name_ops_without_affinity() -> None:
    out = apply({"spec": {"containers": []}}, node_name_ops({"containers": []}, ["a", "b"]))
    assert [x["matchFields"][0]["values"] for x in terms(out)] == [["a"], ["b"]]
    assert node_name_ops(out["spec"], ["a", "b"]) == []
    assert node_name_ops({}, []) == []


def test_preferred_ops_append_once() -> None:
    term = {
        "weight": 100,
        "preference": {"matchExpressions": [{"key": "g", "operator": "NotIn", "values": ["true"]}]},
    }
    spec: dict[str, Any] = {
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {}}]
            }
        }
    }
    ops = preferred_ops(spec, term)
    assert ops[0]["path"].endswith("/-")
    out = apply({"spec": spec}, ops)
    assert preferred_ops(out["spec"], term) == []


def test_apply_ops_matches_jsonpatch() -> None:
    pod = {"metadata": {"annotations": {"a/b": "1", "x": "2"}}, "spec": {"affinity": None}}
    ops = annotation_ops(pod["metadata"], {"a/b": "3", "y~z": "4"}) + affinity_ops(pod["spec"], REQ)
    assert apply_ops(copy.deepcopy(pod), ops) == apply(pod, ops)


_keys = st.sampled_from(["a", "b/c", "d~e", "zone", "kubernetes.io/hostname"])
_expr = st.fixed_dictionaries(
    {
        "key": _keys,
        "operator": st.sampled_from(["In", "NotIn"]),
        "values": st.lists(st.sampled_from(["x", "y"]), min_size=1, max_size=2),
    }
)
_term = st.fixed_dictionaries({}, optional={"matchExpressions": st.lists(_expr, max_size=2)})


@settings(max_examples=60, deadline=None)
@given(st.lists(_term, max_size=3), st.booleans())
def test_affinity_idempotent_and_preserving(user_terms: list[dict[str, Any]], names: bool) -> None:
    spec: dict[str, Any] = {
        "affinity": {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": user_terms}}}
    }
    ops = node_name_ops(spec, ["n1", "n2"]) if names else affinity_ops(spec, REQ)
    out = apply({"spec": spec}, ops)
    again = node_name_ops(out["spec"], ["n1", "n2"]) if names else affinity_ops(out["spec"], REQ)
    assert again == []
    # every user expression survives in some term
    for term in user_terms:
        for expr in term.get("matchExpressions") or []:
            assert any(expr in (t.get("matchExpressions") or []) for t in terms(out))
