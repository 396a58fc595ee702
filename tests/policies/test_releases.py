"""The rules of the configured scheduler release (core.intent.release_rules) in the
policies ``numagate policies --config`` generates: for HAMi v2.6.0 the webhook and the
policies (celpy) fail the same rules with the same messages on tests/policies/table.py's
RELEASE_CASES; tests/e2e/test_policies.py holds the real apiserver to the same."""

from __future__ import annotations

import json

import pytest

from tests.policies.compare import (
    CEL_CODES,
    RELEASE_CODES,
    as_cel_words,
    policy_failures,
    webhook_failures,
)
from tests.policies.table import RELEASE_CASES, RELEASE_CONFIG, Case
from webhook.config import parse_config
from webhook.policies import policies

CODES = CEL_CODES | RELEASE_CODES


@pytest.mark.parametrize("case", RELEASE_CASES, ids=[c.name for c in RELEASE_CASES])
def test_webhook_and_policy_agree_for_an_older_release(case: Case) -> None:
    webhook = webhook_failures(case, RELEASE_CONFIG, CODES)
    assert {(p, c) for p, c, _ in webhook} == set(case.expect)
    assert {(p, c, as_cel_words(t)) for p, c, t in webhook} == policy_failures(case, RELEASE_CONFIG)


def test_the_table_covers_the_release_rule() -> None:
    codes = {c for case in RELEASE_CASES for _, c in case.expect}
    assert "unsupported-value" in codes
    assert [c for c in RELEASE_CASES if not c.expect]


@pytest.mark.parametrize("hami", ["v2.10.0", "v2.11.0"])
def test_nothing_is_generated_for_a_release_that_reads_every_value(hami: str) -> None:
    config = parse_config({"schedulerVersions": {"hami": hami}}, env={})
    assert "(rule unsupported-value)" not in json.dumps(policies(config, 1024))
    assert policies(config, 1024) == policies(parse_config({}, env={}), 1024)


def test_older_releases_get_the_rule() -> None:
    for hami in ("v2.6.0", "v2.7.0", "v2.9.1"):
        config = parse_config({"schedulerVersions": {"hami": hami}}, env={})
        assert "(rule unsupported-value)" in json.dumps(policies(config, 1024)), hami
