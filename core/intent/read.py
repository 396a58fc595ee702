"""Read one pod template into a normalized :class:`PodIntent`, with findings and the
normalized annotation map.

The steps, one module each: the annotations as strings (``annotations``), the Koordinator,
Volcano and HAMi keys (``koordinator``, ``volcano``, ``hami``), the containers' resources
and QoS (``containers``), which scheduler places the pod and the keys it does not read
(``scheduler``, whose docstring states the detection rule), the required node affinity
(``selection``). Finding codes are listed in ``core.intent.findings``.

Normalization writes every value in its owner's spelling, moves Koordinator NUMA fields
found in ``resource-spec`` into ``numa-topology-spec``, repairs lenient JSON, and mirrors a
policy into the key the pod's scheduler reads. It never drops a key, and never guesses
when two keys disagree. JSON it rewrites is compact with sorted keys, so normalizing the
output again changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from core.frozen import fast_init
from core.intent import dialects as d
from core.intent.allocation import forged_allocation
from core.intent.annotations import string_annotations
from core.intent.containers import (
    QoS,
    RawContainer,
    check_exclusive_cpus,
    demands,
    pod_qos,
    pod_requests,
    scan_containers,
)
from core.intent.findings import Ctx
from core.intent.hami import hami_release_checks, hami_values
from core.intent.koordinator import Koord, read_koordinator
from core.intent.scheduler import (
    detect_scheduler,
    mirror,
    other_keys_no_effect,
    unscheduled_keys,
)
from core.intent.selection import node_selector, required_terms
from core.intent.volcano import read_volcano, volcano_devices
from core.intent.workloads import PodTemplate
from core.model import POLICY_NONE, Finding, PodIntent, Scheduler, is_map

__all__ = ["IntentResult", "detect_scheduler", "read_intent"]


@fast_init
@dataclass(frozen=True, slots=True)
class IntentResult:
    intent: PodIntent
    findings: tuple[Finding, ...]
    annotations: dict[str, str]
    changed: bool


def _scheduler_name(template: PodTemplate) -> str:
    raw_name = template.spec.get("schedulerName")
    scheduler_name = raw_name.strip() if isinstance(raw_name, str) else ""
    if not scheduler_name and template.strict_cpu:
        return "volcano"
    return scheduler_name


def _reconcile(
    scheduler: Scheduler,
    scheduler_name: str,
    koord: Koord,
    volcano: tuple[str | None, str],
    volcano_in_template: bool,
    annotations: dict[str, str],
    ctx: Ctx,
) -> tuple[str | None, str | None]:
    """Two keys that disagree: an error, and no mirroring. Otherwise mirror the policy into
    the key the scheduler reads. Report the keys that have no effect; return the (koord,
    volcano) policies after."""
    koord_policy = koord.policy
    volcano_policy, volcano_path = volcano
    conflict = (
        koord_policy is not None and volcano_policy is not None and koord_policy != volcano_policy
    )
    if conflict:
        ctx.add(
            volcano_path if scheduler == "volcano" else ctx.ann(d.KOORD_NUMA_SPEC),
            "error",
            "conflicting-policies",
            f"{d.KOORD_NUMA_SPEC} asks for {koord_policy!r} but {d.VOLCANO_NUMA_POLICY} asks "
            f"for {volcano_policy!r}; state one policy",
        )
    mirrored: set[str] = set()
    if not conflict:
        before = set(annotations)
        koord_policy, volcano_policy = mirror(
            scheduler,
            scheduler_name,
            koord.numa,
            koord_policy,
            volcano_policy,
            volcano_in_template,
            annotations,
            ctx,
        )
        mirrored = set(annotations) - before
    elif scheduler in ("volcano", "koordinator"):
        mirrored = {d.KOORD_NUMA_SPEC, d.VOLCANO_NUMA_POLICY}
    if koord.resource.doc == {}:
        mirrored.add(d.KOORD_RESOURCE_SPEC)  # emptied by the move: nothing left to report
    other_keys_no_effect(scheduler, scheduler_name, annotations, ctx, mirrored)
    return koord_policy, volcano_policy


def _koord_exclusive(koord: Koord, policy: str | None) -> Literal["required", "preferred"] | None:
    """koord-scheduler: unset defaults to Required; anything but the exact "Required"
    disables exclusivity (plugin.go, checkExclusivePolicy)."""
    if policy in (None, POLICY_NONE):
        return None
    if koord.exclusive is None and d.F_NUMA_EXCLUSIVE not in (koord.numa.doc or {}):
        return "required"
    return "required" if koord.exclusive == "Required" else "preferred"


def _intent(
    template: PodTemplate,
    scheduler: Scheduler,
    scheduler_name: str,
    policy: str | None,
    exclusive: Literal["required", "preferred"] | None,
    raw: list[RawContainer],
    qos: QoS,
    bind: str | None,
    hami: tuple[str | None, tuple[str, ...]],
    ctx: Ctx,
) -> PodIntent:
    spec: Mapping[str, Any] = template.spec
    node_name = spec.get("nodeName")
    selection = node_selector(spec, ctx), required_terms(spec, ctx)
    return PodIntent(
        scheduler=scheduler,
        scheduler_name=scheduler_name,
        policy=policy,
        exclusive=exclusive,
        scope=None,  # no dialect lets a pod state a scope; the node's scope decides
        qos=qos,
        containers=demands(raw, qos),
        pod_requests=pod_requests(raw),
        cpu_bind_policy=bind,
        hami_node_policy=hami[0],
        hami_gpu_policy=hami[1],
        node_name=node_name if isinstance(node_name, str) and node_name else None,
        node_selector=selection[0],
        required_terms=selection[1],
    )


def read_intent(template: PodTemplate) -> IntentResult:
    """Parse, normalize and validate one pod template (see the module docstring)."""
    ctx = Ctx(template.path, limits=template.limits)
    raw_annotations = template.metadata.get("annotations")
    # Compared with, never changed (string_annotations copies): no copy of a plain dict.
    original = (
        raw_annotations
        if type(raw_annotations) is dict
        else dict(raw_annotations)
        if is_map(raw_annotations)
        else {}
    )
    # Over the API server's size: none is read, and the result keeps them as written.
    annotations = string_annotations(template.metadata, ctx)
    readable = annotations is not None
    if annotations is None:
        annotations = {}
    scheduler_name = _scheduler_name(template)

    koord = read_koordinator(annotations, ctx)
    volcano_in_template = d.VOLCANO_NUMA_POLICY in annotations
    volcano_policy, volcano_path, extra = read_volcano(template, annotations, ctx)
    hami = hami_values(annotations, ctx)
    gpu_policy, hami_weights = hami_release_checks(annotations, hami[1], template.versions, ctx)
    hami = hami[0], gpu_policy
    forged_allocation(annotations, ctx)

    raw, resources = scan_containers(template.spec, ctx)
    extra_keys = template.extra_annotations
    keys = set(annotations) | set(extra_keys) if extra_keys else annotations.keys()
    scheduler = detect_scheduler(
        scheduler_name, keys, volcano_job=template.strict_cpu, resources=resources
    )
    unscheduled_keys(scheduler, scheduler_name, annotations, ctx)
    koord_policy, volcano_policy = _reconcile(
        scheduler,
        scheduler_name,
        koord,
        (volcano_policy, volcano_path),
        volcano_in_template,
        annotations,
        ctx,
    )

    policy: str | None = None
    policy_path = ctx.ann(d.KOORD_NUMA_SPEC)
    exclusive: Literal["required", "preferred"] | None = None
    if scheduler == "koordinator":
        policy = koord_policy
        exclusive = _koord_exclusive(koord, policy)
    elif scheduler == "volcano":
        policy = volcano_policy
        policy_path = volcano_path
        volcano_devices(policy, policy_path, resources, ctx)

    qos = pod_qos(raw)
    if policy not in (None, POLICY_NONE) and raw:
        assert policy is not None
        strict = template.strict_cpu and extra is not None
        check_exclusive_cpus(policy, policy_path, raw, qos, strict, ctx)

    intent = _intent(
        template, scheduler, scheduler_name, policy, exclusive, raw, qos, koord.bind, hami, ctx
    )
    if hami_weights is not None:
        intent = replace(intent, hami_weights=hami_weights)
    if not readable:
        return IntentResult(intent, ctx.findings(), dict(original), False)
    return IntentResult(intent, ctx.findings(), annotations, annotations != original)


def with_spec_affinity(
    intent: PodIntent, template: PodTemplate, spec: Mapping[str, Any]
) -> PodIntent:
    """``read_intent(template with spec).intent`` when ``spec`` differs from the template's
    only in its node affinity (validate judging the pod without mutate's own affinity): the
    required terms are the one part of the intent read from the affinity, so only they are
    read again, not the annotations and containers (a third of such a review's CPU)."""
    ctx = Ctx(template.path, limits=template.limits)
    return replace(intent, required_terms=required_terms(spec, ctx))
