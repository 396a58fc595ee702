"""A build split into shares of the nodes (core/inventory/build.py: ``build_inventory_share``,
``join_shares``; a large file's build uses two cores with it) gives what the whole build
gives: the same nodes, the same errors in the same order, the same ignored kinds."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from core.inventory.build import (
    build_inventory,
    build_inventory_share,
    join_shares,
    share_of,
    split_objects,
)
from tests.builders.events import objects
from tests.builders.objects import node, nrt, two_zones

# What the random objects lack: an object that is no map, a kind the inventory ignores,
# one without a name, one of an unsupported version, a pod bound to a node not listed.
ODD: list[Any] = [
    ["not", "an", "object"],
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}},
    {"apiVersion": "v1", "kind": "Node", "metadata": {}},
    {"apiVersion": "v9", "kind": "Node", "metadata": {"name": "b"}},
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "x"},
     "spec": {"nodeName": "zz", "containers": []}},
]  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(
    objs=st.lists(st.one_of(objects(), st.sampled_from(ODD)), max_size=40),
    shares=st.integers(1, 4),
)
def test_shares_joined_are_the_whole_build(objs: list[Any], shares: int) -> None:
    whole = build_inventory(objs)
    joined = join_shares(build_inventory_share(part) for part in split_objects(objs, shares))
    assert joined.nodes == whole.nodes
    assert joined.errors == whole.errors
    assert joined.ignored == whole.ignored


def test_a_node_and_its_objects_fall_in_one_share() -> None:
    names = [f"node-{i}" for i in range(64)]
    for name in names:
        pod = {"kind": "Pod", "spec": {"nodeName": name}}
        assert share_of(node(name), 3) == share_of(nrt(name, two_zones()), 3) == share_of(pod, 3)
    assert {share_of(node(n), 3) for n in names} == {0, 1, 2}
