"""Startup of the inventory (issue 14, time to ready and peak memory): a list delivered
page by page, a list cut short that leaves no object behind, the static file's helper forked or spawned, the reflector's own GET."""

from __future__ import annotations

import ctypes
import gc
import os
import pickle
import random
import signal
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
from kubernetes.client.exceptions import ApiException

from tests.builders.objects import SMALL
from tests.launch import wait_for
from tests.webhook.fake_apiserver import NODES, FakeApiServer, node
from webhook.heap import release_free_heap
from webhook.inventory.file_build import FileBuildProcess
from webhook.inventory.live import NODES as NODE_RESOURCE
from webhook.inventory.loader import LoadError
from webhook.inventory.objects import Key, Timing, fingerprint
from webhook.inventory.reflector import Reflector
from webhook.inventory.state import (
    build_file,
    pickled_file_build,
)
from webhook.inventory.stream import api_get

TIMING = Timing(
    watch_timeout=1,
    request_timeout=5.0,
    backoff_initial=0.05,
    backoff_max=0.2,
    absent_retry=0.3,
    page_size=2,
)


class Model:
    """A listener that holds what the reflector told it, as the inventory process does:
    each on_replaced call replaces ``old`` by ``new`` (what ``old`` has and ``new`` lacks is
    deleted). ``on_page`` runs inside the first delivery (to act between two pages)."""

    def __init__(self) -> None:
        self.held: dict[Key, Any] = {}
        self.calls: list[tuple[int, int]] = []  # (len(old), len(new)) per on_replaced
        self.on_page: Any = None
        self._lock = threading.Lock()

    def on_replaced(
        self, reflector: Any, old: Mapping[Key, Any], new: Mapping[Key, Any], changed: bool
    ) -> None:
        with self._lock:
            self.calls.append((len(old), len(new)))
            for key, item in new.items():
                self.held[key] = fingerprint(item)
            for key in old.keys() - new.keys():
                self.held.pop(key, None)
        if self.on_page is not None:
            hook, self.on_page = self.on_page, None
            hook()

    def on_event(self, reflector: Any, kind: str, key: Key, item: dict[str, Any]) -> None:
        with self._lock:
            if kind == "DELETED":
                self.held.pop(key, None)
            else:
                self.held[key] = fingerprint(item)

    def on_touch(self) -> None:
        pass

    def names(self) -> set[str]:
        with self._lock:
            return {key[1] for key in self.held}


@pytest.fixture
def reflect(api: kubernetes.client.ApiClient) -> Iterator[Any]:
    """Start a fingerprint-keeping Node reflector on ``api`` for a listener."""
    stopping = threading.Event()
    started: list[tuple[Reflector, threading.Thread]] = []

    def start(listener: Model) -> Reflector:
        reflector = Reflector(NODE_RESOURCE, api, listener, TIMING, stopping, random.Random(1))
        thread = threading.Thread(target=reflector.run, daemon=True)
        thread.start()
        started.append((reflector, thread))
        return reflector

    yield start
    stopping.set()
    for reflector, thread in started:
        reflector.cut()
        thread.join(5)


def server_names(server: FakeApiServer) -> set[str]:
    return {o["metadata"]["name"] for o in server.objects(NODES)}


def test_a_list_reaches_the_listener_page_by_page(server: FakeApiServer, reflect: Any) -> None:
    """No call carries more than a page (no whole list held as dicts); the list's end
    is one more call, with nothing to delete on a first list, after ``listed``."""
    server.load(node(f"n{i}") for i in range(5))
    model = Model()
    reflector = reflect(model)
    wait_for(lambda: reflector.listed, 10, "the first list")
    wait_for(lambda: len(model.calls) >= 4, 10, "the deliveries")
    assert model.calls[:4] == [(0, 2), (0, 2), (0, 1), (0, 0)]
    assert model.names() == server_names(server) == {f"n{i}" for i in range(5)}
    assert len(reflector.items) == 5


def test_a_relist_sends_only_the_deletions_at_its_end(server: FakeApiServer, reflect: Any) -> None:
    server.load(node(f"n{i}") for i in range(5))
    model = Model()
    reflector = reflect(model)
    wait_for(lambda: reflector.listed and model.names() == server_names(server), 10, "listed")
    server.delete(NODES, "n3")
    server.apply(node("n9"))
    server.compact()
    server.expire_watches(NODES)  # the watch resumes from a compacted version: relist
    wait_for(lambda: reflector.relists >= 1, 10, "a relist")
    wait_for(lambda: model.names() == server_names(server), 10, "the relist applied")
    assert "n3" not in model.names() and "n9" in model.names()


def test_a_list_cut_short_leaves_no_object_behind(server: FakeApiServer, reflect: Any) -> None:
    """The first page is delivered, then the object it held is deleted and the continue
    token compacted away (410): the relist no longer has the object, and the listener
    must not keep it (the reflector compares the relist with what it delivered)."""
    server.load(node(f"n{i}") for i in range(5))
    model = Model()

    def delete_between_pages() -> None:
        first = sorted(model.names())[0]
        server.delete(NODES, first)
        server.compact()

    model.on_page = delete_between_pages
    reflector = reflect(model)
    wait_for(lambda: reflector.listed, 10, "the list after the 410")
    wait_for(lambda: model.names() == server_names(server), 10, "the listener in step")
    assert len(server_names(server)) == 4 and reflector.relists >= 1
    assert len(reflector.items) == 4


def test_api_get_lists_core_and_custom_resources_and_raises_for_errors(
    server: FakeApiServer, api: kubernetes.client.ApiClient
) -> None:
    server.load([node("a"), node("b")])
    response = api_get(api, "/api/v1/nodes", {"limit": 1}, (5.0, 5.0))
    try:
        body = response.data
    finally:
        response.release_conn()
    assert b'"a"' in body and b'"continue"' in body
    with pytest.raises(ApiException) as info:
        api_get(api, "/apis/no.such.group/v1/things", {"watch": True}, (5.0, 5.0))
    assert info.value.status == 404


def rss_kib() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


@pytest.mark.skipif(
    not hasattr(ctypes.CDLL(None), "malloc_trim"), reason="no glibc malloc_trim here"
)
def test_the_free_heap_is_released() -> None:
    """16 MiB freed below a live allocation stay in RSS until trimmed."""
    garbage = [bytearray(8192) for _ in range(2048)]
    pin = bytearray(8192)  # above them: glibc cannot shrink the heap's top past it
    del garbage
    before = rss_kib()
    assert release_free_heap() is True
    assert before - rss_kib() > 8 * 1024
    del pin


@pytest.mark.slow
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_the_file_helper_builds_the_same_inventory_forked_or_spawned(
    tmp_path: Path, method: str
) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text(SMALL.read_text())
    reference = build_file(str(path), now=0.0)
    built = pickle.loads(FileBuildProcess(str(path), pickled_file_build, method=method).result())
    assert built.view.nodes == reference.view.nodes
    assert built.view.errors == reference.view.errors
    assert built.digest == reference.digest
    assert gc.isenabled()  # the helper's pause is its own
    path.write_text("{{{ not yaml")
    with pytest.raises(LoadError, match="not valid YAML"):
        FileBuildProcess(str(path), pickled_file_build, method=method).result()


_SERVE_SPY = """
import json, sys
sys.path.insert(0, {root!r})
from webhook.inventory import file_build
seen = {{}}
real = file_build.FileBuildProcess.__init__
def spy(self, *args, **kwargs):
    seen["loaded"] = sorted(m for m in {heavy!r} if m in sys.modules)
    real(self, *args, **kwargs)
    seen["helper"] = self
file_build.FileBuildProcess.__init__ = spy
from webhook.cli.main import main
code = main(["serve", "--inventory", {path!r}, "--config", {config!r},
             "--cert-dir", {certs!r}, "--port", "0"])
print(json.dumps({{"code": code, "loaded": seen["loaded"],
                  "alive": seen["helper"]._proc.is_alive()}}))
"""


@pytest.mark.slow
def test_serve_builds_a_large_file_beside_its_imports_and_leaves_no_helper(
    tmp_path: Path,
) -> None:
    """``numagate serve --inventory`` starts the build helper before it imports the
    server, the TLS stack and aiohttp, so the build runs beside them; a startup that fails
    afterwards (a config that does not load) stops the helper, which here would otherwise
    wait to hand over its result."""
    import json
    import subprocess
    import sys

    from tests.paths import ROOT

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import gen
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    path = gen.write_inventory(tmp_path / "inventory.yaml", 500)
    assert path.stat().st_size > 1 << 20  # a helper's, and its result outgrows a pipe
    config = tmp_path / "config.yaml"
    config.write_text("inventory: {reloadIntervalSeconds: -1}\n")
    heavy = ("aiohttp", "cryptography", "webhook.server", "webhook.config")
    script = _SERVE_SPY.format(
        root=str(ROOT), heavy=heavy, path=str(path), config=str(config),
        certs=str(tmp_path / "certs"),
    )  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome == {"code": 2, "loaded": [], "alive": False}, done.stderr
    assert "reloadIntervalSeconds" in done.stderr
    assert "Traceback" not in done.stderr


def _killed(path: str) -> bytes:
    os.kill(os.getpid(), signal.SIGKILL)
    raise AssertionError("not reached")


class _Unpicklable(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.callback = lambda: None  # what pickle refuses


def _raises_unpicklable(path: str) -> bytes:
    raise _Unpicklable("no NUMA zones in node-7")


def test_a_file_helper_that_dies_or_fails_oddly_is_reported_clearly(tmp_path: Path) -> None:
    """A helper killed mid-build (the OOM killer) is a LoadError naming the file and the
    exit code; an exception that does not pickle still arrives as its type and words."""
    from webhook.inventory.file_build import FileBuildProcess

    path = tmp_path / "inv.yaml"
    path.write_text(SMALL.read_text())
    with pytest.raises(
        LoadError, match=r"inv\.yaml: the process building the inventory exited with code -9"
    ):
        FileBuildProcess(str(path), _killed, method="fork").result()
    with pytest.raises(RuntimeError, match="_Unpicklable: no NUMA zones in node-7"):
        FileBuildProcess(str(path), _raises_unpicklable, method="fork").result()


_ARENAS = """
import ctypes, sys, threading
sys.path.insert(0, {root!r})
from webhook.heap import limit_malloc_arenas
if {limit}:
    assert limit_malloc_arenas(2)
start = threading.Barrier(9)
done = threading.Event()
def work():
    start.wait()
    held = [bytearray(65536) for _ in range(64)]  # malloc, each thread at once
    done.wait()
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads:
    t.start()
start.wait()
import time; time.sleep(0.3)
ctypes.CDLL(None).malloc_stats()  # one "Arena N:" block per arena, on stderr
done.set()
for t in threads:
    t.join()
"""


@pytest.mark.skipif(not hasattr(ctypes.CDLL(None), "mallopt"), reason="no glibc mallopt here")
@pytest.mark.parametrize("limit", [False, True])
def test_malloc_arenas_are_capped(limit: bool) -> None:
    import subprocess
    import sys

    from tests.paths import ROOT

    code = _ARENAS.format(root=str(ROOT), limit=limit)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    arenas = out.stderr.count("Arena ")
    if limit:
        assert 1 <= arenas <= 2
    else:
        assert arenas > 2  # the default: threads that contend get arenas of their own
