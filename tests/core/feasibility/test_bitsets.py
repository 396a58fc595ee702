"""Compact bitsets (a set of one node is ``~index``): the operations the incremental
inventory edits shapes and labels with agree with plain bitsets."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from core.feasibility.bitsets import compact, count, expand, with_member, without_member

steps = st.lists(st.tuples(st.booleans(), st.integers(0, 2000)), max_size=40)


@given(steps)
def test_compact_edits_match_plain_sets(ops: list[tuple[bool, int]]) -> None:
    b, members = 0, set[int]()
    for add, i in ops:
        if add and i not in members:
            b = with_member(b, i)
            members.add(i)
        elif not add and i in members:
            b = without_member(b, i)
            members.discard(i)
        assert expand(b) == sum(1 << m for m in members)
        assert count(b) == len(members)
        assert (b < 0) == (len(members) == 1)  # one member: never a wide int
        if members:
            assert b == compact(sorted(members))


def test_a_single_high_node_is_small() -> None:
    b = compact([99_999])
    assert b == ~99_999 and b.bit_length() < 20 and expand(b) == 1 << 99_999
