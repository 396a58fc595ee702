"""build_inventory shares equal per-node data between nodes (issue 7, memory): nodes of
one shape share their zones and resource maps, strings are shared, and sharing never
merges values that only compare equal (True == 1)."""

from __future__ import annotations

from core.inventory.build import build_inventory
from core.inventory.share import Sharer as _Sharer
from tests.builders.objects import node, nrt, two_zones


def objects(names: list[str], cpu: tuple[str, ...] = ("32", "31")) -> list[dict]:
    out: list[dict] = []
    for name in names:
        out.append(
            node(
                name,
                labels={"kubernetes.io/hostname": name, "pool": "a"},
                allocatable={"cpu": "62", "memory": "250Gi"},
                capacity={"cpu": "64", "memory": "256Gi"},
            )
        )
        out.append(nrt(name, two_zones(cpu)))
    return out


def test_nodes_of_one_shape_share_zones_and_maps() -> None:
    result = build_inventory(objects(["a-1", "a-2", "a-3"]))
    a, b, c = result.nodes
    assert not result.errors
    assert a.zones is b.zones is c.zones and a.zones[0] is b.zones[0]
    assert a.allocatable is b.allocatable and a.capacity is c.capacity
    assert a.labels is not b.labels  # the hostname differs
    key_a = next(k for k in a.labels if k == "kubernetes.io/hostname")
    key_b = next(k for k in b.labels if k == "kubernetes.io/hostname")
    assert key_a is key_b and a.labels["pool"] is b.labels["pool"]


def test_sharing_changes_no_value() -> None:
    shared = build_inventory(objects(["a-1", "a-2"]) + objects(["b-1"], ("16", "15")))
    alone = [build_inventory(objects([n]) if n[0] == "a" else objects([n], ("16", "15")))
             for n in ("a-1", "a-2", "b-1")]  # fmt: skip
    assert shared.nodes == tuple(r.nodes[0] for r in alone)
    assert shared.nodes[0].zones != shared.nodes[2].zones


def test_equal_but_different_values_are_not_merged() -> None:
    share = _Sharer()
    ints = share.mapping({"a": 1})
    bools = share.mapping({"a": True})
    assert ints is not bools
    assert type(bools["a"]) is bool and type(ints["a"]) is int
    assert share.mapping({"a": 1}) is ints
    assert share.mapping({"b": 1, "a": 2}) is not share.mapping({"a": 2, "b": 1})  # order kept


def test_maps_whose_contents_hash_alike_stay_apart() -> None:
    """The sharer keys its maps by the content's hash (no copy of the content held), so
    equal hashes must still be told apart: hash(-1) == hash(-2) in CPython."""
    share = _Sharer()
    minus_one, minus_two = share.mapping({"a": -1}), share.mapping({"a": -2})
    assert hash(((("a", -1),), (int,))) == hash(((("a", -2),), (int,)))
    assert minus_one == {"a": -1} and minus_two == {"a": -2}
    assert share.mapping({"a": -1}) is minus_one and share.mapping({"a": -2}) is minus_two


def test_without_usage_free_amounts_are_kept_as_they_are() -> None:
    """The incremental inventory's sharer (usage=False) shares what machines of one model
    have in common, not the free amounts that watch events bring one by one."""
    from core.model import NumaZone

    share = _Sharer(usage=False)
    a = NumaZone(0, {"cpu": 32}, {"cpu": 31}, {"cpu": 7}, {0: 10})
    b = NumaZone(0, {"cpu": 32}, {"cpu": 31}, {"cpu": 7}, {0: 10})
    za, zb = share.zone(a), share.zone(b)
    assert za == a and zb == b
    assert za.capacity is zb.capacity and za.allocatable is zb.allocatable
    assert za.costs is zb.costs
    assert za.available is a.available and zb.available is b.available
    assert len(share) == 4  # the string "cpu" and three maps; no free amounts, no zones


def test_the_incremental_inventory_shares_free_amounts_only_while_asked() -> None:
    from core.inventory.incremental import IncrementalInventory, parse_object

    inventory = IncrementalInventory()
    for obj in objects(["a-1", "a-2"]):
        inventory.set(parse_object(obj, inventory.units))
    inventory.flush()
    a, b = inventory.records["a-1"], inventory.records["a-2"]
    assert a.zones[0].available is b.zones[0].available  # a whole list: shared
    inventory.share_usage(False)
    for obj in objects(["a-3", "a-4"]):
        inventory.set(parse_object(obj, inventory.units))
    inventory.flush()
    c, d = inventory.records["a-3"], inventory.records["a-4"]
    assert c.zones == d.zones and c.zones[0].available is not d.zones[0].available
    assert c.zones[0].capacity is d.zones[0].capacity is a.zones[0].capacity
    assert inventory.nodes() == build_inventory(objects(["a-1", "a-2", "a-3", "a-4"])).nodes


def test_once_usage_is_not_shared_the_sharer_holds_only_what_is_looked_up_again() -> None:
    """At the end of the first list (``share_usage(False)``) the whole-zone tables and the
    free amounts leave the sharer; the records keep theirs, and a free-amount map that is
    also a table of amounts (an idle zone: free == allocatable) stays known as one."""
    from core.inventory.incremental import IncrementalInventory, parse_object

    inventory = IncrementalInventory()
    idle = objects(["a-1"], cpu=("32", "31", "31"))  # free == allocatable: one map for both
    busy_objects = objects(["a-2", "a-3"], cpu=("32", "31", "7"))
    for obj in [*busy_objects, *idle]:
        inventory.set(parse_object(obj, inventory.units))
    inventory.flush()
    before = inventory.nodes()
    share = inventory.share
    busy, free = inventory.records["a-2"].zones[0], inventory.records["a-1"].zones[0]
    assert share.mapping(busy.available) is busy.available
    assert free.available is free.allocatable
    held = len(share)
    inventory.share_usage(False)
    assert inventory.nodes() == before
    assert not share._zones and not share._zone_tuples
    assert held - len(share) >= 2  # the whole-zone tables and a busy zone's free amounts
    assert share.mapping(dict(busy.available)) is not busy.available  # forgotten: a new copy
    assert share.mapping(dict(free.allocatable)) is free.allocatable  # still known
    later = objects(["a-4"], cpu=("32", "31", "7"))
    for obj in later:
        inventory.set(parse_object(obj, inventory.units))
    inventory.flush()
    assert inventory.records["a-4"].zones[0].capacity is busy.capacity
    everything = [*busy_objects, *idle, *later]
    assert inventory.nodes() == build_inventory(everything).nodes
