"""The allocator's search on one node (structured/internal/stable/allocator_stable.go at
v0.36.3, Allocate / allocateOne / allocateDevice): claims in order, each request's devices
one after the other, every candidate tried in turn with backtracking, the first complete
solution wins. Rules kept:

- a device is used by one claim at most (allocated elsewhere, or being allocated here),
  except for an ``adminAccess`` request, which only avoids devices of its own claim;
- ``matchAttribute``: every device of the named requests (all when none are named) has the
  attribute, all with one value of one type; a device without it is never chosen;
- ``allocationMode: All`` takes every matching device of the node's complete pools, needs at
  least one, and fails when any is in use or breaks a constraint;
- ``firstAvailable`` tries its subrequests in order and takes the first that fits.

Candidates may be uncertain (a selector we cannot evaluate, counters, binding conditions,
shared devices): ``search`` runs either pessimistically (uncertain = unusable) or
optimistically (uncertain = usable), and the caller (``evaluate``) concludes only what both
agree on."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final

from core.dra.objects import ALL, AttributeValue, Constraint, Version
from core.dra.pools import PoolDevice

Key = tuple[str, str, str]  # driver, pool, device
# Steps (candidate tries) one search may take: past it the answer is unknown. The real
# allocator stops after a time limit instead (DRASchedulerFilterTimeout, 10 s).
MAX_STEPS: Final = 200_000


@dataclass(frozen=True, slots=True)
class Candidate:
    device: PoolDevice
    sure: bool  # False: whether the device suits the request is not known exactly


@dataclass(frozen=True, slots=True)
class Alternative:
    """One way to satisfy a claim's request: the request itself or one subrequest."""

    request: str
    sub: str
    mode: str
    count: int
    admin: bool
    candidates: tuple[Candidate, ...]
    # All only: a matching device no request may use (an untolerated taint): upstream lists
    # every matching device first, so the request cannot be met
    blocked: bool = False

    @property
    def label(self) -> str:
        return f"{self.request}/{self.sub}" if self.sub else self.request


@dataclass(frozen=True, slots=True)
class ClaimProblem:
    name: str
    requests: tuple[tuple[Alternative, ...], ...]  # per request, its alternatives
    constraints: tuple[Constraint, ...]


class BudgetExceeded(Exception):
    """The search took more than MAX_STEPS tries."""


class _Abort(Exception):
    """A constraint rejected one of the devices an All request must take: upstream treats
    that as an error of the whole attempt (allocateDevice with must=true), no backtracking."""


class OrderDependent(Exception):
    """Upstream's attempt ended on an All request's constraint, but another choice for an
    earlier request would have succeeded: the outcome depends on the order the allocator
    tries pools and slices in (a Go map's), so it is not known."""


def lookup_attribute(pd: PoolDevice, name: str) -> AttributeValue | None:
    """The device's value of a fully qualified attribute name (lookupAttribute): the full
    name, or the bare id when the domain is the device's driver."""
    attrs = pd.device.attributes
    if name in attrs:
        return attrs[name]
    domain, slash, ident = name.partition("/")
    if slash and domain == pd.driver:
        return attrs.get(ident)
    return None


def same_value(a: AttributeValue, b: AttributeValue) -> bool:
    """matchAttributeConstraint.add: equal values of one type; lists never match."""
    if isinstance(a, tuple) or isinstance(b, tuple):
        return False
    if isinstance(a, Version) or isinstance(b, Version):
        return a == b
    return type(a) is type(b) and a == b


@dataclass(slots=True)
class _Match:
    constraint: Constraint
    value: AttributeValue | None = None
    count: int = 0

    def applies(self, alt: Alternative) -> bool:
        names = self.constraint.requests
        return not names or alt.request in names or (bool(alt.sub) and alt.label in names)

    def add(self, alt: Alternative, pd: PoolDevice) -> bool:
        if not self.applies(alt):
            return True
        attr = self.constraint.match_attribute
        value = lookup_attribute(pd, attr) if attr else None
        if value is None:
            return False
        if self.count and (self.value is None or not same_value(self.value, value)):
            return False
        if not self.count:
            self.value = value
        self.count += 1
        return True

    def remove(self, alt: Alternative) -> None:
        if self.applies(alt):
            self.count -= 1


@dataclass(slots=True)
class _State:
    claims: Sequence[ClaimProblem]
    in_use: frozenset[Key]
    shared: frozenset[Key]  # in use, but a device that several claims may share
    optimistic: bool
    abort: bool = True  # All's constraint failure ends the attempt, as upstream
    steps: int = 0
    allocating: dict[Key, set[int]] = field(default_factory=dict)
    matches: list[list[_Match]] = field(default_factory=list)
    chosen: list[tuple[str, Key]] = field(default_factory=list)


def _usable(s: _State, c: Candidate) -> bool:
    return c.sure or s.optimistic


def _free(s: _State, key: Key, claim: int, admin: bool) -> bool:
    if admin:
        return claim not in s.allocating.get(key, ())
    if s.allocating.get(key):
        return False
    if key in s.shared:
        return s.optimistic
    return key not in s.in_use


def _take(s: _State, claim: int, alt: Alternative, pd: PoolDevice) -> bool:
    added: list[_Match] = []
    for m in s.matches[claim]:
        if not m.add(alt, pd):
            for done in reversed(added):
                done.remove(alt)
            return False
        added.append(m)
    s.allocating.setdefault(pd.key, set()).add(claim)
    s.chosen.append((f"{s.claims[claim].name}/{alt.label}", pd.key))
    return True


def _release(s: _State, claim: int, alt: Alternative, pd: PoolDevice) -> None:
    s.chosen.pop()
    s.allocating[pd.key].discard(claim)
    for m in reversed(s.matches[claim]):
        m.remove(alt)


def _requests(s: _State) -> Iterator[tuple[int, tuple[Alternative, ...]]]:
    for ci, claim in enumerate(s.claims):
        for alts in claim.requests:
            yield ci, alts


def _place(s: _State, todo: list[tuple[int, tuple[Alternative, ...]]], at: int) -> bool:
    if at == len(todo):
        return True
    claim, alts = todo[at]
    return any(_fill(s, todo, at, claim, alt, 0, 0) for alt in alts)


def _fill(
    s: _State,
    todo: list[tuple[int, tuple[Alternative, ...]]],
    at: int,
    claim: int,
    alt: Alternative,
    got: int,
    start: int,
) -> bool:
    s.steps += 1
    if s.steps > MAX_STEPS:
        raise BudgetExceeded
    if alt.mode == ALL:
        return _fill_all(s, todo, at, claim, alt)
    if got == alt.count:
        return _place(s, todo, at + 1)
    # devices of one request are interchangeable in order: try them in increasing index
    for i in range(start, len(alt.candidates)):
        c = alt.candidates[i]
        if not _usable(s, c) or not _free(s, c.device.key, claim, alt.admin):
            continue
        if not _take(s, claim, alt, c.device):
            continue
        if _fill(s, todo, at, claim, alt, got + 1, i + 1):
            return True
        _release(s, claim, alt, c.device)
    return False


def _fill_all(
    s: _State,
    todo: list[tuple[int, tuple[Alternative, ...]]],
    at: int,
    claim: int,
    alt: Alternative,
) -> bool:
    usable = [c.device for c in alt.candidates if _usable(s, c)]
    if not usable or alt.blocked:
        return False
    taken: list[PoolDevice] = []
    for pd in usable:
        if not _free(s, pd.key, claim, alt.admin):
            for done in reversed(taken):
                _release(s, claim, alt, done)
            return False
        if not _take(s, claim, alt, pd):
            if s.abort:
                raise _Abort
            for done in reversed(taken):
                _release(s, claim, alt, done)
            return False
        taken.append(pd)
    if _place(s, todo, at + 1):
        return True
    for done in reversed(taken):
        _release(s, claim, alt, done)
    return False


def search(
    claims: Sequence[ClaimProblem],
    in_use: frozenset[Key],
    *,
    shared: frozenset[Key] = frozenset(),
    optimistic: bool = False,
) -> list[tuple[str, Key]] | None:
    """A complete allocation as (request label, device) pairs, or None when there is none.
    Raises BudgetExceeded past MAX_STEPS, OrderDependent when upstream's answer depends on
    its device order."""
    for abort in (True, False):
        s = _State(claims, in_use, shared, optimistic, abort)
        s.matches = [
            [_Match(c) for c in claim.constraints if c.match_attribute] for claim in claims
        ]
        try:
            found = _place(s, list(_requests(s)), 0)
        except _Abort:
            continue
        if not found:
            return None
        if not abort:
            raise OrderDependent
        return list(s.chosen)
    return None
