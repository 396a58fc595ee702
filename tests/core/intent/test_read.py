"""read_intent: normalization, validation findings and the PodIntent fields, table-driven
from the seeds and research/upstream-schedulers.md, kubelet-topology-manager.md."""

from __future__ import annotations

import json
from typing import Any

import pytest

from core.intent.read import detect_scheduler, read_intent
from core.intent.workloads import pod_templates
from core.model import NodeSelectorRequirement, NodeSelectorTerm
from tests.core.intent.reading import GI, HGPU, HNODE, NUMA, RES, VOL, ann, codes, ctr, pod, run

# ---- normalization table: annotations in -> annotations out, findings, policy ----------------

NORMALIZE = [
    pytest.param(
        # Seed 000 (proposal): NUMA fields in resource-spec are moved, other fields kept.
        {RES: '{"numaTopologyPolicy":"SingleNUMANode","preferredCPUBindPolicy":"FullPCPUs"}'},
        {
            RES: '{"preferredCPUBindPolicy":"FullPCPUs"}',
            NUMA: '{"numaTopologyPolicy":"SingleNUMANode"}',
        },
        [(ann(RES), "warning", "misplaced-field")],
        ("koordinator", "single-numa-node", "required"),
        id="proposal-resource-spec-placement",
    ),
    pytest.param(
        {RES: '{"numaTopologyPolicy":"Restricted","singleNUMANodeExclusive":"Preferred"}'},
        {
            RES: "{}",
            NUMA: '{"numaTopologyPolicy":"Restricted","singleNUMANodeExclusive":"Preferred"}',
        },
        [(ann(RES), "warning", "misplaced-field")],
        ("koordinator", "restricted", "preferred"),
        id="proposal-both-fields-moved",
    ),
    pytest.param(
        {
            RES: '{"numaTopologyPolicy":"SingleNUMANode"}',
            NUMA: '{"singleNUMANodeExclusive":"Preferred"}',
        },
        {
            RES: "{}",
            NUMA: '{"numaTopologyPolicy":"SingleNUMANode","singleNUMANodeExclusive":"Preferred"}',
        },
        [(ann(RES), "warning", "misplaced-field")],
        ("koordinator", "single-numa-node", "preferred"),
        id="proposal-merged-into-existing-spec",
    ),
    pytest.param(
        {
            RES: '{"numaTopologyPolicy":"Restricted"}',
            NUMA: '{"numaTopologyPolicy":"SingleNUMANode"}',
        },
        {
            RES: '{"numaTopologyPolicy":"Restricted"}',
            NUMA: '{"numaTopologyPolicy":"SingleNUMANode"}',
        },
        [(ann(RES), "error", "conflicting-policies")],
        ("koordinator", "single-numa-node", "required"),
        id="resource-spec-disagrees-no-guess",
    ),
    pytest.param(
        # The proposal's Go sketch: NUMAExclusiveExclusive = "Reuqired".
        {NUMA: '{"numaTopologyPolicy":"SingleNUMANode","singleNUMANodeExclusive":"Reuqired"}'},
        {NUMA: '{"numaTopologyPolicy":"SingleNUMANode","singleNUMANodeExclusive":"Required"}'},
        [(ann(NUMA), "warning", "typo-fixed")],
        ("koordinator", "single-numa-node", "required"),
        id="Reuqired-typo",
    ),
    pytest.param(
        {NUMA: '{"numaTopologyPolicy":"SingleNUMANode","singleNUMANodeExclusive":"required"}'},
        {NUMA: '{"numaTopologyPolicy":"SingleNUMANode","singleNUMANodeExclusive":"Required"}'},
        [(ann(NUMA), "warning", "respelled")],
        ("koordinator", "single-numa-node", "required"),
        id="lowercase-required",
    ),
    pytest.param(
        {NUMA: '{"numaTopologyPolicy":"SingleNUMANode","singleNUMANodeExclusive":" Required "}'},
        {NUMA: '{"numaTopologyPolicy":"SingleNUMANode","singleNUMANodeExclusive":"Required"}'},
        [(ann(NUMA), "warning", "respelled")],
        ("koordinator", "single-numa-node", "required"),
        id="padded-Required",
    ),
    pytest.param(
        {NUMA: '{"numaTopologyPolicy":"SingleNUMANode"}'},
        {NUMA: '{"numaTopologyPolicy":"SingleNUMANode"}'},
        [],
        ("koordinator", "single-numa-node", "required"),
        id="exclusive-defaults-to-required",
    ),
    pytest.param(
        {NUMA: '{"numaTopologyPolicy":""}'},
        {NUMA: '{"numaTopologyPolicy":""}'},
        [],
        ("koordinator", "none", None),
        id="koordinator-empty-is-none",
    ),
    pytest.param(
        {NUMA: '{"numaTopologyPolicy":"single-numa-node"}'},
        {NUMA: '{"numaTopologyPolicy":"SingleNUMANode"}'},
        [(ann(NUMA), "warning", "respelled")],
        ("koordinator", "single-numa-node", "required"),
        id="kubelet-spelling-in-koordinator-json",
    ),
    pytest.param(
        # Seed 000 example as written (trailing comma): Go's json.Unmarshal rejects it.
        {NUMA: '{\n"numaTopologyPolicy": "SingleNUMANode",\n}'},
        {NUMA: '{"numaTopologyPolicy":"SingleNUMANode"}'},
        [(ann(NUMA), "warning", "repaired-json")],
        ("koordinator", "single-numa-node", "required"),
        id="proposal-trailing-comma",
    ),
    pytest.param(
        # Koordinator v1.5 release blog: a "# Required or Preferred" comment in the value.
        {
            NUMA: '{\n  "numaTopologyPolicy": "SingleNUMANode",\n'
            '  "singleNUMANodeExclusive": "Preferred", # Required or Preferred\n}'
        },
        {NUMA: '{"numaTopologyPolicy":"SingleNUMANode","singleNUMANodeExclusive":"Preferred"}'},
        [(ann(NUMA), "warning", "repaired-json")],
        ("koordinator", "single-numa-node", "preferred"),
        id="blog-comment-and-comma",
    ),
    pytest.param(
        {NUMA: "{numaTopologyPolicy: SingleNUMANode}"},
        {NUMA: "{numaTopologyPolicy: SingleNUMANode}"},
        [(ann(NUMA), "error", "invalid-json")],
        ("koordinator", None, None),
        id="unrepairable-json-is-an-error",
    ),
    pytest.param(
        {NUMA: '"SingleNUMANode"'},
        {NUMA: '"SingleNUMANode"'},
        [(ann(NUMA), "error", "invalid-json")],
        ("koordinator", None, None),
        id="json-not-an-object",
    ),
    pytest.param(
        {NUMA: '{"numaTopologyPolicy":1}'},
        {NUMA: '{"numaTopologyPolicy":1}'},
        [(ann(NUMA), "error", "invalid-value")],
        ("koordinator", None, None),
        id="policy-not-a-string",
    ),
    pytest.param(
        {NUMA: '{"numaTopologyPolicy":"SingleNUMA"}'},
        {NUMA: '{"numaTopologyPolicy":"SingleNUMA"}'},
        [(ann(NUMA), "error", "unknown-policy")],
        ("koordinator", None, None),
        id="unknown-koordinator-policy",
    ),
    pytest.param(
        {NUMA: '{"NUMATopologyPolicy":"Restricted","extra":{"k":1}}'},
        {NUMA: '{"extra":{"k":1},"numaTopologyPolicy":"Restricted"}'},
        [(ann(NUMA), "warning", "respelled")],
        ("koordinator", "restricted", "required"),
        id="field-case-variant-renamed-unknown-field-kept",
    ),
    pytest.param(
        {NUMA: '{"numaPolicy":"Restricted"}'},
        {NUMA: '{"numaPolicy":"Restricted"}'},
        [(ann(NUMA), "warning", "unknown-field")],
        ("koordinator", None, None),
        id="misspelled-field-kept-with-suggestion",
    ),
    pytest.param(
        # Koordinator #1890: the node-only value on a pod.
        {RES: '{"preferredCPUBindPolicy":"FullPCPUsOnly"}'},
        {RES: '{"preferredCPUBindPolicy":"FullPCPUs"}'},
        [(ann(RES), "warning", "node-only-value")],
        ("koordinator", None, None),
        id="FullPCPUsOnly-1890",
    ),
    pytest.param(
        {RES: '{"requiredCPUBindPolicy":"FullPCPU"}'},
        {RES: '{"requiredCPUBindPolicy":"FullPCPU"}'},
        [(ann(RES), "error", "unknown-value")],
        ("koordinator", None, None),
        id="unknown-bind-policy",
    ),
    pytest.param(
        # Volcano compares case-sensitively: SingleNUMANode never matches a node.
        {VOL: "SingleNUMANode"},
        {VOL: "single-numa-node"},
        [(ann(VOL), "warning", "respelled")],
        ("volcano", "single-numa-node", None),
        id="volcano-SingleNUMANode",
    ),
    pytest.param(
        {VOL: " restricted"},
        {VOL: "restricted"},
        [(ann(VOL), "warning", "respelled")],
        ("volcano", "restricted", None),
        id="volcano-padded",
    ),
    pytest.param(
        {VOL: "single-numa"},
        {VOL: "single-numa"},
        [(ann(VOL), "error", "unknown-policy")],
        ("volcano", None, None),
        id="volcano-unknown",
    ),
    pytest.param(
        {VOL: "single-numa-node", NUMA: '{"numaTopologyPolicy":"Restricted"}'},
        {VOL: "single-numa-node", NUMA: '{"numaTopologyPolicy":"Restricted"}'},
        [(ann(VOL), "error", "conflicting-policies")],
        ("volcano", "single-numa-node", None),
        id="two-keys-disagree",
    ),
    pytest.param(
        {VOL: "single-numa-node", NUMA: '{"numaTopologyPolicy":"SingleNUMANode"}'},
        {VOL: "single-numa-node", NUMA: '{"numaTopologyPolicy":"SingleNUMANode"}'},
        [(ann(NUMA), "info", "no-effect")],
        ("volcano", "single-numa-node", None),
        id="two-keys-agree",
    ),
]


@pytest.mark.parametrize(("annotations", "expected", "findings", "intent"), NORMALIZE)
def test_normalization(annotations, expected, findings, intent):
    r = run(pod(annotations))
    assert r.annotations == expected
    assert codes(r) == findings
    assert (r.intent.scheduler, r.intent.policy, r.intent.exclusive) == intent
    assert r.changed == (expected != annotations)


def test_messages_name_field_value_allowed_and_suggestion():
    r = run(pod({NUMA: '{"numaTopologyPolicy":"SingleNUMA"}'}))
    [f] = r.findings
    assert "numaTopologyPolicy" in f.message and "'SingleNUMA'" in f.message
    assert "BestEffort, Restricted, SingleNUMANode" in f.message
    assert f.message.endswith("did you mean SingleNUMANode?")


def test_invalid_json_message_names_the_annotation_and_place():
    [f] = run(pod({NUMA: "{numaTopologyPolicy: SingleNUMANode}"})).findings
    assert NUMA in f.message and "line 1, column 2" in f.message


def test_exclusive_message_says_only_exact_required_counts():
    [f] = run(
        pod({NUMA: '{"numaTopologyPolicy":"SingleNUMANode","singleNUMANodeExclusive":"Reuqired"}'})
    ).findings
    assert "'Reuqired'" in f.message and "only the exact 'Required'" in f.message


# ---- HAMi --------------------------------------------------------------------------------

GPU = ctr(limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"})


@pytest.mark.parametrize(
    ("annotations", "expected", "findings", "node", "gpu"),
    [
        pytest.param(
            {HNODE: "Binpack"},
            {HNODE: "binpack"},
            [(ann(HNODE), "warning", "respelled")],
            "binpack",
            (),
            id="Binpack-2767",
        ),
        pytest.param(
            {HGPU: " binpack "},
            {HGPU: "binpack"},
            [(ann(HGPU), "warning", "respelled")],
            None,
            ("binpack",),
            id="padded-binpack-2854",
        ),
        pytest.param(
            {HGPU: "Binpack, NUMA"},
            {HGPU: "binpack,numa"},
            [(ann(HGPU), "warning", "respelled")],
            None,
            ("binpack", "numa"),
            id="chain-respelled",
        ),
        pytest.param(
            {HGPU: "topology-aware,mutex"},
            {HGPU: "topology-aware,mutex"},
            [],
            None,
            ("topology-aware", "mutex"),
            id="chain-ok",
        ),
        pytest.param(
            {HGPU: "binpack,numaa"},
            {HGPU: "binpack,numaa"},
            [(ann(HGPU), "error", "unknown-value")],
            None,
            (),
            id="chain-unknown-token",
        ),
        pytest.param(
            {HNODE: "pack"},
            {HNODE: "pack"},
            [(ann(HNODE), "error", "unknown-value")],
            None,
            (),
            id="node-unknown",
        ),
        pytest.param(
            {"nvidia.com/numa-bind": "yes"},
            {"nvidia.com/numa-bind": "yes"},
            [(ann("nvidia.com/numa-bind"), "error", "unknown-value")],
            None,
            (),
            id="numa-bind-not-bool",
        ),
    ],
)
def test_hami_policies(annotations, expected, findings, node, gpu):
    r = run(pod(annotations, [GPU]))
    assert r.intent.scheduler == "hami"
    assert r.annotations == expected
    assert codes(r) == findings
    assert (r.intent.hami_node_policy, r.intent.hami_gpu_policy) == (node, gpu)


def test_hami_chain_message():
    [f] = run(pod({HGPU: "binpack,numaa"}, [GPU])).findings
    assert "'numaa'" in f.message and "did you mean numa?" in f.message
    assert "binpack, spread, topology-aware, mutex, numa" in f.message


@pytest.mark.parametrize(
    ("resources", "path", "code"),
    [
        (
            {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "150"}},
            "spec.containers[1].resources.limits[nvidia.com/gpucores]",
            "out-of-range",
        ),
        (
            {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": 101}},
            "spec.containers[1].resources.limits[nvidia.com/gpumem-percentage]",
            "out-of-range",
        ),
        (
            {"requests": {"nvidia.com/gpucores": "1k"}, "limits": {"nvidia.com/gpucores": "1k"}},
            "spec.containers[1].resources.limits[nvidia.com/gpucores]",
            "out-of-range",
        ),
        (
            {"limits": {"nvidia.com/gpucores": "lots"}},
            "spec.containers[1].resources.limits[nvidia.com/gpucores]",
            "invalid-quantity",
        ),
    ],
)
def test_hami_percentages(resources, path, code):
    r = run(pod({}, [ctr("a"), {"name": "gpu", "resources": resources}]))
    assert (path, "error", code) in codes(r)
    assert r.intent.scheduler == "hami"


def test_hami_percentages_in_range_are_fine():
    c = {
        "name": "g",
        "resources": {
            "limits": {"nvidia.com/gpucores": "100", "nvidia.com/gpumem-percentage": "0"}
        },
    }
    assert codes(run(pod({}, [c]))) == []


# ---- mirroring and keys without effect -------------------------------------------------------


def test_volcano_pod_with_only_koordinator_json_gets_the_volcano_key():
    r = run(pod({NUMA: '{"numaTopologyPolicy":"SingleNUMANode"}'}, schedulerName="volcano"))
    assert r.annotations == {
        NUMA: '{"numaTopologyPolicy":"SingleNUMANode"}',
        VOL: "single-numa-node",
    }
    assert codes(r) == [(ann(NUMA), "warning", "mirrored")]
    assert (r.intent.scheduler, r.intent.policy, r.intent.exclusive) == (
        "volcano",
        "single-numa-node",
        None,
    )
    again = run(pod(r.annotations, schedulerName="volcano"))
    assert again.annotations == r.annotations and not again.changed


def test_koordinator_pod_with_only_volcano_key_gets_the_koordinator_json():
    r = run(pod({VOL: "restricted"}, schedulerName="koord-scheduler"))
    assert r.annotations == {VOL: "restricted", NUMA: '{"numaTopologyPolicy":"Restricted"}'}
    assert codes(r) == [(ann(VOL), "warning", "mirrored")]
    assert (r.intent.policy, r.intent.exclusive) == ("restricted", "required")


def test_mirroring_merges_into_existing_koordinator_json():
    r = run(
        pod(
            {VOL: "restricted", NUMA: '{"singleNUMANodeExclusive":"Preferred"}'},
            schedulerName="koord-scheduler",
        )
    )
    assert json.loads(r.annotations[NUMA]) == {
        "numaTopologyPolicy": "Restricted",
        "singleNUMANodeExclusive": "Preferred",
    }
    assert r.intent.exclusive == "preferred"


def test_a_null_policy_in_numa_spec_takes_the_misplaced_one_in_one_pass():
    """koord-scheduler reads a JSON null as no value, so the misplaced policy is moved over
    it at once, not refused as a clash and moved on a second normalization (Hypothesis
    found this one: the Volcano mirror filled the null, and the next pass moved)."""
    annotations = {
        RES: '{"numaTopologyPolicy": "BestEffort"}',
        VOL: "BestEffort",
        NUMA: '{"numaTopologyPolicy": null}',
    }
    first = run(pod(annotations, schedulerName="koord-scheduler"))
    assert json.loads(first.annotations[NUMA]) == {"numaTopologyPolicy": "BestEffort"}
    assert first.annotations[RES] == "{}"
    assert (ann(RES), "warning", "misplaced-field") in codes(first)
    assert "conflicting-policies" not in [c[2] for c in codes(first)]
    second = run(pod(first.annotations, schedulerName="koord-scheduler"))
    assert second.annotations == first.annotations and not second.changed


@pytest.mark.parametrize(
    ("annotations", "scheduler_name", "key"),
    [
        ({HNODE: "spread"}, "koord-scheduler", HNODE),
        ({NUMA: '{"numaTopologyPolicy":"SingleNUMANode"}'}, "hami-scheduler", NUMA),
        ({VOL: "single-numa-node"}, "hami-scheduler", VOL),
        ({RES: '{"requiredCPUBindPolicy":"FullPCPUs"}'}, "volcano", RES),
        ({HGPU: "binpack"}, "", HGPU),
    ],
)
def test_annotation_for_another_scheduler_has_no_effect(annotations, scheduler_name, key):
    r = run(pod(annotations, schedulerName=scheduler_name) if scheduler_name else pod(annotations))
    assert (ann(key), "warning", "no-effect") in codes(r)
    assert r.annotations == annotations
    assert any("has no effect" in f.message for f in r.findings)


def test_hami_pod_policy_comes_from_no_numa_key():
    r = run(pod({VOL: "single-numa-node"}, schedulerName="hami-scheduler"))
    assert r.intent.policy is None


# ---- scheduler detection -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "keys", "volcano_job", "resources", "expected"),
    [
        ("koord-scheduler", set(), False, set(), "koordinator"),
        ("volcano", {NUMA}, False, set(), "volcano"),
        ("hami-scheduler", {VOL}, False, set(), "hami"),
        ("", {NUMA}, False, set(), "koordinator"),
        ("", {RES}, False, set(), "koordinator"),
        ("", {VOL}, False, set(), "volcano"),
        ("", {VOL, NUMA}, False, set(), "volcano"),
        ("", set(), True, set(), "volcano"),
        ("default-scheduler", set(), False, {"nvidia.com/gpumem"}, "hami"),
        ("", {HGPU}, False, {"nvidia.com/gpu"}, "hami"),
        ("", {HGPU}, False, set(), "default"),
        ("", set(), False, {"nvidia.com/gpu"}, "default"),
        ("my-scheduler", set(), False, {"nvidia.com/gpucores"}, "default"),
        ("", set(), False, set(), "default"),
    ],
)
def test_detect_scheduler(name, keys, volcano_job, resources, expected):
    assert detect_scheduler(name, keys, volcano_job=volcano_job, resources=resources) == expected


# ---- exclusive CPUs ------------------------------------------------------------------------


def test_policy_on_burstable_pod_warns():
    r = run(
        pod({VOL: "single-numa-node"}, [{"name": "c", "resources": {"requests": {"cpu": "2"}}}])
    )
    assert codes(r) == [(ann(VOL), "warning", "not-guaranteed")]
    assert "Burstable" in r.findings[0].message
    # the webhook returns it as an admission warning: under 120 characters (issue 15)
    assert len(r.findings[0].message) < 120


def test_policy_on_guaranteed_fractional_pod_warns_per_container():
    r = run(pod({VOL: "single-numa-node"}, [ctr("a", cpu="2"), ctr("b", cpu="2500m")]))
    assert codes(r) == [("spec.containers[1].resources.requests[cpu]", "warning", "fractional-cpu")]
    assert "2500m" in r.findings[0].message


def test_no_policy_no_cpu_warning():
    assert codes(run(pod({}, [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]))) == []


def test_none_policy_no_cpu_warning():
    assert codes(run(pod({VOL: "none"}, [{"name": "c"}]))) == []


def _vjob(
    policy: str | None, containers: list, init: list | None = None, annotations: dict | None = None
) -> dict:
    task: dict = {"name": "t", "replicas": 1, "template": {"spec": {"containers": containers}}}
    if policy is not None:
        task["topologyPolicy"] = policy
    if init:
        task["template"]["spec"]["initContainers"] = init
    if annotations:
        task["template"]["metadata"] = {"annotations": annotations}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "vj"},
        "spec": {"schedulerName": "volcano", "minAvailable": 1, "tasks": [task]},
    }


TASK = "spec.tasks[0].template.spec"


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        # Volcano admit_job_test TestValidateTaskTopoPolicy: restricted + cpu limit 1 -> ok
        pytest.param(_vjob("restricted", [ctr(cpu="1")]), [], id="limit-1-ok"),
        # ... restricted + 500m -> "the cpu request isn't an integer"
        pytest.param(
            _vjob("restricted", [ctr(cpu="500m")]),
            [(f"{TASK}.containers[0].resources.limits[cpu]", "error", "fractional-cpu")],
            id="500m-error",
        ),
        pytest.param(
            _vjob("single-numa-node", [ctr(cpu="2")], init=[ctr("i", cpu="100m")]),
            [(f"{TASK}.initContainers[0].resources.limits[cpu]", "error", "fractional-cpu")],
            id="init-container-checked-too",
        ),
        pytest.param(
            _vjob(
                "best-effort",
                [
                    {
                        "name": "c",
                        "resources": {"requests": {"memory": "1Gi"}, "limits": {"cpu": "2"}},
                    }
                ],
            ),
            [
                (f"{TASK}.containers[0].resources.requests[cpu]", "error", "fractional-cpu"),
                ("spec.tasks[0].topologyPolicy", "warning", "not-guaranteed"),
            ],
            id="requests-win-over-limits-zero-fails",
        ),
        pytest.param(_vjob("none", [ctr(cpu="500m")]), [], id="none-not-checked"),
        pytest.param(_vjob(None, [ctr(cpu="500m")]), [], id="no-policy-not-checked"),
        pytest.param(
            _vjob("SingleNUMANode", [ctr(cpu="2")]),
            [("spec.tasks[0].topologyPolicy", "error", "unknown-policy")],
            id="crd-enum-is-case-sensitive",
        ),
        pytest.param(
            _vjob("restricted", [ctr(cpu="2")], annotations={VOL: "single-numa-node"}),
            [(f"spec.tasks[0].template.{ann(VOL)}", "error", "conflicting-policies")],
            id="task-field-vs-template-annotation",
        ),
    ],
)
def test_volcano_job_tasks(job, expected):
    r = run(job)
    assert codes(r) == expected
    assert r.intent.scheduler == "volcano"


def test_volcano_job_seed_example_is_clean():
    # Seed 001 (CCE): a task with best-effort and cpu limit 20 (requests defaulted).
    r = run(
        _vjob(
            "best-effort",
            [{"name": "running", "resources": {"limits": {"cpu": 20, "memory": "100Mi"}}}],
        )
    )
    assert codes(r) == []
    assert (r.intent.policy, r.intent.qos, r.intent.containers[0].exclusive_cpus) == (
        "best-effort",
        "Guaranteed",
        20,
    )
    assert r.annotations == {}  # the task field is not copied into the template


def test_volcano_job_mirrors_koordinator_json_into_the_template():
    r = run(_vjob(None, [ctr()], annotations={NUMA: '{"numaTopologyPolicy":"Restricted"}'}))
    assert r.annotations[VOL] == "restricted"
    assert codes(r) == [(f"spec.tasks[0].template.{ann(NUMA)}", "warning", "mirrored")]


# ---- QoS, containers, pod-level requests ---------------------------------------------------


def _c(name: str, cpu: str, kind: str = "app", mem: str | None = None) -> dict:
    limits = {"cpu": cpu, "memory": mem or "1Gi"}
    c: dict = {"name": name, "resources": {"requests": dict(limits), "limits": limits}}
    if kind == "sidecar":
        c["restartPolicy"] = "Always"
    return c


def _pod_of(seq: list[tuple[str, str]]) -> dict:
    """seq: (kind, cpu) in spec order; init and sidecar go to initContainers."""
    init = [_c(f"i{n}", cpu, kind) for n, (kind, cpu) in enumerate(seq) if kind != "app"]
    apps = [_c(f"a{n}", cpu) for n, (kind, cpu) in enumerate(seq) if kind == "app"]
    return pod({}, apps, initContainers=init)


@pytest.mark.parametrize(
    ("seq", "cpus"),
    [
        # kubelet-topology-manager §6 item 28 (podGuaranteedCPUs)
        ([("init", "2"), ("app", "5")], 5),
        ([("init", "5"), ("app", "2")], 5),
        ([("app", "2"), ("app", "4")], 6),
        ([("sidecar", "1"), ("app", "1")], 2),
        ([("init", "5"), ("sidecar", "1"), ("sidecar", "2"), ("sidecar", "3"), ("app", "1")], 7),
        (
            [
                ("init", "5"),
                ("sidecar", "1"),
                ("sidecar", "2"),
                ("init", "5"),
                ("sidecar", "3"),
                ("app", "1"),
            ],
            8,
        ),
        ([("sidecar", "10"), ("init", "200"), ("app", "100")], 210),
    ],
)
def test_pod_level_cpu_formula(seq, cpus):
    r = run(_pod_of(seq))
    assert r.intent.pod_requests["cpu"] == cpus * 1000
    assert r.intent.qos == "Guaranteed"


@pytest.mark.parametrize(
    ("init", "sidecar", "apps", "gib"),
    [
        # §6 item 41 (getPodRequestedResources)
        (["1Gi", "4Gi"], None, ["1Gi", "2Gi"], 4),
        (["3Gi"], None, ["2Gi", "3Gi"], 5),
        (["4Gi"], "2Gi", ["1Gi", "2Gi"], 6),
    ],
)
def test_pod_level_memory_formula(init, sidecar, apps, gib):
    inits = []
    if sidecar:
        inits.append(_c("s", "1", "sidecar", sidecar))
    inits += [_c(f"i{n}", "1", "init", m) for n, m in enumerate(init)]
    r = run(pod({}, [_c(f"a{n}", "1", "app", m) for n, m in enumerate(apps)], initContainers=inits))
    assert r.intent.pod_requests["memory"] == gib * GI


def test_container_demands_in_kubelet_order():
    p = pod({}, [_c("app", "2")], initContainers=[_c("init", "1"), _c("side", "500m", "sidecar")])
    r = run(p)
    got = [(c.name, c.kind, c.requests["cpu"], c.exclusive_cpus) for c in r.intent.containers]
    assert got == [("init", "init", 1000, 1), ("side", "sidecar", 500, 0), ("app", "app", 2000, 2)]


@pytest.mark.parametrize(
    ("containers", "init", "qos"),
    [
        ([{"name": "c"}], [], "BestEffort"),
        ([{"name": "c", "resources": {"requests": {"cpu": "1"}}}], [], "Burstable"),
        ([{"name": "c", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}], [], "Guaranteed"),
        (
            [
                {
                    "name": "c",
                    "resources": {
                        "requests": {"cpu": "1", "memory": "1Gi"},
                        "limits": {"cpu": "2", "memory": "1Gi"},
                    },
                }
            ],
            [],
            "Burstable",
        ),
        ([{"name": "c", "resources": {"limits": {"cpu": "1"}}}], [], "Burstable"),
        (
            [{"name": "c", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}],
            [{"name": "i"}],
            "Burstable",
        ),
        (
            [
                {
                    "name": "c",
                    "resources": {"limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}},
                }
            ],
            [],
            "Guaranteed",
        ),
        (
            [
                {
                    "name": "c",
                    "resources": {
                        "requests": {"nvidia.com/gpu": "1"},
                        "limits": {"nvidia.com/gpu": "1"},
                    },
                }
            ],
            [],
            "BestEffort",
        ),
    ],
)
def test_qos(containers, init, qos):
    r = run(pod({}, containers, initContainers=init))
    assert r.intent.qos == qos
    if qos != "Guaranteed":
        assert all(c.exclusive_cpus == 0 for c in r.intent.containers)


def test_bad_quantity_is_a_finding_not_an_exception():
    r = run(pod({}, [{"name": "c", "resources": {"limits": {"cpu": "2 cores", "memory": "1Gi"}}}]))
    assert codes(r) == [("spec.containers[0].resources.limits[cpu]", "error", "invalid-quantity")]
    assert "'2 cores'" in r.findings[0].message


def test_non_string_annotation_is_an_error_and_kept():
    r = run(pod({"nvidia.com/numa-bind": True, "x": "y"}))
    assert (ann("nvidia.com/numa-bind"), "error", "invalid-value") in codes(r)
    assert set(r.annotations) == {"nvidia.com/numa-bind", "x"}


def test_node_selection_fields():
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]},
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}
                        ]
                    },
                ]
            }
        }
    }
    r = run(pod({}, nodeName="n2", nodeSelector={"disk": "ssd"}, affinity=affinity))
    assert r.intent.node_name == "n2"
    assert r.intent.node_selector == {"disk": "ssd"}
    assert r.intent.required_terms == (
        NodeSelectorTerm(match_expressions=(NodeSelectorRequirement("zone", "In", ("a", "b")),)),
        NodeSelectorTerm(
            match_fields=(NodeSelectorRequirement("metadata.name", "NotIn", ("n1",)),)
        ),
    )


def test_deployment_paths_are_relative_to_the_object():
    # Seed 001 (CCE) Deployment, with the policy mis-cased.
    dep = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "numa-tset"},
        "spec": {
            "template": {
                "metadata": {"annotations": {VOL: "SingleNUMANode"}},
                "spec": {"containers": [ctr("container-1", cpu="2", mem="2048Mi")]},
            }
        },
    }
    r = run(dep)
    assert codes(r) == [
        (f"spec.template.{ann(VOL)}", "warning", "respelled"),
        # no schedulerName: read as Volcano's (a webhook may still set it), with a warning
        (f"spec.template.{ann(VOL)}", "warning", "no-effect"),
    ]
    assert r.intent.policy == "single-numa-node"


def test_scope_is_never_guessed():
    assert run(pod({VOL: "single-numa-node"})).intent.scope is None


def _frozen(value: Any) -> Any:
    """The same document with every dict a read-only non-dict Mapping (the slow path of the
    dict fast paths)."""
    from types import MappingProxyType

    if isinstance(value, dict):
        return MappingProxyType({k: _frozen(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_frozen(v) for v in value]
    return value


@pytest.mark.parametrize(
    "doc",
    [
        pod({NUMA: '{"numaTopologyPolicy": "singlenumanode",}', RES: "{}"}),
        pod(
            {HGPU: "Binpack", HNODE: "spread"},
            [
                ctr("a", limits={"nvidia.com/gpu": "2", "nvidia.com/gpucores": "150"}),
                ctr("b", cpu="1.5", limits={"nvidia.com/gpumem-percentage": "x"}),
            ],
            initContainers=[ctr("i", restartPolicy="Always"), {"name": 3}, "bad"],
        ),
        pod({VOL: "SingleNUMANode"}, [ctr(resources={"requests": [1]})], schedulerName="volcano"),
    ],
    ids=["koord", "hami-ranges", "volcano-bad-requests"],
)
def test_non_dict_mappings_read_like_dicts(doc: dict) -> None:
    plain = read_intent(pod_templates(doc)[0])
    proxied = read_intent(pod_templates(_frozen(doc))[0])
    assert proxied == plain
    assert plain.findings  # the cases exercise the finding paths too


def test_hami_range_findings_follow_the_other_container_findings() -> None:
    doc = pod(
        {},
        [
            ctr("a", limits={"nvidia.com/gpucores": "101"}),
            ctr("b", limits={"memory": "lots"}),
        ],
    )
    codes = [f.code for f in read_intent(pod_templates(doc)[0]).findings]
    assert codes.index("invalid-quantity") < codes.index("out-of-range")
