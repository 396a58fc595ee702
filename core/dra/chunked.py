"""An immutable mapping that a new version copies only where it changes.

The live DRA inventory makes a new view per flush of watch events; copying a mapping of
10,000 nodes (or pools, or claims) per flush costs more than the events' own work
(measured in benchmarks/dra.py --live, docs/dra.md), as core/snapshot/columns.py found
for the NRT snapshot. A :class:`ChunkedMap` keeps its entries in CHUNKS dicts by key hash:
:meth:`ChunkedMap.edit` copies the outer tuple and the chunks it writes to and shares the
rest with the old map, which is never written, so a reader of an old view sees it whole."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final, Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")
CHUNKS: Final = 256
_MASK: Final = CHUNKS - 1
_EMPTY: Final[dict[Any, Any]] = {}


class ChunkedMap(Mapping[K, V], Generic[K, V]):
    __slots__ = ("_chunks", "_len")

    def __init__(self, chunks: tuple[dict[K, V], ...] | None = None, length: int = 0) -> None:
        self._chunks = chunks if chunks is not None else (_EMPTY,) * CHUNKS
        self._len = length

    @classmethod
    def of(cls, items: Mapping[K, V] | Iterable[tuple[K, V]]) -> ChunkedMap[K, V]:
        chunks: list[dict[K, V]] = [{} for _ in range(CHUNKS)]
        for k, v in items.items() if isinstance(items, Mapping) else items:
            chunks[hash(k) & _MASK][k] = v
        return cls(tuple(chunks), sum(len(c) for c in chunks))

    def __getitem__(self, key: K) -> V:
        return self._chunks[hash(key) & _MASK][key]

    def get(self, key: K, default: Any = None) -> Any:
        return self._chunks[hash(key) & _MASK].get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._chunks[hash(key) & _MASK]

    def __iter__(self) -> Iterator[K]:
        for chunk in self._chunks:
            yield from chunk

    def __len__(self) -> int:
        return self._len

    def __repr__(self) -> str:
        return f"ChunkedMap({dict(self)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # string hashes differ between processes: rebuild the chunks where unpickled
        return (ChunkedMap.of, (dict(self),))

    def edit(self, changes: Mapping[K, V | None]) -> ChunkedMap[K, V]:
        """A new map with ``changes`` (None: the key removed); this one is left as it was."""
        if not changes:
            return self
        chunks = list(self._chunks)
        copied: set[int] = set()
        length = self._len
        for k, v in changes.items():
            i = hash(k) & _MASK
            if i not in copied:
                chunks[i] = dict(chunks[i])
                copied.add(i)
            had = k in chunks[i]
            if v is None:
                if had:
                    del chunks[i][k]
                    length -= 1
            else:
                chunks[i][k] = v
                length += not had
        return ChunkedMap(tuple(chunks), length)
