"""webhook.app: the HTTP contract of every endpoint and every error path (in-process
aiohttp test server; the TLS round trips are in test_contract.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient

from tests.builders.objects import SMALL, build_review, koord_pod
from tests.webhook.harness import runtime
from tests.webhook.scrape import parse
from webhook.app import MAX_BODY, Health, make_app, parse_timeout
from webhook.review.pipeline import Runtime

JSON = {"Content-Type": "application/json"}


@pytest.fixture
def rt() -> Runtime:
    return runtime(inventory=SMALL)


@pytest.fixture
async def client(aiohttp_client: Any, rt: Runtime) -> TestClient:
    return await aiohttp_client(make_app(rt))


async def test_allowed_review_round_trip(client: TestClient) -> None:
    review = build_review(koord_pod("2"))
    resp = await client.post("/validate?timeout=10s", data=orjson.dumps(review), headers=JSON)
    assert resp.status == 200 and resp.content_type == "application/json"
    body = orjson.loads(await resp.read())
    assert body["response"]["uid"] == review["request"]["uid"]
    assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"


async def test_charset_parameter_is_accepted(client: TestClient) -> None:
    review = build_review(koord_pod("2"))
    resp = await client.post(
        "/mutate",
        data=orjson.dumps(review),
        headers={"Content-Type": "application/json; charset=utf-8"},
    )
    assert resp.status == 200


@pytest.mark.parametrize(
    ("body", "headers", "status", "fragment"),
    [
        (b"{}", {"Content-Type": "text/plain"}, 415, "text/plain"),
        (b"{}", {"Content-Type": "application/yaml"}, 415, "application/json"),
        (b"", JSON, 400, "empty body"),
        (b"{not json", JSON, 400, "not JSON"),
        (
            orjson.dumps(
                {**build_review(koord_pod("2")), "apiVersion": "admission.k8s.io/v1beta1"}
            ),
            JSON,
            400,
            "apiVersion",
        ),
        (
            orjson.dumps(
                {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}
            ),
            JSON,
            400,
            "request.uid",
        ),
    ],
    ids=["text-plain", "yaml", "empty", "garbage", "v1beta1", "no-uid"],
)
@pytest.mark.parametrize("webhook", ["mutate", "validate"])
async def test_bad_requests_get_real_http_errors(
    client: TestClient,
    rt: Runtime,
    webhook: str,
    body: bytes,
    headers: dict[str, str],
    status: int,
    fragment: str,
) -> None:
    resp = await client.post(f"/{webhook}", data=body, headers=headers)
    assert resp.status == status
    assert resp.content_type == "text/plain"
    text = await resp.text()
    assert fragment in text and "Traceback" not in text
    assert (
        rt.metrics.requests.value(
            webhook=webhook, operation="unknown", allowed="", code=str(status)
        )
        == 1
    )


async def test_oversize_body_is_413(client: TestClient) -> None:
    review = build_review(koord_pod("2"))
    review["request"]["object"]["metadata"]["annotations"]["padding"] = "x" * MAX_BODY
    resp = await client.post("/validate", data=orjson.dumps(review), headers=JSON)
    assert resp.status == 413
    assert "cap" in await resp.text()


async def test_body_just_under_the_cap_is_served(client: TestClient) -> None:
    # an UPDATE with two ~3 MiB objects, the apiserver's worst case
    pod = koord_pod("2")
    pod["metadata"]["annotations"]["padding"] = "x" * (3 * 1024 * 1024 - 4096)
    review = build_review(pod, operation="UPDATE", old=pod)
    data = orjson.dumps(review)
    assert len(data) < MAX_BODY
    resp = await client.post("/validate", data=data, headers=JSON)
    assert resp.status == 200


async def test_delete_with_null_object_and_update_with_old_object(client: TestClient) -> None:
    pod = koord_pod("12")
    for review in (
        build_review(None, operation="DELETE", old=pod),
        build_review(pod, operation="UPDATE", old=pod),
    ):
        for webhook in ("mutate", "validate"):
            resp = await client.post(f"/{webhook}", data=orjson.dumps(review), headers=JSON)
            body = orjson.loads(await resp.read())
            assert resp.status == 200 and body["response"] == {
                "uid": review["request"]["uid"],
                "allowed": True,
            }


async def test_get_on_review_endpoint_is_405(client: TestClient) -> None:
    assert (await client.get("/mutate")).status == 405


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("10s", 10.0),
        ("1m30s", 90.0),
        ("500ms", 0.5),
        ("1.5s", 1.5),
        ("", None),
        (None, None),
        ("10", None),
        ("-1s", None),
        ("0s", None),
        ("abc", None),
    ],
)
def test_parse_timeout(value: str | None, seconds: float | None) -> None:
    assert parse_timeout(value) == seconds


async def test_timeout_query_is_honoured(client: TestClient) -> None:
    review = build_review(koord_pod("12"))
    # 1 s minus the 0.25 s margin leaves time: denied normally
    resp = await client.post("/validate?timeout=1s", data=orjson.dumps(review), headers=JSON)
    assert orjson.loads(await resp.read())["response"]["allowed"] is False
    # a deadline shorter than the margin: allowed with a warning, answered at once (a pod
    # not seen before: the answer for the first one is known and comes from the cache)
    review = build_review(koord_pod("14"))
    resp = await client.post("/validate?timeout=100ms", data=orjson.dumps(review), headers=JSON)
    body = orjson.loads(await resp.read())
    assert body["response"]["allowed"] is True and "deadline" in body["response"]["warnings"][0]
    # that answer depended on the deadline: it is not reused when there is time
    resp = await client.post("/validate?timeout=1s", data=orjson.dumps(review), headers=JSON)
    assert orjson.loads(await resp.read())["response"]["allowed"] is False


async def test_health_readiness_and_metrics(aiohttp_client: Any, tmp_path: Path) -> None:
    rt = runtime(inventory=None)
    health = Health(serving=True)
    client = await aiohttp_client(make_app(rt, health=health))
    assert (await client.get("/healthz")).status == 200
    resp = await client.get("/readyz")
    assert resp.status == 503 and "inventory" in await resp.text()
    rt.inventory.load_objects([], source="test")
    assert (await client.get("/readyz")).status == 200
    health.shutting_down = True
    resp = await client.get("/readyz")
    assert resp.status == 503 and "shutting down" in await resp.text()
    assert (await client.get("/healthz")).status == 200  # alive while draining
    review = build_review(koord_pod("2"))
    await client.post("/validate", data=orjson.dumps(review), headers=JSON)
    resp = await client.get("/metrics")
    assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    samples = parse(await resp.text())
    assert (
        samples[
            'numagate_admission_requests_total{webhook="validate",operation="CREATE",allowed="true",code="200"}'
        ]
        == 1
    )
    assert samples['numagate_admission_duration_seconds_count{webhook="validate"}'] == 1
    assert samples['numagate_admission_requests_in_flight{webhook="validate"}'] == 0
