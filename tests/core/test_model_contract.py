"""core/model.py's value types keep their contract with core.frozen.fast_init's __init__:
the generated dataclass's signature, equality, hashing, immutability, replace and repr."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import orjson
import pytest

from core import model
from core.frozen import fast_init
from core.model import (
    ContainerDemand,
    Decision,
    Finding,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    NodeVerdict,
    PodIntent,
)

FAST = (
    Finding,
    ContainerDemand,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodIntent,
    NodeVerdict,
    Decision,
)


def _plain_twin(cls: type) -> type:
    """The same fields as a frozen dataclass with the generated __init__ (the reference)."""
    fields = [
        (f.name, f.type, dataclasses.field(default=f.default, default_factory=f.default_factory))
        for f in dataclasses.fields(cls)
    ]
    return dataclasses.make_dataclass(cls.__name__, fields, frozen=True, slots=True)


def _intent(**changes: Any) -> PodIntent:
    base: dict[str, Any] = dict(
        scheduler="koordinator",
        scheduler_name="koord-scheduler",
        policy="single-numa-node",
        exclusive="required",
        scope=None,
        qos="Guaranteed",
        containers=(ContainerDemand("app", "app", {"cpu": 2000}, {"cpu": 2000}, 2),),
        pod_requests={"cpu": 2000},
    )
    base.update(changes)
    return PodIntent(**base)


@pytest.mark.parametrize("cls", FAST, ids=lambda c: c.__name__)
def test_signature_is_the_generated_one(cls: type) -> None:
    assert str(inspect.signature(cls)) == str(inspect.signature(_plain_twin(cls)))


@pytest.mark.parametrize("cls", FAST, ids=lambda c: c.__name__)
def test_still_a_frozen_slotted_dataclass(cls: type) -> None:
    assert dataclasses.is_dataclass(cls)
    assert cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
    assert "__slots__" in cls.__dict__
    assert cls.__init__.__qualname__ == f"{cls.__qualname__}.__init__"


def test_fields_set_positionally_by_keyword_and_by_default() -> None:
    d = ContainerDemand("c", "init", {"cpu": 1}, {})
    assert (d.name, d.kind, d.requests, d.limits, d.exclusive_cpus) == (
        "c",
        "init",
        {"cpu": 1},
        {},
        0,
    )
    assert ContainerDemand(name="c", kind="init", requests={"cpu": 1}, limits={}) == d
    intent = _intent()
    assert (
        intent.node_selector == {} and intent.required_terms == () and intent.hami_weights is None
    )
    assert intent.cpu_bind_policy is None and intent.hami_gpu_policy == ()


def test_default_factory_gives_each_instance_its_own() -> None:
    a, b = _intent(), _intent()
    assert a.node_selector is not b.node_selector
    assert Decision("fits").counts is not Decision("fits").counts


def test_missing_and_unknown_arguments_raise_as_before() -> None:
    with pytest.raises(TypeError):
        ContainerDemand("c", "app", {})  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Finding("p", "error", "code", "message", extra=1)  # type: ignore[call-arg]


@pytest.mark.parametrize("cls", FAST, ids=lambda c: c.__name__)
def test_setting_or_deleting_an_attribute_raises(cls: type) -> None:
    obj = {
        Finding: Finding("p", "error", "c", "m"),
        ContainerDemand: ContainerDemand("c", "app", {}, {}),
        NodeSelectorRequirement: NodeSelectorRequirement("k", "In", ("v",)),
        NodeSelectorTerm: NodeSelectorTerm(),
        PodIntent: _intent(),
        NodeVerdict: NodeVerdict("n", "fits"),
        Decision: Decision("fits"),
    }[cls]
    name = dataclasses.fields(cls)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(obj, name, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        delattr(obj, name)
    with pytest.raises((AttributeError, TypeError)):
        obj.not_a_field = 1  # type: ignore[attr-defined]


def test_equality_hashing_repr_and_replace() -> None:
    term = NodeSelectorTerm((NodeSelectorRequirement("k", "In", ("a", "b")),))
    same = NodeSelectorTerm((NodeSelectorRequirement("k", "In", ("a", "b")),))
    assert term == same and hash(term) == hash(same)
    assert term != NodeSelectorTerm((NodeSelectorRequirement("k", "NotIn", ("a", "b")),))
    verdict = NodeVerdict("n", "fits", (0,), True)
    assert hash(verdict) == hash(("n", "fits", (0,), True, None, ""))
    assert repr(verdict) == (
        "NodeVerdict(name='n', verdict='fits', numa=(0,), preferred=True, score=None, reason='')"
    )
    assert dataclasses.replace(verdict, score=3) == NodeVerdict("n", "fits", (0,), True, 3)
    intent = dataclasses.replace(_intent(), hami_weights=(1, 2, 3))
    assert intent.hami_weights == (1, 2, 3) and intent.policy == "single-numa-node"
    assert intent != _intent()
    with pytest.raises(TypeError):
        hash(intent)  # holds dicts, as before
    twin = _plain_twin(Finding)("p", "warning", "c", "m")
    assert dataclasses.astuple(twin) == dataclasses.astuple(Finding("p", "warning", "c", "m"))


def test_orjson_encodes_them_as_objects() -> None:
    decision = Decision("impossible", "no node", ("w",), {"fits": 0})
    assert orjson.loads(orjson.dumps(decision)) == {
        "outcome": "impossible",
        "message": "no node",
        "warnings": ["w"],
        "counts": {"fits": 0},
        "unchecked": "",
    }


def test_fast_init_refuses_what_it_cannot_keep() -> None:
    @dataclasses.dataclass(slots=True)
    class Mutable:
        a: int

    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        a: int

    @dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
    class KeywordOnly:
        a: int

    for cls in (Mutable, NoSlots, KeywordOnly, int):
        with pytest.raises(TypeError):
            fast_init(cls)


def test_every_request_path_type_of_the_model_has_it() -> None:
    for cls in FAST:
        assert cls.__init__.__module__ == model.__name__
        names = cls.__init__.__code__.co_names
        assert "__setattr__" not in names and f"_set_{dataclasses.fields(cls)[0].name}" in names
