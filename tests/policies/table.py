"""The agreement table (issue 29): objects with the rules of core.intent.rules they fail,
as (field path, code). tests/policies/test_agreement.py checks that the webhook and the
generated policies (celpy) both fail exactly these; tests/e2e/test_policies.py that the
real apiserver denies exactly these."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

VOLCANO = "volcano.sh/numa-topology-policy"
HAMI_NODE = "hami.io/node-scheduler-policy"
HAMI_GPU = "hami.io/gpu-scheduler-policy"
NUMA_BIND = "nvidia.com/numa-bind"
CONTAINER = {"name": "app", "image": "registry.k8s.io/pause:3.10"}


@dataclass(frozen=True)
class Case:
    name: str
    obj: dict[str, Any]
    expect: tuple[tuple[str, str], ...] = ()  # (path, code) the webhook denies
    operation: str = "CREATE"
    old: dict[str, Any] | None = None
    namespace: str = "default"
    labels: dict[str, str] = field(default_factory=dict)


def pod(name: str, annotations: dict[str, str], labels: dict[str, str] | None = None) -> Any:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "annotations": annotations}
    if labels:
        meta["labels"] = labels
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [CONTAINER]},
    }


def deployment(name: str, annotations: dict[str, str], replicas: int = 1) -> Any:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels, "annotations": annotations},
                "spec": {"containers": [CONTAINER]},
            },
        },
    }


def cronjob(name: str, annotations: dict[str, str]) -> Any:
    template = {
        "metadata": {"annotations": annotations},
        "spec": {"containers": [CONTAINER], "restartPolicy": "Never"},
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": template}}},
    }


def volcano_job(name: str, policy: str | None, annotations: dict[str, str]) -> Any:
    task: dict[str, Any] = {
        "name": "worker",
        "replicas": 1,
        "template": {
            "metadata": {"annotations": annotations},
            "spec": {
                "containers": [
                    {**CONTAINER, "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}}
                ],
                "restartPolicy": "Never",
            },
        },
    }
    if policy is not None:
        task["topologyPolicy"] = policy
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulerName": "volcano", "minAvailable": 1, "tasks": [task]},
    }


def _ann(key: str, prefix: str = "") -> str:
    return f"{prefix}metadata.annotations[{key}]"


LONG = "single-numa-node" + " " * 1024

CASES: tuple[Case, ...] = (
    # Volcano's pod annotation: any spelling the mutating webhook rewrites is accepted
    Case("volcano-exact", pod("volcano-exact", {VOLCANO: "single-numa-node"})),
    Case("volcano-respelled", pod("volcano-respelled", {VOLCANO: "SingleNUMANode"})),
    Case("volcano-separators", pod("volcano-separators", {VOLCANO: " Best_Effort\t"})),
    Case(
        "volcano-unicode-space",
        pod("volcano-unicode-space", {VOLCANO: "single\u00a0numa\u2003node"}),
    ),
    Case("hami-kelvin-sign", pod("hami-kelvin-sign", {HAMI_NODE: "binpac\u212a"})),  # str.lower: k
    Case(
        "volcano-unknown",
        pod("volcano-unknown", {VOLCANO: "SingleNUMA"}),
        ((_ann(VOLCANO), "unknown-policy"),),
    ),
    Case(
        "volcano-empty", pod("volcano-empty", {VOLCANO: ""}), ((_ann(VOLCANO), "unknown-policy"),)
    ),
    Case(
        "volcano-two-values",
        pod("volcano-two-values", {VOLCANO: "restricted,none"}),
        ((_ann(VOLCANO), "unknown-policy"),),
    ),
    Case(
        "volcano-too-long",
        pod("volcano-too-long", {VOLCANO: LONG}),
        ((_ann(VOLCANO), "too-large"),),
    ),
    # HAMi
    Case("hami-node-ok", pod("hami-node-ok", {HAMI_NODE: "Spread", NUMA_BIND: " False "})),
    Case("hami-node-separator", pod("hami-node-separator", {HAMI_NODE: "bin-pack"})),
    Case(
        "hami-node-unknown",
        pod("hami-node-unknown", {HAMI_NODE: "best"}),
        ((_ann(HAMI_NODE), "unknown-value"),),
    ),
    Case("hami-gpu-chain", pod("hami-gpu-chain", {HAMI_GPU: "Binpack, topology_aware"})),
    Case(
        "hami-gpu-trailing-comma",
        pod("hami-gpu-trailing-comma", {HAMI_GPU: "binpack,"}),
        ((_ann(HAMI_GPU), "unknown-value"),),
    ),
    Case(
        "hami-gpu-unknown-token",
        pod("hami-gpu-unknown-token", {HAMI_GPU: "spread,numaa"}),
        ((_ann(HAMI_GPU), "unknown-value"),),
    ),
    Case(
        "numa-bind-yes",
        pod("numa-bind-yes", {NUMA_BIND: "yes", HAMI_NODE: "bnpack"}),
        ((_ann(NUMA_BIND), "unknown-value"), (_ann(HAMI_NODE), "unknown-value")),
    ),
    Case(
        "numa-bind-mixed-case",
        pod("numa-bind-mixed-case", {NUMA_BIND: "tRUE"}),
        ((_ann(NUMA_BIND), "unknown-value"),),
    ),
    # scope: excluded namespaces and the ignore label are the webhook's
    Case(
        "excluded-namespace",
        {
            **pod("excluded-namespace", {VOLCANO: "bogus"}),
            "metadata": {
                "name": "x",
                "namespace": "kube-system",
                "annotations": {VOLCANO: "bogus"},
            },
        },
        namespace="kube-system",
    ),
    Case("ignore-label", pod("ignore-label", {VOLCANO: "bogus"}, {"numagate.io/ignore": "true"})),
    # workloads: the template's annotations, on CREATE and on an UPDATE that changes them
    Case("deployment-ok", deployment("deployment-ok", {HAMI_GPU: "numa"})),
    Case(
        "deployment-unknown",
        deployment("deployment-unknown", {VOLCANO: "single"}),
        ((_ann(VOLCANO, "spec.template."), "unknown-policy"),),
    ),
    Case(
        "deployment-scaled",
        deployment("deployment-scaled", {VOLCANO: "single"}, replicas=3),
        operation="UPDATE",
        old=deployment("deployment-scaled", {VOLCANO: "single"}),
    ),
    Case(
        "deployment-changed",
        deployment("deployment-changed", {VOLCANO: "single"}),
        ((_ann(VOLCANO, "spec.template."), "unknown-policy"),),
        operation="UPDATE",
        old=deployment("deployment-changed", {}),
    ),
    Case(
        "cronjob-unknown",
        cronjob("cronjob-unknown", {HAMI_NODE: "packed"}),
        ((_ann(HAMI_NODE, "spec.jobTemplate.spec.template."), "unknown-value"),),
    ),
    # Volcano Jobs: each task's topologyPolicy (exact: the CRD enum) and template
    Case("vcjob-ok", volcano_job("vcjob-ok", "single-numa-node", {HAMI_GPU: "binpack"})),
    Case("vcjob-empty-policy", volcano_job("vcjob-empty-policy", "", {})),
    Case(
        "vcjob-respelled",
        volcano_job("vcjob-respelled", "SingleNUMANode", {}),
        (("spec.tasks[*].topologyPolicy", "unknown-policy"),),
    ),
    Case(
        "vcjob-template-annotation",
        volcano_job("vcjob-template-annotation", None, {NUMA_BIND: "on"}),
        ((_ann(NUMA_BIND, "spec.tasks[*].template."), "unknown-value"),),
    ),
)
