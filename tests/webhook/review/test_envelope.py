"""webhook.review.wire.envelope_fields: the uid and operation of a review too large to
decode (issue 29), found without decoding it, whatever the order of its fields, and a
bounded scan on bodies built to make it slow."""

from __future__ import annotations

import json

import pytest

from webhook.review.wire import (
    ENVELOPE_BYTES,
    ENVELOPE_TOKENS,
    MAX_JSON_COMMAS,
    PayloadTooLarge,
    TooLargeToCheck,
    envelope_fields,
    parse_review,
)

ENV = [{"name": f"V{i}", "value": "x"} for i in range(MAX_JSON_COMMAS)]
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"uid": "object-uid"}, "spec": {"e": ENV}}


def _body(request: dict[str, object], first: str = "request") -> bytes:
    doc = {"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", first: request}
    if first != "request":
        doc["request"] = request
    return json.dumps(doc).encode()


def test_apiserver_order_uid_first() -> None:
    raw = _body({"uid": "u-1", "kind": {"kind": "Pod"}, "operation": "CREATE", "object": POD})
    assert envelope_fields(raw) == ("u-1", "CREATE")


def test_other_uids_are_not_the_request_uid() -> None:
    # userInfo.uid and object.metadata.uid come before request.uid here
    request = {
        "userInfo": {"uid": "user-uid", "username": "u"},
        "operation": "UPDATE",
        "oldObject": {"metadata": {"uid": "old-uid"}},
        "uid": "the-uid",
        "object": POD,
    }
    assert envelope_fields(_body(request)) == ("the-uid", "UPDATE")


def test_keys_and_escapes_in_strings_do_not_confuse_the_scan() -> None:
    request = {
        "name": 'a "uid": "fake", {[',
        "namespace": "\\",
        "uid": 'u\\"2',
        "operation": "DELETE",
    }
    assert envelope_fields(_body(request)) == ('u\\"2', "DELETE")


def test_a_uid_only_after_the_object_is_not_searched_for() -> None:
    raw = _body({"object": POD, "uid": "late"})
    assert envelope_fields(raw) == (None, "unknown")


def test_an_unknown_operation_is_not_a_metric_label() -> None:
    assert envelope_fields(_body({"uid": "u", "operation": "x" * 50})) == ("u", "unknown")


def test_parse_review_over_the_guard_raises_too_large_to_check() -> None:
    raw = _body({"uid": "u-3", "operation": "CREATE", "object": POD})
    with pytest.raises(TooLargeToCheck) as info:
        parse_review(raw)
    assert (info.value.uid, info.value.operation) == ("u-3", "CREATE")
    assert info.value.commas > info.value.limit == MAX_JSON_COMMAS


def test_parse_review_without_a_uid_is_still_413() -> None:
    with pytest.raises(PayloadTooLarge, match=r"no request\.uid"):
        parse_review(_body({"object": POD, "uid": "late"}))


def test_the_scan_reads_only_the_window_and_the_token_budget() -> None:
    # what bounds its CPU (benchmarks/worst_case.py measures it): past ENVELOPE_BYTES or
    # ENVELOPE_TOKENS nothing is read, so a uid there is not found
    long_name = _body({"name": "n" * ENVELOPE_BYTES, "uid": "u", "operation": "CREATE"})
    assert envelope_fields(long_name) == (None, "unknown")
    groups = {"userInfo": {"groups": ["g"] * ENVELOPE_TOKENS}, "uid": "u"}
    assert envelope_fields(_body(groups)) == (None, "unknown")
    assert envelope_fields(_body(groups), tokens=3 * ENVELOPE_TOKENS) == ("u", "unknown")


@pytest.mark.parametrize(
    "raw",
    [
        b'{"request":{"name":"' + b'\\"' * 1_500_000,  # an unterminated string of escapes
        b'{"request":' + b"[" * 3_000_000,
        b'{"request":{"uid":' + b"{" * 3_000_000,
        b"," * 3_000_000,
    ],
    ids=["unterminated-escapes", "deep", "deep-uid", "commas"],
)
def test_malformed_bodies_have_no_uid(raw: bytes) -> None:
    assert envelope_fields(raw) == (None, "unknown")
