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
