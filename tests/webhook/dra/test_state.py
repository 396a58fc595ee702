"""The DRA inventory's sources (webhook/dra/state.py): the inventory file (same loader and
reload rules as the NRT source) and the cluster (the reflectors of
webhook/inventory/reflector.py against the list/watch test apiserver), with the NRT
inventory's staleness rule: a stale live DRA inventory never denies."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from core.dra.inventory import read_inventory
from core.intent.read import read_intent
from core.intent.workloads import pod_templates
from tests.webhook.dra.objects import (
    DRA_FAKES,
    claim,
    gpu_class,
    gpu_slice,
    inventory,
    pod,
    request,
)
from tests.webhook.fake_apiserver import DEFAULT_RESOURCES, running_apiserver
from webhook import server as server_module
from webhook.config import ConfigHolder
from webhook.dra.admission import check_claims
from webhook.dra.live import DraUpdates
from webhook.dra.state import DraFileSource, DraState, build_dra_view
from webhook.inventory.file_build import ISOLATE_ABOVE_BYTES
from webhook.inventory.loader import LoadError
from webhook.inventory.state import InventoryState, build_view

FIVE = claim("five", [request("gpus", 5)])


def _write(path: Path, objects: list[dict[str, object]], *, age: float = 10.0) -> None:
    path.write_text(json.dumps({"kind": "List", "items": objects}))
    past = time.time() - age  # older than the racy window: the stat is trusted
    os.utime(path, (past, past))


def test_only_dra_kinds_are_read_and_bad_ones_are_named() -> None:
    bad = {**gpu_slice("x"), "spec": {**gpu_slice("x")["spec"], "devices": "many"}}
    view = build_dra_view([*inventory([FIVE]), bad], source="t", now=0.0)
    inv = view.inventory
    assert view.objects == 5  # two slices, the class, the claim, the bad slice
    assert len(inv.slices) == 2 and set(inv.classes) == {"gpu"}
    assert list(inv.claims) == [("ml", "five")]
    assert len(inv.errors) == 1 and "spec.devices" in inv.errors[0] and "'many'" in inv.errors[0]


class _Reflector:
    """What DraUpdates reads of the reflector calling it: the resource's kind."""

    def __init__(self, kind: str) -> None:
        self.resource = type("R", (), {"kind": kind})()


def _key(obj: dict[str, Any]) -> tuple[str, str]:
    return (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])


def test_events_and_relists_update_only_what_changed() -> None:
    """The listener as the reflectors call it (webhook/inventory/reflector.py, objects not
    kept): a list page, watch events, a relist that changed one object and lost another;
    after each flush the view is the whole build of what the cluster holds."""
    installed: list[tuple[Any, int]] = []
    updates = DraUpdates(lambda inv, n: installed.append((inv, n)))
    objects = {
        (o["kind"], *_key(o)): o for o in inventory([FIVE]) if "resource.k8s" in o["apiVersion"]
    }
    by_kind: dict[str, dict[tuple[str, str], Any]] = {}
    for (kind, ns, name), o in objects.items():
        by_kind.setdefault(kind, {})[(ns, name)] = o
    for kind, page in by_kind.items():
        updates.on_replaced(_Reflector(kind), {}, page, True)
    first = updates.flush()
    assert first == read_inventory(objects.values()) and installed[-1][1] == 4
    assert updates.flush() is None  # nothing new: no new view
    slices = {k: o for k, o in by_kind["ResourceSlice"].items()}
    gone, kept = sorted(slices)
    updates.on_event(_Reflector("ResourceClaim"), "DELETED", _key(FIVE), FIVE)
    changed = {**slices[kept], "metadata": {**slices[kept]["metadata"], "resourceVersion": "9"}}
    changed["spec"] = {**changed["spec"], "devices": changed["spec"]["devices"][:1]}
    held = {kept: None}  # the fingerprint held before: differs from "9"
    updates.on_replaced(_Reflector("ResourceSlice"), held, {kept: changed}, True)
    updates.on_replaced(_Reflector("ResourceSlice"), {gone: "1"}, {}, True)  # relist's end
    second = updates.flush()
    now = [by_kind["DeviceClass"][("", "gpu")], changed]
    assert second == read_inventory(now) and installed[-1][1] == 2
    assert first == read_inventory(objects.values())  # the earlier view is untouched


def test_no_view_before_every_type_has_listed() -> None:
    installed: list[Any] = []
    updates = DraUpdates(lambda inv, n: installed.append(inv))
    updates.synced = lambda: False
    updates.on_event(_Reflector("DeviceClass"), "ADDED", ("", "gpu"), gpu_class())
    assert updates.flush() is None and installed == []
    updates.synced = lambda: True
    assert updates.flush() is not None and set(installed[0].classes) == {"gpu"}


def test_the_file_source_reloads_on_change_and_keeps_the_last_good(tmp_path: Path) -> None:
    path = tmp_path / "inventory.json"
    _write(path, inventory())
    state = DraState()
    source = DraFileSource(str(path), state)
    source.load()
    assert state.view is not None and not state.view.inventory.claims
    assert source.check() is None  # unchanged: not re-read
    _write(path, inventory([FIVE]))
    assert source.check() is True
    assert list(state.view.inventory.claims) == [("ml", "five")]
    path.write_text("kind: [unclosed")
    assert source.check() is False
    assert source.last_error and "not valid YAML or JSON" in source.last_error
    assert list(state.view.inventory.claims) == [("ml", "five")]  # the last good
    assert not state.is_stale(0.001)  # a file is never stale


def test_a_large_file_is_read_in_a_helper_process(tmp_path: Path) -> None:
    """Over ISOLATE_ABOVE_BYTES the parse runs in a helper process, as for the NRT source;
    the view that comes back is the same."""
    padding = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "pad"}}
    padding["data"] = {"x": "y" * (ISOLATE_ABOVE_BYTES + 10)}
    path = tmp_path / "inventory.json"
    _write(path, [*inventory([FIVE]), padding])
    state = DraState()
    DraFileSource(str(path), state).load()
    assert state.view is not None and state.view.source == f"file:{path}"
    assert list(state.view.inventory.claims) == [("ml", "five")]
    assert len(state.view.inventory.slices) == 2
    path.write_text("[" + " " * (ISOLATE_ABOVE_BYTES + 10))  # the helper's LoadError, as itself
    os.utime(path, (time.time() - 10, time.time() - 10))
    with pytest.raises(LoadError, match="not valid YAML or JSON"):
        DraFileSource(str(path), DraState()).load()


async def _judge(dra: DraState, stale_after: float) -> tuple[list[str], list[str]]:
    nodes = build_view(inventory(), source="t", now=0.0).nodes
    template = pod_templates(pod("p", {"gpus": "five"}))[0]
    found = await check_claims(
        [(template, read_intent(template).intent)],
        namespace="ml",
        nodes=nodes,
        nrt_stale=False,
        dra=dra,
        stale_after=stale_after,
        remaining=5.0,
    )
    return [m for _, m in found.failures], found.warnings


async def test_a_stale_live_dra_inventory_warns_instead_of_denying() -> None:
    now = [100.0]
    dra = DraState(clock=lambda: now[0])
    dra.load_objects(inventory([FIVE]), source="live")
    dra.live = True
    dra.last_sync = lambda: 100.0
    failures, _ = await _judge(dra, stale_after=30.0)
    assert failures and "needs 5" in failures[0]
    now[0] = 131.0  # not synchronized for longer than staleAfterSeconds
    failures, warnings = await _judge(dra, stale_after=30.0)
    assert failures == []
    assert any("needs 5" in w and "inventory stale: not denied" in w for w in warnings)


async def test_no_dra_inventory_yet_leaves_claims_unchecked() -> None:
    failures, warnings = await _judge(DraState(), stale_after=30.0)
    assert failures == [] and warnings == ["DRA claims not checked: no inventory loaded yet"]


@pytest.mark.slow  # starts a test API server and the watch threads
async def test_the_cluster_is_listed_and_watched(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("{}\n")
    with running_apiserver(tmp_path, resources=(*DEFAULT_RESOURCES, *DRA_FAKES)) as fake:
        for obj in inventory():
            fake.apply(obj)
        opts = server_module.ServeOptions(
            host="127.0.0.1",
            port=0,
            cert="",
            key="",
            kubeconfig=str(fake.write_kubeconfig(tmp_path / "kubeconfig")),
        )
        dra = DraState()
        sources = server_module.start_sources(opts, InventoryState(), ConfigHolder(config), dra=dra)

        async def until(check: Callable[[], bool], what: str) -> None:
            for _ in range(200):
                if check():
                    return
                await asyncio.sleep(0.05)
            raise AssertionError(f"timed out waiting for {what}")

        try:
            await until(
                lambda: dra.view is not None and len(dra.view.inventory.slices) == 2, "list"
            )
            assert dra.live and not dra.is_stale(60.0)
            fake.apply(FIVE)
            await until(lambda: ("ml", "five") in dra.view.inventory.claims, "a watched claim")
            fake.delete(DRA_FAKES[1], gpu_class()["metadata"]["name"])
            await until(lambda: not dra.view.inventory.classes, "a deleted class")
            # a relist (the watch's history compacted away) brings what was missed
            fake.compact()
            fake.expire_watches(DRA_FAKES[0])
            fake.delete(DRA_FAKES[0], gpu_slice("gpu-a")["metadata"]["name"])
            await until(lambda: set(dra.view.inventory.by_node) == {"gpu-b"}, "a relist")
            expected = read_inventory([gpu_slice("gpu-b"), claim("five", [request("gpus", 5)])])
            assert dra.view.inventory == expected
        finally:
            sources.stop()
            for task in sources.tasks:
                task.cancel()
