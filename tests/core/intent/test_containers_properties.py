"""The containers' QoS class and pod requests, written for cost (issue 27, fourth round),
against their rules written plainly: Kubernetes' GetPodQOS (sums of the positive cpu and
memory requests and limits in maps; Guaranteed when every container limits both and the
maps are equal) and the kubelet's pod requests (max of the largest init container plus the
sidecars started before it, and the sum of apps and sidecars), on random containers."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from core.intent.containers import RawContainer, pod_qos, pod_requests

_RESOURCES = ("cpu", "memory", "nvidia.com/gpu", "hugepages-2Mi")
_amounts = st.dictionaries(st.sampled_from(_RESOURCES), st.integers(0, 4) | st.integers(0, 10**12))


@st.composite
def _containers(draw: st.DrawFn) -> list[RawContainer]:
    out = []
    for i in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(("init", "sidecar", "app")))
        requests, limits = draw(_amounts), draw(_amounts)
        out.append(RawContainer(f"c{i}", kind, f"spec.containers[{i}]", requests, limits,
                                bool(requests), dict(requests)))  # fmt: skip
    # kubelet order: init containers (and sidecars) first
    return sorted(out, key=lambda c: c.kind == "app")


def _reference_qos(containers: list[RawContainer]) -> str:
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    guaranteed = True
    for c in containers:
        for r in ("cpu", "memory"):
            if c.requests.get(r, 0) > 0:
                requests[r] = requests.get(r, 0) + c.requests[r]
            if c.limits.get(r, 0) > 0:
                limits[r] = limits.get(r, 0) + c.limits[r]
            else:
                guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    return "Guaranteed" if guaranteed and requests == limits else "Burstable"


def _reference_requests(containers: list[RawContainer]) -> dict[str, int]:
    total: dict[str, int] = {}
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for c in containers:
        if c.kind in ("app", "sidecar"):
            for r, v in c.requests.items():
                total[r] = total.get(r, 0) + v
        if c.kind == "sidecar":
            for r, v in c.requests.items():
                sidecars[r] = sidecars.get(r, 0) + v
            for r, v in sidecars.items():
                init_peak[r] = max(init_peak.get(r, 0), v)
        elif c.kind == "init":
            for r in set(c.requests) | set(sidecars):
                v = c.requests.get(r, 0) + sidecars.get(r, 0)
                init_peak[r] = max(init_peak.get(r, 0), v)
    for r, v in init_peak.items():
        total[r] = max(total.get(r, 0), v)
    return total


@settings(max_examples=400, deadline=None)
@given(_containers())
def test_qos_is_get_pod_qos(containers: list[RawContainer]) -> None:
    assert pod_qos(containers) == _reference_qos(containers)


@settings(max_examples=400, deadline=None)
@given(_containers())
def test_pod_requests_are_the_kubelet_formula(containers: list[RawContainer]) -> None:
    # equal maps, zero entries included (an init container asking for 0 of a resource)
    assert pod_requests(containers) == _reference_requests(containers)
