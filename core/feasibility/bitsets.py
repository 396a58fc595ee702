"""Bitsets of node indexes, and the label index of a snapshot (core/snapshot/snapshot.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from core.model import NodeTopology


def bitset(indexes: Sequence[int]) -> int:
    """The bitset of ascending ``indexes``, built in O(N) (OR-ing one bit at a time into
    a growing int copies it every time: O(N^2) for a label every node has)."""
    if len(indexes) < 64:
        out = 0
        for i in indexes:
            out |= 1 << i
        return out
    raw = bytearray(indexes[-1] // 8 + 1)
    for i in indexes:
        raw[i >> 3] |= 1 << (i & 7)
    return int.from_bytes(raw, "little")


# Compact bitsets: a set of one node i is stored as ``~i`` (negative), not as an int of
# ~i/8 bytes with one high bit: 625 MB for the hostname labels of 100,000 nodes, and as
# much for the shapes under watch churn, where most nodes' usage is their own.


def compact(indexes: Sequence[int]) -> int:
    """The compact bitset of ascending ``indexes``."""
    return ~indexes[0] if len(indexes) == 1 else bitset(indexes)


def expand(b: int) -> int:
    """The plain bitset of compact ``b``."""
    return 1 << ~b if b < 0 else b


def with_member(b: int, i: int) -> int:
    """Compact ``b`` plus node i."""
    if not b:
        return ~i
    return expand(b) | (1 << i)


def without_member(b: int, i: int) -> int:
    """Compact ``b`` minus node i."""
    b = expand(b) & ~(1 << i)
    if b & (b - 1):
        return b
    return ~(b.bit_length() - 1) if b else 0


def count(b: int) -> int:
    return 1 if b < 0 else b.bit_count()


class BitIndex(Mapping[Any, int]):
    """key -> bitset of node indexes, stored compact (a hostname label: ``~index``)."""

    __slots__ = ("raw",)

    def __init__(self, raw: dict[Any, int] | None = None) -> None:
        self.raw = {} if raw is None else raw

    def __getitem__(self, key: Any) -> int:
        return expand(self.raw[key])

    def get(self, key: Any, default: Any = None) -> Any:
        b = self.raw.get(key)
        return default if b is None else expand(b)

    def __contains__(self, key: object) -> bool:
        return key in self.raw

    def __iter__(self) -> Any:
        return iter(self.raw)

    def __len__(self) -> int:
        return len(self.raw)

    def __getstate__(self) -> dict[Any, int]:
        return self.raw

    def __setstate__(self, raw: dict[Any, int]) -> None:
        self.raw = raw

    def add(self, key: Any, i: int) -> None:
        """Node i has ``key`` (only for an index copy being edited)."""
        self.raw[key] = with_member(self.raw.get(key, 0), i)

    def discard(self, key: Any, i: int) -> None:
        b = without_member(self.raw.get(key, 0), i)
        if b:
            self.raw[key] = b
        else:
            self.raw.pop(key, None)


class ValueIndex(Mapping[str, tuple[tuple[str, int], ...]]):
    """label key -> ((value, bitset), ...), decoded from the label BitIndex on access
    (only Gt/Lt read it)."""

    __slots__ = ("labels", "values")

    def __init__(self, labels: BitIndex, values: dict[str, tuple[str, ...]]) -> None:
        self.labels = labels
        self.values = values

    def __getitem__(self, key: str) -> tuple[tuple[str, int], ...]:
        return tuple((v, self.labels[(key, v)]) for v in self.values[key])

    def __iter__(self) -> Any:
        return iter(self.values)

    def __len__(self) -> int:
        return len(self.values)

    def __getstate__(self) -> tuple[BitIndex, dict[str, tuple[str, ...]]]:
        return self.labels, self.values

    def __setstate__(self, state: tuple[BitIndex, dict[str, tuple[str, ...]]]) -> None:
        self.labels, self.values = state


def label_indexes(nodes: Sequence[NodeTopology]) -> tuple[BitIndex, dict[str, int], ValueIndex]:
    pairs: dict[tuple[str, str], list[int]] = {}
    keys: dict[str, list[int]] = {}
    for i, node in enumerate(nodes):
        for k, v in node.labels.items():
            pairs.setdefault((k, v), []).append(i)
            keys.setdefault(k, []).append(i)
    labels = BitIndex({kv: compact(ix) for kv, ix in pairs.items()})
    values: dict[str, list[str]] = {}
    for k, v in pairs:
        values.setdefault(k, []).append(v)
    key_bits = {k: bitset(ix) for k, ix in keys.items()}
    return labels, key_bits, ValueIndex(labels, {k: tuple(v) for k, v in values.items()})
