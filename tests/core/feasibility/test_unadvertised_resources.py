"""Resources no node advertises (HAMi's nvidia.com/gpumem, gpucores) never make a pod
impossible: the kubelet drops extended resources missing from the node
(removeMissingExtendedResources) and HAMi's scheduler extender manages them."""

from __future__ import annotations

from importlib import resources

import yaml

from core.feasibility.decision import decide
from core.feasibility.verdicts import evaluate
from core.intent.read import read_intent
from core.intent.workloads import pod_templates
from core.inventory.build import build_inventory
from core.snapshot.snapshot import Snapshot


def _snapshot() -> Snapshot:
    text = resources.files("webhook").joinpath("data/demo-inventory.yaml").read_text("utf-8")
    inv = build_inventory([o for o in yaml.safe_load_all(text) if o])
    assert inv.errors == ()
    return Snapshot.build(inv.nodes)


def _pod(limits: dict[str, str]) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "annotations": {"hami.io/gpu-scheduler-policy": "binpack"}},
        "spec": {
            "schedulerName": "hami-scheduler",
            "containers": [{"name": "c", "image": "i", "resources": {"limits": limits}}],
        },
    }


def test_hami_virtual_resources_do_not_deny() -> None:
    snap = _snapshot()
    pod = _pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000", "nvidia.com/gpucores": "30"})
    intent = read_intent(pod_templates(pod)[0]).intent
    ev = evaluate(intent, snap)
    fits = [v.name for v in ev.verdicts if v.verdict == "fits"]
    assert fits == ["gpu-1"]  # the only node with nvidia.com/gpu
    assert decide(ev).allowed


def test_advertised_device_still_limits_nodes() -> None:
    snap = _snapshot()
    intent = read_intent(pod_templates(_pod({"nvidia.com/gpu": "64"}))[0]).intent
    ev = evaluate(intent, snap)
    assert {k: v for k, v in ev.counts.items() if v} == {"never-fits": 9, "unknown-topology": 1}
    # 64 GPUs exist on no node with NUMA data; the node without NUMA data keeps it allowed
    decision = decide(ev)
    assert decision.allowed
    assert "without NUMA data" in decision.warnings[0]
