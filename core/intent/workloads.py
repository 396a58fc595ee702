"""Find the pod templates inside Kubernetes objects.

A Pod is its own template (path ``""``). Deployment, StatefulSet, DaemonSet, ReplicaSet
(``apps/v1``) and Job (``batch/v1``) carry one at ``spec.template``; CronJob at
``spec.jobTemplate.spec.template``. A Volcano Job (``batch.volcano.sh/v1alpha1``) carries one
per task at ``spec.tasks[i].template``: its ``topologyPolicy`` is what the Volcano job
controller copies into each pod's ``volcano.sh/numa-topology-policy`` annotation
(``job_controller_util.go``), so it is surfaced as that annotation, and its tasks are held to
Volcano's Job webhook rule (integer CPUs, ``strict_cpu``). Every other object has no
template and gives ``[]``. At most ``limits.templates`` templates are read per object; each
template carries the limits its reading keeps to (core.intent.limits.Limits).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Final

from core.frozen import fast_init
from core.intent.dialects import VOLCANO_NUMA_POLICY
from core.intent.limits import DEFAULT, Limits, over
from core.intent.versions import LATEST, SchedulerVersions
from core.model import Finding, is_map

VOLCANO_JOB_GROUP: Final = "batch.volcano.sh"
# kind -> path of the pod template, for the built-in workloads.
TEMPLATE_PATHS: Final[dict[str, tuple[str, ...]]] = {
    "Deployment": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "ReplicationController": ("spec", "template"),
    "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}


@fast_init
@dataclass(frozen=True, slots=True)
class PodTemplate:
    """One pod spec found in an object, with where it was found.

    ``extra_annotations`` are annotations the pod will get from its controller (a Volcano
    task's ``topologyPolicy``); ``extra_paths`` gives, for each, the field it came from.
    """

    kind: str
    name: str
    namespace: str
    path: str
    metadata: Mapping[str, Any]
    spec: Mapping[str, Any]
    extra_annotations: Mapping[str, str] = field(default_factory=dict)
    strict_cpu: bool = False
    extra_paths: Mapping[str, str] = field(default_factory=dict)
    limits: Limits = DEFAULT
    versions: SchedulerVersions = LATEST  # the releases the cluster runs (core.intent.versions)


_NO_EXTRA: Final[Mapping[str, str]] = MappingProxyType({})


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if is_map(value) else {}


def _dig(obj: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    cur: Any = obj
    for key in keys:
        if not is_map(cur):
            return None
        cur = cur.get(key)
    return cur


def _group(api_version: Any) -> str:
    text = api_version if isinstance(api_version, str) else ""
    return text.split("/", 1)[0] if "/" in text else ""


def is_volcano_job(obj: Mapping[str, Any]) -> bool:
    return obj.get("kind") == "Job" and _group(obj.get("apiVersion")) == VOLCANO_JOB_GROUP


def object_identity(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    """(kind, namespace, name); namespace ``default`` when unset, name falls back to
    ``generateName``."""
    meta = _mapping(obj.get("metadata"))
    kind = obj.get("kind")
    name = meta.get("name") or meta.get("generateName") or ""
    namespace = meta.get("namespace") or "default"
    return (
        kind if isinstance(kind, str) else "",
        namespace if isinstance(namespace, str) else str(namespace),
        name if isinstance(name, str) else str(name),
    )


def _template(
    obj: Mapping[str, Any], path: str, tmpl: Any, limits: Limits, **extra: Any
) -> PodTemplate:
    kind, namespace, name = object_identity(obj)
    t = _mapping(tmpl)
    return PodTemplate(
        kind=kind,
        name=name,
        namespace=namespace,
        path=path,
        metadata=_mapping(t.get("metadata")),
        spec=_mapping(t.get("spec")),
        limits=limits,
        **extra,
    )


def _volcano_tasks(obj: Mapping[str, Any], limits: Limits) -> list[PodTemplate]:
    """The tasks' templates; the first ``limits.templates`` only (structure_findings
    reports more)."""
    tasks = _dig(obj, ("spec", "tasks"))
    out: list[PodTemplate] = []
    if not isinstance(tasks, list):
        return out
    read = tasks[: limits.templates]
    limits = limits.shared(len(read))  # the tasks share the Job's limits
    for i, task in enumerate(read):
        task_map = _mapping(task)
        extra: dict[str, str] = {}
        paths: dict[str, str] = {}
        policy = task_map.get("topologyPolicy")
        # The job controller copies the field only when it is non-empty.
        if isinstance(policy, str) and policy != "":
            extra[VOLCANO_NUMA_POLICY] = policy
            paths[VOLCANO_NUMA_POLICY] = f"spec.tasks[{i}].topologyPolicy"
        out.append(
            _template(
                obj,
                f"spec.tasks[{i}].template",
                task_map.get("template"),
                limits,
                extra_annotations=extra,
                extra_paths=paths,
                strict_cpu=True,
            )
        )
    return out


def pod_templates(
    obj: Mapping[str, Any], limits: Limits = DEFAULT, versions: SchedulerVersions = LATEST
) -> list[PodTemplate]:
    """Every pod template of ``obj`` in document order; ``[]`` for non-workloads."""
    if not is_map(obj):
        return []
    if versions != LATEST:
        return [replace(t, versions=versions) for t in pod_templates(obj, limits)]
    kind = obj.get("kind")
    if kind == "Pod":  # its own template: the object's metadata and spec, not copied
        _, namespace, name = object_identity(obj)
        meta, spec = obj.get("metadata"), obj.get("spec")
        return [
            PodTemplate(
                "Pod", name, namespace, "", meta if is_map(meta) else {},
                spec if is_map(spec) else {}, _NO_EXTRA, False, _NO_EXTRA, limits,
            )
        ]  # fmt: skip
    if is_volcano_job(obj):
        return _volcano_tasks(obj, limits)
    if isinstance(kind, str) and kind in TEMPLATE_PATHS:
        keys = TEMPLATE_PATHS[kind]
        return [_template(obj, ".".join(keys), _dig(obj, keys), limits)]
    return []


def structure_findings(obj: Mapping[str, Any], limits: Limits = DEFAULT) -> list[Finding]:
    """Workloads whose pod template is missing or not an object (lint reports them; the API
    server would reject them too)."""
    kind = obj.get("kind")
    if kind == "Pod":
        if not isinstance(obj.get("spec"), Mapping):
            return [Finding("spec", "error", "invalid-value", "Pod has no spec object")]
        return []
    if is_volcano_job(obj):
        tasks = _dig(obj, ("spec", "tasks"))
        if not isinstance(tasks, list) or not tasks:
            return [
                Finding("spec.tasks", "error", "invalid-value", "Volcano Job has no tasks list")
            ]
        if len(tasks) > limits.templates:
            found = f"{len(tasks):,} tasks"
            message = over("spec.tasks", found, limits.templates, " pod templates")
            return [Finding("spec.tasks", "error", "too-large", message)]
        return [
            Finding(
                f"spec.tasks[{i}].template",
                "error",
                "invalid-value",
                f"Volcano Job task {i} has no pod template object",
            )
            for i, task in enumerate(tasks)
            if not isinstance(_mapping(task).get("template"), Mapping)
        ]
    if isinstance(kind, str) and kind in TEMPLATE_PATHS:
        keys = TEMPLATE_PATHS[kind]
        if not isinstance(_dig(obj, keys), Mapping):
            path = ".".join(keys)
            return [
                Finding(path, "error", "invalid-value", f"{kind} has no pod template at {path}")
            ]
    return []
