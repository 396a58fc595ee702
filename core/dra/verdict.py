"""The verdict of a pod's claims on one node from the allocator's search: fits (devices
free now), no-room-now (would fit if allocated devices were free), never-fits (the message
names the request with too few matching devices or the constraint that fails), unchecked
(depends on something not known exactly)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from core.dra.allocate import (
    BudgetExceeded,
    ClaimProblem,
    Key,
    OrderDependent,
    lookup_attribute,
    search,
)
from core.dra.objects import ALL

FITS: Final = "fits"
NO_ROOM_NOW: Final = "no-room-now"
NEVER_FITS: Final = "never-fits"
UNCHECKED: Final = "unchecked"


def judge(
    problems: Sequence[ClaimProblem], in_use: frozenset[Key], shared: frozenset[Key]
) -> tuple[str, str, tuple[tuple[str, Key], ...]]:
    """(verdict, message, allocation) of the claims' search problems on one node. Uncertain
    candidates count as usable in the optimistic search and unusable in the pessimistic
    one; a verdict is given only when it holds either way."""
    if any(
        a.mode == ALL and not all(c.sure for c in a.candidates)
        for p in problems
        for alts in p.requests
        for a in alts
    ):  # "All" is not monotonic in its devices: more matches can make it fail
        return UNCHECKED, "an allocationMode All request with devices not known to match", ()
    try:
        found = search(problems, in_use, shared=shared)
        if found is not None:
            return FITS, "", tuple(found)
        if search(problems, frozenset(), shared=shared, optimistic=True) is None:
            return NEVER_FITS, explain_never(problems, shared), ()
        if search(problems, in_use, shared=shared, optimistic=True) is None and search(
            problems, frozenset(), shared=shared
        ):
            matching = {
                c.device.key
                for p in problems
                for alts in p.requests
                for a in alts
                for c in a.candidates
            }
            taken = len(matching & in_use)
            return (
                NO_ROOM_NOW,
                f"{taken} of the {len(matching)} matching devices are allocated to other claims",
                (),
            )
        return UNCHECKED, "the answer depends on devices not known exactly", ()
    except BudgetExceeded:
        return UNCHECKED, "the allocation search is too large to finish", ()
    except OrderDependent:
        return (
            UNCHECKED,
            "an allocationMode All request with a constraint: the allocator's answer depends "
            "on the order it tries devices in",
            (),
        )


def explain_never(problems: Sequence[ClaimProblem], shared: frozenset[Key]) -> str:
    """Names what makes the claims impossible: a request with too few matching devices,
    else a constraint that fails on its own, else the requests together."""
    short = []
    for claim in problems:
        for alts in claim.requests:
            if all(
                len(a.candidates) < a.count or (a.mode == ALL and not a.candidates) for a in alts
            ):
                parts = [
                    f"{a.label} needs {a.count or 'at least one'} matching device(s), the node has "
                    f"{len(a.candidates)}"
                    for a in alts
                ]
                short.append(f"request {claim.name}/{alts[0].request}: " + "; ".join(parts))
    if short:
        return "; ".join(short)
    for claim in problems:
        for c in claim.constraints:
            alone = ClaimProblem(claim.name, claim.requests, (c,))
            if search([alone], frozenset(), shared=shared, optimistic=True) is None:
                return _constraint_message(claim, c.match_attribute or "", c.requests)
    return "the requests together need more matching devices than the node has"


def _constraint_message(claim: ClaimProblem, attribute: str, names: tuple[str, ...]) -> str:
    involved = [
        a
        for alts in claim.requests
        for a in alts
        if not names or a.request in names or a.label in names
    ]
    devices = {c.device.key: c.device for a in involved for c in a.candidates}
    lacking = sum(1 for pd in devices.values() if lookup_attribute(pd, attribute) is None)
    over = ", ".join(names) if names else "all requests"
    why = f" ({lacking} of {len(devices)} matching devices lack it)" if lacking else ""
    return (
        f"constraint matchAttribute {attribute!r} of claim {claim.name} over {over}: "
        f"no set of matching devices shares one value{why}"
    )
