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

from tests.core.dra.ground_truth import Case, _node, load_cases, numagate_verdict
from tests.core.dra.objects import cpu_slice
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


# ---- the DRA CPU driver's claims as the real scheduler allocates them (issue 28)

CPU_NS = "dra-cpu"
CPU_NODE = f"{CPU_NS}-n1"
NUMA0 = 'device.attributes["dra.cpu"].numaNodeID == 0'


def _cpu_objects() -> list[dict[str, Any]]:
    """One kwok node whose driver dra.cpu publishes 8 CPUs (individual mode, 4 per NUMA
    node), its class, and the claims: All over NUMA node 0, firstAvailable 6 or 2, one
    claim two pods share, one a Deployment's replicas share."""
    cls = f"{CPU_NS}-cpu"

    def claim(name: str, request: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": CPU_NS},
            "spec": {"devices": {"requests": [{"name": "cpus", **request}]}},
        }

    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": cls},
            "spec": {"selectors": [{"cel": {"expression": 'device.driver == "dra.cpu"'}}]},
        },
        cpu_slice(CPU_NODE),
        claim(
            "all-numa0",
            {"exactly": {"deviceClassName": cls, "allocationMode": "All",
                         "selectors": [{"cel": {"expression": NUMA0}}]}},
        ),
        claim(
            "first",
            {"firstAvailable": [{"name": "big", "deviceClassName": cls, "count": 6},
                                {"name": "small", "deviceClassName": cls, "count": 2}]},
        ),
        claim("shared", {"exactly": {"deviceClassName": cls, "count": 1}}),
        claim("replicated", {"exactly": {"deviceClassName": cls, "count": 1}}),
    ]  # fmt: skip


def _cpu_pod(name: str, claim: str, cpu: str, *, ignored: bool = True) -> dict[str, Any]:
    res = {"cpu": cpu, "memory": "1Gi"}
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": CPU_NS},
        "spec": {
            "resourceClaims": [{"name": "c", "resourceClaimName": claim}],
            "nodeSelector": {"kubernetes.io/hostname": CPU_NODE},
            "tolerations": [
                {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}
            ],
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": res, "limits": res, "claims": [{"name": "c"}]},
                }
            ],
        },
    }
    if ignored:
        pod["metadata"]["labels"] = dict(IGNORE)
    return pod


def _warned(install: Install, obj: dict[str, Any], expected: str | None) -> str:
    """numagate's warnings for ``obj`` (a server dry run) once its live inventory has the
    objects: ``expected`` among them (or, None, the claims checked at all)."""
    text = ""
    for _ in range(30):
        out = install.plane.kubectl(
            "create", "--dry-run=server", "-f", "-", input=json.dumps(obj), check=False
        )
        text = out.stderr
        checked = "DRA claims not checked" not in text and out.returncode == 0
        if checked and (expected is None or expected in text):
            return text
        time.sleep(SETTLE)
    return f"never: {text}"


def _bound_claim(plane: Any, pod: str, claim: str) -> dict[str, Any]:
    wait_until(
        lambda: bool(
            json.loads(plane.kubectl("get", "pod", pod, "-n", CPU_NS, "-o", "json").stdout)[
                "spec"
            ].get("nodeName")
        ),
        BIND_TIMEOUT,
        f"kube-scheduler binds {pod}",
    )
    out = plane.kubectl("get", "resourceclaim", claim, "-n", CPU_NS, "-o", "json")
    return json.loads(out.stdout)


@pytest.mark.slow
def test_cpu_driver_claims_as_kube_scheduler_allocates_them(serving: Install) -> None:
    """allocationMode All yields every matching device of the node (4 CPUs on NUMA node
    0: numagate's mirroring count is the scheduler's allocation), firstAvailable the
    subrequest the allocator can satisfy (with 4 CPUs free: 'small', 2), and a claim two
    pods created together share is reserved for both by the scheduler (the driver, not
    running here, would fail the second): numagate warns for a third pod and for a
    Deployment whose replicas share a claim by name."""
    plane = serving.plane
    objects = _cpu_objects()
    node = _node(CPU_NS, "n1")
    try:
        plane.create_namespace(CPU_NS)
        _apply(plane, objects)
        _apply(plane, [node])
        text = _warned(serving, _cpu_pod("p-all", "all-numa0", "4", ignored=False), None)
        assert "CPUs from dra.cpu claims" not in text, text  # 4 mirrors the 4 All yields
        text = _warned(serving, _cpu_pod("p-first", "first", "6", ignored=False), "2 or 6 CPUs")
        assert "cpu requests 6 / limits 6, 2 or 6 CPUs from dra.cpu claims" in text, text

        _apply(plane, [_cpu_pod("p-all", "all-numa0", "4")])
        results = _bound_claim(plane, "p-all", "all-numa0")["status"]["allocation"]
        assert len(results["devices"]["results"]) == 4
        _apply(plane, [_cpu_pod("p-first", "first", "2")])
        results = _bound_claim(plane, "p-first", "first")["status"]["allocation"]
        assert [r["request"] for r in results["devices"]["results"]] == ["cpus/small"] * 2

        _apply(plane, [_cpu_pod("s1", "shared", "1"), _cpu_pod("s2", "shared", "1")])
        _bound_claim(plane, "s1", "shared")
        users = _bound_claim(plane, "s2", "shared")["status"]["reservedFor"]
        assert sorted(u["name"] for u in users) == ["s1", "s2"]  # the scheduler let both in
        text = _warned(serving, _cpu_pod("s3", "shared", "1", ignored=False), "reserved for pod")
        assert "(ResourceClaim dra-cpu/shared) is reserved for pod s" in text, text

        template = _cpu_pod("r", "replicated", "1", ignored=False)
        deployment = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "r", "namespace": CPU_NS},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "r"}},
                "template": {"metadata": {"labels": {"app": "r"}}, "spec": template["spec"]},
            },
        }
        text = _warned(serving, deployment, "concurrent pods")
        assert "(ResourceClaim dra-cpu/replicated) shared by 2 concurrent pods" in text, text
    finally:
        for name in ("p-all", "p-first", "s1", "s2"):
            plane.kubectl(
                "delete", "pod", name, "-n", CPU_NS, "--grace-period=0", "--force", check=False
            )
        body = json.dumps({"apiVersion": "v1", "kind": "List", "items": [*objects, node]})
        plane.kubectl(
            "delete", "--ignore-not-found", "--wait=false", "-f", "-", input=body, check=False
        )
