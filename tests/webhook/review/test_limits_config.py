"""The configuration's ``limits`` section (issue 29): today's values are the defaults, and
each configured value is the one the review keeps to, in the webhook and in lint."""

from __future__ import annotations

import orjson
import pytest

from core.intent import limits as core_limits
from tests.builders.objects import build_review
from tests.fixtures.slow.worst_cases import many_containers, many_env, pod
from tests.webhook.harness import call, runtime
from webhook.config import Limits, parse_config


def test_defaults_are_core_intent_limits() -> None:
    assert parse_config({}, env={}).core_limits == core_limits.DEFAULT
    assert Limits().review_values == 40_000


async def test_review_values_decides_what_is_decoded() -> None:
    review = build_review(many_env(20_000))
    unchecked = await call(runtime(), "validate", review)
    assert unchecked["allowed"] is True
    assert unchecked["warnings"][0].startswith("numagate: not checked: the review holds")
    checked = await call(runtime({"limits": {"reviewValues": 100_000}}), "validate", review)
    assert not any("not checked" in w for w in checked.get("warnings", []))


async def test_containers_limit_is_configurable() -> None:
    review = build_review(many_containers("containers")(150))
    unchecked = await call(runtime(), "validate", review)
    assert unchecked["allowed"] is True
    (warning,) = [w for w in unchecked["warnings"] if w.startswith("numagate: not checked:")]
    assert "over numagate's limit of 128" in warning
    raised = await call(runtime({"limits": {"containers": 200}}), "validate", review)
    assert "too-large" not in orjson.dumps(raised).decode()


@pytest.mark.parametrize("value_chars", [64, 2048])
async def test_value_chars_is_configurable(value_chars: int) -> None:
    review = build_review(pod({"volcano.sh/numa-topology-policy": "x" * 100}))
    response = await call(runtime({"limits": {"valueChars": value_chars}}), "validate", review)
    message = response["status"]["message"]
    if value_chars == 64:
        assert "100 characters, over numagate's limit of 64" in message
    else:
        assert "(rule unknown-policy)" in message and "too-large" not in message


async def test_annotation_bytes_limit_names_numagate_when_lowered() -> None:
    review = build_review(pod({"a": "x" * 2000}))
    response = await call(runtime({"limits": {"annotationsBytes": 1000}}), "validate", review)
    assert "over numagate's limit of 1,000; none read" in response["status"]["message"]
