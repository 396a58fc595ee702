"""Issue 26, "where the real apiserver disagrees with our test API server": the list/watch
behaviours tests/webhook/fake_apiserver.py claims to copy, asked of the real one. Each
test names the claim of the fake's docstring it checks."""

from __future__ import annotations

import http.client
import json
import time
from typing import Any
from urllib.parse import urlencode

from tests.e2e.cluster import Install, nrt
from tests.e2e.controlplane import ControlPlane, wait_until

NRTS = "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies"


def request(plane: ControlPlane, path: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPSConnection(
        "127.0.0.1", plane.apiserver_port, context=plane.ssl_context(), timeout=30
    )
    try:
        conn.request("GET", f"{path}?{urlencode(params)}")
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


def watch_events(
    plane: ControlPlane, path: str, params: dict[str, Any], limit: int, timeout: float
) -> list[dict[str, Any]]:
    """Up to ``limit`` events of a watch (it ends on the server's timeoutSeconds)."""
    conn = http.client.HTTPSConnection(
        "127.0.0.1", plane.apiserver_port, context=plane.ssl_context(), timeout=timeout
    )
    events: list[dict[str, Any]] = []
    try:
        conn.request("GET", f"{path}?{urlencode({'watch': 'true', **params})}")
        resp = conn.getresponse()
        assert resp.status == 200, resp.read()
        while len(events) < limit:
            line = resp.readline()
            if not line:
                break
            events.append(json.loads(line))
    finally:
        conn.close()
    return events


def test_typed_list_items_carry_no_kind_and_custom_resources_do(installed: Install) -> None:
    plane = installed.plane
    status, nodes = request(plane, "/api/v1/nodes", {"limit": 2})
    assert status == 200 and nodes["items"]
    assert all("kind" not in item and "apiVersion" not in item for item in nodes["items"])
    status, nrts = request(plane, NRTS, {"limit": 2})
    assert status == 200
    assert all(item["kind"] == "NodeResourceTopology" for item in nrts["items"])


def test_a_watch_from_a_compacted_version_gets_an_expired_error_event(installed: Install) -> None:
    plane = installed.plane
    _, listed = request(plane, NRTS, {})
    old = listed["metadata"]["resourceVersion"]
    for cpus in (5, 8):  # move the resource on, then compact its history away
        plane.kubectl("apply", "-f", "-", input=json.dumps(nrt("none-a", "none", cpus)))
    plane.compact_etcd()
    # The watch cache keeps a window of recent events; a watch older than the window is
    # answered 200 with one ERROR event (not an HTTP 410), as the fake does.
    plane.start_apiserver()  # a fresh watch cache: its window starts after `old`
    # A just-started apiserver answers 429 "storage is (re)initializing" until its watch
    # cache has listed (the fake has no such window).
    deadline = time.monotonic() + 60
    while True:
        status, _ = request(plane, NRTS, {"limit": 1, "resourceVersion": "0"})
        if status == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    events = watch_events(plane, NRTS, {"resourceVersion": old, "timeoutSeconds": 5}, 1, 30)
    assert events and events[0]["type"] == "ERROR", events
    status = events[0]["object"]
    assert (status["kind"], status["code"], status["reason"]) == ("Status", 410, "Expired"), status
    assert "too old resource version" in status["message"]


def test_bookmarks_carry_the_version_and_an_empty_object(installed: Install) -> None:
    """On a long watch (opened at install, tests/e2e/watches.py) the apiserver's watch
    cache sends a BOOKMARK about once a minute: an empty object of the watched kind
    (``spec``/``status`` present but empty, unlike the fake's, which has only
    ``metadata``) with the version."""
    events = installed.watches.node_events
    wait_until(
        lambda: any(e["type"] == "BOOKMARK" for e in events), 90, "a BOOKMARK on the node watch"
    )
    obj = next(e for e in events if e["type"] == "BOOKMARK")["object"]
    assert (obj["kind"], obj["apiVersion"]) == ("Node", "v1")
    assert int(obj["metadata"]["resourceVersion"]) > 0
    assert set(obj["metadata"]) == {"resourceVersion"}


def test_a_version_newer_than_the_store_is_a_504_too_large(installed: Install) -> None:
    plane = installed.plane
    _, listed = request(plane, "/api/v1/nodes", {})
    future = int(listed["metadata"]["resourceVersion"]) + 1_000_000
    started = time.monotonic()
    status, body = request(plane, "/api/v1/nodes", {"resourceVersion": future})
    assert status == 504, body
    assert body["reason"] == "Timeout"
    assert body["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
    assert time.monotonic() - started < 30
