"""The cluster-aware CLI against the test API server over TLS with a kubeconfig (token
auth, CA verification): explain and lint read the inventory from the cluster, explain
pod/NAME reads the pod, pending lists the pods that wait on a topology rule."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.paths import FIXTURES
from tests.webhook.fake_apiserver import FakeApiServer, running_apiserver
from webhook.cli.main import main

MANIFESTS = FIXTURES / "manifests"
INVENTORY = MANIFESTS / "inventory-small.yaml"


def pending(pod: dict[str, Any], namespace: str, name: str) -> dict[str, Any]:
    pod = copy.deepcopy(pod)
    pod["metadata"].update(namespace=namespace, name=name)
    pod["status"] = {"phase": "Pending"}
    return pod


@pytest.fixture
def cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[FakeApiServer, Path]]:
    monkeypatch.setenv("HOME", str(tmp_path))  # no kubeconfig of the machine leaks in
    monkeypatch.delenv("KUBECONFIG", raising=False)
    with running_apiserver(tmp_path, token="t0ken") as server:
        for obj in yaml.safe_load_all(INVENTORY.read_text()):
            server.apply(obj)
        impossible = yaml.safe_load((MANIFESTS / "koord-pod-impossible.yaml").read_text())
        koord = yaml.safe_load((MANIFESTS / "koord-pod.yaml").read_text())
        plain = yaml.safe_load((MANIFESTS / "plain-pod.yaml").read_text())
        server.apply(pending(impossible, "default", "koord-impossible"))
        server.apply(pending(koord, "team-a", "koord-waiting"))
        server.apply(pending(plain, "default", "plain"))  # waits for another reason
        yield server, server.write_kubeconfig(tmp_path / "kubeconfig")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_explain_reads_the_cluster_as_the_file_would_give_it(cluster, capsys):
    server, kubeconfig = cluster
    manifest = str(MANIFESTS / "koord-pod-impossible.yaml")
    code, from_cluster, err = run(
        capsys, "explain", "--kubeconfig", str(kubeconfig), "-o", "json", manifest
    )
    assert code == 1, err  # denied
    code, from_file, _ = run(
        capsys, "explain", "--inventory", str(INVENTORY), "-o", "json", manifest
    )
    assert code == 1 and json.loads(from_cluster) == json.loads(from_file)
    assert {r.path for r in server.requests} >= {"/api/v1/nodes", "/api/v1/pods"}


def test_explain_pod_name_with_the_default_kubeconfig(cluster, capsys, monkeypatch):
    server, kubeconfig = cluster
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))  # as kubectl: no flag needed
    code, out, err = run(capsys, "explain", "-o", "yaml", "pod/koord-impossible")
    doc = yaml.safe_load(out)
    assert code == 1, err
    assert doc["object"] == {"kind": "Pod", "namespace": "default", "name": "koord-impossible"}
    assert {n["name"] for n in doc["nodes"]} == {"busy-1", "restricted-1"}
    assert any(
        r.path == "/api/v1/namespaces/default/pods/koord-impossible" for r in server.requests
    )
    code, out, _ = run(capsys, "explain", "-n", "team-a", "pods/koord-waiting")
    assert code == 0 and "decision: ALLOW" in out
    code, out, err = run(capsys, "explain", "pod/nope")
    assert code == 2 and out == "" and 'pods "nope" not found' in err


def test_pending_lists_the_pods_a_topology_rule_holds(cluster, capsys):
    _, kubeconfig = cluster
    kc = ("--kubeconfig", str(kubeconfig))
    code, out, _ = run(capsys, "pending", *kc, "-n", "default", "-o", "json")
    assert code == 0
    [entry] = json.loads(out)["pods"]  # "plain" waits for another reason: not listed
    assert (entry["namespace"], entry["name"]) == ("default", "koord-impossible")
    assert entry["outcome"] == "impossible"
    assert entry["rule"] == "koordinator policy single-numa-node"
    assert entry["closest"]["node"] in {"busy-1", "restricted-1"} and entry["closest"]["reason"]
    assert sum(entry["nodes"].values()) == 2
    code, out, _ = run(capsys, "pending", *kc, "-A")
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == [
        "NAMESPACE",
        "NAME",
        "RULE",
        "OUTCOME",
        "NODES",
        "CLOSEST",
    ]
    assert [line.split()[:2] for line in lines[1:]] == [
        ["default", "koord-impossible"],
        ["team-a", "koord-waiting"],
    ]
    assert "no-room-now" in lines[2]
    code, out, err = run(capsys, "pending", *kc, "-n", "empty")
    assert code == 0 and out == "" and "No Pending pods in namespace empty" in err


def test_lint_checks_feasibility_against_the_cluster_only_when_asked(cluster, capsys):
    _, kubeconfig = cluster
    manifest = str(MANIFESTS / "koord-pod-impossible.yaml")
    code, out, _ = run(capsys, "lint", "-o", "json", "--kubeconfig", str(kubeconfig), manifest)
    assert code == 1 and [f["code"] for f in json.loads(out)["findings"]] == ["impossible"]
    code, out, _ = run(capsys, "lint", "-o", "json", manifest)  # offline: no cluster read
    assert code == 0 and json.loads(out)["findings"] == []


def test_cluster_errors_are_one_line(cluster, capsys, tmp_path):
    _, kubeconfig = cluster
    code, _, err = run(capsys, "pending", "-n", "default")  # no kubeconfig anywhere
    assert code == 2 and "no cluster configuration" in err and "Traceback" not in err
    bad = tmp_path / "bad-token"
    bad.write_text(kubeconfig.read_text().replace("t0ken", "wrong"))
    code, _, err = run(capsys, "pending", "--kubeconfig", str(bad), "-A")
    assert code == 2 and err.startswith("numagate pending: 401") and "Traceback" not in err
    code, _, err = run(
        capsys, "explain", "--context", "nope", "--kubeconfig", str(kubeconfig), "pod/x"
    )
    assert code == 2 and "context 'nope'" in err
