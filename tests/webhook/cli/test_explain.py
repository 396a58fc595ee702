"""`numagate explain`: the docs/contracts.md: explain -o json JSON contract and the table, on real inventory files;
the decision is the webhooks' own answer (patch from the mutating webhook, allowed/message
from the validating one), checked against `numagate review` and applied with jsonpatch."""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import re
from pathlib import Path
from typing import Any

import jsonpatch
import kubernetes_validate
import pytest
import yaml

from core.intent.workloads import pod_templates
from tests.builders.objects import MANIFESTS, build_review
from tests.paths import ROOT
from tests.webhook.cli.demo_files import DEMO, POD, write_demo_files
from tests.webhook.harness import (
    call,
    decode_patch,
    runtime,
)
from webhook.cli.explain_report import pod_for_template, template_pointer
from webhook.cli.main import main

K8S_VERSION = "1.37.0"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


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
    decision = doc["decision"]
    assert list(decision) == ["allowed", "message", "warnings", "patch"]
    assert decision["allowed"] is True and decision["message"] == ""
    # the mutating webhook restricts the pod to the nodes with Volcano's exact policy
    pod = jsonpatch.JsonPatch(decision["patch"]).apply(copy.deepcopy(POD))
    terms = pod["spec"]["affinity"]["nodeAffinity"][REQUIRED]["nodeSelectorTerms"]
    allowed_nodes = {v for t in terms for f in t["matchFields"] for v in f["values"]}
    assert set(doc["ranking"]) <= allowed_nodes
    assert "gpu-1" not in allowed_nodes  # single-numa-node: a policy mismatch for Volcano


def test_table_shows_verdicts_and_decision(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    impossible = json.loads(json.dumps(POD))
    impossible["metadata"]["annotations"]["volcano.sh/numa-topology-policy"] = "single-numa-node"
    impossible["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "40"
    inv, manifest = write_demo_files(tmp_path, impossible)
    code, out, _ = explain(capsys, "--inventory", str(inv), str(manifest))
    assert code == 1  # a denial: explain fails a CI step as the webhook would
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


# ------------------------------------------------------------------ decision = the webhooks


def admission_review(obj: dict[str, Any], *, kind: str, namespace: str, name: str) -> bytes:
    """The AdmissionReview v1 dry-run CREATE the apiserver would send for ``obj``."""
    group, _, version = str(obj.get("apiVersion") or "v1").rpartition("/")
    request = {
        "uid": "numagate-explain",
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": kind.lower() + "s"},
        "name": name,
        "namespace": namespace,
        "operation": "CREATE",
        "userInfo": {"username": "numagate-explain"},
        "object": obj,
        "dryRun": True,
    }
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    return json.dumps(review).encode()


def _review_cli(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    inv: Path,
    obj: dict[str, Any],
    hook: str,
    *config: str,
) -> dict[str, Any]:
    """`numagate review --webhook HOOK` on a CREATE review of ``obj``: its response."""
    kind, meta = obj["kind"], obj["metadata"]
    name = meta.get("name") or meta.get("generateName", "")
    review = tmp_path / f"review-{hook}.json"
    review.write_bytes(
        admission_review(obj, kind=kind, namespace=meta.get("namespace", "default"), name=name)
    )
    code = main(["review", "--inventory", str(inv), *config, "--webhook", hook, str(review)])
    out = capsys.readouterr().out
    assert code == 0
    response: dict[str, Any] = json.loads(out)["response"]
    return response


def _ops(response: dict[str, Any]) -> list[dict[str, Any]]:
    return json.loads(base64.b64decode(response["patch"])) if "patch" in response else []


def _explain_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, _ = explain(capsys, *argv, "-o", "json")
    doc: dict[str, Any] = json.loads(out)
    assert code == (0 if doc["decision"]["allowed"] else 1)  # 1: denied
    return doc


SCARCE_CONFIGS = {
    "default": {},
    # the scarce stage extends what the policy stage added: explain must print the
    # operations as sent, not as extended in place
    "scarce-preferred": {"affinity": {"mode": "node-names"}, "scarce": {"enabled": True}},
    "scarce-required": {
        "scarce": {
            "enabled": True,
            "required": True,
            "resources": ["nvidia.com/gpu", "amd.com/gpu"],
        }
    },
}


@pytest.mark.parametrize("config", sorted(SCARCE_CONFIGS))
@pytest.mark.parametrize(
    "name", ["koord-pod-misspelled", "koord-pod-user-affinity", "volcano-pod", "plain-pod"]
)
def test_pod_patch_is_the_mutating_webhooks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, config: str
) -> None:
    pod = yaml.safe_load((MANIFESTS / f"{name}.yaml").read_text())
    inv, manifest = write_demo_files(tmp_path, pod)
    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump(SCARCE_CONFIGS[config]))
    cfg = ("--config", str(config_file))
    doc = _explain_json(capsys, "--inventory", str(inv), *cfg, str(manifest))
    mutate = _review_cli(capsys, tmp_path, inv, pod, "mutate", *cfg)
    assert doc["decision"]["patch"] == _ops(mutate)
    mutated = jsonpatch.JsonPatch(doc["decision"]["patch"]).apply(copy.deepcopy(pod))
    kubernetes_validate.validate(mutated, K8S_VERSION, strict=True)
    # the apiserver calls the validating webhook with the mutated object
    validate = _review_cli(capsys, tmp_path, inv, mutated, "validate", *cfg)
    assert doc["decision"]["allowed"] == validate["allowed"]
    assert doc["decision"]["message"] == validate.get("status", {}).get("message", "")
    for warning in validate.get("warnings", []) + mutate.get("warnings", []):
        assert warning in doc["decision"]["warnings"]


def test_misspelled_pod_patch_normalizes_and_restricts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pod = yaml.safe_load((MANIFESTS / "koord-pod-misspelled.yaml").read_text())
    inv, manifest = write_demo_files(tmp_path, pod)
    doc = _explain_json(capsys, "--inventory", str(inv), str(manifest))
    paths = {op["path"].split("/")[2] for op in doc["decision"]["patch"]}
    assert paths == {"annotations", "affinity"}
    assert any("singlenumanode" in w for w in doc["decision"]["warnings"])


def test_denial_is_the_validating_webhooks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pod = json.loads(json.dumps(POD))
    pod["metadata"]["annotations"]["volcano.sh/numa-topology-policy"] = "single-numa-node"
    pod["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "40"
    inv, manifest = write_demo_files(tmp_path, pod)
    doc = _explain_json(capsys, "--inventory", str(inv), str(manifest))
    mutated = jsonpatch.JsonPatch(doc["decision"]["patch"]).apply(copy.deepcopy(pod))
    validate = _review_cli(capsys, tmp_path, inv, mutated, "validate")
    assert validate["allowed"] is False and doc["decision"]["allowed"] is False
    assert doc["decision"]["message"] == validate["status"]["message"] != ""
    # the modes apply as in the server: warn turns the denial into a warning
    cfg = tmp_path / "warn.yaml"
    cfg.write_text("modes: {feasibility: warn}\n")
    warned = _explain_json(capsys, "--inventory", str(inv), "--config", str(cfg), str(manifest))
    assert warned["decision"]["allowed"] is True and warned["decision"]["message"] == ""
    assert warned["decision"]["warnings"]


VOLCANO_JOB = {
    "apiVersion": "batch.volcano.sh/v1alpha1",
    "kind": "Job",
    "metadata": {"name": "vj", "namespace": "default"},
    "spec": {
        "schedulerName": "volcano",
        "minAvailable": 1,
        "tasks": [
            {
                "name": "worker",
                "replicas": 1,
                "topologyPolicy": "restricted",
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "w",
                                "image": "alpine",
                                "resources": {"limits": {"cpu": "2", "memory": "1Gi"}},
                            }
                        ]
                    }
                },
            }
        ],
    },
}


@pytest.mark.parametrize(
    ("obj", "base"),
    [
        (yaml.safe_load((MANIFESTS / "deployment-impossible.yaml").read_text()), "/spec/template"),
        (VOLCANO_JOB, "/spec/tasks/0/template"),
    ],
    ids=["deployment", "volcano-job"],
)
def test_workload_patch_is_rooted_at_the_template(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], obj: dict[str, Any], base: str
) -> None:
    workload = copy.deepcopy(obj)
    if workload["kind"] == "Deployment":  # a size that fits: the patch is about placement
        limits = workload["spec"]["template"]["spec"]["containers"][0]["resources"]
        limits["requests"] = limits["limits"] = {"cpu": "4", "memory": "4Gi"}
        annotations = workload["spec"]["template"]["metadata"]["annotations"]
        annotations["scheduling.koordinator.sh/numa-topology-spec"] = (
            '{"numaTopologyPolicy":"singlenumanode"}'
        )
    inv, manifest = write_demo_files(tmp_path, workload)
    doc = _explain_json(capsys, "--inventory", str(inv), str(manifest))
    patch = doc["decision"]["patch"]
    assert patch and all(op["path"].startswith(base + "/") for op in patch)
    patched = jsonpatch.JsonPatch(patch).apply(copy.deepcopy(workload))
    # the template now carries what the mutating webhook gives the pods made from it
    template = pod_templates(workload)[0]
    pod = pod_for_template(template)
    mutated_pod = jsonpatch.JsonPatch(
        _ops(_review_cli(capsys, tmp_path, inv, pod, "mutate"))
    ).apply(pod)
    node = jsonpatch.JsonPointer(base).resolve(patched)
    assert node["spec"] == mutated_pod["spec"]
    own = (node.get("metadata") or {}).get("annotations") or {}
    extra = set(template.extra_annotations)
    assert own == {
        k: v for k, v in mutated_pod["metadata"]["annotations"].items() if k not in extra
    }
    if workload["kind"] == "Job":
        # the task's topologyPolicy stays the task's: not copied into the template
        assert not extra & set(own)
    else:
        kubernetes_validate.validate(patched, K8S_VERSION, strict=True)


@pytest.mark.parametrize(
    ("path", "pointer"),
    [
        ("", ""),
        ("spec.template", "/spec/template"),
        ("spec.jobTemplate.spec.template", "/spec/jobTemplate/spec/template"),
        ("spec.tasks[12].template", "/spec/tasks/12/template"),
    ],
)
def test_template_pointer(path: str, pointer: str) -> None:
    assert template_pointer(path) == pointer


# ------------------------------------------------------------------ REASON of `fits` rows


def test_fits_rows_explain_placement_and_score(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = yaml.safe_load((MANIFESTS / "plain-pod.yaml").read_text())
    inv, manifest = write_demo_files(tmp_path, plain)
    doc = _explain_json(capsys, "--inventory", str(inv), str(manifest))
    fits = [n for n in doc["nodes"] if n["verdict"] == "fits"]
    assert fits
    for n in fits:
        if n["numa"]:
            zones = ",".join(map(str, n["numa"]))
            assert n["reason"].startswith(
                f"fits on NUMA node{'s' if len(n['numa']) > 1 else ''} {zones}"
            )
        assert f"= {n['score']}" in n["reason"]  # the scoring explanation, ending in the score
    code, out, _ = explain(capsys, "--inventory", str(inv), str(manifest))
    assert code == 0
    rows = [line for line in out.splitlines() if " fits " in line]
    assert len(rows) == len(fits)
    for line, n in zip(rows, fits, strict=True):
        assert line.startswith(n["name"]) and line.rstrip().endswith(n["reason"])


# ------------------------------------------------------------------ each scheduler's ranking

SCORING = ROOT / "tests" / "fixtures" / "scoring"


def _config_with_scoring(tmp_path: Path, scheduler_args: str) -> Path:
    """A numagate configuration whose ``scoring`` section is a seed scheduler-args file."""
    cfg = tmp_path / f"config-{scheduler_args}"
    cfg.write_text(
        yaml.safe_dump({"scoring": yaml.safe_load((SCORING / scheduler_args).read_text())})
    )
    return cfg


def _pod(scheduler: str, annotations: dict[str, str], limits: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "annotations": annotations},
        "spec": {
            "schedulerName": scheduler,
            "containers": [{"name": "c", "image": "x", "resources": {"limits": limits}}],
        },
    }


def _explain_pod(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    inventory: Path,
    pod: dict[str, Any],
    *extra: str,
) -> dict[str, Any]:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(yaml.safe_dump(pod))
    return _explain_json(capsys, "--inventory", str(inventory), *extra, str(manifest))


def _scores(doc: dict[str, Any]) -> dict[str, int]:
    return {n["name"]: n["score"] for n in doc["nodes"] if n["verdict"] == "fits"}


def _best_first(doc: dict[str, Any], *, higher: bool = True) -> None:
    scores = [_scores(doc)[name] for name in doc["ranking"]]
    assert scores == sorted(scores, reverse=higher)


def test_volcano_seed_750_500_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Seed 001/002: weight 10, nodes needing 1, 2 and 4 NUMA nodes -> 750, 500, 0."""
    pod = _pod(
        "volcano", {"volcano.sh/numa-topology-policy": "restricted"}, {"cpu": "12", "memory": "4Gi"}
    )
    inventory = SCORING / "volcano-750-500-0.yaml"
    cfg = _config_with_scoring(tmp_path, "volcano-numa-aware.yaml")
    doc = _explain_pod(tmp_path, capsys, inventory, pod, "--config", str(cfg))
    assert doc["ranking"] == ["node-a", "node-b", "node-c"]
    assert _scores(doc) == {"node-a": 750, "node-b": 500, "node-c": 0}
    assert {n["name"]: len(n["numa"]) for n in doc["nodes"]} == {
        "node-a": 1,
        "node-b": 2,
        "node-c": 4,
    }
    # without the configuration: Volcano's default weight 1
    plain = _explain_pod(tmp_path, capsys, inventory, pod)
    assert _scores(plain) == {"node-a": 75, "node-b": 50, "node-c": 0}
    assert plain["ranking"] == doc["ranking"]


def test_koordinator_fitplus_and_scarce_from_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The v1.6 NodeResourcesFitPlus + ScarceResourceAvoidance args (seed 004): a CPU-only
    pod ranks the GPU node last; without the args the NUMA score alone decides."""
    pod = _pod(
        "koord-scheduler",
        {"scheduling.koordinator.sh/numa-topology-spec": '{"numaTopologyPolicy":"SingleNUMANode"}'},
        {"cpu": "4", "memory": "4Gi"},
    )
    plain = _explain_pod(tmp_path, capsys, DEMO, pod)
    assert "gpu-1" in plain["ranking"] and plain["ranking"][-1] != "gpu-1"
    _best_first(plain)
    cfg = _config_with_scoring(tmp_path, "koordinator-fitplus.yaml")
    doc = _explain_pod(tmp_path, capsys, DEMO, pod, "--config", str(cfg))
    assert sorted(doc["ranking"]) == sorted(plain["ranking"])
    assert doc["ranking"][-1] == "gpu-1"
    _best_first(doc)
    scarce = {name: _scarce(doc, name, weight=2) for name in doc["ranking"]}
    # (|diff| - |hit|) * 100 / |diff|: gpu-1 has nvidia.com/gpu the pod does not request
    assert scarce["gpu-1"] < 100
    assert all(value == 100 for name, value in scarce.items() if name != "gpu-1")
    reasons = {n["name"]: n["reason"] for n in doc["nodes"]}
    assert all("NodeResourcesFitPlus" in reasons[name] for name in doc["ranking"])


def _scarce(doc: dict[str, Any], name: str, *, weight: int) -> int:
    reason = next(n["reason"] for n in doc["nodes"] if n["name"] == name)
    found = re.search(rf"ScarceResourceAvoidance [^+]*?= (\d+) x{weight}\b", reason)
    assert found, reason
    return int(found.group(1))


def test_koordinator_profile_weights_from_a_kube_scheduler_configuration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pod = _pod(
        "koord-scheduler",
        {"scheduling.koordinator.sh/numa-topology-spec": '{"numaTopologyPolicy":"SingleNUMANode"}'},
        {"cpu": "4", "memory": "4Gi"},
    )
    plain = _scores(_explain_pod(tmp_path, capsys, DEMO, pod))
    cfg = _config_with_scoring(tmp_path, "kube-scheduler-config.yaml")
    doc = _explain_pod(tmp_path, capsys, DEMO, pod, "--config", str(cfg))
    # koord-scheduler profile: NodeNUMAResource x3, ScarceResourceAvoidance x5
    for name, score in _scores(doc).items():
        scarce = _scarce(doc, name, weight=5)
        assert scarce == (66 if name == "gpu-1" else 100)  # gpu-1: (3 - 1) * 100 // 3
        assert score == 3 * plain[name] + 5 * scarce
    assert doc["ranking"][-1] == "gpu-1"
    _best_first(doc)


HAMI_NODES = SCORING / "hami-nodes.yaml"


def test_hami_node_policy_binpack_spread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """HAMi's node policy: binpack (default) the busier node first, spread the idler."""
    pod = _pod("hami-scheduler", {}, {"nvidia.com/gpu": "1"})
    binpack = _explain_pod(tmp_path, capsys, HAMI_NODES, pod)
    assert binpack["ranking"] == ["hami-busy", "hami-idle"]
    _best_first(binpack)
    cfg = tmp_path / "spread.yaml"
    cfg.write_text("scoring:\n  hami: {nodeSchedulerPolicy: spread}\n")
    spread = _explain_pod(tmp_path, capsys, HAMI_NODES, pod, "--config", str(cfg))
    assert spread["ranking"] == ["hami-idle", "hami-busy"]
    _best_first(spread, higher=False)
    assert _scores(spread) == _scores(binpack)
    # the pod's own annotation wins over the configured default
    annotated = _pod(
        "hami-scheduler", {"hami.io/node-scheduler-policy": "binpack"}, {"nvidia.com/gpu": "1"}
    )
    again = _explain_pod(tmp_path, capsys, HAMI_NODES, annotated, "--config", str(cfg))
    assert again["ranking"] == ["hami-busy", "hami-idle"]


def test_hami_topology_aware_seed_cards(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Seed 003: three GPUs topology-aware -> gpu1, gpu2, gpu3 (pair total 500); one GPU ->
    a card of the lowest link total (gpu0 or gpu1; HAMi finds gpu1 first)."""
    three = _pod(
        "hami-scheduler",
        {"hami.io/gpu-scheduler-policy": "topology-aware"},
        {"nvidia.com/gpu": "3"},
    )
    doc = _explain_pod(tmp_path, capsys, HAMI_NODES, three)
    reasons = {n["name"]: n["reason"] for n in doc["nodes"]}
    found = re.search(r"cards ([\w,]+) \(", reasons["hami-idle"])
    assert found and sorted(found.group(1).split(",")) == ["gpu1", "gpu2", "gpu3"]
    one = _pod(
        "hami-scheduler",
        {"hami.io/gpu-scheduler-policy": "topology-aware"},
        {"nvidia.com/gpu": "1"},
    )
    doc = _explain_pod(tmp_path, capsys, HAMI_NODES, one)
    reason = {n["name"]: n["reason"] for n in doc["nodes"]}["hami-idle"]
    # worst link total (gpu0 and gpu1: 400); Fit walks from the end, so gpu1 is found first
    assert "cards gpu1 (" in reason


def test_hami_gpu_pod_on_the_demo_shows_the_cards(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The demo's gpu-1 carries HAMi's register and link scores: cards 0 and 1 are taken,
    NVLink bridges 2-3 and 4-5; topology-aware picks a bridged pair, walking from the tail.
    Card usage comes from the bound pod infer-0's hami.io/vgpu-devices-allocated."""
    pod = _pod(
        "hami-scheduler",
        {"hami.io/gpu-scheduler-policy": "topology-aware"},
        {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "2"},
    )
    doc = _explain_pod(tmp_path, capsys, DEMO, pod)
    assert doc["ranking"] == ["gpu-1"]
    gpu = next(n for n in doc["nodes"] if n["name"] == "gpu-1")
    assert "hami node score 10*(used 2/8 + cores 200/800" in gpu["reason"]
    assert "cards GPU-a100-demo-5,GPU-a100-demo-4" in gpu["reason"]
    spread = _pod("hami-scheduler", {}, {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "1"})
    doc = _explain_pod(tmp_path, capsys, DEMO, spread)
    gpu = next(n for n in doc["nodes"] if n["name"] == "gpu-1")
    # cards 0 and 1 are held by infer-0; spread sorts the idle cards last and Fit walks from
    # the end: the last registered idle card
    assert "cards GPU-a100-demo-7 (" in gpu["reason"]
    code, out, _ = explain(capsys, "--inventory", str(DEMO), str(tmp_path / "pod.yaml"))
    assert code == 0 and "cards GPU-a100-demo-7" in out


def test_default_scheduler_fewest_numa_nodes_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pod = _pod("default-scheduler", {}, {"cpu": "2", "memory": "2Gi"})
    doc = _explain_pod(tmp_path, capsys, DEMO, pod)
    _best_first(doc)
    numa = {n["name"]: n["numa"] for n in doc["nodes"] if n["verdict"] == "fits"}
    # koord-none-1 has no policy: no alignment, the pod may use both NUMA nodes -> last
    assert doc["ranking"][-1] == "koord-none-1" and numa["koord-none-1"] == []
    assert all(len(numa[name]) == 1 for name in doc["ranking"][:-1])


def test_bad_scoring_config_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inv, manifest = write_demo_files(tmp_path)
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(
        "scoring:\n  pluginConfig:\n  - name: NodeResourcesFitPlus\n    args:\n"
        "      resources: {cpu: {type: Most, weight: 1}}\n"
    )
    code, out, err = explain(capsys, "--inventory", str(inv), "--config", str(cfg), str(manifest))
    assert code == 2 and out == ""
    assert "scoring.pluginConfig.0.args.resources.cpu.type" in err and "'Most'" in err
    assert "MostAllocated" in err


def test_workload_decision_is_the_validation_of_the_workload(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The mutating webhook changes Pods only: a workload's allowed/message is the
    validating webhook's answer for the workload as written."""
    job = copy.deepcopy(VOLCANO_JOB)
    job["spec"]["tasks"][0]["template"]["metadata"] = {
        "annotations": {"volcano.sh/numa-topology-policy": "single-numa-node"}
    }
    inv, manifest = write_demo_files(tmp_path, job)
    doc = _explain_json(capsys, "--inventory", str(inv), str(manifest))
    validate = _review_cli(capsys, tmp_path, inv, job, "validate")
    assert validate["allowed"] is False and doc["decision"]["allowed"] is False
    assert doc["decision"]["message"] == validate["status"]["message"]
    assert "topologyPolicy" in doc["decision"]["message"]


@pytest.mark.parametrize(
    "template_metadata",
    [{"annotations": [1]}, {"annotations": {"a": 1}}, "x", None],
    ids=["annotations-list", "annotation-int", "metadata-string", "no-metadata"],
)
def test_malformed_templates_get_a_decision_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], template_metadata: Any
) -> None:
    deployment = yaml.safe_load((MANIFESTS / "deployment-impossible.yaml").read_text())
    if template_metadata is None:
        del deployment["spec"]["template"]["metadata"]
    else:
        deployment["spec"]["template"]["metadata"] = template_metadata
    inv, manifest = write_demo_files(tmp_path, deployment)
    code, out, err = explain(capsys, "--inventory", str(inv), "-o", "json", str(manifest))
    assert "Traceback" not in err
    decision = json.loads(out)["decision"]
    assert code == (0 if decision["allowed"] else 1)
    # whatever the template looks like, the patch applies to the workload
    jsonpatch.JsonPatch(decision["patch"]).apply(copy.deepcopy(deployment))


# ------------------------------------------------------------------ deny message = explain's verdicts

_COUNTED = ("never-fits", "policy-mismatch", "not-selected")
_USER_TERM = {
    "matchExpressions": [{"key": "kubernetes.io/os", "operator": "NotIn", "values": ["windows"]}]
}


def _message_counts(message: str) -> dict[str, int]:
    """The verdict counts a deny message names: ``(1 never-fits, 3 policy-mismatch)``."""
    found = re.search(r"can ever run this pod under .*? \(([^)]*)\)", message)
    assert found, message
    counts = {}
    for part in found[1].split(", "):
        number, verdict = part.split(" ", 1)
        counts[verdict] = int(number)
    return counts


@pytest.mark.parametrize("mode", ["auto", "label", "node-names"])
@pytest.mark.parametrize("inventory", ["inventory-small.yaml", "cce-volcano.yaml"])
@pytest.mark.parametrize("user_affinity", [False, True])
def test_deny_message_names_the_verdicts_explain_shows(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    mode: str,
    inventory: str,
    user_affinity: bool,
) -> None:
    """mutate, its patch applied with jsonpatch, validate: the verdicts the deny message
    counts (and its closest node) are those of explain's table, not the `not-selected` of
    the affinity numagate itself injected."""
    inv = (
        ROOT
        / "tests"
        / "fixtures"
        / ("manifests" if "small" in inventory else "inventory")
        / inventory
    )
    pod = yaml.safe_load((MANIFESTS / "koord-pod-impossible.yaml").read_text())
    if user_affinity:
        pod["spec"]["affinity"] = {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [_USER_TERM]}}}
    rt = runtime({"affinity": {"mode": mode}}, inventory=inv)
    ops = decode_patch(asyncio.run(call(rt, "mutate", build_review(pod))))
    assert ops, "the policy affinity is injected"
    mutated = jsonpatch.apply_patch(pod, ops)
    assert mutated["spec"]["affinity"] != pod["spec"].get("affinity")
    response = asyncio.run(call(rt, "validate", build_review(mutated)))
    assert response["allowed"] is False
    message = response["status"]["message"]

    manifest = tmp_path / "pod.yaml"
    manifest.write_text(yaml.safe_dump(pod))
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"affinity": {"mode": mode}}))
    doc = _explain_json(capsys, "--inventory", str(inv), "--config", str(config), str(manifest))
    verdicts = [n["verdict"] for n in doc["nodes"]]
    expected = {v: verdicts.count(v) for v in _COUNTED if verdicts.count(v)}
    assert _message_counts(message) == expected
    assert "policy-mismatch" in expected and "not-selected" not in expected
    closest = re.search(r"; closest: ([^:]+):", message)
    assert closest and closest[1] in {n["name"] for n in doc["nodes"] if n["verdict"] != "fits"}
    assert doc["decision"]["message"] == message  # explain's decision is the webhook's


def test_yaml_output_and_exit_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """-o yaml is the -o json report; exit 0 allowed, 1 denied (as in every output)."""
    inv = MANIFESTS / "inventory-small.yaml"
    for name, want in (("koord-pod", 0), ("koord-pod-impossible", 1)):
        manifest = str(MANIFESTS / f"{name}.yaml")
        code_json, as_json, _ = explain(capsys, "--inventory", str(inv), "-o", "json", manifest)
        code_yaml, as_yaml, _ = explain(capsys, "--inventory", str(inv), "-o", "yaml", manifest)
        code_table, table, _ = explain(capsys, "--inventory", str(inv), manifest)
        assert code_json == code_yaml == code_table == want
        assert yaml.safe_load(as_yaml) == json.loads(as_json)
        assert ("decision: DENY" in table) is bool(want)
    code, out, err = explain(capsys, "--inventory", str(inv), "-o", "yaml", str(tmp_path / "x"))
    assert code == 2 and out == "" and "x" in err


def test_koordinator_held_cpus_per_numa_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # issue 30: the CPUs koord-scheduler holds back, per NUMA node, in the row and the JSON
    detail = [{"id": c, "core": c // 2, "socket": c // 16, "node": c // 16} for c in range(32)]
    annotations = {
        "node.koordinator.sh/cpu-topology": json.dumps({"detail": detail}),
        "kubelet.koordinator.sh/cpu-manager-policy": json.dumps(
            {"policy": "static", "reservedCPUs": "0-1"}
        ),
        "node.koordinator.sh/pod-cpu-allocs": json.dumps(
            [{"uid": "u", "cpuset": "2-9", "managedByKubelet": True}]
        ),
    }
    zones = [
        {
            "name": f"node-{z}",
            "type": "Node",
            "resources": [{"name": "cpu", "capacity": "16", "allocatable": "16"}],
        }
        for z in (0, 1)
    ]
    docs = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": "k",
                "labels": {"node.koordinator.sh/numa-topology-policy": "SingleNUMANode"},
            },
            "status": {"allocatable": {"cpu": "32", "memory": "64Gi", "pods": "110"}},
        },
        {
            "apiVersion": "topology.node.k8s.io/v1alpha2",
            "kind": "NodeResourceTopology",
            "metadata": {"name": "k", "annotations": annotations},
            "zones": zones,
        },
    ]
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump_all(docs))
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {
            "schedulerName": "koord-scheduler",
            "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "10"}}}
            ],
        },
    }
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(yaml.safe_dump(pod))
    code, out, err = explain(capsys, "--inventory", str(inv), str(manifest))
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.startswith("k "))
    assert "fits on NUMA node 1" in row  # NUMA 0 has 6 CPUs free, not 16
    assert "NUMA 0: 16 CPUs, 2 reserved by the kubelet, 8 held by kubelet-managed pods" in row
    code, out, _ = explain(capsys, "--inventory", str(inv), "-o", "json", str(manifest))
    (node,) = json.loads(out)["nodes"]
    assert node["cpus_held"] == [
        {"numa": 0, "cpus": 16, "kubelet": 2, "pods": 8, "reservation": 0, "system-qos": 0},
        {"numa": 1, "cpus": 16, "kubelet": 0, "pods": 0, "reservation": 0, "system-qos": 0},
    ]
