"""DRA ground truth from the real kube-scheduler: for every case of
tests/fixtures/dra/cases.yaml, the ResourceSlices are created on kwok nodes (no driver
needed: the scheduler's DRA allocator only reads slices), then the pod. Three verdicts
must agree: numagate's core (core/dra over the case's objects), numagate served as the
cluster's validating webhook with its live inventory (the pod created with
``--dry-run=server``: denied by the DRA check = impossible, allowed = fits), and the
scheduler (the pod created for real, opted out of numagate with ``numagate.io/ignore``):
fits = bound within BIND_TIMEOUT, impossible = still unbound after NEVER_WAIT (the
scheduler has tried and failed: a FailedScheduling event). Claims from a template are
created by the test as claims of the same name (no kube-controller-manager here).

Needs the end-to-end suite's ``serving`` fixture: the control plane (kube-apiserver,
kube-scheduler, kwok) with numagate installed from manifests/base, serving as its
ServiceAccount (whose RBAC must let it list and watch the DRA objects)."""

from __future__ import annotations

import copy
import json
import time
from typing import Any

import pytest

from tests.core.dra.ground_truth import Case, load_cases, numagate_verdict
from tests.e2e.cluster import Install
from tests.e2e.controlplane import wait_until
from tests.launch import http

CASES = load_cases()
BIND_TIMEOUT = 60.0  # s for a pod that fits to be bound
NEVER_WAIT = 5.0  # s an impossible pod stays unbound (after the scheduler said so)
DENIED = "DRA claims: no node can ever allocate them"
IGNORE = {"numagate.io/ignore": "true"}  # the webhooks' objectSelector leaves it out
SETTLE = 1.0  # s between two dry runs that must agree (both watches delivered)


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


def _served_nodes(install: Install) -> float:
    """numagate_inventory_nodes of the served numagate (one worker)."""
    status, body = http(install.port, install.ca, "GET", "/metrics", name="127.0.0.1")
    assert status == 200
    for line in body.decode().splitlines():
        if line.startswith("numagate_inventory_nodes"):
            return float(line.rsplit(" ", 1)[1])
    return -1.0


def _dry_run(install: Install, pod: dict[str, Any]) -> tuple[str, str]:
    out = install.plane.kubectl(
        "create", "--dry-run=server", "-f", "-", input=json.dumps(pod), check=False
    )
    if out.returncode == 0:
        return "fits", out.stderr
    return ("impossible" if DENIED in out.stderr else f"error: {out.stderr.strip()}"), out.stderr


def _admission_verdict(install: Install, case: Case, pod: dict[str, Any]) -> str:
    """numagate's answer through the apiserver, once its live inventory has the case: the
    DRA objects are created before the nodes, and the nodes are awaited in its metric; two
    dry runs SETTLE apart must then agree (the DRA types are separate watches)."""
    plane = install.plane
    count = len(json.loads(plane.kubectl("get", "nodes", "-o", "json").stdout)["items"])
    wait_until(lambda: _served_nodes(install) >= count, 30, "numagate's inventory has the nodes")
    last = _dry_run(install, pod)
    for _ in range(20):
        time.sleep(SETTLE)
        now = _dry_run(install, pod)
        if now[0] == last[0] and "DRA claims not checked" not in now[1]:
            return now[0]
        last = now
    return f"unsettled: {last}"


def _scheduler_verdict(control_plane: Any, case: Case) -> str:
    _, pod = _claims_by_name(case)
    pod["metadata"]["labels"] = dict(IGNORE)
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
def test_numagate_agrees_with_kube_scheduler(serving: Install, case: Case) -> None:
    plane = serving.plane
    ours = numagate_verdict(case)
    try:
        plane.create_namespace(case.name)
        objects, pod = _claims_by_name(case)
        _apply(plane, objects)
        _apply(plane, case.nodes)
        served = _admission_verdict(serving, case, pod)
        theirs = _scheduler_verdict(plane, case)
    finally:
        _remove(plane, case)
    assert (ours, served, theirs) == (case.expect,) * 3, (
        f"{case.name}: numagate core {ours}, numagate served {served}, scheduler {theirs}"
    )
