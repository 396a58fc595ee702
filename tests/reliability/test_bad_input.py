"""The bad-input corpus (tests/reliability/corpus.py) against the real server over real TLS.

Every case gets the documented answer (HTTP 400/413/415 with a plain message, or HTTP 200
with a well-formed AdmissionReview echoing the uid), never a 500, never a hang (the client
has a timeout), and the server answers the next good request correctly.
"""

from __future__ import annotations

import base64
import http.client
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonpatch
import pytest

from tests.launch import ThreadedServer, serving
from tests.reliability.corpus import (
    BODY_CAP,
    Case,
    Client,
    build_corpus,
    check_good,
    check_reject,
    check_review,
    good_review,
)

CORPUS = build_corpus()
WEBHOOKS = ("validate", "mutate")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ThreadedServer, Client]]:
    with serving(tmp_path_factory.mktemp("bad-input")) as (srv, paths):
        yield srv, Client(srv.port, paths.ca)


def test_corpus_is_large_and_covers_every_category() -> None:
    assert len(CORPUS) >= 150
    categories = {c.name.split("/")[0] for c in CORPUS}
    assert {
        "not-json",
        "not-utf8",
        "truncated",
        "nested",
        "huge",
        "envelope",
        "object",
        "kind",
        "operation",
        "annotation",
        "content-type",
    } <= categories
    # "wrong types at every field": each envelope and object field appears with a wrong type
    assert sum(1 for c in CORPUS if c.name.startswith("object/") and "=" in c.name) >= 100


def _run(client: Client, case: Case, webhook: str) -> None:
    reply = client.post(f"/{webhook}?timeout=10s", case.body, case.content_type)
    assert reply.status != 500, reply.body[:300]
    expect = case.expect(webhook)
    if expect == "reject":
        check_reject(reply, case.statuses, case.fragment)
        return
    assert case.uid is not None
    response = check_review(reply, uid=case.uid, webhook=webhook)
    if webhook == "mutate" and "patch" in response:
        _apply_patch(case.body, response)
    if expect == "allow":
        assert response["allowed"] is True, response
    elif expect == "deny":
        assert response["allowed"] is False, response
        assert case.fragment in response["status"]["message"], response["status"]


def _apply_patch(body: bytes, response: dict[str, Any]) -> None:
    """The patch must apply to the object as sent: the apiserver rejects the request with
    an InternalError, whatever the failurePolicy, when it does not (research 1.3)."""
    obj = json.loads(body)["request"]["object"]
    ops = json.loads(base64.b64decode(response["patch"]))
    jsonpatch.JsonPatch(ops).apply(obj)


@pytest.fixture(scope="module")
def kept_alive(server: tuple[ThreadedServer, Client]) -> Iterator[http.client.HTTPSConnection]:
    """One connection for the good requests, kept alive across every case."""
    conn = server[1].connect()
    try:
        yield conn
    finally:
        conn.close()


@pytest.mark.parametrize("case", CORPUS, ids=[c.name for c in CORPUS])
def test_bad_input(
    server: tuple[ThreadedServer, Client], kept_alive: http.client.HTTPSConnection, case: Case
) -> None:
    srv, client = server
    for webhook in WEBHOOKS:
        _run(client, case, webhook)
        check_good(client, webhook, kept_alive)
    assert srv.alive


def test_keep_alive_connection_survives_bad_requests(server: tuple[ThreadedServer, Client]) -> None:
    """The apiserver reuses connections (client-go keeps 25 idle per host): a 400 on one
    request must not poison the next request on the same connection."""
    _, client = server
    conn = client.connect()
    try:
        for i, body in enumerate((b"{", b"[]", b"", b"\xff")):
            check_reject(client.post("/validate", body, conn=conn), frozenset({400}))
            uid = f"uid-keepalive-{i}"
            reply = client.post("/validate", json.dumps(good_review(uid)).encode(), conn=conn)
            assert check_review(reply, uid=uid, webhook="validate")["allowed"] is True
    finally:
        conn.close()


def test_declared_oversize_body_is_refused_before_it_is_read(
    server: tuple[ThreadedServer, Client],
) -> None:
    """A Content-Length over the cap is answered 413 from the headers alone: the server
    does not buffer gigabytes first."""
    _, client = server
    conn = client.connect()
    try:
        conn.putrequest("POST", "/validate")
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Content-Length", str(4 * 1024**3))
        conn.endheaders()
        conn.send(b'{"apiVersion":')
        resp = conn.getresponse()
        assert resp.status == 413
        assert str(BODY_CAP) in resp.read().decode()
    finally:
        conn.close()
    check_good(client, "validate")


def test_slow_partial_body_does_not_block_others(server: tuple[ThreadedServer, Client]) -> None:
    """A client that sends half a body and stalls holds only its own connection."""
    _, client = server
    stalled = client.connect()
    try:
        stalled.putrequest("POST", "/validate")
        stalled.putheader("Content-Type", "application/json")
        stalled.putheader("Content-Length", "1000")
        stalled.endheaders()
        stalled.send(b'{"apiVersion": "admission.k8s.io/v1"')
        for webhook in WEBHOOKS:
            check_good(client, webhook)
    finally:
        stalled.close()


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_wrong_method_is_a_4xx(server: tuple[ThreadedServer, Client], method: str) -> None:
    _, client = server
    conn = client.connect()
    try:
        conn.request(method, "/validate", body=b"{}" if method == "PUT" else None)
        resp = conn.getresponse()
        assert 400 <= resp.status < 500
        resp.read()
    finally:
        conn.close()


def test_bogus_timeout_query_is_ignored(server: tuple[ThreadedServer, Client]) -> None:
    """A malformed ``?timeout=`` must not fail admission (the default applies)."""
    _, client = server
    for query in ("abc", "-5s", "0s", "1e9h", "%00", "10"):
        reply = client.review("validate", good_review("uid-q"), timeout_query=query)
        assert check_review(reply, uid="uid-q", webhook="validate")["allowed"] is True


def test_health_endpoints_answer_after_the_corpus(
    server: tuple[ThreadedServer, Client], tmp_path: Path
) -> None:
    _, client = server
    assert client.get("/healthz").status == 200
    assert client.get("/readyz").status == 200
    metrics = client.get("/metrics")
    assert metrics.status == 200 and b"numagate" in metrics.body
    # The server never answered with a connection reset: a raw TCP check of a fresh
    # connection still completes the TLS handshake.
    conn = http.client.HTTPSConnection("127.0.0.1", client.port, context=client.context, timeout=5)
    conn.connect()
    conn.close()
