"""The schedulers' current releases (issue 28): each rule read at a named upstream tag.

HAMi v2.6.0-v2.10.0 (Project-HAMi/HAMi), Volcano v1.15.1 (volcano-sh/volcano); the tags and
functions are named per test and in docs/upstream-fidelity.md."""

from __future__ import annotations

import pytest

from core.errors import InvalidInput
from core.intent.allocation import is_scheduler_owned
from core.intent.hami import go_parse_int, parse_scoring_weights
from core.intent.read import IntentResult, read_intent
from core.intent.versions import LATEST, SchedulerVersions, parse_version
from core.intent.workloads import pod_templates
from tests.core.intent.reading import HGPU, VOL, ann, codes, ctr, pod, run

WEIGHTS = "hami.io/device-scoring-weights"
GPU = {"limits": {"nvidia.com/gpu": "1"}}


def hami_pod(annotations: dict[str, str]) -> dict:
    return pod(annotations, [ctr(**GPU)], schedulerName="hami-scheduler")


def at(obj: dict, hami: str) -> IntentResult:
    versions = SchedulerVersions(hami=parse_version(hami, "hami"))
    return read_intent(pod_templates(obj, versions=versions)[0])


def finding(r: IntentResult, code: str) -> str:
    [message] = [f.message for f in r.findings if f.code == code]
    return message


# ---- versions -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "want"), [("v2.10.0", (2, 10, 0)), ("2.7", (2, 7, 0)), ("v1.15.1", (1, 15, 1))]
)
def test_versions_parse(text: str, want: tuple[int, int, int]) -> None:
    assert parse_version(text, "schedulerVersions.hami") == want


@pytest.mark.parametrize("text", ["", "latest", "v2", "v2.10.0-rc1", " v2.10.0", "v２.1"])
def test_bad_versions_name_the_field_and_the_form(text: str) -> None:
    with pytest.raises(InvalidInput) as exc:
        parse_version(text, "schedulerVersions.hami")
    assert "schedulerVersions.hami" in str(exc.value) and "vMAJOR.MINOR" in str(exc.value)


def test_the_default_is_the_newest_release_read() -> None:
    assert SchedulerVersions((2, 10, 0)) == LATEST


# ---- HAMi gpu-scheduler-policy by release ------------------------------------------------


@pytest.mark.parametrize(
    ("value", "release", "since"),
    [
        # pkg/util/types.go at v2.6.0 has only GPUSchedulerPolicyBinpack/Spread
        ("topology-aware", "v2.6.0", "v2.7.0"),
        # GPUSchedulerPolicyMutex / Numa first at v2.10.0
        ("mutex", "v2.9.0", "v2.10.0"),
        ("numa", "v2.9.0", "v2.10.0"),
        ("binpack,numa", "v2.9.0", "v2.10.0"),
    ],
)
def test_gpu_policy_token_newer_than_the_release(value: str, release: str, since: str) -> None:
    """Before v2.10.0 gpu_policy.go Less and nvidia/device.go Fit compare the whole value
    with one name: anything else is spread, silently."""
    r = at(hami_pod({HGPU: value}), release)
    assert (ann(HGPU), "error", "unsupported-value") in codes(r)
    message = finding(r, "unsupported-value")
    assert f"needs HAMi {since}" in message and release in message
    assert "silently treats it as spread" in message and "schedulerVersions.hami" in message
    assert r.intent.hami_gpu_policy == ()


def test_chain_of_known_tokens_before_v2_10() -> None:
    """util.PolicyContains (the comma chain) is first at v2.10.0; v2.9.0 compares exactly."""
    r = at(hami_pod({HGPU: "binpack,spread"}), "v2.9.0")
    message = finding(r, "unsupported-value")
    assert "a comma chain needs HAMi v2.10.0" in message
    assert "allowed there: one of binpack, spread, topology-aware" in message


@pytest.mark.parametrize(
    ("value", "release"),
    [
        ("topology-aware", "v2.7.0"),  # device.go Fit: needTopology, v2.7.0
        ("binpack", "v2.5.0"),
        ("binpack,numa", "v2.10.0"),  # gpu_policy.go Less: chain, v2.10.0
        ("mutex,topology-aware", "v2.10.0"),
    ],
)
def test_gpu_policy_the_release_knows(value: str, release: str) -> None:
    r = at(hami_pod({HGPU: value}), release)
    assert not r.findings
    assert r.intent.hami_gpu_policy == tuple(value.split(","))


def test_respelled_token_is_checked_against_the_release() -> None:
    r = at(hami_pod({HGPU: "Topology-Aware"}), "v2.6.0")
    assert codes(r) == [
        (ann(HGPU), "warning", "respelled"),
        (ann(HGPU), "error", "unsupported-value"),
    ]


def test_default_release_accepts_todays_values() -> None:
    assert not run(hami_pod({HGPU: "numa,spread"})).findings


# ---- hami.io/device-scoring-weights (v2.10.0 pkg/util/device_scoring_weights.go) ----------

# device_scoring_weights_test.go TestParseDeviceScoringWeights, every case.
PARSE_CASES = [
    ("slot=1,core=2,memory=3", (1, 2, 3)),
    (" memory = 3, slot = 1, core = 0 ", (1, 0, 3)),
    ("", "expected slot, core and memory weights"),
    ("slot=1,memory=3", "expected slot, core and memory weights"),
    ("slot=1,core,memory=3", "expected key=value entries"),
    ("slot=1,core=high,memory=3", "'core' weight must be an integer"),
    ("slot=1,core=-1,memory=3", "'core' weight must not be negative"),
    ("slot=1,bandwidth=2,memory=3", "unknown weight 'bandwidth'"),
    ("slot=1,slot=2,memory=3", "duplicate 'slot' weight"),
    ("slot=0,core=0,memory=0", "at least one weight must be positive"),
]


@pytest.mark.parametrize(("value", "want"), PARSE_CASES)
def test_parse_device_scoring_weights(value: str, want: object) -> None:
    assert parse_scoring_weights(value) == want


@pytest.mark.parametrize(
    ("text", "want"),
    [("7", 7), ("+7", 7), ("-0", 0), ("9223372036854775807", 2**63 - 1)]
    + [(t, None) for t in ("", "+", "1_0", "0x1", "١", "9223372036854775808", " 1")],
)
def test_go_parse_int(text: str, want: int | None) -> None:
    assert go_parse_int(text) == want


@pytest.mark.parametrize(("value", "why"), [c for c in PARSE_CASES if isinstance(c[1], str)])
def test_invalid_weights_are_an_error(value: str, why: str) -> None:
    """score.go calcScoreWithOptions returns ParseDeviceScoringWeights' error, and
    scheduler.go Filter fails the pod with it: it never schedules."""
    r = run(hami_pod({WEIGHTS: value}))
    assert codes(r) == [(ann(WEIGHTS), "error", "invalid-value")]
    message = finding(r, "invalid-value")
    assert why in message and "slot=N,core=N,memory=N" in message and "stays Pending" in message


def test_valid_weights_pass() -> None:
    assert not run(hami_pod({WEIGHTS: "slot=1,core=1,memory=3"})).findings


def test_weights_before_v2_10_have_no_effect() -> None:
    r = at(hami_pod({WEIGHTS: "slot=1,core=1,memory=3"}), "v2.9.0")
    assert codes(r) == [(ann(WEIGHTS), "warning", "no-effect")]
    assert "v2.10.0" in r.findings[0].message and "v2.9.0" in r.findings[0].message


def test_weights_on_a_pod_of_another_scheduler_have_no_effect() -> None:
    r = run(pod({WEIGHTS: "slot=1,core=1,memory=3"}, schedulerName="default-scheduler"))
    assert codes(r) == [(ann(WEIGHTS), "warning", "no-effect")]


# ---- nvidia.com/numa-bind: Go ParseBool, anything else silently false --------------------


@pytest.mark.parametrize("value", ["notabool", "yes", "on", "2"])
def test_numa_bind_not_a_go_bool(value: str) -> None:
    """nvidia/device.go assertNuma and device_test.go TestAssertNuma (v2.10.0): "notabool"
    is false, with no error anywhere in HAMi; numagate says so."""
    r = run(hami_pod({"nvidia.com/numa-bind": value}))
    assert codes(r) == [(ann("nvidia.com/numa-bind"), "error", "unknown-value")]
    assert "silently treats anything else as false" in r.findings[0].message


@pytest.mark.parametrize("value", ["true", "false", "1", "0", "t", "F", "TRUE", "False"])
def test_numa_bind_go_bools(value: str) -> None:
    assert not run(hami_pod({"nvidia.com/numa-bind": value})).findings


# ---- scheduler-owned allocation annotations --------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        # pkg/util/types.go (v2.10.0)
        "hami.io/vgpu-node",
        "hami.io/vgpu-time",
        "hami.io/bind-time",
        "hami.io/bind-phase",
        # nvidia/device.go InRequestDevices / SupportDevices
        "hami.io/vgpu-devices-to-allocate",
        "hami.io/vgpu-devices-allocated",
        # other backends: amd, cambricon, metax, kunlun
        "hami.io/amd-devices-to-allocate",
        "hami.io/cambricon-mlu-devices-allocated",
        "hami.io/metax-sgpu-devices-allocated",
        "hami.io/kunlun-allocated",
    ],
)
def test_forged_allocation_is_an_error(key: str) -> None:
    """Project-HAMi/HAMi #3041 (open at v2.10.0): a pod created with these is taken as
    allocated by HAMi's device plugin, whatever its scheduler."""
    assert is_scheduler_owned(key)
    for obj in (
        hami_pod({key: "x"}),
        pod({key: "x"}, schedulerName="default-scheduler"),
        pod({key: "x"}),
    ):
        r = run(obj)
        assert (ann(key), "error", "forged-allocation") in codes(r)
        message = finding(r, "forged-allocation")
        assert key in message and "Remove it" in message


@pytest.mark.parametrize(
    "key",
    [
        "hami.io/node-scheduler-policy",
        "hami.io/gpu-scheduler-policy",
        "hami.io/device-scoring-weights",
        "hami.io/webhook",
        "hami.io/node-nvidia-register",  # a node annotation, not a pod allocation
        "example.com/vgpu-devices-allocated",
        "hami.io/vgpu-devices-allocated-x",
    ],
)
def test_user_keys_are_not_scheduler_owned(key: str) -> None:
    assert not is_scheduler_owned(key)


def test_forged_keys_in_a_workload_template() -> None:
    deploy = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {
            "template": {
                "metadata": {"annotations": {"hami.io/vgpu-node": "gpu-1"}},
                "spec": {"containers": [ctr(**GPU)]},
            }
        },
    }
    r = run(deploy)
    path = "spec.template.metadata.annotations[hami.io/vgpu-node]"
    assert (path, "error", "forged-allocation") in codes(r)


# ---- Volcano numa-aware aligns CPUs only (numaaware.go New, v1.15.1) ----------------------


def test_volcano_policy_does_not_align_a_gpu() -> None:
    """numaaware.go New registers one hint provider, cpumanager.NewProvider(): the policy
    aligns the pod's CPUs; the GPU is the kubelet's business."""
    r = run(pod({VOL: "single-numa-node"}, [ctr(**GPU)]))
    assert codes(r) == [(ann(VOL), "warning", "not-aligned")]
    message = r.findings[0].message
    assert "nvidia.com/gpu" in message and "only CPUs" in message and "single-numa-node" in message


def test_volcano_policy_without_devices_or_none_is_quiet() -> None:
    assert not run(pod({VOL: "single-numa-node"})).findings
    assert not run(pod({VOL: "none"}, [ctr(**GPU)])).findings


def test_volcano_job_task_policy_with_a_gpu() -> None:
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {
            "tasks": [
                {
                    "topologyPolicy": "restricted",
                    "template": {"spec": {"containers": [ctr(**GPU)]}},
                }
            ]
        },
    }
    r = run(job)
    assert ("spec.tasks[0].topologyPolicy", "warning", "not-aligned") in codes(r)


def test_koordinator_gpu_pod_gets_no_volcano_warning() -> None:
    numa = "scheduling.koordinator.sh/numa-topology-spec"
    r = run(pod({numa: '{"numaTopologyPolicy":"SingleNUMANode"}'}, [ctr(**GPU)]))
    assert "not-aligned" not in [f.code for f in r.findings]


def test_weights_and_a_gpu_make_a_hami_pod() -> None:
    """scheduler.py rule 3: a HAMi key and nvidia.com/gpu, no schedulerName: HAMi's webhook
    gives the pod to hami-scheduler (webhook.go Handle), so the weights are read."""
    r = run(pod({WEIGHTS: "slot=1,core=1,memory=3"}, [ctr(**GPU)]))
    assert r.intent.scheduler == "hami" and r.intent.hami_weights == (1, 1, 3)
    assert not r.findings
