"""The schedulers' current releases (issue 28), the cases that need an inventory: each
translated from the upstream test named, at the tag named.

- koordinator v1.8.0 ``pkg/koordlet/statesinformer/impl/states_noderesourcetopology_test.go
  Test_applyNUMAReservationToZoneResources``: with ``node.koordinator.sh/enable-numa-reservation:
  "true"`` koordlet deducts ceil(kubelet reserved / NUMA count) from each zone's allocatable
  in the NRT (capacity unchanged); koord-scheduler reads the zones as reported, and so does
  numagate.
- HAMi v2.10.0 ``pkg/device/nvidia/device_test.go TestFit_DeviceCordon``: the node annotation
  ``hami.io/device-cordon`` takes cards out of new allocations.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from core.intent.read import read_intent
from core.intent.workloads import pod_templates
from core.inventory.build import build_inventory
from core.scoring import hami, hami_devices
from core.scoring.rank import choose_gpus_for
from tests.builders import objects as k8s
from tests.core.upstream_cases import run

GI = 2**30


def koord_reserved_node(allocatable_cpu: str) -> list[dict[str, Any]]:
    """Case "apply reservation to 2 numa nodes with cpu and memory": 48 CPUs and 120 GiB per
    NUMA node, kubelet reserved 4 CPUs and 2 GiB: koordlet reports 46 CPUs, 119 GiB."""
    memory = ("128849018880", "127775277056" if allocatable_cpu == "46" else "128849018880")
    zones = [k8s.zone(i, {"cpu": ("48", allocatable_cpu), "memory": memory}) for i in (0, 1)]
    attributes = {"topologyManagerPolicy": "single-numa-node", "cpuManagerPolicy": "static"}
    return [
        k8s.node("n", {"cpu": "96", "memory": "240Gi", "pods": "110"}),
        k8s.nrt("n", zones, attributes=attributes),
    ]


def guaranteed(cpu: str) -> dict[str, Any]:
    return k8s.pod("p", [k8s.container("c", {"cpu": cpu, "memory": "1Gi"})])


@pytest.mark.parametrize(
    ("allocatable", "cpu", "verdict"),
    [
        ("46", "46", "fits"),
        ("46", "47", "never-fits"),  # the reservation's share is gone from each NUMA node
        ("48", "47", "fits"),  # without the label koordlet reports the whole zone
    ],
)
def test_apply_numa_reservation_to_zone_resources(allocatable: str, cpu: str, verdict: str) -> None:
    outcome = run(guaranteed(cpu), koord_reserved_node(allocatable))
    assert outcome.errors == ()
    assert outcome.verdicts["n"].verdict == verdict
    zone = outcome.nodes["n"].zones[0]
    assert zone.capacity["cpu"] == 48_000 and zone.allocatable["cpu"] == int(allocatable) * 1000


# ---- HAMi v2.10.0 hami.io/device-cordon (nvidia/device.go Fit, cordonedDevices) ----------

REGISTER = [
    {"id": f"dev-{i}", "index": i, "count": 100, "devmem": 128, "devcore": 100}
    | {"type": "NVIDIA", "numa": 0, "health": True}
    for i in (0, 1)
]
CORDON_REQ = hami.GpuRequest(nums=1, mem=64, cores=50)


def cards(cordon: str | None, usage: dict[str, tuple[int, int, int]] | None = None) -> tuple:
    annotations = {hami_devices.REGISTER_ANNOTATION: k8s.js(REGISTER)}
    if cordon is not None:
        annotations[hami_devices.CORDON_ANNOTATION] = cordon
    return hami.node_cards(annotations, usage or {})


def test_fit_device_cordon_skips_the_cordoned_card() -> None:
    """TestFit_DeviceCordon "cordoned device is skipped, healthy sibling still fits": the
    value "dev-1, " (trimmed, empty entries skipped)."""
    got = cards("dev-1, ")
    assert [c.cordoned for c in got] == [False, True]
    assert hami.card_refusal(got[1], CORDON_REQ) == "cordoned (hami.io/device-cordon)"
    assert hami.choose_gpus(got, [CORDON_REQ]).cards == ("dev-0",)


def test_fit_device_cordon_all_cordoned_fails() -> None:
    """ "all devices cordoned fails with CardCordoned reason"."""
    choice = hami.choose_gpus(cards("dev-0,dev-1"), [CORDON_REQ])
    assert choice.cards == () and "cordoned" in choice.reason


def test_fit_device_cordon_keeps_running_pods() -> None:
    """ "running pods on a cordoned device are unaffected": usage stays, the pod goes to dev-0."""
    got = cards("dev-1", {"dev-1": (1, 64, 50)})
    assert (got[1].used, got[1].usedmem, got[1].usedcores) == (1, 64, 50)
    assert hami.choose_gpus(got, [CORDON_REQ]).cards == ("dev-0",)


@pytest.mark.parametrize("cordon", [None, "", " , "])
def test_fit_device_cordon_absent_means_nothing_cordoned(cordon: str | None) -> None:
    """ "no annotation or no node info means nothing cordoned"; an empty value too."""
    assert not any(c.cordoned for c in cards(cordon))
    assert hami.choose_gpus(cards(cordon), [CORDON_REQ]).cards


# ---- HAMi v2.10.0 hami.io/device-scoring-weights on the pod (score.go calcScoreWithOptions) --


def _weighted_node() -> Any:
    """score_test.go TestCalcScoreUsesPodDeviceScoringWeights: gpu-a (used 1, 10 MiB, 90%
    cores) and gpu-b (used 7, 20 MiB, 10%) of 100 MiB each."""
    register = [
        {"id": uid, "index": i, "count": 10, "devmem": 100, "devcore": 100}
        | {"type": "NVIDIA", "numa": 0, "health": True}
        for i, uid in enumerate(("gpu-a", "gpu-b"))
    ]
    node = k8s.node(
        "n",
        {"nvidia.com/gpu": "20"},
        annotations={hami_devices.REGISTER_ANNOTATION: k8s.js(register)},
    )
    (built,) = build_inventory([node]).nodes
    return replace(built, gpu_usage={"gpu-a": (1, 10, 90), "gpu-b": (7, 20, 10)})


@pytest.mark.parametrize(
    ("annotation", "card"),
    [
        (None, "gpu-a"),
        ("slot=1,core=1,memory=3", "gpu-b"),
        (" memory = 3, slot = 1, core = 1 ", "gpu-b"),
    ],
)
def test_calc_score_uses_pod_device_scoring_weights(annotation: str | None, card: str) -> None:
    """The pod's own annotation (GetDeviceScoringWeightsByPod), binpack, a 40% memory card."""
    annotations = {"hami.io/gpu-scheduler-policy": "binpack"}
    if annotation is not None:
        annotations["hami.io/device-scoring-weights"] = annotation
    resources = {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "40"}
    pod = k8s.pod(
        "p",
        [k8s.container("c", resources)],
        annotations=annotations,
        scheduler="hami-scheduler",
    )
    result = read_intent(pod_templates(pod)[0])
    assert not [f for f in result.findings if f.severity == "error"]
    assert choose_gpus_for(result.intent, _weighted_node()).cards == (card,)
