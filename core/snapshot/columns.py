"""Per-node columns that a batch copies only where it writes.

A :class:`Column` is a tuple of CHUNK-entry chunks: an edit copies the outer tuple and the
chunks it writes, and ``freeze`` shares every other chunk with the old column (a copy of a
100,000-entry tuple per batch cost ~1 ms, more than the batch's own work).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import chain
from typing import Any, Generic, TypeVar, overload

from core.inventory.usage_only import with_available
from core.model import NodeTopology

T = TypeVar("T")
# 64 entries per chunk: a batch of ~110 events writes as many chunks, and the collector's
# young passes walk every entry of each new one (at 256 per chunk, 0.36 ms of collector
# time per batch at 100,000 nodes, against 0.15 at 64: docs/inventory.md, round 22).
SHIFT = 6
CHUNK = 1 << SHIFT
_MASK = CHUNK - 1


class Column(Sequence[T], Generic[T]):
    """An immutable sequence stored as chunks (integer indexes only; slices copy)."""

    __slots__ = ("_chunks", "_len")

    def __init__(self, chunks: tuple[tuple[T, ...], ...] = (), length: int = 0) -> None:
        self._chunks = chunks
        self._len = length

    @classmethod
    def of(cls, values: Iterable[T]) -> Column[T]:
        items = tuple(values)
        chunks = tuple(items[i : i + CHUNK] for i in range(0, len(items), CHUNK))
        return cls(chunks, len(items))

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, i: int) -> T: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[T, ...]: ...
    def __getitem__(self, i: int | slice) -> T | tuple[T, ...]:
        if isinstance(i, slice):
            return tuple(self)[i]
        if i < 0:
            i += self._len
        if not 0 <= i < self._len:
            raise IndexError("column index out of range")
        return self._chunks[i >> SHIFT][i & _MASK]

    def __iter__(self) -> Iterator[T]:
        return chain.from_iterable(self._chunks)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Column | tuple | list):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Column({list(self)!r})"

    def __reduce__(self) -> tuple[object, tuple[tuple[T, ...]]]:
        return (Column.of, (tuple(self),))

    def edit(self) -> EditedColumn[T]:
        return EditedColumn(self)


class EditedColumn(Generic[T]):
    """A draft of a column: writes copy their chunk once; ``freeze`` makes the column."""

    __slots__ = ("_chunks", "_len", "_own")

    def __init__(self, base: Column[T]) -> None:
        self._chunks: list[Sequence[T]] = list(base._chunks)
        self._len = base._len
        self._own: set[int] = set()  # chunks copied into lists by this draft

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, i: int) -> T:
        if not 0 <= i < self._len:
            raise IndexError("column index out of range")
        return self._chunks[i >> SHIFT][i & _MASK]

    def _writable(self, c: int) -> list[T]:
        chunk = self._chunks[c]
        if c not in self._own:
            chunk = self._chunks[c] = list(chunk)
            self._own.add(c)
        return chunk  # type: ignore[return-value]

    def __setitem__(self, i: int, value: T) -> None:
        if not 0 <= i < self._len:
            raise IndexError("column index out of range")
        self._writable(i >> SHIFT)[i & _MASK] = value

    def append(self, value: T) -> None:
        c = self._len >> SHIFT
        if c == len(self._chunks):
            self._chunks.append([])
            self._own.add(c)
        self._writable(c).append(value)
        self._len += 1

    def pop(self) -> T:
        if not self._len:
            raise IndexError("pop from an empty column")
        self._len -= 1
        c = self._len >> SHIFT
        value = self._writable(c).pop()
        if not self._chunks[c]:
            self._chunks.pop()
            self._own.discard(c)
        return value

    def freeze(self) -> Column[T]:
        # Only the written chunks in Python: a pass over every chunk per batch was 4% of
        # the event loop under churn at 100,000 nodes (py-spy).
        chunks = self._chunks
        for c in self._own:
            chunks[c] = tuple(chunks[c])
        self._own = set()
        return Column(tuple(chunks), self._len)  # type: ignore[arg-type]


# Each zone's free amounts (resource, amount, ..., in the map's order) closed by None, then
# the NUMA states: one flat tuple of str and int, which the collector stops tracking (one
# that holds a dict it tracks for good: docs/inventory.md, "Usage beside the records").
# It is also the usage half of a shape's key (snapshot.py), so it is made once per event.
Usage = tuple[Any, ...]


def usage_of(node: NodeTopology) -> Usage:
    return usage_from([z.available for z in node.zones], node.numa_states)


def usage_from(free: Sequence[Mapping[str, int]], states: Sequence[str]) -> Usage:
    """The usage of a node whose zones have the free amounts ``free`` (one map per zone,
    in the record's order) and whose NUMA states are ``states``."""
    flat: list[Any] = []
    for amounts in free:
        flat.extend(chain.from_iterable(amounts.items()))
        flat.append(None)
    flat.extend(states)
    return tuple(flat)


def states_of(usage: Usage, zones: int) -> Usage:
    """The NUMA states of ``usage``, a usage of ``zones`` zones."""
    k = 0
    for _ in range(zones):
        k = usage.index(None, k) + 1
    return usage[k:]


def with_usage(node: NodeTopology, usage: Usage) -> NodeTopology:
    """``node`` with the free amounts and NUMA states of ``usage`` (a fresh record, not
    kept: kept records are what the collector walks)."""
    frees, k = [], 0
    for _ in node.zones:
        end = usage.index(None, k)
        frees.append(dict(zip(usage[k:end:2], usage[k + 1 : end : 2], strict=True)))
        k = end + 1
    return with_available(node, frees, usage[k:])


class Nodes(Sequence[NodeTopology]):
    """The snapshot's node records: ``base`` as of each node's last change other than
    usage, and ``usage`` (None: the base's own) for the nodes whose usage changed since.
    A usage change under churn then writes atoms only, which the cyclic collector does
    not track, instead of a record, its zones tuple and its zones (tracked, ~4 objects
    per node: the full passes in a worker at 100,000 nodes walked them). A record with
    its usage is made when read."""

    __slots__ = ("base", "usage")

    def __init__(self, base: Column[NodeTopology], usage: Column[Usage | None]) -> None:
        self.base = base
        self.usage = usage

    @classmethod
    def of(cls, nodes: Iterable[NodeTopology]) -> Nodes:
        base = Column.of(nodes)
        return cls(base, Column.of([None] * len(base)))

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, i: int) -> NodeTopology:  # type: ignore[override]  # no slices
        u = self.usage[i]
        return self.base[i] if u is None else with_usage(self.base[i], u)

    def __iter__(self) -> Iterator[NodeTopology]:
        for node, u in zip(self.base, self.usage, strict=True):
            yield node if u is None else with_usage(node, u)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Nodes | Column | tuple | list):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Nodes({list(self)!r})"

    def __reduce__(self) -> tuple[object, tuple[Column[NodeTopology], Column[Usage | None]]]:
        return (Nodes, (self.base, self.usage))
