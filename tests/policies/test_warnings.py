"""The warnings' policy (webhook.policy_warnings, core.intent.rules.WARNING_RULES): the
webhook warns exactly where the table says, and the part of the policy cel-python can
evaluate agrees with the webhook.

cel-python cannot evaluate the policy's rules themselves: the QoS class and whole CPUs
need Kubernetes' CEL quantity library (``quantity``, ``isInteger``) and its list library
(``sum``), which no CEL library on PyPI has. tests/e2e/test_policies.py holds them to the
webhook, row by row, in the real apiserver. What cel-python evaluates here is the reading
of the policy value: every spelling the webhook folds gives the webhook's policy.
"""

from __future__ import annotations

import json

import celpy
import pytest

from core.intent import dialects as d
from core.intent.rules import WARNING_RULES
from tests.policies.cel_eval import evaluate
from tests.policies.compare import WARNING_CODES, webhook_warnings
from tests.policies.table import ALL_CASES, VOLCANO, Case
from webhook.config import parse_config
from webhook.policies import WARNINGS, policies
from webhook.policy_warnings import policy_value


@pytest.mark.parametrize("case", ALL_CASES, ids=[c.name for c in ALL_CASES])
def test_the_webhook_warns_what_the_table_says(case: Case) -> None:
    assert {(p, c) for p, c, _ in webhook_warnings(case, {})} == set(case.warns)


SPELLINGS = (
    "single-numa-node",
    "SingleNUMANode",
    " Best_Effort\t",
    "single\u00a0numa\u2003node",
    "RESTRICTED",
    "re-stricted",
    "none",
    "None",
    "",
    "SingleNUMA",
    "restricted,none",
    "single-numa-node" + " " * 1024,
    "best\u212aeffort",  # not a k: no letter folds to it here
)


@pytest.mark.parametrize("raw", SPELLINGS, ids=[repr(s)[:30] for s in SPELLINGS])
def test_the_policy_value_is_the_webhooks(raw: str) -> None:
    """policy_value gives the policy the webhook reads ('' for none or none at all)."""
    m = d.match_volcano_policy(raw)
    expected = m.value if len(raw) <= 1024 and m.value not in (None, d.POLICY_NONE) else ""
    got = evaluate(policy_value("v0", 1024), celpy.json_to_cel({"v0": raw}))
    assert str(got) == expected


def test_every_warning_rule_has_rows_both_ways() -> None:
    """Each rule warns in some row of a pod template and of a Volcano Job task, and some
    row where its policy applies is left without that warning."""
    for rule in WARNING_RULES:
        warned = [c for c in ALL_CASES if any(code == rule.code for _, code in c.warns)]
        assert any(c.obj["kind"] != "Job" for c in warned), rule.name
        assert any(c.obj["kind"] == "Job" for c in warned), rule.name
        quiet = [c for c in ALL_CASES if c not in warned and VOLCANO in json.dumps(c.obj)]
        assert quiet, rule.name


def test_the_warnings_policy_holds_every_warning_rule() -> None:
    """numagate-warnings words every rule, and only the shipped policies have it (it
    needs the quantity library throughout)."""
    config = parse_config({}, env={})
    shipped = {
        o["metadata"]["name"]: o
        for o in policies(config, 1024)
        if o["kind"] == "ValidatingAdmissionPolicy"
    }
    text = json.dumps(shipped[WARNINGS])
    for code in WARNING_CODES:
        assert f"(rule {code})" in text, code
    portable = policies(config, 1024, quantities=False)
    assert WARNINGS not in {o["metadata"]["name"] for o in portable}
