"""Column: the chunked per-node column the incremental inventory edits copy-on-write."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.snapshot.columns import CHUNK, Column

Op = tuple[str, int, int]
ops = st.lists(
    st.tuples(st.sampled_from(["set", "append", "pop"]), st.integers(0, 10**6), st.integers()),
    max_size=60,
)


@given(st.integers(0, 3 * CHUNK + 5), ops)
def test_an_edit_is_a_list_edit_and_leaves_the_base_alone(size: int, steps: list[Op]) -> None:
    base = Column.of(range(size))
    draft, model = base.edit(), list(range(size))
    for op, where, value in steps:
        if op == "set" and model:
            draft[where % len(model)] = model[where % len(model)] = value
        elif op == "append":
            draft.append(value)
            model.append(value)
        elif op == "pop" and model:
            assert draft.pop() == model.pop()
        assert len(draft) == len(model)
    frozen = draft.freeze()
    assert list(frozen) == model and len(frozen) == len(model)
    assert [frozen[i] for i in range(len(model))] == model
    assert list(base) == list(range(size))  # the old snapshot's column never changes


def test_untouched_chunks_are_shared() -> None:
    base = Column.of(range(4 * CHUNK))
    draft = base.edit()
    draft[CHUNK + 1] = -1
    new = draft.freeze()
    assert new[CHUNK + 1] == -1 and base[CHUNK + 1] == CHUNK + 1
    assert [a is b for a, b in zip(new._chunks, base._chunks, strict=True)] == [
        True,
        False,
        True,
        True,
    ]


def test_reads_as_a_sequence() -> None:
    col = Column.of("abc")
    assert col[-1] == "c" and col[0:2] == ("a", "b") and col == ("a", "b", "c")
    assert "b" in col and col.index("c") == 2 and list(reversed(col)) == ["c", "b", "a"]
    assert pickle.loads(pickle.dumps(col)) == col
    with pytest.raises(IndexError):
        col[3]
    with pytest.raises(IndexError):
        Column.of(()).edit().pop()
