"""The test API server speaks the list/watch protocol the way the kube-apiserver does,
checked with the real kubernetes client and raw HTTPS (so other tests can trust it)."""

from __future__ import annotations

import json
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
import urllib3
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from tests.webhook.fake_apiserver import (
    NODES,
    NRTS,
    NUMATOPOLOGIES,
    PODS,
    FakeApiServer,
    node,
    nrt,
    pod,
    running_apiserver,
)
from tests.webhook.fake_apiserver_churn import node_heartbeat, nrt_available
from webhook.inventory.kube import api_client_from_kubeconfig


@pytest.fixture
def server(tmp_path: Path) -> Iterator[FakeApiServer]:
    with running_apiserver(tmp_path, token="s3cret") as srv:
        yield srv


@pytest.fixture
def api(server: FakeApiServer, tmp_path: Path) -> Iterator[kubernetes.client.ApiClient]:
    client = api_client_from_kubeconfig(server.write_kubeconfig(tmp_path / "kubeconfig"))
    yield client
    client.close()


def list_nodes(api: kubernetes.client.ApiClient, **kwargs: Any) -> dict[str, Any]:
    response = kubernetes.client.CoreV1Api(api).list_node(_preload_content=False, **kwargs)
    return json.loads(response.data)


def watch_lines(api: kubernetes.client.ApiClient, **kwargs: Any) -> list[dict[str, Any]]:
    response = kubernetes.client.CoreV1Api(api).list_node(
        _preload_content=False, watch=True, _request_timeout=(5, 10), **kwargs
    )
    assert response.headers.get("Transfer-Encoding") == "chunked"
    return [json.loads(line) for line in iter_resp_lines(response) if line]


def test_list_has_version_and_items_without_kind(server, api):
    server.apply(node("b"))
    rv = server.apply(node("a"))
    body = list_nodes(api)
    assert body["kind"] == "NodeList"
    assert body["apiVersion"] == "v1"
    assert body["metadata"]["resourceVersion"] == rv
    assert [i["metadata"]["name"] for i in body["items"]] == ["a", "b"]
    assert all("kind" not in i and "apiVersion" not in i for i in body["items"])


def test_paged_list_is_one_snapshot(server, api):
    for name in ("n1", "n2", "n3"):
        server.apply(node(name))
    first = list_nodes(api, limit=2)
    assert [i["metadata"]["name"] for i in first["items"]] == ["n1", "n2"]
    token = first["metadata"]["continue"]
    server.apply(node("n4"))  # after the snapshot: not in the continued pages
    rest = list_nodes(api, limit=2, _continue=token)
    assert [i["metadata"]["name"] for i in rest["items"]] == ["n3"]
    assert rest["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert "continue" not in rest["metadata"]


def test_expired_continue_token_is_410(server, api):
    for name in ("n1", "n2"):
        server.apply(node(name))
    token = list_nodes(api, limit=1)["metadata"]["continue"]
    server.compact()
    with pytest.raises(ApiException) as info:
        list_nodes(api, limit=1, _continue=token)
    assert info.value.status == 410


@pytest.mark.slow
def test_watch_streams_changes_after_version_then_times_out(server, api):
    server.apply(node("old"))
    since = server.resource_version
    rv_new = server.apply(node("new"))
    server.apply({**node("old"), "metadata": {"name": "old", "labels": {"x": "1"}}})
    rv_del = server.delete(NODES, "new")
    started = time.monotonic()
    events = watch_lines(api, resource_version=since, timeout_seconds=1)
    assert 0.9 < time.monotonic() - started < 3
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "new"),
        ("MODIFIED", "old"),
        ("DELETED", "new"),
    ]
    assert events[0]["object"]["metadata"]["resourceVersion"] == rv_new
    assert events[2]["object"]["metadata"]["resourceVersion"] == rv_del
    assert events[0]["object"]["kind"] == "Node"


@pytest.mark.slow
def test_watch_without_version_starts_with_current_objects(server, api):
    server.apply(node("a"))
    events = watch_lines(api, timeout_seconds=1)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "a")]


def test_watch_from_compacted_version_gets_410_error_event(server, api):
    since = server.apply(node("a"))
    server.apply(node("b"))
    server.compact()
    events = watch_lines(api, resource_version=since, timeout_seconds=5)
    assert len(events) == 1
    assert events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert (status["kind"], status["code"], status["reason"]) == ("Status", 410, "Expired")


@pytest.mark.slow
def test_live_events_reach_an_open_watch_and_bookmarks_only_when_asked(server, api):
    since = server.resource_version
    core = kubernetes.client.CoreV1Api(api)
    response = core.list_node(
        _preload_content=False,
        watch=True,
        resource_version=since,
        allow_watch_bookmarks=True,
        timeout_seconds=2,
    )
    plain = core.list_node(
        _preload_content=False, watch=True, resource_version=since, timeout_seconds=2
    )
    deadline = time.monotonic() + 3
    while server.open_watches(NODES) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    server.apply(node("live"))
    bumped = server.advance(5)
    server.send_bookmarks()
    events = [json.loads(line) for line in iter_resp_lines(response) if line]
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
    assert events[1]["object"] == {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": bumped},
    }
    assert [json.loads(line)["type"] for line in iter_resp_lines(plain) if line] == ["ADDED"]


@pytest.mark.slow
def test_periodic_bookmarks(tmp_path, server, api):
    server.bookmark_interval = 0.2
    events = watch_lines(
        api, resource_version=server.resource_version, allow_watch_bookmarks=True, timeout_seconds=1
    )
    assert len(events) >= 3
    assert {e["type"] for e in events} == {"BOOKMARK"}


def test_not_installed_resource_is_404_until_installed(server, api):
    custom = kubernetes.client.CustomObjectsApi(api)
    server.set_installed(NUMATOPOLOGIES, False)
    with pytest.raises(ApiException) as info:
        custom.list_cluster_custom_object("nodeinfo.volcano.sh", "v1alpha1", "numatopologies")
    assert info.value.status == 404
    assert json.loads(info.value.body)["reason"] == "NotFound"
    server.set_installed(NUMATOPOLOGIES, True)
    body = custom.list_cluster_custom_object("nodeinfo.volcano.sh", "v1alpha1", "numatopologies")
    assert body["kind"] == "NumatopologyList"


def test_custom_resource_list_and_unknown_group(server, api):
    server.apply(nrt("n1"))
    custom = kubernetes.client.CustomObjectsApi(api)
    body = custom.list_cluster_custom_object(
        "topology.node.k8s.io", "v1alpha2", "noderesourcetopologies"
    )
    assert [i["metadata"]["name"] for i in body["items"]] == ["n1"]
    assert body["items"][0]["zones"][0]["name"] == "node-0"
    with pytest.raises(ApiException) as info:
        custom.list_cluster_custom_object(
            "topology.node.k8s.io", "v1alpha1", "noderesourcetopologies"
        )
    assert info.value.status == 404


@pytest.mark.slow
def test_field_selector_on_pods_list_and_watch(server, api):
    core = kubernetes.client.CoreV1Api(api)
    selector = "spec.nodeName!=,status.phase!=Succeeded"
    server.apply(pod("pending"))
    server.apply(pod("bound", node_name="n1"))
    since = server.resource_version
    listed = json.loads(
        core.list_pod_for_all_namespaces(_preload_content=False, field_selector=selector).data
    )
    assert [i["metadata"]["name"] for i in listed["items"]] == ["bound"]
    server.apply(pod("pending", node_name="n2"))  # enters the selection
    server.apply(pod("bound", node_name="n1", phase="Succeeded"))  # leaves it
    server.apply(pod("other", namespace="kube-system"))  # never in it
    response = core.list_pod_for_all_namespaces(
        _preload_content=False,
        watch=True,
        field_selector=selector,
        resource_version=since,
        timeout_seconds=1,
    )
    events = [json.loads(line) for line in iter_resp_lines(response) if line]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "pending"),
        ("DELETED", "bound"),
    ]
    assert server.objects(PODS)[0]["metadata"]["namespace"] == "default"


def test_down_refuses_and_drops_open_watches_then_up_on_same_port(server, api):
    port = server.port
    core = kubernetes.client.CoreV1Api(api)
    response = core.list_node(
        _preload_content=False,
        watch=True,
        resource_version=server.resource_version,
        timeout_seconds=30,
        _request_timeout=(5, 10),
    )
    deadline = time.monotonic() + 3
    while server.open_watches(NODES) < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    server.down()
    started = time.monotonic()
    with pytest.raises((urllib3.exceptions.ProtocolError, urllib3.exceptions.SSLError, OSError)):
        list(iter_resp_lines(response))
    assert time.monotonic() - started < 2  # dropped, not waited out
    with pytest.raises(urllib3.exceptions.MaxRetryError):
        core.list_node(_request_timeout=(1, 1))
    server.up()
    assert server.port == port
    assert list_nodes(api)["kind"] == "NodeList"


def test_tls_is_verified_and_token_required(server, tmp_path):
    untrusted = ssl.create_default_context()  # system roots: our throwaway CA is not there
    pool = urllib3.PoolManager(ssl_context=untrusted, retries=False)
    with pytest.raises(urllib3.exceptions.SSLError):
        pool.request("GET", f"{server.url}/api/v1/nodes")
    trusted = urllib3.PoolManager(ca_certs=str(server.tls.ca), retries=False)
    response = trusted.request("GET", f"{server.url}/api/v1/nodes")
    assert response.status == 401
    response = trusted.request(
        "GET", f"{server.url}/api/v1/nodes", headers={"Authorization": "Bearer s3cret"}
    )
    assert response.status == 200
    assert server.list_requests(NODES)
    assert not server.watch_requests(NRTS)


# ----------------------------------------------------------------------------- issue 14:
# list semantics, continue tokens, watch expiry and churn, as the benchmark relies on them


def raw_get(server: FakeApiServer, path: str) -> tuple[int, dict[str, Any]]:
    pool = urllib3.PoolManager(ca_certs=str(server.tls.ca), retries=False)
    response = pool.request(
        "GET", f"{server.url}{path}", headers={"Authorization": "Bearer s3cret"}
    )
    return response.status, json.loads(response.data)


def names(body: dict[str, Any]) -> list[str]:
    return [i["metadata"]["name"] for i in body["items"]]


def test_paging_walks_every_object_once_at_one_version(server, api):
    server.load(node(f"n{k:04d}") for k in range(1200))
    seen: list[str] = []
    versions = set()
    token = None
    pages = 0
    while True:
        body = list_nodes(api, limit=500, **({"_continue": token} if token else {}))
        server.apply(node(f"late-{pages}"))  # writes between pages do not show up
        seen += names(body)
        versions.add(body["metadata"]["resourceVersion"])
        pages += 1
        token = body["metadata"].get("continue")
        if not token:
            break
        assert body["metadata"]["remainingItemCount"] == 1200 - len(seen)
    assert pages == 3
    assert seen == [f"n{k:04d}" for k in range(1200)]
    assert len(versions) == 1


def test_expired_continue_offers_an_inconsistent_continuation(server):
    for name in ("a", "b", "c"):
        server.apply(node(name))
    status, first = raw_get(server, "/api/v1/nodes?limit=1")
    server.apply(node("bb"))
    server.compact()
    token = first["metadata"]["continue"]
    status, gone = raw_get(server, f"/api/v1/nodes?limit=1&continue={token}")
    assert (status, gone["reason"], gone["code"]) == (410, "Expired", 410)
    assert "too old to display a consistent list" in gone["message"]
    status, rest = raw_get(server, f"/api/v1/nodes?continue={gone['metadata']['continue']}")
    assert status == 200
    assert names(rest) == ["b", "bb", "c"]  # from the next key, at the latest version


@pytest.mark.slow
def test_list_resource_version_semantics(server):
    server.apply(node("a"))
    old = server.apply(node("b"))
    server.apply({**node("a"), "metadata": {"name": "a", "labels": {"x": "2"}}})
    server.delete(NODES, "b")
    now = server.resource_version
    status, cached = raw_get(server, "/api/v1/nodes?resourceVersion=0&limit=1")
    assert status == 200 and names(cached) == ["a"] and "continue" not in cached["metadata"]
    status, exact = raw_get(
        server, f"/api/v1/nodes?resourceVersion={old}&resourceVersionMatch=Exact"
    )
    assert status == 200 and exact["metadata"]["resourceVersion"] == old
    assert names(exact) == ["a", "b"]
    assert (
        "labels" not in exact["items"][0]["metadata"] or not exact["items"][0]["metadata"]["labels"]
    )
    status, legacy = raw_get(server, f"/api/v1/nodes?resourceVersion={old}&limit=5")
    assert names(legacy) == ["a", "b"]  # a version plus a limit: Exact (KEP-2523)
    status, newer = raw_get(server, f"/api/v1/nodes?resourceVersion={old}")
    assert newer["metadata"]["resourceVersion"] == now and names(newer) == ["a"]
    status, too_new = raw_get(server, f"/api/v1/nodes?resourceVersion={int(now) + 50}")
    assert (status, too_new["reason"]) == (504, "Timeout")
    status, bad = raw_get(server, "/api/v1/nodes?resourceVersionMatch=Exact")
    assert (status, bad["reason"]) == (400, "BadRequest")
    status, bad = raw_get(server, "/api/v1/nodes?limit=1&continue=not-a-token")
    assert (status, bad["reason"]) == (400, "BadRequest")
    server.compact()
    status, gone = raw_get(
        server, f"/api/v1/nodes?resourceVersion={old}&resourceVersionMatch=Exact"
    )
    assert (status, gone["reason"]) == (410, "Expired")


def test_custom_resource_list_items_keep_kind(server):
    server.apply(nrt("n1"))
    _status, body = raw_get(server, NRTS.path)
    assert body["items"][0]["kind"] == "NodeResourceTopology"
    assert body["items"][0]["apiVersion"] == "topology.node.k8s.io/v1alpha2"


def test_expire_watches_sends_410_error_mid_stream(server, api):
    since = server.resource_version
    core = kubernetes.client.CoreV1Api(api)
    response = core.list_node(
        _preload_content=False, watch=True, resource_version=since, timeout_seconds=5
    )
    wait_for(lambda: server.open_watches(NODES) == 1)
    server.apply(node("x"))
    assert server.expire_watches(NODES) == 1
    events = [json.loads(line) for line in iter_resp_lines(response) if line]
    assert [e["type"] for e in events] == ["ADDED", "ERROR"]
    assert (events[1]["object"]["code"], events[1]["object"]["reason"]) == (410, "Expired")


@pytest.mark.slow
def test_periodic_compaction_expires_old_versions(tmp_path):
    with running_apiserver(tmp_path, compaction_interval=0.2) as srv:
        old = srv.apply(node("a"))
        srv.apply(node("b"))
        time.sleep(0.7)
        status, _body = raw_get_plain(
            srv, f"/api/v1/nodes?resourceVersion={old}&resourceVersionMatch=Exact"
        )
        assert status == 410


def raw_get_plain(server: FakeApiServer, path: str) -> tuple[int, dict[str, Any]]:
    pool = urllib3.PoolManager(ca_certs=str(server.tls.ca), retries=False)
    response = pool.request("GET", f"{server.url}{path}")
    return response.status, json.loads(response.data)


def wait_for(condition: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


@pytest.mark.slow
def test_churn_rewrites_nrt_available_at_the_asked_rate(server, api):
    server.load(nrt(f"n{k:03d}") for k in range(100))
    since = server.resource_version
    server.churn(NRTS, 200.0, nrt_available, exclude=("n000",))
    time.sleep(2.0)
    server.churn(NRTS, 0, nrt_available)
    custom = kubernetes.client.CustomObjectsApi(api)
    response = custom.list_cluster_custom_object(
        NRTS.group, NRTS.version, NRTS.plural, watch=True, resource_version=since,
        timeout_seconds=1, _preload_content=False,
    )  # fmt: skip
    events = [json.loads(line) for line in iter_resp_lines(response) if line]
    assert 360 <= len(events) <= 440  # 200/s for 2 s, within 10%
    assert {e["type"] for e in events} == {"MODIFIED"}
    assert "n000" not in {e["object"]["metadata"]["name"] for e in events}
    availables = {
        r["available"] for e in events for z in e["object"]["zones"] for r in z["resources"]
    }
    assert len(availables) > 5  # values move, within allocatable
    assert all(0 <= int(a) <= 32 for a in availables)


def test_node_heartbeat_churn_changes_conditions_and_labels(server):
    server.apply(node("a"))
    server.churn(NODES, 20.0, node_heartbeat)
    wait_for(lambda: server.churned(NODES) >= 2)
    server.churn(NODES, 0, node_heartbeat)
    got = server.objects(NODES)[0]
    assert got["status"]["conditions"][0]["type"] == "Ready"
    assert "bench.numagate.io/churn" in got["metadata"]["labels"]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["refuse", "503"])
def test_cut_off_then_back_by_itself(server, mode):
    server.apply(node("a"))
    server.cut_off(0.5, mode)
    if mode == "503":
        status, body = raw_get(server, "/api/v1/nodes")
        assert (status, body["reason"]) == (503, "ServiceUnavailable")
    else:
        with pytest.raises(urllib3.exceptions.HTTPError):
            raw_get(server, "/api/v1/nodes")
    time.sleep(0.8)
    status, body = raw_get(server, "/api/v1/nodes")
    assert status == 200 and names(body) == ["a"]


def test_slow_watcher_is_closed_when_its_buffer_is_full(server, api):
    server.watch_buffer = 5
    core = kubernetes.client.CoreV1Api(api)
    response = core.list_node(
        _preload_content=False, watch=True, resource_version=server.resource_version,
        timeout_seconds=5,
    )  # fmt: skip
    wait_for(lambda: server.open_watches(NODES) == 1)
    server.load(node(f"n{k}") for k in range(50))  # one batch: the stream cannot keep up
    started = time.monotonic()
    events = [json.loads(line) for line in iter_resp_lines(response) if line]
    assert time.monotonic() - started < 3  # closed, not timed out
    assert 0 < len(events) < 50


@pytest.mark.slow
def test_a_second_churn_carries_on_rather_than_replaying_the_first(server, api):
    """A churner started afresh wrote again the values its predecessor wrote: an event
    then rewrites an object with the content it already has, which a watcher applies as
    a no-op (the benchmarks' later churn periods measured almost nothing)."""
    server.load(nrt(f"n{k:03d}") for k in range(20))
    since = server.resource_version
    periods = []
    for _ in range(2):
        server.churn(NRTS, 100.0, nrt_available)
        time.sleep(0.5)
        server.churn(NRTS, 0, nrt_available)
        periods.append(server.resource_version)
    custom = kubernetes.client.CustomObjectsApi(api)
    response = custom.list_cluster_custom_object(
        NRTS.group, NRTS.version, NRTS.plural, watch=True, resource_version=since,
        timeout_seconds=1, _preload_content=False,
    )  # fmt: skip
    writes: list[list[tuple[str, str]]] = [[], []]
    for line in iter_resp_lines(response):
        if not line:
            continue
        obj = json.loads(line)["object"]
        period = 0 if int(obj["metadata"]["resourceVersion"]) <= int(periods[0]) else 1
        zones = json.dumps(obj["zones"], sort_keys=True)
        writes[period].append((obj["metadata"]["name"], zones))
    first, second = writes
    assert len(first) >= 20 and len(second) >= 20
    assert second[:20] != first[:20]
    # The next round writes each object once: new content, bar a coincidence of values.
    last = dict(first)  # each object's content at the end of the first period
    assert sum(last[name] != zones for name, zones in second[:20]) >= 15
