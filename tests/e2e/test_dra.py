"""DRA ground truth from the real kube-scheduler: for every case of
tests/fixtures/dra/cases.yaml, the ResourceSlices are created on kwok nodes (no driver
needed: the scheduler's DRA allocator only reads slices), then the pod; numagate's verdict
(core/dra over the same objects) must agree with the scheduler: fits = the pod is bound
within BIND_TIMEOUT, impossible = it is still unbound after NEVER_WAIT (the scheduler has
tried and failed: a FailedScheduling event). Claims from a template are created by the
test as claims of the same name (no kube-controller-manager here).

Needs the session-scoped ``control_plane`` fixture of the end-to-end suite (``.kubeconfig``,
``.kubectl(*args, input=..., check=...)``) with kube-apiserver, kube-scheduler and kwok."""

from __future__ import annotations

import copy
import json
import time
from typing import Any

import pytest

from tests.core.dra.ground_truth import Case, load_cases, numagate_verdict

CASES = load_cases()
BIND_TIMEOUT = 60.0  # s for a pod that fits to be bound
NEVER_WAIT = 5.0  # s an impossible pod stays unbound (after the scheduler said so)


def _apply(control_plane: Any, objects: list[dict[str, Any]]) -> None:
    body = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    control_plane.kubectl("apply", "-f", "-", input=body)


def _pod(control_plane: Any, namespace: str) -> dict[str, Any]:
    out = control_plane.kubectl("get", "pod", "pod", "-n", namespace, "-o", "json")
    return json.loads(out.stdout)


def _unschedulable(control_plane: Any, namespace: str) -> bool:
    """The scheduler tried and failed: a FailedScheduling event for the pod (its
    PodScheduled condition is not always written by the time the event is)."""
    out = control_plane.kubectl(
        "get",
        "events",
        "-n",
        namespace,
        "--field-selector",
        "reason=FailedScheduling,involvedObject.name=pod",
        "-o",
        "json",
    )
    return bool(json.loads(out.stdout)["items"])


def _claims_by_name(case: Case) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The case's objects and pod with each ResourceClaimTemplate turned into a
    ResourceClaim of the same name and spec, which the pod names: the control plane has no
    kube-controller-manager, whose resourceclaim controller would create the claims of a
    template. The allocator sees the same requests either way."""
    objects = []
    for obj in case.objects:
        if obj["kind"] == "ResourceClaimTemplate":
            obj = {**obj, "kind": "ResourceClaim", "spec": obj["spec"]["spec"]}
        objects.append(obj)
    pod = copy.deepcopy(case.pod)
    for entry in pod["spec"]["resourceClaims"]:
        if "resourceClaimTemplateName" in entry:
            entry["resourceClaimName"] = entry.pop("resourceClaimTemplateName")
    return objects, pod


def _scheduler_verdict(control_plane: Any, case: Case) -> str:
    control_plane.create_namespace(case.name)
    objects, pod = _claims_by_name(case)
    _apply(control_plane, case.nodes)
    _apply(control_plane, objects)
    _apply(control_plane, [pod])
    deadline = time.monotonic() + BIND_TIMEOUT
    seen_unschedulable: float | None = None
    while time.monotonic() < deadline:
        pod = _pod(control_plane, case.name)
        if pod["spec"].get("nodeName"):
            return "fits"
        if _unschedulable(control_plane, case.name):
            seen_unschedulable = seen_unschedulable or time.monotonic()
            if time.monotonic() - seen_unschedulable >= NEVER_WAIT:
                return "impossible"
        time.sleep(0.5)
    if seen_unschedulable is not None:
        return "impossible"
    return "no decision (neither bound nor marked unschedulable: is kube-scheduler running?)"


def _remove(control_plane: Any, case: Case) -> None:
    """The case's nodes, pod and DRA objects are gone again: the session's other tests
    share the cluster (a node without NUMA data there changes their decisions)."""
    objects, _ = _claims_by_name(case)
    control_plane.kubectl(
        "delete", "pod", "pod", "-n", case.name, "--grace-period=0", "--force", check=False
    )
    body = json.dumps({"apiVersion": "v1", "kind": "List", "items": [*objects, *case.nodes]})
    control_plane.kubectl(
        "delete", "--ignore-not-found", "--wait=false", "-f", "-", input=body, check=False
    )


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_numagate_agrees_with_kube_scheduler(control_plane: Any, case: Case) -> None:
    ours = numagate_verdict(case)
    try:
        theirs = _scheduler_verdict(control_plane, case)
    finally:
        _remove(control_plane, case)
    assert (ours, theirs) == (case.expect, case.expect), (
        f"{case.name}: numagate {ours}, scheduler {theirs}"
    )
