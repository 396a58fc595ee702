"""The Volcano policy: the pod annotation and a Volcano Job task's ``topologyPolicy``."""

from __future__ import annotations

from core.intent import dialects as d
from core.intent.annotations import short_value
from core.intent.findings import Ctx, change_code
from core.intent.limits import clip_repr
from core.intent.rules import VOLCANO_POLICY, VOLCANO_TASK, rule
from core.intent.workloads import PodTemplate
from core.model import POLICY_NONE


def _volcano_value(raw: str, path: str, ctx: Ctx) -> tuple[str | None, str]:
    """(policy, normalized text) for a Volcano policy value."""
    m = d.match_volcano_policy(raw)
    if m.value is None:
        ctx.add(
            path,
            "error",
            "unknown-policy",
            rule(VOLCANO_POLICY).unknown(clip_repr(m.raw), d.suggestion_tail(m)),
        )
        return None, raw
    if m.changed:
        ctx.add(
            path,
            "warning",
            change_code(m),
            f"Volcano NUMA policy {d.describe_change(m, 'Volcano')}",
        )
    return m.value, m.value


def _task_policy(raw: str, path: str, ctx: Ctx) -> str | None:
    """A Volcano Job task's ``topologyPolicy``: the CRD enum (none, best-effort, restricted,
    single-numa-node) rejects any other spelling, so a respelling is an error here, with
    the value it should be; numagate does not rewrite Job fields."""
    m = d.match_volcano_policy(raw)
    if m.how == "exact":
        return m.value
    suggestion = m.value if m.value is not None else m.suggestion
    unknown = d.ValueMatch(raw, None, "unknown", suggestion)
    ctx.add(
        path,
        "error",
        "unknown-policy",
        rule(VOLCANO_TASK).unknown(clip_repr(raw), d.suggestion_tail(unknown)),
    )
    return m.value


def read_volcano(
    template: PodTemplate, annotations: dict[str, str], ctx: Ctx
) -> tuple[str | None, str, str | None]:
    """(policy, path it came from, the Job task's raw topologyPolicy or None). A Job task's
    field wins over the template's annotation: the job controller overwrites it."""
    policy: str | None = None
    path = ctx.ann(d.VOLCANO_NUMA_POLICY)
    in_template = d.VOLCANO_NUMA_POLICY in annotations
    if in_template and short_value(
        d.VOLCANO_NUMA_POLICY, annotations[d.VOLCANO_NUMA_POLICY], path, ctx
    ):
        policy, text = _volcano_value(annotations[d.VOLCANO_NUMA_POLICY], path, ctx)
        annotations[d.VOLCANO_NUMA_POLICY] = text
    extra = template.extra_annotations.get(d.VOLCANO_NUMA_POLICY)
    if extra is None:
        return policy, path, None
    task_path = template.extra_paths.get(d.VOLCANO_NUMA_POLICY, path)
    if not short_value("topologyPolicy", extra, task_path, ctx):
        return None, task_path, extra
    task_policy = _task_policy(extra, task_path, ctx)
    if in_template and None not in (task_policy, policy) and task_policy != policy:
        ctx.add(
            path,
            "error",
            "conflicting-policies",
            f"{d.VOLCANO_NUMA_POLICY} is {policy!r} but the task's topologyPolicy is "
            f"{task_policy!r}; the Volcano job controller overwrites the annotation. Remove one",
        )
    return task_policy, task_path, extra


def volcano_devices(policy: str | None, path: str, resources: set[str], ctx: Ctx) -> None:
    """Volcano's numa-aware plugin has one hint provider, the CPU manager (numaaware.go New,
    v1.15.1): its policy aligns the pod's CPUs only. An extended resource (a GPU) is left to
    the kubelet's Topology Manager, which may refuse the pod on the node Volcano chose."""
    if policy in (None, POLICY_NONE):
        return
    devices = sorted(r for r in resources if "/" in r)
    if not devices:
        return
    shown = ", ".join(devices[:3]) + (f" and {len(devices) - 3} more" if len(devices) > 3 else "")
    ctx.add(
        path,
        "warning",
        "not-aligned",
        f"Volcano's numa-aware plugin aligns only CPUs to the {policy} policy; {shown} is not "
        "aligned by Volcano, so the kubelet's Topology Manager may refuse the pod "
        "(TopologyAffinityError) on the node Volcano chose",
    )
