"""One view per review (issue 31): a review reads the inventory once, when it starts, and
every step of it (the decision cache, mutate's affinity, validate's judged intent and its
feasibility check) uses that view. A reload installed in the middle of a review changes
the next review, never the rest of this one."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders.objects import build_review, koord_pod, node, nrt, zone
from tests.webhook.harness import call
from webhook.config import parse_config
from webhook.inventory.state import InventoryState, InventoryView
from webhook.review.pipeline import Runtime

POLICY_LABEL = "node.koordinator.sh/numa-topology-policy"


def _view(cores: int, names: tuple[str, ...]) -> InventoryView:
    """Nodes with two NUMA nodes of ``cores`` free CPUs each: the last one Restricted (a
    SingleNUMANode pod's affinity excludes it), the others SingleNUMANode."""
    objects: list[dict[str, Any]] = []
    for name in names:
        policy = "Restricted" if name == names[-1] else "SingleNUMANode"
        labels = {POLICY_LABEL: policy, "kubernetes.io/hostname": name}
        objects.append(
            node(name, labels=labels, allocatable={"cpu": str(2 * cores), "memory": "128Gi"})
        )
        zones = [
            zone(i, {"cpu": (str(cores), str(cores), str(cores)), "memory": ("64Gi", "64Gi")})
            for i in (0, 1)
        ]
        kubelet = "single-numa-node" if policy == "SingleNUMANode" else "restricted"
        objects.append(nrt(name, zones, attributes={"topologyManagerPolicy": kubelet}))
    return InventoryState().load_objects(objects, source="test")


# A: 32 free CPUs per NUMA node, so a 24-CPU SingleNUMANode pod fits; B: 8, so it never does.
ROOMY = ("a0", "a1", "a2")
SMALL = ("b0", "b1", "b2")


class ReloadAfterFirstRead(InventoryState):
    """An inventory whose reload lands right after a review took its view: the first read
    of ``view`` answers the installed view and installs ``then`` (as a file reload or a
    watch batch would, between two steps of the review)."""

    def __init__(self, first: InventoryView, then: InventoryView) -> None:
        super().__init__()
        self._view: InventoryView | None = first
        self._then = then
        self.reads = 0

    @property  # type: ignore[override]
    def view(self) -> InventoryView | None:
        self.reads += 1
        current = self._view
        self._view = self._then
        return current

    @view.setter
    def view(self, value: InventoryView | None) -> None:
        self._view = value


def _runtime(state: InventoryState, config: dict[str, Any] | None = None) -> Runtime:
    cfg = parse_config(config or {}, env={})
    return Runtime(config=lambda: cfg, inventory=state)


def _static(view: InventoryView, config: dict[str, Any] | None = None) -> Runtime:
    state = InventoryState()
    state.install(view)
    return _runtime(state, config)


def _essence(response: dict[str, Any]) -> tuple[Any, ...]:
    return (response["allowed"], response.get("status"), response.get("warnings"),
            response.get("patch"))  # fmt: skip


@pytest.mark.parametrize("cache", [1024, 0], ids=["cache", "no-cache"])
async def test_validate_answers_from_the_view_it_started_with(cache: int) -> None:
    roomy, small = _view(32, ROOMY), _view(8, SMALL)
    config = {"decisionCache": {"entries": cache}}
    review = build_review(koord_pod("24"))
    on_roomy = await call(_static(roomy, config), "validate", review)
    on_small = await call(_static(small, config), "validate", review)
    assert on_roomy["allowed"] and not on_small["allowed"]  # the two views disagree

    state = ReloadAfterFirstRead(roomy, small)
    got = await call(_runtime(state, config), "validate", review)
    assert _essence(got) == _essence(on_roomy)
    assert state.reads == 1
    # the next review reads the reloaded view
    assert _essence(await call(_runtime(state, config), "validate", review)) == _essence(on_small)


async def test_mutate_answers_from_the_view_it_started_with() -> None:
    # node-names mode: the injected affinity names the nodes of the view read
    roomy, small = _view(32, ROOMY), _view(8, SMALL)
    config = {"affinity": {"mode": "node-names"}}
    review = build_review(koord_pod("2"))
    on_roomy = await call(_static(roomy, config), "mutate", review)
    on_small = await call(_static(small, config), "mutate", review)
    assert on_roomy["patch"] != on_small["patch"]

    state = ReloadAfterFirstRead(roomy, small)
    got = await call(_runtime(state, config), "mutate", review)
    assert _essence(got) == _essence(on_roomy)
    assert state.reads == 1
