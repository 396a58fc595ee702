"""core/dra/cpu_driver.py: the DRA CPU driver's rules, each checked at kubernetes-sigs/
dra-driver-cpu tag v0.2.0 (the file and function named per test)."""

from __future__ import annotations

from typing import Any

import pytest

from core.dra.cpu_driver import (
    CPU_CAPACITY,
    ERROR,
    NO_ROOM_NOW,
    WARNING,
    concurrent_pods,
    cpu_requests,
    is_cpu_class,
)
from core.dra.evaluate import pod_claims
from core.dra.inventory import read_inventory
from core.dra.objects import DraError
from core.dra.pod import cpu_driver_findings, judge_pod
from core.dra.read import read_claim
from core.intent.read import read_intent
from core.intent.workloads import pod_templates
from core.inventory.build import build_inventory
from tests.builders.objects import node, nrt, zone
from tests.core.dra.objects import cpu_slice

NS = "default"
POLICY = {"cpu-a": "none", "cpu-b": "static"}


# manifests/base/deviceclass-dracpu.part.yaml at v0.2.0
CPU_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "dra.cpu"},
    "spec": {"selectors": [{"cel": {"expression": 'device.driver == "dra.cpu"'}}]},
}


def _claim(name: str, cpus: int, *, grouped: bool = False, **status: Any) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": "dra.cpu"}
    if grouped:  # hack/examples/pod_with_resource_claim_grouped_mode.yaml
        exactly["capacity"] = {"requests": {CPU_CAPACITY: str(cpus)}}
    else:  # hack/examples/pod_with_resource_claim_individual_mode.yaml
        exactly["count"] = cpus
    obj: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"devices": {"requests": [{"name": "cpus", "exactly": exactly}]}},
    }
    if status:
        obj["status"] = status
    return obj


def _reserved(pod_name: str) -> dict[str, Any]:
    result = {"request": "cpus", "driver": "dra.cpu", "pool": "cpu-a-cpu", "device": "cpu000"}
    return {
        "allocation": {"devices": {"results": [result]}},
        "reservedFor": [{"resource": "pods", "name": pod_name, "uid": "u1"}],
    }


def _objects(*claims: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [CPU_CLASS, *claims]
    res = {"cpu": ("4", "4", "4"), "memory": ("8Gi", "8Gi", "8Gi")}
    for n, policy in POLICY.items():
        out.append(node(n, {"cpu": "8", "memory": "16Gi", "pods": "110"}))
        out.append(nrt(n, [zone(0, res), zone(1, res)], attributes={"cpuManagerPolicy": policy}))
        out.append(cpu_slice(n))
    return out


OBJECTS = _objects(
    _claim("four", 4),
    _claim("grouped-ten", 10, grouped=True),
    _claim("taken", 2, **_reserved("first")),
)
INV = read_inventory(OBJECTS)
NODES = build_inventory(OBJECTS).nodes


def _pod(claims: dict[str, str], *containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": NS},
        "spec": {
            "resourceClaims": [{"name": k, "resourceClaimName": v} for k, v in claims.items()],
            "containers": list(containers),
            **spec,
        },
    }


def _ctr(name: str, claims: list[str], cpu: str | None = None, **extra: Any) -> dict[str, Any]:
    res: dict[str, Any] = {"claims": [{"name": c} for c in claims]}
    if cpu is not None:
        res["requests"] = {"cpu": cpu, "memory": "1Gi"}
        res["limits"] = {"cpu": cpu, "memory": "1Gi"}
    return {"name": name, "image": "x", "resources": res, **extra}


def _findings(p: dict[str, Any]) -> list[tuple[str, str, str]]:
    intent = read_intent(pod_templates(p)[0]).intent
    verdict = judge_pod(p, intent, NODES, INV)
    return [
        (f.code, f.severity, f.message) for f in cpu_driver_findings(p, intent, verdict, NODES, INV)
    ]


def _mirror(p: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [f for f in _findings(p) if f[0] == "draCpuNotMirrored"]


def test_the_driver_and_its_class_are_named_dra_cpu() -> None:
    """cmd/dracpu/app.go driverName = "dra.cpu"; deviceclass-dracpu.part.yaml selects it."""
    assert is_cpu_class("dra.cpu", INV.classes)
    assert is_cpu_class("dra.cpu", {})  # class not in the inventory: by its name
    assert not is_cpu_class("gpu", {})


def test_cpus_are_counted_as_devices_or_as_the_dra_cpu_capacity() -> None:
    """README "Driver configuration": individual mode counts devices, grouped mode (the
    default) requests the consumable capacity dra.cpu/cpu."""
    assert cpu_requests(INV.claims[(NS, "four")].spec, INV) == {"cpus": 4}
    assert cpu_requests(INV.claims[(NS, "grouped-ten")].spec, INV) == {"cpus": 10}


def test_a_claim_shared_by_two_containers_of_the_pod_is_an_error() -> None:
    """pkg/store/claim_tracker.go SetOwner (TestSetOwner "duplicate binding - container"),
    called by pkg/driver/nri_hooks.go CreateContainer: the second container fails."""
    p = _pod({"c": "four"}, _ctr("a", ["c"], "4"), _ctr("b", ["c"], "4"))
    shared = [f for f in _findings(p) if f[0] == "draCpuSharedClaim"]
    assert len(shared) == 1 and shared[0][1] == ERROR
    assert "'c'" in shared[0][2] and "containers a, b" in shared[0][2]
    assert "'b' fails with CreateContainerError" in shared[0][2]
    # a sidecar runs alongside the app container: shared too
    sidecar = _ctr("s", ["c"], "4", restartPolicy="Always")
    p = _pod({"c": "four"}, _ctr("a", ["c"], "4"), initContainers=[sidecar])
    assert any(f[0] == "draCpuSharedClaim" for f in _findings(p))
    # a plain init container stops (StopContainer cleans the tracker) before the next starts
    p = _pod({"c": "four"}, _ctr("a", ["c"], "4"), initContainers=[_ctr("i", ["c"], "4")])
    assert not any(f[0] == "draCpuSharedClaim" for f in _findings(p))


def test_a_claim_another_pod_reserves_has_no_room_now() -> None:
    """claim_tracker.go SetOwner (TestSetOwner "duplicate binding - pod"); README "Sharing
    resource claims": every pod but the first stays Pending with CreateContainerError."""
    found = [
        f for f in _findings(_pod({"c": "taken"}, _ctr("a", ["c"], "2"))) if f[1] == NO_ROOM_NOW
    ]
    assert len(found) == 1
    assert "ResourceClaim default/taken" in found[0][2] and "pod first" in found[0][2]
    assert "ResourceClaimTemplate" in found[0][2]
    mine = _pod({"c": "taken"}, _ctr("a", ["c"], "2"))
    mine["metadata"]["name"] = "first"  # the pod holding it is not blocked by itself
    assert not any(f[1] == NO_ROOM_NOW for f in _findings(mine))


def test_requests_must_mirror_the_claims_cpus() -> None:
    """README "Workload Configuration Requirements" (Option B): a container's requests.cpu
    and limits.cpu must equal its claims' CPUs, as the kubelet's QoS class ignores claims."""
    assert not _mirror(_pod({"c": "four"}, _ctr("a", ["c"], "4")))
    besteffort = _mirror(_pod({"c": "four"}, _ctr("a", ["c"])))
    assert [(f[0], f[1]) for f in besteffort] == [("draCpuNotMirrored", WARNING)]
    text = besteffort[0][2]
    assert "container 'a': cpu requests unset / limits unset, 4 CPUs" in text
    assert "(QoS BestEffort)" in text and "to 4" in text
    grouped = _mirror(_pod({"c": "grouped-ten"}, _ctr("a", ["c"], "2")))
    assert any("cpu requests 2 / limits 2, 10 CPUs" in f[2] for f in grouped), grouped


def test_pod_level_resources_may_carry_the_claims_cpus() -> None:
    """README "Workload Configuration Requirements" (Option A): spec.resources requests =
    limits = the claims' CPUs plus the other containers'."""
    ok = {"requests": {"cpu": "6", "memory": "2Gi"}, "limits": {"cpu": "6", "memory": "2Gi"}}
    p = _pod({"c": "four"}, _ctr("a", ["c"]), _ctr("side", []), resources=ok)
    assert not _mirror(p)
    low = {"requests": {"cpu": "2"}, "limits": {"cpu": "2"}}
    found = _mirror(_pod({"c": "four"}, _ctr("a", ["c"]), resources=low))
    assert any("spec.resources cpu requests 2 / limits 2, 4 CPUs" in f[2] for f in found)


def test_cpu_manager_policy_static_conflicts_with_the_driver() -> None:
    """README "Configuration": the CPUManager and the driver are mutually incompatible,
    nodes need cpuManagerPolicy none; numagate reads it from the NRT attributes."""
    found = [f for f in _findings(_pod({"c": "four"}, _ctr("a", ["c"], "4")))]
    assert [(f[0], f[1]) for f in found] == [("draCpuStaticPolicy", WARNING)]
    assert "cpuManagerPolicy static on 1 node(s) (first: cpu-b)" in found[0][2]
    assert "cpuManagerPolicy none" in found[0][2]
    only_a = _pod({"c": "four"}, _ctr("a", ["c"], "4"), nodeName="cpu-a")
    assert not _findings(only_a)


def test_a_malformed_claim_entry_is_a_dra_error_even_without_candidate_nodes() -> None:
    """webhook/dra/admission.py turns it into a 'not checked' warning, never a 500."""
    p = _pod({}, _ctr("a", []), nodeName="nowhere")
    p["spec"]["resourceClaims"] = [{"resourceClaimName": "four"}]
    intent = read_intent(pod_templates(p)[0]).intent
    assert judge_pod(p, intent, NODES, INV) is None
    with pytest.raises(DraError, match="has no name"):
        cpu_driver_findings(p, intent, None, NODES, INV)


def test_claims_of_other_drivers_are_not_judged() -> None:
    gpu = read_claim(
        {
            "metadata": {"name": "g", "namespace": NS},
            "spec": {
                "devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu"}}]}
            },
        }
    )
    assert cpu_requests(gpu.spec, INV) == {}
    assert pod_claims(_pod({"c": "four"}), INV)[0].claim is not None


# ---- what allocationMode All and firstAvailable yield (issue 28)


def _request(name: str, **exactly: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": "dra.cpu", **exactly}}


def _claim_of(name: str, *requests: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"devices": {"requests": list(requests)}},
    }


NUMA0 = 'device.attributes["dra.cpu"].numaNodeID == 0'
ALL_CLAIMS = (
    _claim_of("all", _request("cpus", allocationMode="All")),
    _claim_of(
        "all-numa0",
        _request("cpus", allocationMode="All", selectors=[{"cel": {"expression": NUMA0}}]),
    ),
    _claim_of(
        "first",
        {"name": "cpus", "firstAvailable": [
            {"name": "big", "deviceClassName": "dra.cpu", "count": 4},
            {"name": "small", "deviceClassName": "dra.cpu", "count": 2},
        ]},
    ),
    _claim_of(
        "first-same",
        {"name": "cpus", "firstAvailable": [
            {"name": "numa0", "deviceClassName": "dra.cpu", "count": 2,
             "selectors": [{"cel": {"expression": NUMA0}}]},
            {"name": "any", "deviceClassName": "dra.cpu", "count": 2},
        ]},
    ),
)  # fmt: skip


def _with(objects: list[dict[str, Any]]) -> tuple[Any, Any]:
    return read_inventory(objects), build_inventory(objects).nodes


def _mirror_on(p: dict[str, Any], objects: list[dict[str, Any]]) -> list[str]:
    inv, nodes = _with(objects)
    intent = read_intent(pod_templates(p)[0]).intent
    verdict = judge_pod(p, intent, nodes, inv)
    return [
        f.message
        for f in cpu_driver_findings(p, intent, verdict, nodes, inv)
        if f.code == "draCpuNotMirrored"
    ]


def test_allocation_mode_all_yields_every_matching_cpu_of_the_node() -> None:
    """Individual mode: one CPU per allocated device (pkg/driver/dra_hooks.go
    prepareResourceClaim, deviceNameToCPUID per result); All takes every device of the
    node's pools that the selectors match (k8s.io/dynamic-resource-allocation v0.36.3,
    structured/internal/stable/allocator_stable.go validateDeviceRequest: allDevices).
    The test nodes publish 8 CPUs, 4 per NUMA node."""
    objects = _objects(*ALL_CLAIMS)
    assert not _mirror_on(_pod({"c": "all"}, _ctr("a", ["c"], "8")), objects)
    (found,) = _mirror_on(_pod({"c": "all"}, _ctr("a", ["c"], "4")), objects)
    assert "container 'a': cpu requests 4 / limits 4, 8 CPUs from dra.cpu claims" in found
    assert "limits.cpu to 8" in found
    assert not _mirror_on(_pod({"c": "all-numa0"}, _ctr("a", ["c"], "4")), objects)


def test_allocation_mode_all_over_nodes_of_different_sizes_varies() -> None:
    """The same All claim yields 8 CPUs on one node and 4 on another: no request mirrors
    both, so the finding names both counts (allocator_stable.go validateDeviceRequest per
    node)."""
    objects = _objects(*ALL_CLAIMS)
    small = next(o for o in objects if o["metadata"]["name"] == "cpu-b-dra.cpu")
    small["spec"]["devices"] = small["spec"]["devices"][:4]
    (found,) = _mirror_on(_pod({"c": "all"}, _ctr("a", ["c"], "8")), objects)
    assert "cpu requests 8 / limits 8, 4 or 8 CPUs from dra.cpu claims" in found
    assert "the count depends on the node" in found
    only_b = _pod({"c": "all"}, _ctr("a", ["c"], "4"), nodeName="cpu-b")
    assert not _mirror_on(only_b, objects)


def test_allocation_mode_all_in_grouped_mode_is_not_judged() -> None:
    """Grouped mode: a device is a group of CPUs and the claim gets its consumed capacity
    dra.cpu/cpu (dra_hooks.go prepareGroupedResourceClaim), not known before allocation."""
    objects = _objects(*ALL_CLAIMS)
    for o in objects:
        if o.get("kind") == "ResourceSlice":
            o["spec"]["devices"] = [
                {"name": "cpudevnuma000", "capacity": {CPU_CAPACITY: {"value": "4"}},
                 "allowMultipleAllocations": True},
            ]  # fmt: skip
    assert not _mirror_on(_pod({"c": "all"}, _ctr("a", ["c"], "1")), objects)


def test_first_available_yields_the_cpus_of_the_subrequest_the_allocator_picks() -> None:
    """The allocator takes the first subrequest that can be allocated (allocator_stable.go
    allocateOne, selectedSubRequestIndex), so the claim yields 4 or 2 CPUs depending on
    the node's free CPUs: no single request mirrors it. Subrequests of one count do."""
    assert cpu_requests(read_claim(ALL_CLAIMS[2]).spec, INV) == {"cpus": frozenset({2, 4})}
    objects = _objects(*ALL_CLAIMS)
    (found,) = _mirror_on(_pod({"c": "first"}, _ctr("a", ["c"], "4")), objects)
    assert "cpu requests 4 / limits 4, 2 or 4 CPUs from dra.cpu claims" in found
    assert "one count (2 or 4 now)" in found
    assert not _mirror_on(_pod({"c": "first-same"}, _ctr("a", ["c"], "2")), objects)
    (found,) = _mirror_on(_pod({"c": "first-same"}, _ctr("a", ["c"], "1")), objects)
    assert "cpu requests 1 / limits 1, 2 CPUs" in found
    # pod-level resources: a budget that covers the largest count is enough
    ok = {"requests": {"cpu": "4", "memory": "1Gi"}, "limits": {"cpu": "4", "memory": "1Gi"}}
    assert not _mirror_on(_pod({"c": "first"}, _ctr("a", ["c"]), resources=ok), objects)


# ---- pods created together: a CPU claim by name in a template of several replicas


def _deployment(replicas: Any, claim_ref: dict[str, str]) -> dict[str, Any]:
    spec = _pod({}, _ctr("a", ["c"], "4"))["spec"]
    spec["resourceClaims"] = [{"name": "c", **claim_ref}]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": NS},
        "spec": {"replicas": replicas, "template": {"spec": spec}},
    }


def test_how_many_pods_of_a_template_run_at_once() -> None:
    assert concurrent_pods(_deployment(3, {})) == 3
    assert concurrent_pods(_deployment(None, {})) == 1 and concurrent_pods(_deployment(1, {})) == 1
    assert (
        concurrent_pods({"apiVersion": "batch/v1", "kind": "Job", "spec": {"parallelism": 4}}) == 4
    )
    cron = {"apiVersion": "batch/v1", "kind": "CronJob",
            "spec": {"jobTemplate": {"spec": {"parallelism": 2}}}}  # fmt: skip
    assert concurrent_pods(cron) == 2
    volcano = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "spec": {"parallelism": 4}}
    assert concurrent_pods(volcano) == 1 and concurrent_pods({"kind": "Pod"}) == 1
    assert concurrent_pods({"apiVersion": "apps/v1", "kind": "DaemonSet"}) == 1
    assert (
        concurrent_pods({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": True}})
        == 1
    )


def test_a_cpu_claim_by_name_in_a_template_of_several_pods_has_no_room_now() -> None:
    """Pods a controller creates together are in no claim's status.reservedFor yet: the
    scheduler reserves a claim for up to 256 pods (kubernetes v1.36.3,
    pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go PreFilter
    "resourceclaim in use" only when resourceclaim.CanBeReserved fails; PreBind bindClaim
    appends each pod), and the driver binds the claim to the first container only
    (claim_tracker.go SetOwner): every other replica fails with CreateContainerError."""
    obj = _deployment(3, {"resourceClaimName": "four"})
    template = pod_templates(obj)[0]
    p = {"metadata": {"namespace": NS}, "spec": template.spec}
    intent = read_intent(template).intent
    verdict = judge_pod(p, intent, NODES, INV)
    found = [
        (f.code, f.severity, f.message)
        for f in cpu_driver_findings(p, intent, verdict, NODES, INV, concurrent_pods(obj))
        if f.code == "draCpuSharedClaim"
    ]
    assert [(c, s) for c, s, _ in found] == [("draCpuSharedClaim", NO_ROOM_NOW)]
    assert "(ResourceClaim default/four) shared by 3 concurrent pods" in found[0][2]
    assert "the other 2 fail with CreateContainerError" in found[0][2]
    assert not [
        f for f in cpu_driver_findings(p, intent, verdict, NODES, INV, 1)
        if f.code == "draCpuSharedClaim"
    ]  # fmt: skip
    # a template claim: one claim per pod, nothing shared
    obj = _deployment(3, {"resourceClaimTemplateName": "four"})
    template = pod_templates(obj)[0]
    p = {"metadata": {"namespace": NS}, "spec": template.spec}
    assert not [
        f for f in cpu_driver_findings(p, intent, judge_pod(p, intent, NODES, INV), NODES, INV, 3)
        if f.code == "draCpuSharedClaim"
    ]  # fmt: skip
