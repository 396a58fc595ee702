"""The cluster decision for one pod (docs/contracts.md: Verdicts), from its verdicts: fits, no-room-now,
impossible or unchecked, with the messages the webhook and lint show."""

from __future__ import annotations

from collections.abc import Mapping

from core.feasibility.verdicts import Evaluation
from core.model import Decision, Unchecked

MAX_WARNING = 119


def _short(text: str) -> str:
    return text if len(text) <= MAX_WARNING else text[: MAX_WARNING - 1] + "…"


def decide(evaluation: Evaluation, *, stale: bool = False) -> Decision:
    """Fits, no room now (warn), impossible (deny) or unchecked (warn) (docs/contracts.md: Verdicts).
    Never denies on an empty or stale inventory, on nodes without NUMA data, or when no
    node is selected."""
    c = evaluation.counts
    if evaluation.total == 0:
        return unchecked("empty-inventory", c)
    if stale:
        return unchecked("stale-inventory", c)
    if c.get("fits", 0):
        return Decision("fits", counts=c)
    if c.get("no-room-now", 0):
        n = c["no-room-now"]
        text = (
            f"numagate: no node has room now; {n} node(s) could run this pod once resources free up"
        )
        return Decision("no-room-now", warnings=(_short(text),), counts=c)
    if evaluation.unknown_compatible:
        n = evaluation.unknown_compatible
        text = f"numagate: no node with NUMA data can run this pod; {n} node(s) without NUMA data not checked"
        return Decision("unchecked", warnings=(_short(text),), counts=c, unchecked="no-numa-data")
    if c.get("not-selected", 0) == evaluation.total:
        # Autoscaled pools may have no node yet: nothing to judge, so no denial.
        return unchecked("not-selected", c)
    return Decision("impossible", message=_deny_message(evaluation), counts=c)


_UNCHECKED: Mapping[Unchecked, str] = {
    "empty-inventory": "numagate: inventory is empty; NUMA feasibility not checked",
    "stale-inventory": "numagate: inventory is stale; NUMA feasibility not checked",
    "not-selected": "numagate: no node matches the pod's nodeName/nodeSelector/affinity",
    "no-inventory": "feasibility not checked: no inventory loaded yet",
    "deadline": "feasibility not checked: the admission deadline (?timeout=) was too near",
}


def unchecked(why: Unchecked, counts: Mapping[str, int] | None = None) -> Decision:
    """Nothing decided, and why: allowed with one warning. The webhook uses it for the
    reviews it cannot evaluate (no inventory yet, the deadline too near)."""
    return Decision("unchecked", warnings=(_UNCHECKED[why],), counts=counts or {}, unchecked=why)


def _deny_message(ev: Evaluation) -> str:
    c = ev.counts
    parts = [f"{c[v]} {v}" for v in ("never-fits", "policy-mismatch", "not-selected") if c.get(v)]
    msg = f"numagate: no node can ever run this pod under {ev.rule} ({', '.join(parts)})"
    if ev.near_miss is not None:
        msg += f"; closest: {ev.near_miss.name}: {ev.near_miss.reason}"
    return msg
