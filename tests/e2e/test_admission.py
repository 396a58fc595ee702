"""Issue 26, item 2: admission through the real kube-apiserver. Every assertion is on what
the apiserver stored or answered (kubectl's output, the Python client's objects, the
apiserver's own admission metrics)."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from tests.e2e.cluster import (
    KOORD_SPEC,
    TEST_NS,
    Install,
    clean_pods,
    create,
    get,
    koord,
    pod,
    required_terms,
    selected_nodes,
    webhook_calls,
)
from tests.e2e.controlplane import ControlPlane
from tests.e2e.hookserver import POD_RULES, hook_server, webhook_entry

DENIED = 'admission webhook "pods.validate.numagate.io" denied the request: numagate: no node can ever run this pod'


@pytest.fixture(autouse=True)
def _clean(serving: Install) -> Iterator[None]:
    yield
    clean_pods(serving.plane)


def core_api(install: Install) -> client.CoreV1Api:
    return client.CoreV1Api(config.new_client_from_config(str(install.plane.kubeconfig)))


def test_a_pod_is_stored_normalized_with_the_injected_affinity(serving: Install) -> None:
    api = core_api(serving)
    api.create_namespaced_pod(TEST_NS, pod("normalized", annotations=koord("single-numa-node")))
    stored = api.api_client.sanitize_for_serialization(
        api.read_namespaced_pod("normalized", TEST_NS)
    )
    assert json.loads(stored["metadata"]["annotations"][KOORD_SPEC]) == {
        "numaTopologyPolicy": "SingleNUMANode"
    }
    # The affinity selects exactly the nodes whose policy a Koordinator SingleNUMANode pod
    # is compatible with: its own, or none (README, "What it checks").
    assert selected_nodes(serving.plane, stored) == {"single-a", "single-busy", "none-a"}


def test_the_users_own_required_terms_are_kept_and_narrowed(serving: Install) -> None:
    doc = pod("user-terms", annotations=koord("Restricted"))
    doc["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["restricted-a", "single-a"]}]}]}}}  # fmt: skip
    assert create(serving.plane, doc).returncode == 0
    stored = get(serving.plane, "pod", "user-terms")
    assert len(required_terms(stored)) == 1
    assert selected_nodes(serving.plane, stored) == {"restricted-a"}


def test_an_impossible_pod_is_denied_and_kubectl_prints_our_message(serving: Install) -> None:
    out = create(serving.plane, pod("impossible", cpu="12", annotations=koord("SingleNUMANode")))
    assert out.returncode == 1
    assert DENIED in out.stderr, out.stderr
    assert (
        "NotFound"
        in serving.plane.kubectl("get", "pod", "impossible", "-n", TEST_NS, check=False).stderr
    )


def test_a_no_room_now_pod_is_admitted_and_kubectl_prints_our_warning(serving: Install) -> None:
    doc = pod("no-room", cpu="4", annotations=koord("SingleNUMANode"),
              node_selector={"kubernetes.io/hostname": "single-busy"})  # fmt: skip
    out = create(serving.plane, doc)
    assert out.returncode == 0, out.stderr
    assert "Warning: numagate: no node has room now; 1 node(s) could run this pod" in out.stderr


def test_server_side_dry_run_returns_the_mutated_pod_and_stores_nothing(serving: Install) -> None:
    plane = serving.plane
    before = webhook_calls(plane, "mutate.numagate.io")
    out = create(
        plane, pod("dry", annotations=koord("single-numa-node")), "--dry-run=server", "-o", "json"
    )
    assert out.returncode == 0, out.stderr
    answered = json.loads(out.stdout)
    assert (
        json.loads(answered["metadata"]["annotations"][KOORD_SPEC])["numaTopologyPolicy"]
        == "SingleNUMANode"
    )
    assert required_terms(answered)
    assert webhook_calls(plane, "mutate.numagate.io") > before  # sideEffects None: called
    assert plane.kubectl("get", "pod", "dry", "-n", TEST_NS, check=False).returncode != 0
    denied = create(
        plane, pod("dry-bad", cpu="12", annotations=koord("SingleNUMANode")), "--dry-run=server"
    )
    assert DENIED in denied.stderr


def _deployment(name: str, cpu: str) -> dict:
    template = pod(name, cpu=cpu, annotations=koord("SingleNUMANode"))
    del (
        template["metadata"]["name"],
        template["metadata"]["namespace"],
        template["apiVersion"],
        template["kind"],
    )
    template["metadata"]["labels"] = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": TEST_NS},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}}, "template": template}}  # fmt: skip


def test_workloads_are_checked_on_create_and_update(serving: Install) -> None:
    plane = serving.plane
    bad = create(plane, _deployment("impossible-deploy", "12"))
    assert 'admission webhook "workloads.validate.numagate.io" denied the request' in bad.stderr, (
        bad.stderr
    )
    assert create(plane, _deployment("good-deploy", "2")).returncode == 0
    patch = {"spec": {"template": {"spec": {"containers": [
        {"name": "app", "resources": {"requests": {"cpu": "12"}, "limits": {"cpu": "12"}}}]}}}}  # fmt: skip
    out = plane.kubectl(
        "patch", "deployment", "good-deploy", "-n", TEST_NS, "-p", json.dumps(patch), check=False
    )
    assert out.returncode == 1 and "workloads.validate.numagate.io" in out.stderr, out.stderr
    stored = get(plane, "deployment", "good-deploy")
    assert (
        stored["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "2"
    )
    # A label change leaves the template alone: allowed.
    assert (
        plane.kubectl("label", "deployment", "good-deploy", "-n", TEST_NS, "tier=x").returncode == 0
    )
    plane.kubectl("delete", "deployment", "good-deploy", "-n", TEST_NS)


def test_a_pod_update_is_admitted(serving: Install) -> None:
    plane = serving.plane
    assert create(plane, pod("updated", annotations=koord("SingleNUMANode"))).returncode == 0
    out = plane.kubectl("annotate", "pod", "updated", "-n", TEST_NS, "e2e/touched=yes", check=False)
    assert out.returncode == 0, out.stderr
    assert get(plane, "pod", "updated")["metadata"]["annotations"]["e2e/touched"] == "yes"


def _volcano_job(name: str, cpu: str, policy: str) -> dict:
    template = pod(name, cpu=cpu, scheduler="volcano")
    del template["metadata"], template["apiVersion"], template["kind"]
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": name, "namespace": TEST_NS},
            "spec": {"schedulerName": "volcano", "minAvailable": 1,
                     "tasks": [{"name": "worker", "replicas": 1, "topologyPolicy": policy,
                                "template": template}]}}  # fmt: skip


def test_volcano_jobs_are_checked_after_the_crd_schema(serving: Install) -> None:
    plane = serving.plane
    out = create(plane, _volcano_job("vc-impossible", "12", "single-numa-node"))
    assert 'admission webhook "workloads.validate.numagate.io" denied the request' in out.stderr, (
        out.stderr
    )
    # The CRD's enum is checked before validating webhooks: a respelled policy gets the
    # apiserver's message, never numagate's.
    out = create(plane, _volcano_job("vc-respelled", "2", "SingleNUMANode"))
    assert 'Unsupported value: "SingleNUMANode"' in out.stderr, out.stderr
    assert "numagate" not in out.stderr
    assert create(plane, _volcano_job("vc-good", "2", "single-numa-node")).returncode == 0
    assert (
        get(plane, "jobs.batch.volcano.sh", "vc-good")["spec"]["tasks"][0]["topologyPolicy"]
        == "single-numa-node"
    )


def test_a_later_mutating_webhook_reinvokes_numagate_without_a_second_patch(
    serving: Install, tmp_path: Path
) -> None:
    plane = serving.plane

    def add_label(request: dict) -> list[dict] | None:
        labels = request["object"]["metadata"].get("labels") or {}
        if "e2e-second" in labels:
            return None
        if not labels:
            return [{"op": "add", "path": "/metadata/labels", "value": {"e2e-second": "yes"}}]
        return [{"op": "add", "path": "/metadata/labels/e2e-second", "value": "yes"}]

    with hook_server(tmp_path, add_label) as second:
        # Called after numagate (configurations run in name order); it changes the pod,
        # so the apiserver calls numagate again (reinvocationPolicy IfNeeded).
        config = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
                  "metadata": {"name": "zz-e2e-second"},
                  "webhooks": [webhook_entry("second.e2e.io", second.url("/mutate"), second.ca_bundle,
                                             POD_RULES, TEST_NS, mutating=True)]}  # fmt: skip
        create(plane, config, check=True)
        try:
            time.sleep(1)  # the apiserver picks up a new configuration asynchronously
            before = webhook_calls(plane, "mutate.numagate.io")
            assert (
                create(plane, pod("reinvoked", annotations=koord("single-numa-node"))).returncode
                == 0
            )
            after = webhook_calls(plane, "mutate.numagate.io")
        finally:
            plane.kubectl("delete", "mutatingwebhookconfiguration", "zz-e2e-second")
    stored = get(plane, "pod", "reinvoked")
    assert stored["metadata"]["labels"]["e2e-second"] == "yes"
    assert after - before == 2  # reinvoked once
    terms = required_terms(stored)
    assert len(terms) == 1 and len(
        terms[0].get("matchExpressions", []) + terms[0].get("matchFields", [])
    ) == len(
        {
            json.dumps(e, sort_keys=True)
            for e in terms[0].get("matchExpressions", []) + terms[0].get("matchFields", [])
        }
    )
    assert len(second.recorded) >= 1
    seen = second.recorded[0].review["request"]["object"]
    assert required_terms(seen), "the second webhook sees numagate's affinity already"


def test_excluded_namespaces_and_objects_are_not_sent(serving: Install) -> None:
    plane = serving.plane
    plane.create_namespace("e2e-ignored", {"numagate.io/ignore": "true"})
    impossible = pod(
        "ignored", cpu="12", annotations=koord("single-numa-node"), namespace="e2e-ignored"
    )
    assert create(plane, impossible).returncode == 0
    stored = get(plane, "pod", "ignored", "e2e-ignored")
    assert json.loads(stored["metadata"]["annotations"][KOORD_SPEC]) == {
        "numaTopologyPolicy": "single-numa-node"
    }
    assert not required_terms(stored)
    labelled = pod(
        "ignored-object",
        cpu="12",
        annotations=koord("SingleNUMANode"),
        labels={"numagate.io/ignore": "true"},
    )
    assert create(plane, labelled).returncode == 0
    system = copy.deepcopy(impossible)
    system["metadata"].update(name="e2e-system-pod", namespace="kube-system")
    plane.kubectl("create", "serviceaccount", "default", "-n", "kube-system", check=False)
    assert create(plane, system).returncode == 0
    clean_pods(plane, "e2e-ignored")
    plane.kubectl(
        "delete", "pod", "e2e-system-pod", "-n", "kube-system", "--force", "--grace-period=0"
    )


def _register(plane, name: str, url: str, ca: str, timeout: int, policy: str) -> None:  # type: ignore[no-untyped-def]
    hook = webhook_entry(
        f"{name}.e2e.io", url, ca, POD_RULES, TEST_NS, mutating=False, policy=policy
    )
    hook["timeoutSeconds"] = timeout
    cfg = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
           "metadata": {"name": name}, "webhooks": [hook]}  # fmt: skip
    create(plane, cfg, check=True)
    time.sleep(1)  # the apiserver picks up a new configuration asynchronously


def test_the_apiserver_sends_timeout_seconds_and_enforces_it(
    serving: Install, tmp_path: Path
) -> None:
    plane = serving.plane
    with hook_server(tmp_path / "fast") as rec:
        _register(plane, "e2e-recorder", rec.url("/validate"), rec.ca_bundle, 2, "Ignore")
        try:
            assert create(plane, pod("timed")).returncode == 0
        finally:
            plane.kubectl("delete", "validatingwebhookconfiguration", "e2e-recorder")
    # numagate's deadline comes from this query parameter (webhook/app.py parse_timeout).
    assert rec.recorded and rec.recorded[0].path == "/validate?timeout=2s"
    shipped = get(plane, "mutatingwebhookconfiguration", "numagate", None)["webhooks"][0]
    assert shipped["timeoutSeconds"] == 3
    # A webhook slower than its timeoutSeconds: the apiserver gives up, failurePolicy decides.
    with hook_server(tmp_path / "slow", delay=3.0) as slow:
        _register(plane, "e2e-slow", slow.url("/validate"), slow.ca_bundle, 1, "Fail")
        try:
            started = time.monotonic()
            out = create(plane, pod("too-slow"))
            elapsed = time.monotonic() - started
        finally:
            plane.kubectl("delete", "validatingwebhookconfiguration", "e2e-slow")
    assert out.returncode == 1 and 'failed calling webhook "e2e-slow.e2e.io"' in out.stderr, (
        out.stderr
    )
    assert "context deadline exceeded" in out.stderr or "Timeout" in out.stderr, out.stderr
    assert elapsed < 3.0


def _set_failure_policy(plane: ControlPlane, count: int, value: str) -> None:
    """Every webhook of numagate's validating configuration gets ``failurePolicy: value``."""
    ops = [
        {"op": "replace", "path": f"/webhooks/{i}/failurePolicy", "value": value}
        for i in range(count)
    ]
    plane.kubectl(
        "patch", "validatingwebhookconfiguration", "numagate", "--type=json", "-p", json.dumps(ops)
    )


def test_numagate_stopped_mutate_ignores_and_validate_fails_closed(serving: Install) -> None:
    plane = serving.plane
    hooks = get(plane, "validatingwebhookconfiguration", "numagate", None)["webhooks"]
    serving.stop_serve()
    try:
        out = create(plane, pod("while-down", annotations=koord("single-numa-node")))
        assert out.returncode == 1
        assert 'failed calling webhook "pods.validate.numagate.io"' in out.stderr, out.stderr
        assert "connect: connection refused" in out.stderr
        # With the validating webhook failing open too (components/fail-open), the pod is
        # admitted untouched: the mutating webhook's Ignore lets it through.
        _set_failure_policy(plane, len(hooks), "Ignore")
        time.sleep(1)
        out = create(plane, pod("while-down", annotations=koord("single-numa-node")))
        assert out.returncode == 0, out.stderr
        stored = get(plane, "pod", "while-down")
        assert json.loads(stored["metadata"]["annotations"][KOORD_SPEC]) == {
            "numaTopologyPolicy": "single-numa-node"
        }
        assert not required_terms(stored)
    finally:
        _set_failure_policy(plane, len(hooks), "Fail")
        serving.start_serve()
