"""LiveSource with the real kubernetes client against the list/watch test server."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest

from tests.launch import wait_for
from tests.webhook.fake_apiserver import (
    NODES,
    NRTS,
    NRTS_V1ALPHA1,
    NUMATOPOLOGIES,
    PODS,
    FakeApiServer,
    node,
    nrt,
    numatopology,
    pod,
    running_apiserver,
)
from webhook.inventory.kube import (
    KubeConfigError,
    api_client_from_kubeconfig,
    api_client_in_cluster,
    build_api_client,
)
from webhook.inventory.live import (
    BOUND_PODS,
    DEFAULT_RESOURCES,
    Backoff,
    Collector,
    LiveSource,
    Timing,
)

FAST = {
    "watch_timeout": 1,
    "backoff_initial": 0.05,
    "backoff_max": 0.4,
    "absent_retry": 0.3,
    "request_timeout": 5.0,
}


class Recorder(Collector):
    """The objects the listener was told of, and how many changes (lists, events) it got."""

    def __init__(self) -> None:
        super().__init__((*DEFAULT_RESOURCES, BOUND_PODS))
        self.changes = 0

    def on_replaced(self, reflector: Any, old: Any, new: Any, changed: bool) -> None:
        super().on_replaced(reflector, old, new, changed)
        self.changes += 1

    def on_event(self, reflector: Any, kind: str, key: Any, item: dict[str, Any]) -> None:
        super().on_event(reflector, kind, key, item)
        self.changes += 1

    def names(self) -> set[tuple[str, str]]:
        return {(o["kind"], o["metadata"]["name"]) for o in self.objects()}

    def latest(self, kind: str, name: str) -> dict[str, Any]:
        objects = self.objects()
        return next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)


def each(source: LiveSource, field: str) -> dict[str, Any]:
    """A field of each resource type's reflector, by type."""
    return {r.resource.name: getattr(r, field) for r in source.reflectors}


def total(source: LiveSource, counter: str) -> int:
    return sum(each(source, counter).values())


def connected(source: LiveSource) -> bool:
    return all(each(source, "connected").values())


def live_source(api: Any, listener: Any, **kwargs: Any) -> LiveSource:
    """A LiveSource with FAST timings (``kwargs``: Timing fields or LiveSource options)."""
    timing = {k: kwargs.pop(k) for k in list(kwargs) if k in Timing.__dataclass_fields__}
    return LiveSource(api, listener, timing=Timing(**{**FAST, **timing}), **kwargs)


def truth(server: FakeApiServer, *resources: Any) -> set[tuple[str, str]]:
    return {
        (o["kind"], o["metadata"]["name"])
        for r in (resources or (NODES, NRTS, NUMATOPOLOGIES))
        for o in server.objects(r)
    }


@pytest.fixture
def make_source(api) -> Iterator[Callable[..., tuple[LiveSource, Recorder]]]:
    sources: list[LiveSource] = []

    def make(**kwargs: Any) -> tuple[LiveSource, Recorder]:
        recorder = Recorder()
        source = live_source(api, recorder, **{"rng": random.Random(7), **kwargs})
        sources.append(source)
        source.start()
        return source, recorder

    yield make
    for source in sources:
        source.stop()


def seed(server: FakeApiServer) -> None:
    for name in ("n1", "n2"):
        server.apply(node(name))
        server.apply(nrt(name))
    server.apply(numatopology("n1"))


@pytest.mark.slow
def test_a_custom_resource_list_over_the_cap_is_paged_not_read_whole(server, make_source):
    # Above cache_list_max objects, a whole list from the watch cache would be decoded at
    # once (100,000 NRTs: +0.8 GiB): the first list is paged from etcd like the rest.
    for name in ("n1", "n2", "n3"):
        server.apply(node(name))
        server.apply(nrt(name))
    source, recorder = make_source(cache_list_max=2, page_size=2)
    wait_for(lambda: recorder.names() == truth(server), 5.0, step=0.01)
    lists = server.list_requests(NRTS)
    assert lists[0].query.get("limit") == "1"  # the count: 3 > 2
    assert all("resourceVersion" not in r.query for r in lists)
    assert any("continue" in r.query for r in lists)  # paged
    # The listener has every object before the reflector marks the list done.
    wait_for(lambda: source.synced, 5.0, "the paged list to complete", step=0.01)


@pytest.mark.slow
def test_initial_sync_delivers_every_object_with_kind_and_api_version(server, make_source):
    seed(server)
    source, recorder = make_source()
    wait_for(lambda: source.synced, 5.0, step=0.01)
    assert connected(source)
    assert recorder.names() == truth(server)
    for obj in recorder.objects():
        assert obj["apiVersion"] in (
            "v1",
            "topology.node.k8s.io/v1alpha2",
            "nodeinfo.volcano.sh/v1alpha1",
        )
    nrt_obj = recorder.latest("NodeResourceTopology", "n1")
    assert nrt_obj["apiVersion"] == "topology.node.k8s.io/v1alpha2"
    assert nrt_obj["zones"][1]["resources"][0]["available"] == "30"  # raw: no field lost
    assert recorder.latest("Node", "n2")["status"]["allocatable"]["cpu"] == "64"
    assert source.last_sync is not None and source.last_sync <= time.monotonic()
    assert source.errors == {}


@pytest.mark.slow
def test_not_synced_before_every_installed_type_listed(server, make_source):
    seed(server)
    server.hold_lists(NUMATOPOLOGIES)
    source, recorder = make_source()
    wait_for(
        lambda: (
            each(source, "listed")["nodes"] and each(source, "listed")["noderesourcetopologies"]
        ),
        5.0,
        step=0.01,
    )
    server.apply(node("n3"))  # a change while numatopologies is still listing
    time.sleep(0.3)
    assert not source.synced
    assert source.last_sync is None
    server.release_lists(NUMATOPOLOGIES)
    wait_for(lambda: source.synced, 5.0, step=0.01)
    assert ("Node", "n3") in recorder.names()
    assert ("Numatopology", "n1") in recorder.names()


class _SlowNodesListener:
    """A listener that takes its time over the Node list, as parsing 10,000
    Nodes does (about a second)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()
        self.delivered: set[str] = set()

    def on_replaced(self, reflector: Any, old: Any, new: Any, changed: bool) -> None:
        if reflector.resource.name == "nodes":
            self.entered.set()
            self.release.wait(5.0)
        self.delivered.add(reflector.resource.name)

    def on_event(self, reflector: Any, kind: str, key: Any, item: Any) -> None:
        pass

    def on_touch(self) -> None:
        pass


def test_not_synced_until_the_listener_has_every_listed_object(server, api):
    """Ready (synced) means the listener holds every type's list, not only that the lists
    came back: otherwise the first build runs without the Nodes still being parsed."""
    seed(server)
    listener = _SlowNodesListener()
    source = live_source(api, listener, rng=random.Random(7))
    source.start()
    try:
        assert listener.entered.wait(5.0)
        wait_for(lambda: {"noderesourcetopologies", "numatopologies"} <= listener.delivered, 5.0)
        assert not source.synced
        assert not each(source, "listed")["nodes"]
        listener.release.set()
        wait_for(lambda: source.synced, 5.0, step=0.01)
        assert "nodes" in listener.delivered
    finally:
        listener.release.set()
        source.stop()


def test_add_modify_delete_propagate(server, make_source):
    seed(server)
    source, recorder = make_source()
    wait_for(lambda: source.synced, 5.0, step=0.01)
    server.apply(node("n3"))
    wait_for(lambda: ("Node", "n3") in recorder.names(), 5.0, step=0.01)
    server.apply(node("n1", labels={"node.koordinator.sh/numa-topology-policy": "SingleNUMANode"}))
    wait_for(
        lambda: (
            recorder.latest("Node", "n1")["metadata"]["labels"]
            == {"node.koordinator.sh/numa-topology-policy": "SingleNUMANode"}
        ),
        5.0,
        step=0.01,
    )
    server.delete(NRTS, "n2")
    wait_for(lambda: ("NodeResourceTopology", "n2") not in recorder.names(), 5.0, step=0.01)
    assert recorder.names() == truth(server)
    assert total(source, "events") >= 3
    assert total(source, "relists") == 0
    assert each(source, "resource_version")["noderesourcetopologies"] == server.resource_version


@pytest.mark.slow
def test_bookmarks_advance_resource_version_without_notifying(server, make_source):
    seed(server)
    source, recorder = make_source(watch_timeout=5)
    wait_for(lambda: source.synced and server.open_watches() == 3, 5.0, step=0.01)
    time.sleep(0.2)  # let the lists settle
    before = recorder.changes
    bumped = server.advance(10)  # writes elsewhere in the cluster
    server.send_bookmarks()
    versions = lambda: set(each(source, "resource_version").values())  # noqa: E731
    wait_for(lambda: versions() == {bumped}, 5.0, step=0.01)
    assert total(source, "bookmarks") == 3
    time.sleep(0.2)
    assert recorder.changes == before
    # Thanks to the bookmark, a compaction up to now costs no relist: the next watch
    # resumes from the bookmarked version, which is still in history.
    server.compact()
    watches = len(server.watch_requests(NODES))
    server.down()
    server.up()
    wait_for(
        lambda: len(server.watch_requests(NODES)) > watches and connected(source), 5.0, step=0.01
    )
    server.apply(node("n9"))
    wait_for(lambda: ("Node", "n9") in recorder.names(), 5.0, step=0.01)
    assert total(source, "relists") == 0


def test_410_relists_and_converges_to_the_truth(server, make_source):
    seed(server)
    source, recorder = make_source()
    wait_for(lambda: source.synced, 5.0, step=0.01)
    lists_before = len(server.list_requests(NODES))
    server.down()
    # While we are away: changes, then history compacted past our resourceVersion.
    server.delete(NODES, "n2")
    server.apply(node("n7"))
    server.apply(nrt("n7"))
    server.delete(NUMATOPOLOGIES, "n1")
    server.compact()
    server.up()
    wait_for(lambda: recorder.names() == truth(server), 5.0, step=0.01)
    assert total(source, "relists") >= 3  # every type got a 410 and listed again
    assert len(server.list_requests(NODES)) > lists_before
    # Custom resources: one object asked for its count, then (few enough) the first list
    # from the watch cache (resourceVersion=0, as client-go's), the relist after a 410 a
    # consistent one; Nodes always consistent.
    lists = server.list_requests(NRTS)
    assert lists[0].query.get("limit") == "1" and "resourceVersion" not in lists[0].query
    assert lists[1].query.get("resourceVersion") == "0"
    assert "resourceVersion" not in lists[-1].query
    assert all("resourceVersion" not in r.query for r in server.list_requests(NODES))
    wait_for(lambda: source.synced and connected(source), 5.0, "synced and watching", step=0.01)
    # And the watch goes on from the new list.
    server.apply(node("n8"))
    wait_for(lambda: ("Node", "n8") in recorder.names(), 5.0, step=0.01)


@pytest.mark.slow
def test_api_away_then_back(server, make_source):
    seed(server)
    source, recorder = make_source()
    wait_for(lambda: source.synced and connected(source), 5.0, step=0.01)
    server.down()
    wait_for(lambda: not any(each(source, "connected").values()), 5.0, step=0.01)
    stalled = source.last_sync
    assert stalled is not None
    time.sleep(1.0)
    assert source.last_sync == stalled  # staleness grows while the API is away
    assert time.monotonic() - stalled >= 1.0
    reconnects = total(source, "reconnects")
    assert reconnects >= 3
    assert "API unreachable" in source.errors["nodes"]
    # Backoff: 1 s away at 0.05..0.4 s per attempt is far fewer tries than a spin.
    assert reconnects <= 3 * 3 * 12
    server.apply(node("while-away"))
    server.up()
    wait_for(
        lambda: connected(source) and ("Node", "while-away") in recorder.names(), 5.0, step=0.01
    )
    assert source.last_sync is not None and source.last_sync > stalled
    assert source.errors == {}
    assert recorder.names() == truth(server)


@pytest.mark.slow
def test_missing_crd_reported_once_and_does_not_block_the_others(server, make_source, caplog):
    seed(server)
    server.set_installed(NUMATOPOLOGIES, False)
    caplog.set_level(logging.WARNING, logger="numagate.live")
    source, recorder = make_source(absent_retry=0.1)
    wait_for(lambda: source.synced, 5.0, step=0.01)
    assert source.synced
    assert recorder.names() == truth(server, NODES, NRTS)
    time.sleep(0.5)  # several slow retries
    assert len(server.list_requests(NUMATOPOLOGIES)) >= 3
    warnings = [r for r in caplog.records if "numatopologies" in r.getMessage()]
    assert len(warnings) == 1
    assert "404" in source.errors["numatopologies"]
    assert "CRD" in source.errors["numatopologies"]
    # Installed later: picked up by the slow retry.
    server.set_installed(NUMATOPOLOGIES, True)
    wait_for(lambda: ("Numatopology", "n1") in recorder.names(), 5.0, step=0.01)
    assert "numatopologies" not in source.errors


@pytest.mark.slow
def test_forbidden_resource_names_rbac_and_does_not_block(server, make_source):
    seed(server)
    server.set_forbidden(NRTS, True)
    source, recorder = make_source()
    wait_for(lambda: source.synced, 5.0, step=0.01)
    assert recorder.names() == truth(server, NODES, NUMATOPOLOGIES)
    assert "403" in source.errors["noderesourcetopologies"]
    assert "service account" in source.errors["noderesourcetopologies"]
    server.set_forbidden(NRTS, False)
    wait_for(lambda: recorder.names() == truth(server), 5.0, step=0.01)


@pytest.mark.slow
def test_a_403_after_a_list_keeps_the_objects_and_retries_with_backoff(server, make_source):
    # A kube-apiserver just restarted answers 403 until its RBAC authorizer has synced.
    seed(server)
    _source, recorder = make_source(absent_retry=60.0)
    wait_for(lambda: recorder.names() == truth(server), 5.0, step=0.01)
    server.set_forbidden(NRTS, True)
    server.expire_watches(NRTS)  # the relist meets the 403
    time.sleep(0.3)
    assert recorder.names() == truth(server)  # nothing dropped
    server.set_forbidden(NRTS, False)
    server.apply(nrt("n3"))
    wait_for(lambda: ("NodeResourceTopology", "n3") in recorder.names(), 5.0, step=0.01)


def test_crd_removed_while_watched_drops_its_objects(server, make_source):
    seed(server)
    source, recorder = make_source()
    wait_for(lambda: ("Numatopology", "n1") in recorder.names(), 5.0, step=0.01)
    server.set_installed(NUMATOPOLOGIES, False)
    wait_for(lambda: ("Numatopology", "n1") not in recorder.names(), 5.0, step=0.01)
    assert ("Node", "n1") in recorder.names()
    wait_for(lambda: source.synced, 5.0, "synced without the CRD", step=0.01)


def test_older_crd_version_is_read_when_newer_is_not_served(tmp_path):
    with running_apiserver(tmp_path, resources=(NODES, NRTS_V1ALPHA1, NUMATOPOLOGIES)) as server:
        server.apply(node("n1"))
        server.apply({**nrt("n1"), "apiVersion": "topology.node.k8s.io/v1alpha1"})
        api = api_client_from_kubeconfig(server.write_kubeconfig(tmp_path / "kc"))
        recorder = Recorder()
        source = live_source(api, recorder)
        source.start()
        try:
            wait_for(lambda: source.synced, 5.0, step=0.01)
            assert recorder.latest("NodeResourceTopology", "n1")["apiVersion"] == (
                "topology.node.k8s.io/v1alpha1"
            )
            assert each(source, "version")["noderesourcetopologies"] == "v1alpha1"
        finally:
            source.stop()


def test_bound_pods_are_optional(server, make_source):
    seed(server)
    server.apply(pod("bound", node_name="n1"))
    server.apply(pod("pending"))
    server.apply(pod("done", node_name="n1", phase="Succeeded"))
    without, rec_without = make_source()
    with_pods, rec_with = make_source(include_pods=True)
    wait_for(lambda: without.synced and with_pods.synced, 5.0, step=0.01)
    assert not any(kind == "Pod" for kind, _ in rec_without.names())
    assert {n for kind, n in rec_with.names() if kind == "Pod"} == {"bound"}
    server.apply(pod("bound", node_name="n1", phase="Failed"))
    wait_for(lambda: ("Pod", "bound") not in rec_with.names(), 5.0, step=0.01)
    assert len(server.list_requests(PODS)) == 1
    assert server.list_requests(PODS)[0].query["fieldSelector"].startswith("spec.nodeName!=")
    assert without.synced


def test_stop_is_prompt_with_long_watches_open(server, make_source):
    seed(server)
    source, _ = make_source(watch_timeout=60)
    wait_for(lambda: source.synced and server.open_watches() == 3, 5.0, step=0.01)
    started = time.monotonic()
    source.stop()
    # Far below the 60..120 s watch the threads were blocked in.
    assert time.monotonic() - started < 2.0
    assert not [t for t in threading.enumerate() if t.name.startswith("numagate-")]
    wait_for(lambda: server.open_watches() == 0, timeout=2, step=0.01)


def test_stop_is_prompt_while_backing_off(server, make_source):
    server.down()
    source, _ = make_source(backoff_initial=5.0, backoff_max=30.0)
    wait_for(lambda: total(source, "reconnects") >= 3, 5.0, step=0.01)
    started = time.monotonic()
    source.stop()
    assert time.monotonic() - started < 2.0  # not the 5 s backoff
    assert not [t for t in threading.enumerate() if t.name.startswith("numagate-")]
    assert not source.synced and source.last_sync is None


def test_backoff_grows_with_jitter_and_is_capped():
    backoff = Backoff(0.2, 3.0, rng=random.Random(1))
    delays = [backoff.next() for _ in range(10)]
    ceilings = [min(3.0, 0.2 * 2**n) for n in range(10)]
    for delay, ceiling in zip(delays, ceilings, strict=True):
        assert max(0.2, ceiling / 2) <= delay <= ceiling
    assert len(set(delays)) == len(delays)  # jittered, not a fixed ladder
    assert max(delays) <= 3.0
    backoff.reset()
    assert backoff.next() <= 0.2


def test_timing_rejects_bad_bounds():
    with pytest.raises(ValueError, match=r"initial=1.0, maximum=0.5"):
        Timing(backoff_initial=1.0, backoff_max=0.5)
    with pytest.raises(ValueError, match="watch_timeout"):
        Timing(watch_timeout=0)


def test_kubeconfig_errors_are_clear(tmp_path, monkeypatch):
    with pytest.raises(KubeConfigError, match="does not exist"):
        build_api_client(kubeconfig=tmp_path / "missing")
    garbage = tmp_path / "garbage.yaml"
    garbage.write_text("- just\n- a list\n")
    with pytest.raises(KubeConfigError, match=r"garbage\.yaml"):
        build_api_client(kubeconfig=garbage)
    empty = tmp_path / "empty.yaml"
    empty.write_text("apiVersion: v1\nkind: Config\n")
    with pytest.raises(KubeConfigError, match=r"empty\.yaml"):
        build_api_client(kubeconfig=empty)
    with pytest.raises(KubeConfigError, match="mutually exclusive"):
        build_api_client(kubeconfig=empty, in_cluster=True)
    with pytest.raises(KubeConfigError, match="--kubeconfig FILE or --in-cluster"):
        build_api_client()
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    with pytest.raises(KubeConfigError, match="KUBERNETES_SERVICE_HOST"):
        api_client_in_cluster()


def test_in_cluster_without_service_account_files(monkeypatch):
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "6443")
    if Path("/var/run/secrets/kubernetes.io/serviceaccount/token").exists():
        pytest.fail("this test expects to run outside a pod")
    with pytest.raises(KubeConfigError, match="service account token"):
        api_client_in_cluster()


def test_kubeconfig_context_and_token_reach_the_server(server, tmp_path):
    client = api_client_from_kubeconfig(server.write_kubeconfig(tmp_path / "kc"), context="fake")
    assert client.configuration.host == server.url
    body = kubernetes.client.CoreV1Api(client).list_node(_preload_content=False)
    assert body.status == 200  # the fake server answers 401 without the kubeconfig's token
    from webhook.version import __version__, user_agent

    agent = server.requests[-1].user_agent
    assert agent == user_agent() and agent.startswith(f"numagate/{__version__} (python 3.")
    assert f"kubernetes-client {kubernetes.__version__})" in agent
    with pytest.raises(KubeConfigError, match="nope"):
        api_client_from_kubeconfig(tmp_path / "kc", context="nope")


def test_watch_events_decode_as_the_standard_library_does() -> None:
    """orjson first, the standard library for what only it accepts; a broken line is a
    ValueError (the reflector reports it as an undecodable event and relists)."""
    import json

    from webhook.inventory.objects import decode

    for line in (
        b'{"type":"MODIFIED","object":{"kind":"Node","metadata":{"name":"n1"},"n":7}}',
        b'{"type":"ADDED","object":{"x":NaN,"s":"\\ud800"}}',
    ):
        got, want = decode(line), json.loads(line)
        assert repr(got) == repr(want)  # NaN != NaN: compare the spelling
    with pytest.raises(ValueError):
        decode(b'{"type":')
