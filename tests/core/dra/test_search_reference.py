"""The search (core/dra/allocate.py) against a brute-force reference written from the
rules as stated (allocator_stable.go at v0.36.3: one device per claim at most once and not
in use, All takes every usable device, firstAvailable takes one subrequest, matchAttribute:
every device of the named requests has the attribute with one value of one type): on small
random problems both agree on whether an allocation exists, and the search's answer
satisfies the rules."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from core.dra.allocate import (
    Alternative,
    Candidate,
    ClaimProblem,
    Key,
    OrderDependent,
    lookup_attribute,
    same_value,
    search,
)
from core.dra.objects import ALL, EXACT_COUNT, Constraint, Device, ResourceSlice
from core.dra.pools import PoolDevice
from core.dra.verdict import FITS, NEVER_FITS, NO_ROOM_NOW, UNCHECKED, judge

DRIVER = "d"


def _pool_devices(values: Sequence[int | str | None]) -> list[PoolDevice]:
    devices = [
        Device(f"dev-{i}", {} if v is None else {"numa": v}, {}) for i, v in enumerate(values)
    ]
    s = ResourceSlice("s", DRIVER, "p", 1, 1, "n", False, None, False, False, tuple(devices))
    return [PoolDevice(DRIVER, "p", d, s) for d in devices]


@st.composite
def problems(draw: st.DrawFn) -> tuple[list[ClaimProblem], frozenset[Key]]:
    pds = _pool_devices(draw(st.lists(st.sampled_from([0, 1, "0", None]), min_size=1, max_size=5)))
    claims = []
    for ci in range(draw(st.integers(1, 2))):
        requests = []
        for ri in range(draw(st.integers(1, 2))):
            alts = []
            for ai in range(draw(st.integers(1, 2))):
                chosen = draw(
                    st.lists(st.sampled_from(pds), unique_by=lambda p: p.key, max_size=len(pds))
                )
                mode = draw(st.sampled_from([EXACT_COUNT, EXACT_COUNT, ALL]))
                count = len(chosen) if mode == ALL else draw(st.integers(1, 2))
                cands = tuple(Candidate(p, True) for p in chosen)
                alts.append(
                    Alternative(f"r{ri}", f"s{ai}" if ai else "", mode, count, False, cands)
                )
            requests.append(tuple(alts))
        constraints = []
        if draw(st.booleans()):
            names = draw(st.lists(st.sampled_from(["r0", "r1"]), unique=True, max_size=2))
            constraints.append(Constraint(tuple(names), f"{DRIVER}/numa"))
        claims.append(ClaimProblem(f"c{ci}", tuple(requests), tuple(constraints)))
    in_use = frozenset(p.key for p in pds if draw(st.booleans()) and draw(st.booleans()))
    return claims, in_use


def _constraints_hold(
    claim: ClaimProblem, picks: list[tuple[Alternative, list[PoolDevice]]]
) -> bool:
    for c in claim.constraints:
        devs = [p for alt, ps in picks for p in ps if not c.requests or alt.request in c.requests]
        values = [lookup_attribute(p, c.match_attribute or "") for p in devs]
        if any(v is None for v in values):
            return False
        if any(not same_value(values[0], v) for v in values[1:]):  # type: ignore[arg-type]
            return False
    return True


def reference(claims: list[ClaimProblem], in_use: frozenset[Key]) -> bool:
    slots = [(ci, alts) for ci, claim in enumerate(claims) for alts in claim.requests]
    options = []
    for _ci, alts in slots:
        per = []
        for alt in alts:
            if alt.mode == ALL:
                if alt.candidates:
                    per.append((alt, [c.device for c in alt.candidates]))
            else:
                per.extend(
                    (alt, list(combo))
                    for combo in itertools.combinations(
                        [c.device for c in alt.candidates], alt.count
                    )
                )
        options.append(per)
    for choice in itertools.product(*options):
        keys = [p.key for _alt, ps in choice for p in ps]
        if len(keys) != len(set(keys)) or any(k in in_use for k in keys):
            continue
        by_claim: dict[int, list[tuple[Alternative, list[PoolDevice]]]] = {}
        for (ci, _alts), pick in zip(slots, choice, strict=True):
            by_claim.setdefault(ci, []).append(pick)
        if all(_constraints_hold(claims[ci], picks) for ci, picks in by_claim.items()):
            return True
    return False


def _all_constrained(claim: ClaimProblem) -> bool:
    return any(
        alt.mode == ALL and (not c.requests or alt.request in c.requests)
        for c in claim.constraints
        for alts in claim.requests
        for alt in alts
    )


@settings(max_examples=400, deadline=None)
@given(problems())
def test_search_agrees_with_the_reference(
    problem: tuple[list[ClaimProblem], frozenset[Key]],
) -> None:
    claims, in_use = problem
    try:
        found = search(claims, in_use)
    except OrderDependent:
        # upstream ended the attempt on an All request's constraint (allocateDevice,
        # must=true) although an assignment exists: only possible with such a constraint
        assert any(_all_constrained(c) for c in claims) and reference(claims, in_use)
        return
    assert (found is not None) == reference(claims, in_use)
    if found is not None:
        keys = [k for _label, k in found]
        assert len(keys) == len(set(keys)) and not set(keys) & in_use


@st.composite
def uncertain(draw: st.DrawFn) -> tuple[list[ClaimProblem], frozenset[Key]]:
    """A problem whose candidates are each sure or not (at most 5 uncertain ones)."""
    claims, in_use = draw(problems())
    budget = 5
    out = []
    for claim in claims:
        requests = []
        for alts in claim.requests:
            new_alts = []
            for alt in alts:
                cands = []
                for c in alt.candidates:
                    sure = budget <= 0 or draw(st.booleans()) or draw(st.booleans())
                    budget -= not sure
                    cands.append(Candidate(c.device, sure))
                new_alts.append(dataclasses.replace(alt, candidates=tuple(cands)))
            requests.append(tuple(new_alts))
        out.append(dataclasses.replace(claim, requests=tuple(requests)))
    return out, in_use


def _resolutions(claims: list[ClaimProblem]) -> Iterator[list[ClaimProblem]]:
    """Every way the uncertain candidates may turn out (each kept as sure, or dropped)."""
    spots = [
        (ci, ri, ai, k)
        for ci, claim in enumerate(claims)
        for ri, alts in enumerate(claim.requests)
        for ai, alt in enumerate(alts)
        for k, c in enumerate(alt.candidates)
        if not c.sure
    ]
    for keep in itertools.product((True, False), repeat=len(spots)):
        dropped = {spot for spot, kept in zip(spots, keep, strict=True) if not kept}
        resolved = []
        for ci, claim in enumerate(claims):
            requests = []
            for ri, alts in enumerate(claim.requests):
                new_alts = []
                for ai, alt in enumerate(alts):
                    cands = tuple(
                        Candidate(c.device, True)
                        for k, c in enumerate(alt.candidates)
                        if (ci, ri, ai, k) not in dropped
                    )
                    count = len(cands) if alt.mode == ALL else alt.count
                    new_alts.append(dataclasses.replace(alt, candidates=cands, count=count))
                requests.append(tuple(new_alts))
            resolved.append(dataclasses.replace(claim, requests=tuple(requests)))
        yield resolved


@settings(max_examples=250, deadline=None)
@given(uncertain())
def test_a_verdict_holds_however_the_uncertain_devices_turn_out(
    problem: tuple[list[ClaimProblem], frozenset[Key]],
) -> None:
    """core/dra/verdict.judge: fits, no-room-now and never-fits hold for every resolution of
    the uncertain candidates (else the node is unchecked)."""
    claims, in_use = problem
    verdict, _message, _allocation = judge(claims, in_use, frozenset())
    if verdict == UNCHECKED or any(_all_constrained(c) for c in claims):
        return  # unchecked is always allowed; All's order-dependence is tested above
    for resolved in _resolutions(claims):
        now, empty = reference(resolved, in_use), reference(resolved, frozenset())
        if verdict == FITS:
            assert now
        elif verdict == NEVER_FITS:
            assert not empty
        else:
            assert verdict == NO_ROOM_NOW and not now and empty
