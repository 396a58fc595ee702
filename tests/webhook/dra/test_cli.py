"""``explain`` and ``pending`` show a pod's DRA claims: per node, which devices on which
NUMA node / PCIe root could serve each request, how many are free, and the verdict;
``pending`` lists pods whose claims fit no node now (webhook/dra/report.py). The cluster
is the list/watch test apiserver over TLS with the four resource.k8s.io types."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.core.dra.objects import cpu_slice
from tests.webhook.dra.objects import (
    CPU_CLASS,
    DRA_FAKES,
    claim,
    cpu_claim,
    cpu_container,
    cpu_pod,
    inventory,
    pod,
    request,
)
from tests.webhook.fake_apiserver import DEFAULT_RESOURCES, FakeApiServer, running_apiserver
from webhook.cli.main import main

NUMA1 = 'device.attributes["gpu.example.com"].numaNode == 1'
CLAIMS = [
    claim(
        "holder",
        [request("held", 4, NUMA1)],
        allocated=[(n, d) for n in ("gpu-a", "gpu-b") for d in ("gpu-2", "gpu-3")],
    ),
    claim("two", [request("gpus", 2)]),
    claim("five", [request("gpus", 5)]),
    claim("numa1", [request("gpus", 2, NUMA1)]),
]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def files(tmp_path: Path) -> Path:
    inv = tmp_path / "inventory.json"
    inv.write_text(json.dumps({"kind": "List", "items": inventory(CLAIMS)}))
    return inv


def _write(tmp_path: Path, obj: dict[str, Any]) -> str:
    path = tmp_path / "pod.json"
    path.write_text(json.dumps(obj))
    return str(path)


def test_explain_shows_the_devices_per_numa_node_and_pcie_root(
    files: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = _write(tmp_path, pod("p", {"gpus": "two", "more": "numa1"}))
    code, out, _ = run(capsys, "explain", "--inventory", str(files), "-o", "json", manifest)
    assert code == 0
    claims = json.loads(out)["claims"]
    assert claims["verdict"] == "no-room-now"
    assert [n["name"] for n in claims["nodes"]] == ["gpu-a", "gpu-b"]
    gpus, more = claims["nodes"][0]["requests"]
    assert (gpus["request"], gpus["count"], more["request"]) == ("gpus/gpus", 2, "more/gpus")
    assert gpus["groups"]["gpu.example.com/numaNode=0"] == {"matching": 2, "free": 2}
    assert gpus["groups"]["gpu.example.com/numaNode=1"] == {"matching": 2, "free": 0}
    assert gpus["groups"]["resource.kubernetes.io/pcieRoot=pci0000:01"]["free"] == 0
    first = gpus["devices"][0]
    assert first["device"] == "gpu.example.com/gpu-a/gpu-0" and first["free"] and first["sure"]
    assert first["topology"] == {
        "gpu.example.com/numaNode": "0",
        "resource.kubernetes.io/pcieRoot": "pci0000:00",
    }
    assert list(more["groups"]) == [
        "gpu.example.com/numaNode=1",
        "resource.kubernetes.io/pcieRoot=pci0000:01",
    ]
    code, out, _ = run(capsys, "explain", "--inventory", str(files), manifest)
    lines = out.splitlines()
    assert "DRA claims: no-room-now: 2 of the 4 matching devices are allocated" in out
    row = next(line for line in lines if line.startswith("gpu-a") and "gpus/gpus" in line)
    assert "gpu.example.com/numaNode=0: 2/2 free" in row and "numaNode=1: 0/2 free" in row


def test_explain_names_the_constraint_and_the_topology_manager_gap(
    files: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = _write(tmp_path, pod("p", {"gpus": "five"}))
    code, out, _ = run(capsys, "explain", "--inventory", str(files), manifest)
    assert code == 1  # denied
    assert "DRA claims: impossible: on 2 of 2 nodes: request gpus/gpus" in out
    assert "why: request gpus/gpus: gpus needs 5 matching device(s), the node has 4" in out
    manifest = _write(tmp_path, pod("p", {"gpus": "two"}, cpu="4", guaranteed=True))
    code, out, _ = run(capsys, "explain", "--inventory", str(files), manifest)
    assert code == 0
    assert "DRA and the Topology Manager: the kubelet's Topology Manager (policy" in out
    assert "'gpu.example.com/numaNode', 'resource.kubernetes.io/pcieRoot'" in out


def _pending(obj: dict[str, Any], name: str) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["metadata"]["name"] = name
    obj["status"] = {"phase": "Pending"}
    return obj


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeApiServer]:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    with running_apiserver(tmp_path, resources=(*DEFAULT_RESOURCES, *DRA_FAKES)) as server:
        for obj in inventory(CLAIMS):
            server.apply(obj)
        server.apply(_pending(pod("p", {"gpus": "five"}), "never"))
        server.apply(_pending(pod("p", {"gpus": "numa1"}), "waiting"))
        server.apply(_pending(pod("p", {"gpus": "two"}), "other-reason"))
        yield server


def test_pending_lists_pods_whose_claims_fit_no_node(
    cluster: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kc = ("--kubeconfig", str(cluster.write_kubeconfig(tmp_path / "kubeconfig")))
    code, out, err = run(capsys, "pending", *kc, "-n", "ml", "-o", "json")
    assert code == 0, err
    entries = {e["name"]: e for e in json.loads(out)["pods"]}
    assert set(entries) == {"never", "waiting"}  # "other-reason": its claims fit now
    never = entries["never"]
    assert (never["rule"], never["outcome"]) == ("DRA claims", "impossible")
    assert "needs 5 matching device(s)" in never["message"]
    assert never["nodes"] == {"never-fits": 2}
    assert never["claims"]["nodes"][0]["requests"][0]["request"] == "gpus/gpus"
    assert entries["waiting"]["outcome"] == "no-room-now"
    assert entries["waiting"]["closest"]["verdict"] == "no-room-now"
    code, out, _ = run(capsys, "pending", *kc, "-n", "ml")
    assert code == 0
    assert [line.split()[:5] for line in out.splitlines()[1:]] == [
        ["ml", "never", "DRA", "claims", "impossible"],
        ["ml", "waiting", "DRA", "claims", "no-room-now"],
    ]


def test_explain_shows_the_cpu_driver_findings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The DRA CPU driver's rules (core.dra.cpu_driver, as /validate gives them) in
    explain: a claim two containers share (error), requests that do not mirror the claim
    and cpuManagerPolicy static on the node (warnings)."""
    inv = tmp_path / "cpu.json"
    extra = [CPU_CLASS, cpu_slice("gpu-a"), cpu_claim("cpus", 2)]
    inv.write_text(json.dumps({"kind": "List", "items": inventory(extra)}))
    manifest = _write(tmp_path, cpu_pod("cpus", cpu_container("a", "2"), cpu_container("b", None)))
    code, out, _ = run(capsys, "explain", "--inventory", str(inv), "-o", "json", manifest)
    assert code == 1  # denied: the shared claim fails /validate's feasibility check
    found = {
        (f["code"], f["severity"]): f["message"] for f in json.loads(out)["claims"]["cpuDriver"]
    }
    assert set(found) == {
        ("draCpuSharedClaim", "error"),
        ("draCpuNotMirrored", "warning"),
        ("draCpuStaticPolicy", "warning"),
    }
    assert (
        "CPU claim 'c' in resources.claims of containers a, b"
        in found[("draCpuSharedClaim", "error")]
    )
    assert (
        "container 'b': cpu requests unset / limits unset"
        in found[("draCpuNotMirrored", "warning")]
    )
    code, out, _ = run(capsys, "explain", "--inventory", str(inv), manifest)
    assert code == 1
    lines = [line for line in out.splitlines() if line.startswith("DRA CPU driver")]
    assert len(lines) == 3 and lines[0].startswith(
        "DRA CPU driver (error, draCpuSharedClaim): CPU claim 'c' in resources.claims"
    )
    mirrored = _write(tmp_path, cpu_pod("cpus", cpu_container("a", "2")))
    code, out, _ = run(capsys, "explain", "--inventory", str(inv), "-o", "json", mirrored)
    assert code == 0
    assert [f["code"] for f in json.loads(out)["claims"]["cpuDriver"]] == ["draCpuStaticPolicy"]


def test_explain_of_a_deployment_names_a_cpu_claim_its_replicas_share(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inv = tmp_path / "cpu.json"
    extra = [CPU_CLASS, cpu_slice("gpu-a"), cpu_claim("cpus", 2)]
    inv.write_text(json.dumps({"kind": "List", "items": inventory(extra)}))
    spec = cpu_pod("cpus", cpu_container("a", "2"))["spec"]
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "ml"},
        "spec": {"replicas": 3, "template": {"spec": spec}},
    }
    manifest = _write(tmp_path, deployment)
    code, out, _ = run(capsys, "explain", "--inventory", str(inv), "-o", "json", manifest)
    assert code == 0  # noRoomNow warns by default
    found = [f for f in json.loads(out)["claims"]["cpuDriver"] if f["code"] == "draCpuSharedClaim"]
    assert [f["severity"] for f in found] == ["no-room-now"]
    assert "(ResourceClaim ml/cpus) shared by 3 concurrent pods" in found[0]["message"]
