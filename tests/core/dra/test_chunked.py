"""core/dra/chunked.py: a ChunkedMap edit leaves the old map as it was, shares the chunks
it does not write, and survives a pickle (hashes differ between processes)."""

from __future__ import annotations

import pickle

from core.dra.chunked import CHUNKS, ChunkedMap


def test_an_edit_is_a_new_map_and_the_old_one_is_unchanged() -> None:
    old = ChunkedMap.of({f"n{i}": i for i in range(1000)})
    new = old.edit({"n1": -1, "n2": None, "extra": 7, "absent": None})
    assert dict(old) == {f"n{i}": i for i in range(1000)} and len(old) == 1000
    assert len(new) == 1000 and new["n1"] == -1 and "n2" not in new and new.get("extra") == 7
    shared = sum(a is b for a, b in zip(old._chunks, new._chunks, strict=True))
    assert shared >= CHUNKS - 4  # only the chunks of the four keys were copied
    assert old.edit({}) is old
    expected = {k: v for k, v in old.items() if k != "n2"} | {"n1": -1, "extra": 7}
    assert new == expected and expected == new


def test_a_pickled_map_is_rebuilt() -> None:
    m = ChunkedMap.of({("a", "b"): 1, "c": 2})
    back = pickle.loads(pickle.dumps(m))
    assert back == m and back[("a", "b")] == 1 and len(back) == 2
