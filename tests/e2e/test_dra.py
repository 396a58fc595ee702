"""DRA ground truth from the real kube-scheduler: for every case of
tests/fixtures/dra/cases.yaml, the ResourceSlices are created on kwok nodes (no driver
needed: the scheduler's DRA allocator only reads slices), then the pod; numagate's verdict
(core/dra over the same objects) must agree with the scheduler: fits = the pod is bound
within BIND_TIMEOUT, impossible = it is still unbound after NEVER_WAIT (the scheduler has
tried and failed: the pod reports PodScheduled=False).

Needs the session-scoped ``control_plane`` fixture of the end-to-end suite (``.kubeconfig``,
``.kubectl(*args, input=..., check=...)``) with kube-apiserver, kube-scheduler and kwok."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.core.dra.ground_truth import Case, load_cases, numagate_verdict

CASES = load_cases()
BIND_TIMEOUT = 60.0  # s for a pod that fits to be bound
NEVER_WAIT = 5.0  # s an impossible pod stays unbound (after the scheduler said so)


def _apply(control_plane: Any, objects: list[dict[str, Any]]) -> None:
    body = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    control_plane.kubectl("apply", "-f", "-", input=body)


def _pod(control_plane: Any, namespace: str) -> dict[str, Any]:
    out = control_plane.kubectl("get", "pod", "pod", "-n", namespace, "-o", "json")
    return json.loads(out.stdout)


def _unschedulable(pod: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "PodScheduled" and c.get("status") == "False"
        for c in (pod.get("status") or {}).get("conditions") or ()
    )


def _scheduler_verdict(control_plane: Any, case: Case) -> str:
    control_plane.create_namespace(case.name)
    _apply(control_plane, case.nodes)
    _apply(control_plane, case.objects)
    _apply(control_plane, [case.pod])
    deadline = time.monotonic() + BIND_TIMEOUT
    seen_unschedulable: float | None = None
    while time.monotonic() < deadline:
        pod = _pod(control_plane, case.name)
        if pod["spec"].get("nodeName"):
            return "fits"
        if _unschedulable(pod):
            seen_unschedulable = seen_unschedulable or time.monotonic()
            if time.monotonic() - seen_unschedulable >= NEVER_WAIT:
                return "impossible"
        time.sleep(0.5)
    if seen_unschedulable is not None:
        return "impossible"
    return "no decision (neither bound nor marked unschedulable: is kube-scheduler running?)"


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_numagate_agrees_with_kube_scheduler(control_plane: Any, case: Case) -> None:
    ours = numagate_verdict(case)
    theirs = _scheduler_verdict(control_plane, case)
    assert (ours, theirs) == (case.expect, case.expect), (
        f"{case.name}: numagate {ours}, scheduler {theirs}"
    )
