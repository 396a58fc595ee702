"""webhook.review.wire: parsing with field-naming errors, constructors, and the one finalize."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest

from webhook.review.errors import answer_for_error
from webhook.review.response import (
    MAX_WARNING_CHARS,
    allowed,
    clean_warnings,
    denied,
    finalize,
    patched,
    shorten,
)
from webhook.review.wire import BadRequest, parse_review


def review(**request: Any) -> dict[str, Any]:
    base = {
        "uid": "u-1",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "operation": "CREATE",
        "object": {"kind": "Pod"},
    }
    base.update(request)
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": base}


def raw(doc: Any) -> bytes:
    return orjson.dumps(doc)


def test_parses_a_full_request() -> None:
    req = parse_review(
        raw(review(userInfo={"username": "alice", "groups": ["g"]}, dryRun=True, subResource=""))
    )
    assert (req.uid, req.operation, req.kind.kind, req.user_info.username, req.dry_run) == (
        "u-1",
        "CREATE",
        "Pod",
        "alice",
        True,
    )
    assert req.old_object is None


def test_delete_with_null_object_and_null_dry_run() -> None:
    req = parse_review(
        raw(review(operation="DELETE", object=None, oldObject={"kind": "Pod"}, dryRun=None))
    )
    assert req.object is None and req.old_object == {"kind": "Pod"} and req.dry_run is False


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b"", "empty body"),
        (b"{", "not JSON"),
        (b"[1]", "JSON list"),
        (raw({**review(), "apiVersion": "admission.k8s.io/v1beta1"}), "apiVersion"),
        (raw({**review(), "kind": "Pod"}), "kind"),
        (raw({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}), "request"),
        (raw(review(uid="")), "request.uid"),
        (raw(review(operation="PATCH")), "request.operation"),
        (raw(review(object=[1])), "request.object"),
    ],
    ids=[
        "empty",
        "truncated",
        "list",
        "v1beta1",
        "kind",
        "no-request",
        "no-uid",
        "bad-op",
        "bad-object",
    ],
)
def test_bad_requests_name_the_field(body: bytes, fragment: str) -> None:
    with pytest.raises(BadRequest) as exc:
        parse_review(body)
    assert fragment in str(exc.value)


def test_missing_uid_is_named() -> None:
    doc = review()
    del doc["request"]["uid"]
    with pytest.raises(BadRequest, match=r"request\.uid: Field required"):
        parse_review(raw(doc))


def test_finalize_echoes_and_omits_empty_patch() -> None:
    out = finalize(patched([]), "abc", mutating=True)
    assert out == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": "abc", "allowed": True},
    }


def test_finalize_patch_pairing() -> None:
    ops = [{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}]
    resp = finalize(patched(ops), "abc", mutating=True)["response"]
    assert resp["patchType"] == "JSONPatch"
    assert orjson.loads(base64.b64decode(resp["patch"])) == ops


def test_validating_side_never_carries_a_patch() -> None:
    with pytest.raises(ValueError, match="validating"):
        finalize(patched([{"op": "add", "path": "/x", "value": 1}]), "u", mutating=False)


def test_denied_status() -> None:
    resp = finalize(denied("spec.x: bad (rule r)"), "u", mutating=False)["response"]
    assert resp["allowed"] is False
    assert resp["status"] == {
        "status": "Failure",
        "code": 403,
        "reason": "Forbidden",
        "message": "spec.x: bad (rule r)",
    }
    bad = finalize(denied("malformed", code=400, reason="BadRequest"), "u", mutating=False)[
        "response"
    ]
    assert bad["status"]["code"] == 400
    with pytest.raises(ValueError):
        denied("x", code=200)


def test_warnings_short_deduplicated_capped() -> None:
    long = "word " * 60
    out = clean_warnings([long, long, "a  b", "a b", *[f"w{i}" for i in range(50)]])
    assert all(len(w) <= MAX_WARNING_CHARS for w in out)
    assert out[0].endswith("...")
    assert out.count("a b") == 1
    assert len(out) == 30
    assert shorten("x" * 200).endswith("...") and len(shorten("x" * 200)) == MAX_WARNING_CHARS
    resp = finalize(allowed(warnings=[long]), "u", mutating=True)["response"]
    assert len(resp["warnings"][0]) < 120


def test_errors_map_to_http() -> None:
    bad = answer_for_error(BadRequest("no uid"), fail_open=False, uid=None)
    assert (bad.status, bad.body, bad.allowed) == (400, b"no uid\n", None)
    crash_v = answer_for_error(RuntimeError("secret detail"), fail_open=False, uid="u9")
    assert crash_v.status == 500 and b"secret detail" not in crash_v.body and b"u9" in crash_v.body
    crash_m = answer_for_error(RuntimeError("secret detail"), fail_open=True, uid="u9")
    body = orjson.loads(crash_m.body)
    assert crash_m.status == 200 and body["response"]["allowed"] is True
    assert body["response"]["uid"] == "u9" and "patch" not in body["response"]
    assert body["response"]["warnings"] and b"secret" not in crash_m.body
    # no uid: the mutating side cannot answer a review either
    assert answer_for_error(RuntimeError(), fail_open=True, uid=None).status == 500


# ---- the hand-written envelope check agrees with the pydantic schema ---------------------

_SAME_EITHER_WAY: list[dict[str, Any]] = [
    review(),
    review(userInfo={"username": "u", "uid": "x", "groups": ["a", "b"], "extra": {"k": ["v"]}}),
    review(userInfo={}, dryRun=None, options=None, oldObject=None, subResource="status"),
    review(operation="DELETE", object=None, oldObject={"kind": "Pod"}, namespace="ns"),
    review(kind={"version": "v1", "kind": "Pod"}, resource={"version": "v1", "resource": "p"}),
    review(dryRun="true"),  # pydantic's lax bool: the model path
    review(dryRun=1),
    review(sub_resource="status"),  # populate_by_name: the model path
    review(user_info={"username": "snake"}),
    {**review(), "api_version": "admission.k8s.io/v1"},
    review(requestKind={"group": "apps", "version": "v1", "kind": "Deployment"}),
]


@pytest.mark.parametrize("doc", _SAME_EITHER_WAY, ids=range(len(_SAME_EITHER_WAY)))
def test_fast_check_and_schema_give_the_same_request(doc: dict[str, Any]) -> None:
    from webhook.review.wire import AdmissionReviewModel, _plain

    via_schema = _plain(AdmissionReviewModel.model_validate(doc).request)  # type: ignore[attr-defined]
    assert parse_review(raw(doc)) == via_schema


def test_fast_check_takes_the_apiserver_shape_and_leaves_the_rest() -> None:
    from webhook.review.wire import _fast_request

    assert _fast_request(review(userInfo={"username": "a", "groups": ["g"]})) is not None
    for doc in (
        review(dryRun="true"),
        review(uid=""),
        review(operation="create"),
        review(userInfo={"groups": ["g", 1]}),
        review(kind={"group": None, "version": "v1", "kind": "Pod"}),
        review(object=[1]),
        review(name=None),
        review(sub_resource=""),
    ):
        assert _fast_request(doc) is None


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({**review(), "request": 7}, "instance of AdmissionRequest"),
        (review(kind=3), "request.kind: Input should be a valid dictionary or instance of Gro"),
        (review(userInfo=None), "request.userInfo: Input should be a valid dictionary or inst"),
        (review(dryRun="maybe"), "request.dryRun: Input should be a valid boolean"),
    ],
)
def test_schema_errors_keep_the_wire_names(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(BadRequest) as exc:
        parse_review(raw(doc))
    assert message in str(exc.value)
