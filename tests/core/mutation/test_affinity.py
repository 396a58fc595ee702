"""core.mutation.affinity: the policy affinity planned from plain settings, and its
recognition (validation judges a pod as written, without the affinity numagate added):
the policy affinity is taken away only when planning it again reproduces the pod's."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonpatch
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.feasibility.compat import KOORDINATOR_SPELLING
from core.model import NodeTopology
from core.mutation.affinity import (
    AffinitySettings,
    ScarceSettings,
    policy_ops,
    spec_ops,
    without_policy_affinity,
)
from tests.builders.model import container, intent, plain_node

KEY = "node.koordinator.sh/numa-topology-policy"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
POD = intent(
    "koordinator", policy="single-numa-node", containers=[container(requests={"cpu": 1000})]
)


@dataclass
class Inventory:
    nodes: Sequence[NodeTopology]
    memo: dict[Any, Any] = field(default_factory=dict)

    def has_label(self, key: str) -> bool:
        return any(key in n.labels for n in self.nodes)


def _node(name: str, policy: str, *, labelled: bool) -> NodeTopology:
    labels = {KEY: KOORDINATOR_SPELLING.get(policy, "")} if labelled else {}
    return dataclasses.replace(plain_node(name, {"cpu": 8000}, labels=labels), koord_policy=policy)


def inventory(*, labelled: bool) -> Inventory:
    return Inventory(
        [
            _node("a", "single-numa-node", labelled=labelled),
            _node("b", "restricted", labelled=labelled),
            _node("c", "none", labelled=labelled),
        ]
    )


SETTINGS = AffinitySettings(label_keys={"koordinator": KEY}, default_label_key="x/y")
SCARCE = dataclasses.replace(SETTINGS, scarce=ScarceSettings(("nvidia.com/gpu",), required=True))


def mutated(spec: dict[str, Any], inv: Inventory, s: AffinitySettings) -> dict[str, Any]:
    before = copy.deepcopy(spec)
    ops, _ = spec_ops(POD, spec, inv, s, inject=True, stale=False)
    assert ops
    assert spec == before  # planned on a copy (scarce: its own affinity, the rest shared)
    wire = json.loads(json.dumps(ops))  # as the apiserver gets it
    result: dict[str, Any] = jsonpatch.apply_patch({"spec": spec}, wire)["spec"]
    return result


def terms(spec: dict[str, Any]) -> Any:
    return (
        spec.get("affinity", {})
        .get("nodeAffinity", {})
        .get(REQUIRED, {})
        .get("nodeSelectorTerms", [])
    )


def test_node_names_mode_pins_the_compatible_nodes() -> None:
    ops, warnings = policy_ops(POD, {}, inventory(labelled=False), SETTINGS)
    assert warnings == []
    pinned = jsonpatch.apply_patch({"spec": {}}, ops)["spec"]
    assert [t["matchFields"][0]["values"] for t in terms(pinned)] == [["a"], ["c"]]


def test_node_names_mode_warns_when_stale_or_over_the_cap() -> None:
    inv = inventory(labelled=False)
    assert policy_ops(POD, {}, inv, SETTINGS, stale=True)[1]
    capped = dataclasses.replace(SETTINGS, max_node_names=1)
    assert "affinity.maxNodeNames=1" in policy_ops(POD, {}, capped and inv, capped)[1][0]


_user_term = st.fixed_dictionaries(
    {
        "matchExpressions": st.lists(
            st.fixed_dictionaries(
                {
                    "key": st.sampled_from(["zone", "rack"]),
                    "operator": st.just("In"),
                    "values": st.lists(st.sampled_from(["1", "2"]), min_size=1, max_size=2),
                }
            ),
            min_size=1,
            max_size=2,
        )
    }
)
_user_affinity = st.one_of(
    st.none(),
    st.lists(_user_term, min_size=1, max_size=3, unique_by=lambda t: json.dumps(t, sort_keys=True)),
)


@settings(max_examples=80, deadline=None)
@given(user=_user_affinity, labelled=st.booleans(), scarce=st.booleans())
def test_recognition_gives_back_the_users_terms(user: Any, labelled: bool, scarce: bool) -> None:
    spec: dict[str, Any] = {"containers": []}
    if user is not None:
        spec["affinity"] = {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": user}}}
    s = SCARCE if scarce else SETTINGS
    inv = inventory(labelled=labelled)
    after = mutated(copy.deepcopy(spec), inv, s)
    before = copy.deepcopy(after)
    back = without_policy_affinity(POD, after, inv, s)
    assert back is not None
    assert after == before  # the pod's own spec is left as it was
    assert back["containers"] is after["containers"]  # only the affinity is copied
    expected = [] if user is None else user
    if scarce:  # the scarce avoidance stays: only the policy affinity is numagate's to undo
        gpu = {"key": "nvidia.com/gpu.present", "operator": "NotIn", "values": ["true"]}
        expected = [{"matchExpressions": [*t["matchExpressions"], gpu]} for t in expected] or [
            {"matchExpressions": [gpu]}
        ]
    assert terms(back) == expected


def test_a_users_own_pin_is_not_taken_away() -> None:
    inv = inventory(labelled=False)
    pin = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]}]}
    spec = {"affinity": {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [pin]}}}}
    assert without_policy_affinity(POD, spec, inv, SETTINGS) is None


def test_a_label_affinity_that_also_excludes_compatible_nodes_stays() -> None:
    """Volcano's label affinity (In [policy]) excludes the unlabelled nodes, compatible
    or not: that restriction is the pod's now, and validation must judge it."""
    volcano = dataclasses.replace(POD, scheduler="volcano")
    labelled = dataclasses.replace(
        plain_node("a", {"cpu": 8000}, labels={"x/y": "single-numa-node"}),
        volcano_policy="single-numa-node",
        volcano_cpu_manager_policy="static",
    )
    unlabelled = dataclasses.replace(labelled, name="b", labels={})
    label = dataclasses.replace(SETTINGS, mode="label")
    for nodes, undone in (([labelled], True), ([labelled, unlabelled], False)):
        inv = Inventory(nodes)
        ops, _ = policy_ops(volcano, {}, inv, label)
        after = jsonpatch.apply_patch({"spec": {}}, ops)["spec"]
        assert (without_policy_affinity(volcano, after, inv, label) is not None) is undone


@pytest.mark.parametrize("labelled", [True, False])
def test_nothing_to_undo_when_planning_now_differs(labelled: bool) -> None:
    inv = inventory(labelled=labelled)
    after = mutated({}, inv, SETTINGS)
    assert without_policy_affinity(POD, {}, inv, SETTINGS) is None  # nothing injected
    off = dataclasses.replace(SETTINGS, mode="off")
    assert without_policy_affinity(POD, after, inv, off) is None
    if not labelled:  # the inventory changed since: another set of compatible nodes
        changed = Inventory([*inv.nodes, _node("d", "none", labelled=False)])
        assert without_policy_affinity(POD, after, changed, SETTINGS) is None
        assert without_policy_affinity(POD, after, inv, SETTINGS, stale=True) is None


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=20,
)


def _containers(value: Any) -> list[int]:
    """The ids of every dict and list in ``value``."""
    if isinstance(value, dict):
        return [id(value), *(i for v in value.values() for i in _containers(v))]
    if isinstance(value, list):
        return [id(value), *(i for v in value for i in _containers(v))]
    return []


@settings(max_examples=150, deadline=None)
@given(value=_json)
def test_json_copy_is_an_equal_tree_sharing_no_container(value: Any) -> None:
    """The affinity's copy (_own_affinity) and the ops' copy: equal to copy.deepcopy's,
    no dict or list shared with the original, anything not JSON deep-copied."""
    from core.mutation.affinity import _json_copy

    got = _json_copy(value)
    assert got == copy.deepcopy(value)
    assert not set(_containers(got)) & set(_containers(value))
    odd = {"values": ("a", ["b"])}  # a tuple holding a list: copy.deepcopy's way
    assert _json_copy(odd) == odd and _json_copy(odd)["values"][1] is not odd["values"][1]
