"""Worst-case inputs (issue 17; generators in tests/fixtures/slow/worst_cases.py): each gets
a clear answer from /mutate and /validate, through the in-process handler
(webhook.review.pipeline.answer) and, for two of them, through the real server over TLS.
Their CPU time is measured by benchmarks/worst_case.py, not here.

- ``unchecked``: over the decode guard (not decoded): HTTP 200, allowed unchanged with a
  warning naming the guard's limit, on /validate too (issue 29: a 413 would make the
  validating webhook's failurePolicy: Fail refuse a pod Kubernetes accepts);
- ``too-large``: over a bound of the annotations, /validate denies naming the field and the
  limit (rule too-large); /mutate allows with that same text as a warning and leaves the
  field as written;
- ``unchecked-size``: over a bound of the object's structure (containers, resources,
  affinity, nodeSelector, tasks), which Kubernetes accepts: /validate allows with a
  "numagate: not checked" warning naming the limit (issue 29); /mutate as for too-large;
- ``deny``: /validate denies under another rule, with a bounded message;
- ``reviewed``: read in full, no too-large finding;
- ``any``: HTTP 200 (the slowest inputs fuzz/worst_case_fuzz.py kept).
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import logging
from collections.abc import Iterator
from typing import Any

import jsonpatch
import orjson
import pytest

from tests.fixtures.slow.table import CASES, WorstCase, build_review
from tests.launch import serving
from tests.reliability.corpus import (
    Client,
    check_review,
)
from webhook.config import load_config
from webhook.inventory.state import InventoryState, load_demo
from webhook.review.pipeline import Runtime, answer

UID = "worst-case"
MAX_MESSAGE = 4096  # a deny message stays readable whatever the input's size


@pytest.fixture(scope="module")
def built() -> dict[str, tuple[dict[str, Any], bytes]]:
    return {c.name: build_review(c, UID) for c in CASES}


@pytest.fixture(scope="module")
def state() -> InventoryState:
    inventory = InventoryState()
    load_demo(inventory)
    return inventory


def _answer(raw: bytes, webhook: str, state: InventoryState) -> tuple[int, bytes]:
    config = load_config(None)
    runtime = Runtime(config=lambda: config, inventory=state)
    logging.disable(logging.WARNING)  # an unchecked review is logged once per request
    try:
        result = asyncio.run(answer(raw, webhook=webhook, runtime=runtime))  # type: ignore[arg-type]
    finally:
        logging.disable(logging.NOTSET)
    return result.status, result.body


def _messages(response: dict[str, Any]) -> str:
    return " | ".join(
        [response.get("status", {}).get("message", ""), *response.get("warnings", [])]
    )


def _unread_keys(obj: dict[str, Any], warnings: list[str]) -> list[str]:
    """The annotations a too-large warning names (all of them for the total size)."""
    annotations = obj.get("metadata", {}).get("annotations") or {}
    if any(w.startswith("metadata.annotations:") for w in warnings):
        return list(annotations)
    return [k for k in annotations if any(w.startswith(f"{k}:") for w in warnings)]


def _check_mutate(case: WorstCase, obj: dict[str, Any], response: dict[str, Any]) -> None:
    assert response["allowed"] is True, response
    warnings = response.get("warnings", [])
    if case.expect in ("too-large", "unchecked-size"):
        assert any(case.fragment in w for w in warnings), warnings
    patched = copy.deepcopy(obj)
    if "patch" in response:
        ops = json.loads(base64.b64decode(response["patch"]))
        patched = jsonpatch.JsonPatch(ops).apply(patched)
    before = obj.get("metadata", {}).get("annotations") or {}
    after = patched.get("metadata", {}).get("annotations") or {}
    for key in _unread_keys(obj, warnings):
        assert after.get(key) == before[key], f"{key} was rewritten"


def _check_unchecked(case: WorstCase, response: dict[str, Any]) -> None:
    """Allowed as sent (no patch), with one warning that says it was not checked."""
    assert response["allowed"] is True, response
    assert "patch" not in response and "status" not in response, response
    (warning,) = response["warnings"]
    assert warning.startswith("numagate: not checked:"), warning
    assert case.fragment in warning, warning
    assert len(warning) < 120, warning


def _check_validate(case: WorstCase, response: dict[str, Any]) -> None:
    text = _messages(response)
    if case.expect == "reviewed":
        assert "too-large" not in text, text[:500]
        return
    if case.expect == "unchecked-size":
        assert response["allowed"] is True, response
        assert "patch" not in response and "status" not in response, response
        assert any(
            w.startswith("numagate: not checked:") and case.fragment in w
            for w in response["warnings"]
        ), response["warnings"]
        return
    assert response["allowed"] is False, response
    message = response["status"]["message"]
    assert case.fragment in message, message[:500]
    assert len(message) <= MAX_MESSAGE, len(message)
    if case.expect == "too-large":
        assert "(rule too-large)" in message, message[:500]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
@pytest.mark.parametrize("webhook", ["validate", "mutate"])
def test_worst_case_gets_a_clear_answer(
    case: WorstCase,
    webhook: str,
    built: dict[str, tuple[dict[str, Any], bytes]],
    state: InventoryState,
) -> None:
    obj, raw = built[case.name]
    status, body = _answer(raw, webhook, state)
    assert status == 200, body[:300]
    if case.expect == "any":
        return
    response = orjson.loads(body)["response"]
    assert response["uid"] == UID
    if case.expect == "unchecked":
        _check_unchecked(case, response)
        return
    if webhook == "mutate":
        if obj["kind"] == "Pod":
            _check_mutate(case, obj, response)
        return
    _check_validate(case, response)


def test_table_covers_every_shape() -> None:
    assert {c.shape for c in CASES} == {"deep", "wide", "long", "many"}
    assert {"unchecked", "too-large", "deny", "reviewed"} <= {c.expect for c in CASES}
    assert any(c.update for c in CASES if c.expect == "unchecked")


# ---- through the real server (TLS), four of them


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    with serving(tmp_path_factory.mktemp("worst-case")) as (srv, paths):
        yield Client(srv.port, paths.ca)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", ["koord-wide-200k-keys", "env-20000", "env-10000-update", "koord-wide-keys"]
)
def test_worst_case_over_tls(
    name: str, server: Client, built: dict[str, tuple[dict[str, Any], bytes]]
) -> None:
    case = next(c for c in CASES if c.name == name)
    obj, raw = built[name]
    for webhook in ("validate", "mutate"):
        reply = server.post(f"/{webhook}?timeout=10s", raw, "application/json")
        response = check_review(reply, uid=UID, webhook=webhook)
        if case.expect == "unchecked":
            _check_unchecked(case, response)
            counted = (
                f'numagate_admission_unchecked_total{{reason="review-values",webhook="{webhook}"}}'
            )
            assert counted in server.get("/metrics").body.decode(), "not counted"
        elif webhook == "mutate":
            _check_mutate(case, obj, response)
        else:
            _check_validate(case, response)


def test_fixture_generators_stay_within_the_apiserver_limit(
    built: dict[str, tuple[dict[str, Any], bytes]],
) -> None:
    for name, (_, raw) in built.items():
        assert len(raw) <= 3 * 1024 * 1024, name


# ---- a Volcano Job's tasks share the object's limits (limits.Limits.shared)


def _job(tasks: int, containers: int) -> dict[str, Any]:
    container = {"name": "a", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}
    template = {"spec": {"containers": [dict(container, name=f"c{i}") for i in range(containers)]}}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "shared", "namespace": "default"},
        "spec": {"tasks": [{"name": f"t{i}", "template": template} for i in range(tasks)]},
    }


def test_a_jobs_tasks_share_its_limits(state: InventoryState) -> None:
    """One task of 100 containers is read (128 per list); two are not: each may have 64, so
    the Job is allowed with a "not checked" warning naming the share. Without the share a
    Job's work grew with its tasks: found-0 (13 tasks of 104 containers) took about 45 of
    the 50 ms of /validate (benchmarks/worst_case.py)."""
    from tests.fixtures.slow.worst_cases import review

    one = orjson.loads(_answer(review(_job(1, 100), UID), "validate", state)[1])["response"]
    assert not any("not checked" in w for w in one.get("warnings", [])), one
    two = orjson.loads(_answer(review(_job(2, 100), UID), "validate", state)[1])["response"]
    assert two["allowed"] is True, two
    shared = "numagate: not checked: spec.containers: 100 containers, over numagate's limit of 64"
    assert shared in two["warnings"], two["warnings"]


def test_the_found_worst_case_is_not_read_in_full(state: InventoryState) -> None:
    """found-0 itself: allowed, not checked past the share of the containers limit."""
    case = next(c for c in CASES if c.name == "found-0")
    status, body = _answer(build_review(case, UID)[1], "validate", state)
    response = orjson.loads(body)["response"]
    assert status == 200 and response["allowed"] is True, response
    assert any("over numagate's limit of 9" in w for w in response["warnings"]), response
