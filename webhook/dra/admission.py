"""The DRA step of ``/validate``: each pod template's claims judged over the nodes it may
go to (core.dra.pod). ``impossible`` is a failed ``feasibility`` check (denied under
enforce; the message names the claim, the request and the constraint), ``no-room-now`` a
failed ``noRoomNow`` check, ``unchecked`` a warning, never a denial. A stale or missing
inventory (NRT or DRA) turns every failure into a warning, as for the NRT checks. A
template without claims is not looked at: its answer is unchanged. An answer that read
the DRA inventory is volatile (the decision cache is keyed on the NRT view only)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from core.dra.cluster import IMPOSSIBLE, ClusterVerdict
from core.dra.cpu_driver import ERROR, Finding, concurrent_pods
from core.dra.cpu_driver import NO_ROOM_NOW as CPU_NO_ROOM
from core.dra.evaluate import DraInventory
from core.dra.objects import DraError
from core.dra.pod import Alignment, alignment, cpu_driver_findings, judge_pod, uses_dra
from core.dra.verdict import NO_ROOM_NOW, UNCHECKED
from core.intent.workloads import PodTemplate
from core.model import NodeTopology, PodIntent
from webhook.dra.state import DraState

PREFIX: Final = "DRA claims"


@dataclass
class DraChecks:
    failures: list[tuple[str, str]] = field(default_factory=list)  # (check, message)
    warnings: list[str] = field(default_factory=list)
    judged: bool = False  # some template has claims: the answer read the DRA inventory


def _at(template: PodTemplate, message: str) -> str:
    return f"{template.path}: {message}" if template.path else message


def pod_of(template: PodTemplate, namespace: str) -> dict[str, Any]:
    """The pod core.dra reads: the template's spec in the namespace of the review."""
    return {"metadata": {"namespace": template.namespace or namespace or "default"},
            "spec": template.spec}  # fmt: skip


def _judge_all(
    work: Sequence[tuple[dict[str, Any], PodIntent]],
    nodes: Sequence[NodeTopology],
    inv: DraInventory,
    replicas: int,
) -> list[tuple[ClusterVerdict | None, Alignment | None, list[Finding]] | str]:
    out: list[tuple[ClusterVerdict | None, Alignment | None, list[Finding]] | str] = []
    for pod, intent in work:
        try:
            verdict = judge_pod(pod, intent, nodes, inv)
            # reads claims too
            cpu = cpu_driver_findings(pod, intent, verdict, nodes, inv, replicas)
        except DraError as exc:  # a malformed spec.resourceClaims entry
            out.append(str(exc))
            continue
        found = None if verdict is None else alignment(pod, intent, verdict, nodes, inv)
        out.append((verdict, found, cpu))
    return out


def _classify(
    checks: DraChecks, template: PodTemplate, verdict: ClusterVerdict, stale: bool
) -> None:
    if verdict.verdict == IMPOSSIBLE:
        message = f"{PREFIX}: no node can ever allocate them: {verdict.message}"
        if stale:
            checks.warnings.append(_at(template, f"{message} (inventory stale: not denied)"))
        else:
            checks.failures.append(("feasibility", _at(template, message)))
    elif verdict.verdict == NO_ROOM_NOW:
        message = f"{PREFIX}: no node has the devices free now: {verdict.message}"
        if stale:
            checks.warnings.append(_at(template, message))
        else:
            checks.failures.append(("noRoomNow", _at(template, message)))
    elif verdict.verdict == UNCHECKED:
        checks.warnings.append(_at(template, f"{PREFIX} not checked: {verdict.message}"))


def _cpu_driver(checks: DraChecks, template: PodTemplate, found: Finding, stale: bool) -> None:
    """A DRA CPU driver rule (core.dra.cpu_driver): a claim two containers share is a
    failed ``feasibility``, one another pod holds a failed ``noRoomNow``, the rest warnings."""
    check = {ERROR: "feasibility", CPU_NO_ROOM: "noRoomNow"}.get(found.severity)
    if check is None or stale:  # a warning: the fact, then the fix (each one line)
        checks.warnings += [_at(template, f"{PREFIX}: {found.summary}"), f"numagate: {found.fix}"]
    else:
        checks.failures.append((check, _at(template, f"{PREFIX}: {found.message}")))


def _alignment_warnings(template: PodTemplate, found: Alignment) -> list[str]:
    return [
        _at(
            template,
            f"{PREFIX}: topologyManagerPolicy {found.policy} on {found.nodes} node(s): "
            "DRA devices not aligned with exclusive CPUs",
        ),
        "numagate: DRA alignment needs a DRA CPU driver in the device claim plus "
        "matchAttribute on a topology attribute",
    ]


# Before any DRA object was read (frozen: one for every review, not one built per review).
_NO_INVENTORY = DraInventory()


async def check_claims(
    pairs: Sequence[tuple[PodTemplate, PodIntent]],
    *,
    namespace: str,
    nodes: Sequence[NodeTopology] | None,
    nrt_stale: bool,
    dra: DraState | None,
    stale_after: float,
    remaining: float,
    workload: Mapping[str, Any] | None = None,
) -> DraChecks:
    """The DRA checks of one review (``remaining``: seconds left before the deadline;
    ``workload``: the reviewed object, for how many pods of its template run at once)."""
    checks = DraChecks()
    view = dra.view if dra is not None else None
    inv = view.inventory if view is not None else _NO_INVENTORY
    work = [(t, pod_of(t, namespace), i) for t, i in pairs]
    work = [w for w in work if uses_dra(w[1], inv)]
    if not work:
        return checks
    checks.judged = True
    if view is None or nodes is None:
        checks.warnings.append(f"{PREFIX} not checked: no inventory loaded yet")
        return checks
    stale = nrt_stale or (dra is not None and dra.is_stale(stale_after))
    if remaining <= 0:
        checks.warnings.append(f"{PREFIX} not checked: no time left before the deadline")
        return checks
    try:
        results = await asyncio.wait_for(
            asyncio.to_thread(
                _judge_all, [(p, i) for _, p, i in work], nodes, inv, concurrent_pods(workload)
            ),
            remaining,
        )
    except TimeoutError:
        checks.warnings.append(f"{PREFIX} not checked: the deadline passed first")
        return checks
    for (template, _, _), result in zip(work, results, strict=True):
        if isinstance(result, str):  # the API's validation refuses it before we see it
            checks.warnings.append(_at(template, f"{PREFIX} not checked: {result}"))
            continue
        verdict, found, cpu = result
        for finding in cpu:
            _cpu_driver(checks, template, finding, stale)
        if verdict is None:
            continue
        _classify(checks, template, verdict, stale)
        if found is not None:
            checks.warnings += _alignment_warnings(template, found)
    return checks


def summary(verdict: ClusterVerdict) -> Mapping[str, int]:
    """Node verdict counts (for explain and pending)."""
    counts: dict[str, int] = {}
    for v in verdict.nodes.values():
        counts[v.verdict] = counts.get(v.verdict, 0) + 1
    return counts
