"""Pod templates of every workload kind, with their field paths."""

from __future__ import annotations

import pytest

from core.intent.workloads import pod_templates, structure_findings

TEMPLATE = {"metadata": {"annotations": {"a": "b"}}, "spec": {"containers": [{"name": "c"}]}}


def _obj(api: str, kind: str, spec: dict, ns: str | None = "team") -> dict:
    meta: dict = {"name": "w"}
    if ns:
        meta["namespace"] = ns
    return {"apiVersion": api, "kind": kind, "metadata": meta, "spec": spec}


@pytest.mark.parametrize(
    ("api", "kind", "spec", "path"),
    [
        ("apps/v1", "Deployment", {"template": TEMPLATE}, "spec.template"),
        ("apps/v1", "StatefulSet", {"template": TEMPLATE}, "spec.template"),
        ("apps/v1", "DaemonSet", {"template": TEMPLATE}, "spec.template"),
        ("apps/v1", "ReplicaSet", {"template": TEMPLATE}, "spec.template"),
        ("batch/v1", "Job", {"template": TEMPLATE}, "spec.template"),
        (
            "batch/v1",
            "CronJob",
            {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": TEMPLATE}}},
            "spec.jobTemplate.spec.template",
        ),
    ],
)
def test_builtin_workloads(api, kind, spec, path):
    [t] = pod_templates(_obj(api, kind, spec))
    assert (t.kind, t.namespace, t.name, t.path) == (kind, "team", "w", path)
    assert t.metadata == TEMPLATE["metadata"]
    assert t.spec == TEMPLATE["spec"]
    assert not t.strict_cpu and dict(t.extra_annotations) == {}


def test_pod_is_its_own_template_and_namespace_defaults():
    pod = {"apiVersion": "v1", "kind": "Pod", **TEMPLATE}
    pod["metadata"] = {**pod["metadata"], "generateName": "web-"}
    [t] = pod_templates(pod)
    assert (t.path, t.namespace, t.name) == ("", "default", "web-")
    assert t.spec == TEMPLATE["spec"]


def test_volcano_job_one_template_per_task():
    # The CCE seed's Volcano Job, plus a task without topologyPolicy.
    job = _obj(
        "batch.volcano.sh/v1alpha1",
        "Job",
        {
            "schedulerName": "volcano",
            "tasks": [
                {"name": "test", "topologyPolicy": "best-effort", "template": TEMPLATE},
                {"name": "ps", "template": TEMPLATE},
                {"name": "empty", "topologyPolicy": "", "template": TEMPLATE},
            ],
        },
    )
    ts = pod_templates(job)
    assert [t.path for t in ts] == [f"spec.tasks[{i}].template" for i in range(3)]
    assert all(t.strict_cpu for t in ts)
    assert dict(ts[0].extra_annotations) == {"volcano.sh/numa-topology-policy": "best-effort"}
    assert dict(ts[0].extra_paths) == {
        "volcano.sh/numa-topology-policy": "spec.tasks[0].topologyPolicy"
    }
    assert dict(ts[1].extra_annotations) == {} and dict(ts[2].extra_annotations) == {}


@pytest.mark.parametrize(
    "obj",
    [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}},
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup"},
        {"metadata": {"name": "no-kind"}},
    ],
)
def test_non_workloads_have_no_template(obj):
    assert pod_templates(obj) == []
    assert structure_findings(obj) == []


def test_batch_job_is_not_a_volcano_job():
    [t] = pod_templates(_obj("batch/v1", "Job", {"template": TEMPLATE}))
    assert not t.strict_cpu


@pytest.mark.parametrize(
    ("obj", "path"),
    [
        (_obj("apps/v1", "Deployment", {"replicas": 1}), "spec.template"),
        (_obj("batch/v1", "CronJob", {"jobTemplate": {}}), "spec.jobTemplate.spec.template"),
        (_obj("batch.volcano.sh/v1alpha1", "Job", {"tasks": []}), "spec.tasks"),
        (
            _obj("batch.volcano.sh/v1alpha1", "Job", {"tasks": [{"name": "t"}]}),
            "spec.tasks[0].template",
        ),
        ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}, "spec"),
    ],
)
def test_missing_templates_are_reported(obj, path):
    [f] = structure_findings(obj)
    assert (f.path, f.severity, f.code) == (path, "error", "invalid-value")
