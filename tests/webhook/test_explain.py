"""`numagate explain`: the DESIGN 4.4 JSON contract and the table, on real inventory files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from webhook.cli import main

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "webhook" / "data" / "demo-inventory.yaml"

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "p",
        "namespace": "default",
        "annotations": {"volcano.sh/numa-topology-policy": "restricted"},
    },
    "spec": {
        "schedulerName": "volcano",
        "containers": [{"name": "c", "resources": {"limits": {"cpu": "2", "memory": "2Gi"}}}],
    },
}


def write_demo_files(tmp_path: Path, manifest: dict | None = None) -> tuple[Path, Path]:
    """The demo inventory and a pod manifest, as explain reads them."""
    inv = tmp_path / "inventory.yaml"
    inv.write_text(DEMO.read_text())
    pod_file = tmp_path / "pod.yaml"
    pod_file.write_text(yaml.safe_dump(manifest or POD))
    return inv, pod_file


def explain(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["explain", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_json_contract(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inv, manifest = write_demo_files(tmp_path)
    code, out, _ = explain(capsys, "--inventory", str(inv), "-o", "json", str(manifest))
    assert code == 0
    doc = json.loads(out)
    assert list(doc) == ["object", "intent", "nodes", "ranking", "decision"]
    assert doc["object"] == {"kind": "Pod", "namespace": "default", "name": "p"}
    assert doc["intent"] == {
        "scheduler": "volcano",
        "policy": "restricted",
        "exclusive": None,
        "scope": None,
        "qos": "Guaranteed",
        "requests": {"cpu": "2", "memory": "2Gi"},
    }
    for n in doc["nodes"]:
        assert list(n) == ["name", "verdict", "numa", "preferred", "score", "reason"]
    fits = [n["name"] for n in doc["nodes"] if n["verdict"] == "fits"]
    assert fits and sorted(doc["ranking"]) == sorted(fits)
    assert doc["nodes"][0]["verdict"] == "fits"  # useful rows first
    assert doc["decision"] == {"allowed": True, "message": "", "warnings": [], "patch": []}


def test_table_shows_verdicts_and_decision(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    impossible = json.loads(json.dumps(POD))
    impossible["metadata"]["annotations"]["volcano.sh/numa-topology-policy"] = "single-numa-node"
    impossible["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "40"
    inv, manifest = write_demo_files(tmp_path, impossible)
    code, out, _ = explain(capsys, "--inventory", str(inv), str(manifest))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("Pod default/p: scheduler volcano, policy single-numa-node")
    assert any(line.startswith("NODE") and "VERDICT" in line and "REASON" in line for line in lines)
    assert any("never-fits" in line and "needs 2 NUMA nodes" in line for line in lines)
    assert any(line.startswith("decision: DENY") for line in lines)


def _big_inventory(path: Path, count: int) -> None:
    docs = []
    for i in range(count):
        docs.append(
            {
                "apiVersion": "topology.node.k8s.io/v1alpha2",
                "kind": "NodeResourceTopology",
                "metadata": {"name": f"w-{i:03d}"},
                "attributes": [{"name": "topologyManagerPolicy", "value": "single-numa-node"}],
                "zones": [
                    {
                        "name": f"node-{z}",
                        "type": "Node",
                        "resources": [
                            {
                                "name": "cpu",
                                "capacity": "8",
                                "allocatable": "8",
                                "available": "8" if i % 3 else "1",
                            },
                        ],
                    }
                    for z in range(2)
                ],
            }
        )
    path.write_text(yaml.safe_dump_all(docs))


def test_large_cluster_summary_and_all(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inv = tmp_path / "big.yaml"
    _big_inventory(inv, 60)
    manifest = tmp_path / "pod.yaml"
    plain = json.loads(json.dumps(POD))
    plain["metadata"]["annotations"] = {}
    plain["spec"].pop("schedulerName")
    plain["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "4"
    manifest.write_text(yaml.safe_dump(plain))
    code, out, _ = explain(capsys, "--inventory", str(inv), str(manifest))
    assert code == 0
    assert "60 nodes: 40 fits, 20 no-room-now" in out
    assert "... 40 more nodes (use --all" in out
    code, out, _ = explain(capsys, "--inventory", str(inv), "--all", str(manifest))
    assert sum(1 for line in out.splitlines() if line.startswith("w-")) == 60


def test_unreadable_inputs_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inv, manifest = write_demo_files(tmp_path)
    code, _, err = explain(capsys, "--inventory", str(tmp_path / "missing.yaml"), str(manifest))
    assert code == 2 and "missing.yaml" in err
    cm = tmp_path / "cm.yaml"
    cm.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    code, _, err = explain(capsys, "--inventory", str(inv), str(cm))
    assert code == 2 and "no Pod or workload" in err
