"""A large inventory file is built on two cores (webhook/inventory/state.py
``build_split``, in the file-build helper): the helper forks a child for half of the
nodes (``file_build.forked``) and joins the halves into the view a whole build gives; a
child that fails leaves its half to the helper."""

from __future__ import annotations

import functools
import json
import os
import pickle
import signal
from pathlib import Path
from typing import Any

from core.feasibility.verdicts import evaluate
from core.inventory.build import share_of
from tests.builders.model import container, intent
from tests.builders.objects import koord_status, node, nrt, pod, two_zones
from webhook.inventory import state as state_module
from webhook.inventory.file_build import FileBuildProcess, forked
from webhook.inventory.state import FileBuild, build_file_pickled

NAMES = [f"node-{i:02d}" for i in range(24)]


def _cluster() -> list[Any]:
    objs: list[Any] = []
    for k, name in enumerate(NAMES):
        objs.append(node(name, allocatable={"cpu": "64" if k % 5 else "bad", "memory": "256Gi"}))
        objs.append(nrt(name, two_zones()))
        if k % 4 == 0:  # a pod on NUMA node 3, which no node reports: an error at merge
            objs.append(pod(f"p{k}", node=name, annotations=koord_status({3: {"cpu": "2"}})))
    objs.append(nrt(NAMES[1], two_zones()))  # listed twice
    objs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})
    return objs


def _built(tmp_path: Path, split_above: int) -> FileBuild:
    path = tmp_path / "inventory.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": _cluster()}))
    build = functools.partial(build_file_pickled, split_above=split_above)
    return pickle.loads(FileBuildProcess(str(path), build).result())


def _apart() -> tuple[str, str]:
    """Two nodes of one shape in different shares."""
    a = NAMES[1]
    b = next(n for n in NAMES[2:] if share_of(node(n), 2) != share_of(node(a), 2))
    return a, b


def test_a_split_build_gives_the_view_of_a_whole_build(tmp_path: Path) -> None:
    whole, split = _built(tmp_path, 0), _built(tmp_path, 1)
    assert split.view.nodes == whole.view.nodes and len(whole.view.nodes) == len(NAMES)
    assert split.view.errors == whole.view.errors
    assert any("listed twice" in e for e in whole.view.errors)
    assert any("does not report" in e for e in whole.view.errors)
    pod_intent = intent(scheduler_name="", containers=[container(cpu=8)])
    assert evaluate(pod_intent, split.view.snapshot) == evaluate(pod_intent, whole.view.snapshot)
    # The halves were built apart: equal tables of two halves are not one object, as
    # they are when one process built them all.
    by_name = {n.name: n for n in whole.view.nodes}
    split_by_name = {n.name: n for n in split.view.nodes}
    a, b = _apart()
    assert by_name[a].zones[0].capacity is by_name[b].zones[0].capacity
    assert split_by_name[a].zones[0].capacity == split_by_name[b].zones[0].capacity
    assert split_by_name[a].zones[0].capacity is not split_by_name[b].zones[0].capacity


def test_a_failed_child_leaves_its_half_to_the_helper(monkeypatch) -> None:
    objects = _cluster()
    monkeypatch.setattr(state_module, "forked", lambda work: lambda: None)
    alone = state_module.build_split(objects)
    whole = state_module.build_inventory(objects)
    assert alone.nodes == whole.nodes and alone.errors == whole.errors


def _raise() -> bytes:
    raise MemoryError


def _killed() -> bytes:
    os.kill(os.getpid(), signal.SIGKILL)
    return b""


def _in_helper(_path: str) -> bytes:
    # forked() runs in a process of one thread, as in the file-build helper.
    return pickle.dumps([forked(lambda: b"x" * 200_000)(), forked(_raise)(), forked(_killed)()])


def test_forked_returns_the_childs_bytes_or_none() -> None:
    got = pickle.loads(FileBuildProcess("-", _in_helper).result())
    assert got == [b"x" * 200_000, None, None]
