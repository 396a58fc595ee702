"""Issue 15 items that live in the intent reader.

- koordinator pkg/scheduler/plugins/nodenumaresource/plugin.go (Filter): an empty
  ``singleNUMANodeExclusive`` on a pod with a NUMA policy is treated as ``Required``.
- volcano pkg/scheduler/plugins/numaaware/numaaware.go (and koordinator's plugin) run only
  inside their own scheduler: a key on a pod another scheduler places does nothing. The pod
  is still read as that scheduler's (a webhook may rewrite schedulerName), with a warning.
"""

from __future__ import annotations

import json

import pytest

from core.intent.read import read_intent
from core.intent.workloads import pod_templates
from tests.core.intent.reading import NUMA, RES, VOL, ann, codes, pod, run

WARNING_CHARS = 120


@pytest.mark.parametrize("value", ["", " ", "  \t"])
def test_empty_exclusive_is_required(value: str) -> None:
    spec = json.dumps({"numaTopologyPolicy": "SingleNUMANode", "singleNUMANodeExclusive": value})
    r = run(pod({NUMA: spec}))
    assert json.loads(r.annotations[NUMA])["singleNUMANodeExclusive"] == "Required"
    assert codes(r) == [(ann(NUMA), "warning", "respelled")]
    assert r.intent.exclusive == "required"
    message = r.findings[0].message
    assert "'Required'" in message and "singleNUMANodeExclusive" in message
    # idempotent: the normalized spec reads clean
    again = run(pod({NUMA: r.annotations[NUMA]}))
    assert (again.changed, codes(again)) == (False, [])


def test_empty_exclusive_in_resource_spec_is_moved_as_required() -> None:
    spec = json.dumps({"numaTopologyPolicy": "SingleNUMANode", "singleNUMANodeExclusive": ""})
    r = run(pod({RES: spec}))
    assert json.loads(r.annotations[NUMA]) == {
        "numaTopologyPolicy": "SingleNUMANode",
        "singleNUMANodeExclusive": "Required",
    }
    assert r.intent.exclusive == "required"


@pytest.mark.parametrize("name", [None, "default-scheduler", "my-scheduler"])
def test_volcano_key_without_volcano_scheduler_warns(name: str | None) -> None:
    r = run(pod({VOL: "single-numa-node"}, schedulerName=name))
    assert r.intent.scheduler == "volcano"  # the reading is kept
    assert r.intent.policy == "single-numa-node"
    (finding,) = [f for f in r.findings if f.code == "no-effect"]
    assert finding.path == ann(VOL) and finding.severity == "warning"
    assert "unless volcano places the pod" in finding.message
    assert ("default-scheduler" if name in (None, "default-scheduler") else "'my-scheduler'") in (
        finding.message
    )
    assert len(finding.message) < WARNING_CHARS


@pytest.mark.parametrize("name", [None, "default-scheduler", "a-very-long-custom-scheduler-name"])
def test_koordinator_key_without_koord_scheduler_warns(name: str | None) -> None:
    spec = '{"numaTopologyPolicy":"SingleNUMANode"}'
    r = run(pod({NUMA: spec}, schedulerName=name))
    assert r.intent.scheduler == "koordinator"
    (finding,) = [f for f in r.findings if f.code == "no-effect"]
    assert finding.path == ann(NUMA)
    assert "unless koord-scheduler places the pod" in finding.message
    assert len(finding.message) < WARNING_CHARS


@pytest.mark.parametrize(
    ("annotations", "name"),
    [
        ({VOL: "single-numa-node"}, "volcano"),
        ({NUMA: '{"numaTopologyPolicy":"SingleNUMANode"}'}, "koord-scheduler"),
    ],
)
def test_key_of_the_pods_own_scheduler_does_not_warn(annotations: dict, name: str) -> None:
    assert "no-effect" not in [c for _, _, c in codes(run(pod(annotations, schedulerName=name)))]


def test_volcano_job_task_does_not_warn() -> None:
    # the job controller copies topologyPolicy and sets schedulerName (volcano)
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {
            "tasks": [
                {
                    "topologyPolicy": "single-numa-node",
                    "template": {"spec": {"containers": [{"name": "c"}]}},
                }
            ]
        },
    }
    (template,) = pod_templates(job)
    assert "no-effect" not in [f.code for f in read_intent(template).findings]
