"""The rules of the configured scheduler release (core.intent.release_rules) in the
policies ``numagate policies --config`` generates: for HAMi v2.6.0 the webhook and the
policies (celpy) fail the same rules with the same messages on tests/policies/table.py's
RELEASE_CASES; tests/e2e/test_policies.py holds the real apiserver to the same. And the
RE2 patterns of hami.io/device-scoring-weights (HAMi v2.10.0+) against HAMi's grammar."""

from __future__ import annotations

import json
import random

import pytest
import re2

from core.intent.hami import parse_scoring_weights
from core.intent.release_rules import weights_patterns
from tests.policies.compare import (
    CEL_CODES,
    RELEASE_CODES,
    as_cel_words,
    policy_failures,
    webhook_failures,
)
from tests.policies.table import HAMI_GPU, RELEASE_CASES, RELEASE_CONFIG, Case, pod
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
        # HAMi before v2.10.0 ignores device-scoring-weights (the webhook's no-effect warning)
        assert "(rule invalid-value)" not in json.dumps(policies(config, 1024)), hami


def _weights_values(n: int) -> list[str]:
    """Values near the grammar: the three keys (or a wrong one) in any order, Unicode and
    ASCII space around the parts, numbers in and out of Go's int64 and sign rules."""
    rng = random.Random(29)
    keys = ["slot", "core", "memory", "Slot", "gpu", ""]
    numbers = ["0", "1", "+2", "-0", "-00", "-1", "007", "", "1.5", "\u0661", "1 1", "=1",
               str(2**63 - 1), str(2**63), "0" + str(2**63 - 1), "99999999999999999999"]  # fmt: skip
    space = ["", "", " ", "\t", "\u00a0", "\u3000", "\n"]
    out = []
    for _ in range(n):
        chosen = rng.sample(["slot", "core", "memory"], 3)
        if rng.random() < 0.2:
            chosen[rng.randrange(3)] = rng.choice(keys)
        if rng.random() < 0.1:
            chosen = chosen[: rng.randrange(4)] + [rng.choice(keys)] * rng.randrange(2)
        parts = [
            rng.choice(space) + k + rng.choice(space) + rng.choice(["=", "=", "=", ""])
            + rng.choice(space) + rng.choice(numbers) + rng.choice(space)
            for k in chosen
        ]  # fmt: skip
        out.append(",".join(parts))
    return out


def test_the_weights_pattern_is_hamis_grammar() -> None:
    """The policy's RE2 patterns accept exactly what parse_scoring_weights (HAMi's
    ParseDeviceScoringWeights) reads, on 50,000 values near the grammar (google-re2, the
    engine of celpy's and Kubernetes' ``matches``)."""
    every, zeros = (re2.compile(p) for p in weights_patterns())
    values = _weights_values(50_000)
    accepted = 0
    for value in values:
        ours = every.search(value) is not None and zeros.search(value) is None
        theirs = not isinstance(parse_scoring_weights(value), str)
        assert ours == theirs, value
        accepted += ours
    assert 1_000 < accepted < len(values) - 1_000  # both answers well represented


def test_a_respelled_chain_is_quoted_as_written() -> None:
    """The one difference CEL keeps for unsupported-value (webhook.policy_releases._shown):
    the webhook quotes a chain as it rewrote it to HAMi's spelling, the policy as written;
    the rest of the message is the same."""
    case = Case(
        "release-chain-respelled", pod("release-chain-respelled", {HAMI_GPU: "Spread, BINPACK"})
    )
    (webhook,) = webhook_failures(case, RELEASE_CONFIG, CODES)
    (policy,) = policy_failures(case, RELEASE_CONFIG)
    assert webhook[:2] == policy[:2] == (f"metadata.annotations[{HAMI_GPU}]", "unsupported-value")
    assert "'spread,binpack'" in webhook[2] and "'Spread, BINPACK'" in policy[2]
    assert webhook[2].replace("'spread,binpack'", "'Spread, BINPACK'") == policy[2]
