"""Helpers of the intent tests: annotation keys, a limits-only container, a pod whose
schedulerName follows its keys, and read_intent on a pod's first template."""

from __future__ import annotations

from typing import Any

from core.intent.read import IntentResult, read_intent
from core.intent.workloads import pod_templates

NUMA = "scheduling.koordinator.sh/numa-topology-spec"
RES = "scheduling.koordinator.sh/resource-spec"
VOL = "volcano.sh/numa-topology-policy"
HNODE = "hami.io/node-scheduler-policy"
HGPU = "hami.io/gpu-scheduler-policy"
GI = 2**30


def ctr(name: str = "c", cpu: str | None = "2", mem: str | None = "1Gi", **extra: Any) -> dict:
    limits = {k: v for k, v in (("cpu", cpu), ("memory", mem)) if v is not None}
    c: dict = {"name": name, "image": "x", "resources": {"limits": limits}}
    c["resources"]["limits"].update(extra.pop("limits", {}))
    c.update(extra)
    return c


def _scheduler_of(annotations: dict | None) -> str | None:
    """The scheduler that reads the keys (a pod with only the keys gets a no-effect
    warning, tested on its own below)."""
    keys = set(annotations or {})
    if "volcano.sh/numa-topology-policy" in keys:
        return "volcano"
    if any(k.startswith("scheduling.koordinator.sh/") for k in keys):
        return "koord-scheduler"
    return None


def pod(annotations: dict | None = None, containers: list | None = None, **spec: Any) -> dict:
    """A pod; schedulerName, when not given, is the one that reads its keys (None: unset)."""
    meta: dict = {"name": "p", "namespace": "ns"}
    if annotations is not None:
        meta["annotations"] = annotations
    if "schedulerName" not in spec:
        spec["schedulerName"] = _scheduler_of(annotations)
    if spec["schedulerName"] is None:
        del spec["schedulerName"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": containers if containers is not None else [ctr()], **spec},
    }


def run(obj: dict, index: int = 0) -> IntentResult:
    return read_intent(pod_templates(obj)[index])


def codes(r: IntentResult) -> list[tuple[str, str, str]]:
    return [(f.path, f.severity, f.code) for f in r.findings]


def ann(key: str) -> str:
    return f"metadata.annotations[{key}]"
