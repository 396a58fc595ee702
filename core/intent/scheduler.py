"""Which scheduler places the pod, and the keys of the other schedulers: mirroring a policy
into the key the pod's scheduler reads, or reporting that a key has no effect.

Scheduler detection (docs/contracts.md: Policy semantics):

1. ``spec.schedulerName`` ``koord-scheduler`` -> koordinator, ``volcano`` -> volcano,
   ``hami-scheduler`` -> hami.
2. Otherwise by the keys present: a Volcano key (``volcano.sh/numa-topology-policy``, or a
   Volcano Job task, whose pods Volcano schedules) -> volcano; else Koordinator keys
   (``scheduling.koordinator.sh/numa-topology-spec`` or ``resource-spec``) -> koordinator.
3. Otherwise, when ``schedulerName`` is empty or ``default-scheduler`` and the pod asks for a
   resource only HAMi serves (``nvidia.com/gpumem``, ``gpucores``, ``gpumem-percentage``), or
   carries a HAMi policy key and asks for ``nvidia.com/gpu`` -> hami (HAMi's webhook rewrites
   ``schedulerName`` to ``hami-scheduler`` for such pods, research §3.3).
4. Otherwise ``default`` (the kubelet alone decides).
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from core.intent import dialects as d
from core.intent.annotations import JsonDoc
from core.intent.findings import Ctx
from core.intent.lenient_json import dump_compact
from core.model import POLICY_NONE, Scheduler, Severity

OWNER = {"koordinator": "Koordinator", "volcano": "Volcano", "hami": "HAMi"}
KEY_OWNER = {
    d.KOORD_NUMA_SPEC: "koordinator",
    d.KOORD_RESOURCE_SPEC: "koordinator",
    d.VOLCANO_NUMA_POLICY: "volcano",
    d.HAMI_NODE_POLICY: "hami",
    d.HAMI_GPU_POLICY: "hami",
    d.HAMI_NUMA_BIND: "hami",
    d.HAMI_SCORING_WEIGHTS: "hami",
}

_OWNED_KEYS = tuple(sorted(KEY_OWNER))  # in the order findings are reported
_KOORD_KEYS = frozenset(d.KOORD_KEYS)
_HAMI_KEYS = frozenset(d.HAMI_KEYS)
_HAMI_ONLY_RESOURCES = frozenset(d.HAMI_ONLY_RESOURCES)


def detect_scheduler(
    scheduler_name: str,
    keys: AbstractSet[str],
    *,
    volcano_job: bool,
    resources: set[str],
) -> Scheduler:
    """The rule in the module docstring."""
    if scheduler_name in d.SCHEDULER_BY_NAME:
        return d.SCHEDULER_BY_NAME[scheduler_name]  # type: ignore[return-value]
    if volcano_job or d.VOLCANO_NUMA_POLICY in keys:
        return "volcano"
    if not _KOORD_KEYS.isdisjoint(keys):
        return "koordinator"
    if scheduler_name in d.DEFAULT_SCHEDULER_NAMES and (
        not _HAMI_ONLY_RESOURCES.isdisjoint(resources)
        or (not _HAMI_KEYS.isdisjoint(keys) and d.HAMI_GPU in resources)
    ):
        return "hami"
    return "default"


def _no_effect(
    key: str, scheduler: Scheduler, scheduler_name: str, ctx: Ctx, severity: Severity = "warning"
) -> None:
    owner = OWNER[KEY_OWNER[key]]
    shown = scheduler_name or "default-scheduler"
    ctx.add(
        ctx.ann(key),
        severity,
        "no-effect",
        f"{key} is read only by {owner}; this pod is scheduled by {shown} ({scheduler}), so it "
        "has no effect",
    )


def mirror(
    scheduler: Scheduler,
    scheduler_name: str,
    koord: JsonDoc,
    koord_policy: str | None,
    volcano_policy: str | None,
    volcano_in_template: bool,
    annotations: dict[str, str],
    ctx: Ctx,
) -> tuple[str | None, str | None]:
    """Add the key the pod's scheduler reads when only the other scheduler's key states a
    policy; report keys that have no effect. Returns the (koord, volcano) policies after."""
    shown = scheduler_name or scheduler
    if scheduler == "volcano" and koord.doc is not None:
        writable = d.VOLCANO_NUMA_POLICY not in ctx.unread
        if koord_policy not in (None, POLICY_NONE) and volcano_policy is None and writable:
            annotations[d.VOLCANO_NUMA_POLICY] = koord_policy
            ctx.add(
                ctx.ann(koord.key),
                "warning",
                "mirrored",
                f"{koord.key} is read only by Koordinator but the pod is scheduled by {shown}; "
                f"added {d.VOLCANO_NUMA_POLICY}: {koord_policy}, the key Volcano reads",
            )
            return koord_policy, koord_policy
        sev: Severity = "info" if koord_policy == volcano_policy else "warning"
        _no_effect(koord.key, scheduler, scheduler_name, ctx, sev)
    elif scheduler == "koordinator" and volcano_in_template:
        usable = koord.doc is not None or koord.key not in annotations
        if volcano_policy not in (None, POLICY_NONE) and koord_policy is None and usable:
            doc = koord.doc if koord.doc is not None else {}
            assert volcano_policy is not None
            doc[d.F_NUMA_POLICY] = d.koord_from_kubelet(volcano_policy)
            annotations[d.KOORD_NUMA_SPEC] = dump_compact(doc)
            koord.doc = doc
            ctx.add(
                ctx.ann(d.VOLCANO_NUMA_POLICY),
                "warning",
                "mirrored",
                f"{d.VOLCANO_NUMA_POLICY} is read only by Volcano but the pod is scheduled by "
                f"{shown}; added {d.KOORD_NUMA_SPEC} {annotations[d.KOORD_NUMA_SPEC]}, the key "
                "Koordinator reads",
            )
            return volcano_policy, volcano_policy
        sev = "info" if koord_policy == volcano_policy else "warning"
        _no_effect(d.VOLCANO_NUMA_POLICY, scheduler, scheduler_name, ctx, sev)
    return koord_policy, volcano_policy


def other_keys_no_effect(
    scheduler: Scheduler,
    scheduler_name: str,
    annotations: dict[str, str],
    ctx: Ctx,
    mirrored: set[str],
) -> None:
    for key in [k for k in _OWNED_KEYS if k in annotations]:  # not every key: bounded
        owner = KEY_OWNER.get(key)
        if owner is None or owner == scheduler or key in mirrored:
            continue
        if scheduler in ("volcano", "koordinator") and key in (
            d.KOORD_NUMA_SPEC,
            d.VOLCANO_NUMA_POLICY,
        ):
            continue  # handled by mirror
        _no_effect(key, scheduler, scheduler_name, ctx)


_SCHEDULER_OF = {"volcano": "volcano", "koordinator": "koord-scheduler"}


def unscheduled_keys(
    scheduler: Scheduler, scheduler_name: str, annotations: dict[str, str], ctx: Ctx
) -> None:
    """A pod read as Volcano's or Koordinator's by its keys alone (its schedulerName is
    unset, ``default-scheduler`` or another name) keeps that reading, since a webhook may
    still set schedulerName (Volcano's resource groups do), but is warned: the key does
    nothing unless that scheduler places the pod (volcano numaaware.go and koordinator
    nodenumaresource plugin.go run only inside their own schedulers)."""
    owner = _SCHEDULER_OF.get(scheduler)
    if owner is None or scheduler_name in d.SCHEDULER_BY_NAME:
        return
    keys = [k for k in _OWNED_KEYS if k in annotations and KEY_OWNER[k] == scheduler]
    if not keys:
        return  # a Volcano Job task: the job controller sets schedulerName
    if scheduler_name in d.DEFAULT_SCHEDULER_NAMES:
        shown = "default-scheduler"
    else:  # quoted, at most 19 characters: the warning stays under 120
        shown = repr(scheduler_name if len(scheduler_name) <= 17 else scheduler_name[:16] + "…")
    ctx.add(
        ctx.ann(keys[0]),
        "warning",
        "no-effect",
        f"{keys[0]}: no effect unless {owner} places the pod, not {shown}",
    )
