"""DRA and the Topology Manager: the kubelet aligns only what its hint providers report, and
DRA devices report none (KEP-4381; kubernetes/website #56232), so a Guaranteed pod with
integer CPUs on a restricted or single-numa-node node gets a finding; explain lists per
request the devices and their NUMA node / PCIe root (standard attribute
resource.kubernetes.io/pcieRoot, k8s.io/dynamic-resource-allocation/deviceattribute v0.36.3)."""

from __future__ import annotations

from core.dra.evaluate import pod_claims
from core.dra.inventory import read_inventory
from core.dra.pools import NodeRef
from core.dra.topology import alignment_finding, is_topology_attribute, placements
from tests.core.dra.objects import DRIVER_A, device, device_class, request, resource_slice, template
from tests.core.dra.objects import pod as make_pod

NODE = NodeRef("node-1", {})


def _gpu(name: str, numa: int, root: str) -> dict:
    d = device(name, numaNode=numa)
    d["attributes"]["resource.kubernetes.io/pcieRoot"] = {"string": root}
    return d


OBJECTS = [
    device_class("gpu", DRIVER_A),
    template("t", request("g", "gpu")),
    resource_slice(
        "s1",
        "node-1",
        "pool-1",
        DRIVER_A,
        _gpu("gpu-0", 0, "pci0000:00"),
        _gpu("gpu-1", 1, "pci0000:80"),
    ),
]


def _claims():  # type: ignore[no-untyped-def]
    inv = read_inventory([{**o} for o in OBJECTS])
    return pod_claims(make_pod(("gpus", "template", "t")), inv), inv


def test_topology_attributes() -> None:
    assert is_topology_attribute("resource.kubernetes.io/pcieRoot")
    assert is_topology_attribute("dra.example.com/numaNode")
    assert is_topology_attribute("dra.cpu/socketID")
    assert not is_topology_attribute("dra.example.com/model")


def test_placements_show_numa_node_and_pcie_root_per_request() -> None:
    claims, inv = _claims()
    (found,) = placements(claims, NODE, inv)
    assert found.request == "gpus/g" and found.count == 1
    groups = found.groups()
    assert groups["driver-a/numaNode=0"] == 1 and groups["driver-a/numaNode=1"] == 1
    assert groups["resource.kubernetes.io/pcieRoot=pci0000:80"] == 1
    assert all(p.free and p.sure for p in found.devices)


def test_placements_say_which_devices_are_free_now() -> None:
    used = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "used", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu"}}]}},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "g", "driver": DRIVER_A, "pool": "pool-1", "device": "gpu-1"}
                    ]
                }
            }
        },
    }
    inv = read_inventory([*OBJECTS, used])
    (found,) = placements(pod_claims(make_pod(("gpus", "template", "t")), inv), NODE, inv)
    assert [p.free for p in found.devices] == [True, False]
    assert "driver-a/numaNode=1" not in found.groups(free_only=True)


def test_the_finding_for_aligning_policies_only() -> None:
    claims, inv = _claims()
    args = {"claims": claims, "node": NODE, "inv": inv}
    for policy in ("restricted", "single-numa-node"):
        msg = alignment_finding(guaranteed=True, integer_cpus=True, policy=policy, **args)
        assert msg is not None and policy in msg and "gpus/g" in msg and "matchAttribute" in msg
    assert (
        alignment_finding(guaranteed=True, integer_cpus=True, policy="best-effort", **args) is None
    )
    assert (
        alignment_finding(guaranteed=True, integer_cpus=False, policy="restricted", **args) is None
    )
    assert (
        alignment_finding(guaranteed=False, integer_cpus=True, policy="restricted", **args) is None
    )
