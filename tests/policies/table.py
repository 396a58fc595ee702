"""The agreement table (issue 29): objects with the rules of core.intent.rules they fail,
as (field path, code). tests/policies/test_agreement.py checks that the webhook and the
generated policies (celpy) both fail exactly these; tests/e2e/test_policies.py that the
real apiserver denies exactly these."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
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
    warns: tuple[tuple[str, str], ...] = ()  # (path, code) of WARNING_RULES the webhook warns
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


def volcano_job(
    name: str,
    policy: str | None,
    annotations: dict[str, str],
    resources: dict[str, Any] | None = None,
    init: dict[str, Any] | None = None,
) -> Any:
    """A Volcano Job of one task; ``resources``: its container's (1 CPU by default),
    ``init``: an init container's resources."""
    if resources is None:
        resources = {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}
    spec: dict[str, Any] = {
        "containers": [{**CONTAINER, "resources": resources}],
        "restartPolicy": "Never",
    }
    if init is not None:
        spec["initContainers"] = [{**CONTAINER, "name": "setup", "resources": init}]
    task: dict[str, Any] = {
        "name": "worker",
        "replicas": 1,
        "template": {"metadata": {"annotations": annotations}, "spec": spec},
    }
    if policy is not None:
        task["topologyPolicy"] = policy
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulerName": "volcano", "minAvailable": 1, "tasks": [task]},
    }


def with_resources(obj: dict[str, Any], resources: dict[str, Any], init: bool = False) -> Any:
    """``obj`` (a Pod or a Deployment) whose container, or a new init container, has
    ``resources``."""
    spec = obj["spec"] if obj["kind"] == "Pod" else obj["spec"]["template"]["spec"]
    if init:
        spec["initContainers"] = [{**CONTAINER, "name": "setup", "resources": resources}]
    else:
        spec["containers"] = [{**CONTAINER, "resources": resources}]
    return obj


def _ann(key: str, prefix: str = "") -> str:
    return f"{prefix}metadata.annotations[{key}]"


def _res(section: str, name: str, prefix: str = "", lst: str = "containers") -> str:
    return f"{prefix}spec.{lst}[*].resources.{section}[{name}]"


CORES, MEM_PCT = "nvidia.com/gpucores", "nvidia.com/gpumem-percentage"
TASK = "spec.tasks[*].template."
FORGED = "forged-allocation"
BIND_PHASE, VGPU_NODE = "hami.io/bind-phase", "hami.io/vgpu-node"
BIND_TIME = "hami.io/bind-time"
WEIGHTS, INVALID = "hami.io/device-scoring-weights", "invalid-value"
DEVICES = "hami.io/nvidia-devices-allocated"


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
    # HAMi's scheduler-owned allocation annotations (forged-allocation): on a Pod's CREATE,
    # in workload and Volcano Job task templates; not in an unchanged template
    Case(
        "forged-bind-phase",
        pod("forged-bind-phase", {BIND_PHASE: "allocating"}),
        ((_ann(BIND_PHASE), FORGED),),
    ),
    Case(
        "forged-three-keys",
        pod(
            "forged-three-keys",
            {VGPU_NODE: "node-1", BIND_TIME: "1700000000", DEVICES: "GPU-0,NVIDIA,1000,0:;"},
        ),
        ((_ann(VGPU_NODE), FORGED), (_ann(BIND_TIME), FORGED), (_ann(DEVICES), FORGED)),
    ),
    Case(
        "forged-deployment",
        deployment("forged-deployment", {"hami.io/mlu-devices-to-allocate": "x"}),
        ((_ann("hami.io/mlu-devices-to-allocate", "spec.template."), FORGED),),
    ),
    Case(
        "forged-cronjob",
        cronjob("forged-cronjob", {"hami.io/kunlun-allocated": "0"}),
        ((_ann("hami.io/kunlun-allocated", "spec.jobTemplate.spec.template."), FORGED),),
    ),
    Case(
        "forged-vcjob",
        volcano_job("forged-vcjob", None, {"hami.io/vgpu-time": "1700000000"}),
        ((_ann("hami.io/vgpu-time", TASK), FORGED),),
    ),
    Case(
        "forged-vcjob-devices",
        volcano_job("forged-vcjob-devices", None, {DEVICES: "GPU-0"}),
        ((_ann(DEVICES, TASK), FORGED),),
    ),
    # HAMi's own keys that a user writes, and look-alikes: accepted
    Case(
        "hami-user-keys",
        pod(
            "hami-user-keys",
            {
                "hami.io/use-gpuuuid": "GPU-0",
                "hami.io/nvidia-devices-allocatedx": "1",
                "hami.io/nvidia-devices": "1",
                "example.com/vgpu-node": "1",
            },
        ),
    ),
    Case(
        "forged-deployment-unchanged",
        deployment("forged-deployment-unchanged", {BIND_PHASE: "success"}, replicas=2),
        operation="UPDATE",
        old=deployment("forged-deployment-unchanged", {BIND_PHASE: "success"}),
    ),
    # hami.io/device-scoring-weights (HAMi v2.10.0+): ParseDeviceScoringWeights' grammar
    Case("weights-ok", pod("weights-ok", {WEIGHTS: "slot=1,core=0,memory=2"})),
    Case("weights-spaced", pod("weights-spaced", {WEIGHTS: " memory = +3 ,core=-0,slot=0"})),
    Case(
        "weights-all-zero",
        pod("weights-all-zero", {WEIGHTS: "slot=0,core=0,memory=0"}),
        ((_ann(WEIGHTS), INVALID),),
    ),
    Case(
        "weights-duplicate",
        pod("weights-duplicate", {WEIGHTS: "slot=1,slot=1,memory=1"}),
        ((_ann(WEIGHTS), INVALID),),
    ),
    Case(
        "weights-negative",
        deployment("weights-negative", {WEIGHTS: "slot=1,core=-1,memory=1"}),
        ((_ann(WEIGHTS, "spec.template."), INVALID),),
    ),
    Case(
        "weights-int64",
        volcano_job("weights-int64", None, {WEIGHTS: "slot=9223372036854775808,core=1,memory=1"}),
        ((_ann(WEIGHTS, TASK), INVALID),),
    ),
    Case(
        "weights-two-entries",
        cronjob("weights-two-entries", {WEIGHTS: "slot=1,core=1"}),
        ((_ann(WEIGHTS, "spec.jobTemplate.spec.template."), INVALID),),
    ),
    Case(
        "weights-max",
        volcano_job("weights-max", None, {WEIGHTS: "core=9223372036854775807,slot=0,memory=0"}),
    ),
    # quantity rules (Kubernetes' CEL quantity library: the apiserver's CEL only)
    Case("hami-cores-100", with_resources(pod("hami-cores-100", {}), {"limits": {CORES: "100"}})),
    Case(
        "hami-cores-over",
        with_resources(pod("hami-cores-over", {}), {"limits": {CORES: "150"}}),
        ((_res("limits", CORES), "out-of-range"),),
    ),
    Case(
        "hami-mem-init-over",
        with_resources(
            deployment("hami-mem-init-over", {}), {"limits": {MEM_PCT: "101"}}, init=True
        ),
        ((_res("limits", MEM_PCT, "spec.template.", "initContainers"), "out-of-range"),),
    ),
    Case(
        "vcjob-hami-over",
        volcano_job("vcjob-hami-over", None, {}, {"limits": {"cpu": "1", CORES: 200}}),
        ((_res("limits", CORES, TASK), "out-of-range"),),
    ),
    Case("vcjob-cpu-int", volcano_job("vcjob-cpu-int", "restricted", {}, {"limits": {"cpu": 2}})),
    Case(
        "vcjob-cpu-none-policy",
        volcano_job("vcjob-cpu-none-policy", "none", {}, {"requests": {"cpu": "1500m"}}),
    ),
    Case(
        "vcjob-cpu-other-scheduler",
        {
            **(job := volcano_job("vcjob-cpu-other-scheduler", "best-effort", {}, {})),
            "spec": {
                **job["spec"],
                "tasks": [
                    {
                        **job["spec"]["tasks"][0],
                        "template": {
                            "spec": {
                                "schedulerName": "koord-scheduler",
                                "containers": [CONTAINER],
                            }
                        },
                    }
                ],
            },
        },
    ),
    Case(
        "vcjob-cpu-fraction",
        volcano_job(
            "vcjob-cpu-fraction",
            "single-numa-node",
            {},
            {"requests": {"cpu": "1500m"}, "limits": {"cpu": "2"}},
        ),
        ((_res("requests", "cpu", TASK), "fractional-cpu"),),
    ),
    Case(
        "vcjob-cpu-init-decimal",
        volcano_job("vcjob-cpu-init-decimal", "restricted", {}, init={"limits": {"cpu": "0.5"}}),
        ((_res("limits", "cpu", TASK, "initContainers"), "fractional-cpu"),),
    ),
    Case(
        "vcjob-cpu-sub-millicore",
        volcano_job("vcjob-cpu-sub-millicore", "best-effort", {}, {"limits": {"cpu": "1.0001"}}),
        ((_res("limits", "cpu", TASK), "fractional-cpu"),),
    ),
    Case(
        "vcjob-cpu-unset",
        volcano_job(
            "vcjob-cpu-unset",
            "single-numa-node",
            {},
            {"requests": {"memory": "1Gi"}, "limits": {"cpu": "2"}},
        ),
        ((_res("requests", "cpu", TASK), "fractional-cpu"),),
    ),
)


# ---- the warnings (core.intent.rules.WARNING_RULES: the policy numagate-warnings) ---------

NG, FC = "not-guaranteed", "fractional-cpu"
GUARANTEED = {"limits": {"cpu": "2", "memory": "1Gi"}}


def _req(prefix: str = "", lst: str = "containers") -> str:
    return _res("requests", "cpu", prefix, lst)


def _with_spec(obj: dict[str, Any], **fields: Any) -> Any:
    obj["spec"].update(fields)
    return obj


WARN_CASES: tuple[Case, ...] = (
    # Pods: Volcano's annotation, any spelling the webhook reads
    Case(
        "warn-besteffort",
        pod("warn-besteffort", {VOLCANO: "single-numa-node"}),
        warns=((_ann(VOLCANO), NG),),
    ),
    Case(
        "warn-burstable-respelled",
        with_resources(
            pod("warn-burstable-respelled", {VOLCANO: " Single_NUMA_Node"}),
            {"requests": {"cpu": "1", "memory": "1Gi"}},
        ),
        warns=((_ann(VOLCANO), NG),),
    ),
    Case(
        "warn-requests-below-limits",
        with_resources(
            pod("warn-requests-below-limits", {VOLCANO: "restricted"}),
            {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}},
        ),
        warns=((_ann(VOLCANO), NG),),
    ),
    Case(
        "warn-guaranteed-whole",
        with_resources(pod("warn-guaranteed-whole", {VOLCANO: "restricted"}), GUARANTEED),
    ),
    Case(
        "warn-guaranteed-fraction",
        with_resources(
            pod("warn-guaranteed-fraction", {VOLCANO: "best-effort"}),
            {"limits": {"cpu": "1500m", "memory": "1Gi"}},
        ),
        warns=((_req(), FC),),
    ),
    Case(
        "warn-sub-millicore",
        with_resources(
            pod("warn-sub-millicore", {VOLCANO: "BestEffort"}),
            {"limits": {"cpu": "1.0001", "memory": "1Gi"}},
        ),
        warns=((_req(), FC),),
    ),
    Case(
        "warn-init-fraction",
        with_resources(
            with_resources(pod("warn-init-fraction", {VOLCANO: "single-numa-node"}), GUARANTEED),
            {"limits": {"cpu": "0.5", "memory": "1Gi"}},
            init=True,
        ),
        warns=((_req("", "initContainers"), FC),),
    ),
    Case(
        "warn-init-burstable",
        with_resources(
            with_resources(pod("warn-init-burstable", {VOLCANO: "single-numa-node"}), GUARANTEED),
            {"requests": {"cpu": "1"}},
            init=True,
        ),
        warns=((_ann(VOLCANO), NG),),
    ),
    Case(
        "warn-memory-fraction-guaranteed",  # bytes rounded up, as the webhook does
        with_resources(
            pod("warn-memory-fraction-guaranteed", {VOLCANO: "restricted"}),
            {"limits": {"cpu": "1", "memory": "1500m"}},
        ),
    ),
    Case("warn-none-policy", pod("warn-none-policy", {VOLCANO: "none"})),
    Case(
        "warn-other-scheduler",
        _with_spec(
            pod("warn-other-scheduler", {VOLCANO: "single-numa-node"}),
            schedulerName="hami-scheduler",
        ),
    ),
    Case(
        "warn-volcano-scheduler",
        _with_spec(
            pod("warn-volcano-scheduler", {VOLCANO: "single-numa-node"}), schedulerName="volcano"
        ),
        warns=((_ann(VOLCANO), NG),),
    ),
    Case(
        "warn-second-container",  # the first container that fails is the one named
        _with_spec(
            pod("warn-second-container", {VOLCANO: "restricted"}),
            containers=[
                {**CONTAINER, "resources": GUARANTEED},
                {
                    **CONTAINER,
                    "name": "side",
                    "resources": {"limits": {"cpu": "2500m", "memory": "1Gi"}},
                },
            ],
        ),
        warns=((_req(), FC),),
    ),
    Case(
        "warn-sidecar-burstable",  # a sidecar counts toward the QoS class too
        _with_spec(
            with_resources(pod("warn-sidecar-burstable", {VOLCANO: "restricted"}), GUARANTEED),
            initContainers=[
                {
                    **CONTAINER,
                    "name": "proxy",
                    "restartPolicy": "Always",
                    "resources": {"limits": {"cpu": "1"}},
                }
            ],
        ),
        warns=((_ann(VOLCANO), NG),),
    ),
    # workloads
    Case(
        "warn-deployment-fraction",
        with_resources(
            deployment("warn-deployment-fraction", {VOLCANO: "restricted"}),
            {"limits": {"cpu": "250m", "memory": "64Mi"}},
        ),
        warns=((_req("spec.template."), FC),),
    ),
    Case(
        "warn-cronjob-besteffort",
        cronjob("warn-cronjob-besteffort", {VOLCANO: "best-effort"}),
        warns=((_ann(VOLCANO, "spec.jobTemplate.spec.template."), NG),),
    ),
    Case(
        "warn-deployment-scaled",  # an UPDATE that leaves the template alone: not checked
        deployment("warn-deployment-scaled", {VOLCANO: "single-numa-node"}, replicas=2),
        operation="UPDATE",
        old=deployment("warn-deployment-scaled", {VOLCANO: "single-numa-node"}),
    ),
    # Volcano Jobs: the task's topologyPolicy, else its template's annotation
    Case(
        "warn-vcjob-field-burstable",
        volcano_job("warn-vcjob-field-burstable", "single-numa-node", {}),
        warns=(("spec.tasks[*].topologyPolicy", NG),),
    ),
    Case(
        "warn-vcjob-field-guaranteed",
        volcano_job("warn-vcjob-field-guaranteed", "restricted", {}, GUARANTEED),
    ),
    Case(
        "warn-vcjob-annotation-besteffort",
        volcano_job("warn-vcjob-annotation-besteffort", None, {VOLCANO: "Restricted"}, {}),
        warns=((_ann(VOLCANO, TASK), NG),),
    ),
    Case(
        "warn-vcjob-annotation-fraction",
        volcano_job(
            "warn-vcjob-annotation-fraction",
            None,
            {VOLCANO: "best-effort"},
            {"limits": {"cpu": "1500m", "memory": "1Gi"}},
        ),
        warns=((_req(TASK), FC),),
    ),
    Case(
        "warn-vcjob-second-task",  # the first task that fails is the one named
        {
            **(two := volcano_job("warn-vcjob-second-task", "restricted", {}, GUARANTEED)),
            "spec": {
                **two["spec"],
                "tasks": [
                    two["spec"]["tasks"][0],
                    {  # no topologyPolicy: its template's annotation, and no CPU error
                        "name": "ps",
                        "replicas": 1,
                        "template": {
                            "metadata": {"annotations": {VOLCANO: "best-effort"}},
                            "spec": {"containers": [CONTAINER]},
                        },
                    },
                ],
            },
        },
        warns=((_ann(VOLCANO, TASK), NG),),
    ),
    Case(
        "warn-vcjob-field-fraction",  # Volcano's own rule, an error, replaces the warning
        volcano_job(
            "warn-vcjob-field-fraction",
            "best-effort",
            {},
            {"limits": {"cpu": "1500m", "memory": "1Gi"}},
        ),
        ((_res("limits", "cpu", TASK), "fractional-cpu"),),
    ),
    Case(
        "warn-vcjob-other-scheduler-spaced",  # the webhook strips the name: not Volcano's
        {
            **(job := volcano_job("warn-vcjob-other-scheduler-spaced", "best-effort", {}, {})),
            "spec": {
                **job["spec"],
                "tasks": [
                    {
                        **job["spec"]["tasks"][0],
                        "template": {
                            "spec": {
                                "schedulerName": " hami-scheduler ",
                                "containers": [
                                    {**CONTAINER, "resources": {"limits": {"cpu": "500m"}}}
                                ],
                            }
                        },
                    }
                ],
            },
        },
    ),
    Case(
        "warn-vcjob-none-field",
        volcano_job("warn-vcjob-none-field", "none", {}, {}),
    ),
)

# The rows above that the warnings' rules also apply to: pods without resources are
# BestEffort, and a Volcano Job task's default container sets no memory (Burstable).
_POD_NG = ((_ann(VOLCANO), NG),)
_TASK_NG = (("spec.tasks[*].topologyPolicy", NG),)
_ALSO_WARNED: dict[str, tuple[tuple[str, str], ...]] = {
    **dict.fromkeys(
        ("volcano-exact", "volcano-respelled", "volcano-separators", "volcano-unicode-space"),
        _POD_NG,
    ),
    **dict.fromkeys(
        (
            "vcjob-ok",
            "vcjob-respelled",
            "vcjob-cpu-int",
            "vcjob-cpu-fraction",
            "vcjob-cpu-init-decimal",
            "vcjob-cpu-sub-millicore",
            "vcjob-cpu-unset",
        ),
        _TASK_NG,
    ),
}
CASES = tuple(replace(c, warns=_ALSO_WARNED.get(c.name, c.warns)) for c in CASES)
ALL_CASES: tuple[Case, ...] = CASES + WARN_CASES


# ---- the rules of the configured release (core.intent.release_rules) ----------------------

# HAMi v2.6.0: binpack and spread only, no chains (topology-aware from v2.7.0, mutex and
# numa and chains from v2.10.0). A respelled chain is quoted as written by the policy, as
# rewritten by the webhook (webhook.policy_releases._shown): the chains here are HAMi's spelling.
RELEASE_CONFIG: dict[str, Any] = {"schedulerVersions": {"hami": "v2.6.0"}}
UNSUPPORTED = "unsupported-value"
RELEASE_CASES: tuple[Case, ...] = (
    Case("release-known", pod("release-known", {HAMI_GPU: " Bin_Pack "})),
    Case(
        "release-late-token",
        pod("release-late-token", {HAMI_GPU: "Topology-Aware"}),
        ((_ann(HAMI_GPU), UNSUPPORTED),),
    ),
    Case(
        "release-chain-known",
        pod("release-chain-known", {HAMI_GPU: "binpack,spread"}),
        ((_ann(HAMI_GPU), UNSUPPORTED),),
    ),
    Case(
        "release-chain-late-second",
        pod("release-chain-late-second", {HAMI_GPU: "spread,numa,mutex"}),
        ((_ann(HAMI_GPU), UNSUPPORTED),),
    ),
    Case(
        "release-unknown-is-unknown",
        pod("release-unknown-is-unknown", {HAMI_GPU: "numaa"}),
        ((_ann(HAMI_GPU), "unknown-value"),),
    ),
    Case(
        "release-deployment",
        deployment("release-deployment", {HAMI_GPU: "mutex"}),
        ((_ann(HAMI_GPU, "spec.template."), UNSUPPORTED),),
    ),
    Case(
        "release-vcjob",
        volcano_job("release-vcjob", None, {HAMI_GPU: "binpack,topology-aware"}),
        ((_ann(HAMI_GPU, TASK), UNSUPPORTED),),
    ),
    Case("release-vcjob-ok", volcano_job("release-vcjob-ok", None, {HAMI_GPU: "spread"})),
)
