"""The webhook and the generated ValidatingAdmissionPolicies agree, rule by rule (issue 29):
for every object of the table, the validating webhook (the real pipeline, on the object as
written, as when the mutating webhook was skipped) and the policies (evaluated by celpy,
tests/policies/cel_eval.py) fail the same rules of core.intent.rules at the same fields,
with the same messages as far as CEL allows: no "did you mean" (difflib), a chain's bad
token not named, sizes without a thousands separator, a Volcano Job task and a container
as ``[*]``.

celpy runs the rules of ``RULES`` only. The ``QUANTITY_RULES`` (HAMi's percentages over
100, a Volcano Job task's integer CPUs) need Kubernetes' CEL quantity library, which no
CEL library on PyPI has: here they are left out of the policies celpy evaluates and out of
the webhook's side, and tests/e2e/test_policies.py holds them to the webhook on the same
table in the real apiserver. ``test_every_rule_is_held_by_one_of_the_two`` checks that no
rule falls between the two.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from core.intent.rules import (
    PRESENCE_RULES,
    QUANTITY_RULES,
    RULES,
    VOLCANO_CPU_POLICIES,
    QuantityRule,
)
from tests.policies.compare import (
    CEL_CODES,
    QUANTITY_CODES,
    WARNING_CODES,
    as_cel_words,
    policy_failures,
    webhook_failures,
)
from tests.policies.table import ALL_CASES, CASES, Case
from webhook.config import parse_config
from webhook.policies import policies


@pytest.mark.parametrize("case", ALL_CASES, ids=[c.name for c in ALL_CASES])
def test_webhook_and_policy_fail_the_same_rules(case: Case) -> None:
    webhook = webhook_failures(case, {}, CEL_CODES)
    policy = policy_failures(case, {})
    assert {(p, c) for p, c, _ in webhook} == {(p, c) for p, c, _ in policy}
    assert {(p, c) for p, c, _ in webhook} == {e for e in case.expect if e[1] in CEL_CODES}
    assert {(p, c, as_cel_words(t)) for p, c, t in webhook} == policy


@pytest.mark.parametrize("case", ALL_CASES, ids=[c.name for c in ALL_CASES])
def test_the_webhook_fails_what_the_table_says(case: Case) -> None:
    """The table's answers for the quantity rules too (the e2e test compares the
    apiserver's with them)."""
    assert {(p, c) for p, c, _ in webhook_failures(case, {})} == set(case.expect)


def test_the_table_covers_every_rule_both_ways() -> None:
    failed = {code_path for c in CASES for code_path in c.expect}
    for rule in RULES:
        field = rule.key if rule.where == "task" else f"metadata.annotations[{rule.key}]"
        assert any(p.endswith(field) and c == rule.code for p, c in failed), rule.name
        passed = [c for c in CASES if not c.expect and rule.key in str(c.obj)]
        assert passed, f"{rule.name}: no accepted value in the table"
    for qrule in QUANTITY_RULES:
        fields = tuple(f"[{name}]" for name in qrule.resources)
        assert any(c == qrule.code and p.endswith(fields) for p, c in failed), qrule.name
        passed = [c for c in CASES if not c.expect and _applies(qrule, c)]
        assert passed, f"{qrule.name}: no accepted value in the table"
    for prule in PRESENCE_RULES:
        keys = {p.rsplit("[", 1)[1].rstrip("]") for p, c in failed if c == prule.code}
        # every named key, and one of the pattern's, refused somewhere in the table
        assert set(prule.keys) <= keys, prule.name
        assert any(re.fullmatch(prule.key_pattern, k) for k in keys), prule.name
        # ... and kept where it must be: an unchanged template on UPDATE
        kept = [c for c in CASES if not c.expect and any(k in str(c.obj) for k in prule.keys)]
        assert {c.operation for c in kept} == {"UPDATE"}, prule.name


def _applies(rule: QuantityRule, case: Case) -> bool:
    """The object has what ``rule`` reads: a task policy that wants integer CPUs, or one
    of its resources."""
    if rule.where == "task":
        tasks = case.obj.get("spec", {}).get("tasks", [])
        return any(t.get("topologyPolicy") in VOLCANO_CPU_POLICIES for t in tasks)
    return any(name in str(case.obj) for name in rule.resources)


def test_every_rule_is_held_by_one_of_the_two() -> None:
    """celpy evaluates every rule of RULES (the policies it runs have them all and no
    quantity function); the rest are QUANTITY_RULES and WARNING_RULES, in the shipped
    policies, which the e2e test runs against the real apiserver."""
    config = parse_config({}, env={})
    portable = json.dumps(policies(config, 1024, quantities=False))
    shipped = json.dumps(policies(config, 1024))
    assert "quantity(" not in portable
    for code in CEL_CODES - {"too-large"}:
        assert f"(rule {code})" in portable, code
    for code in QUANTITY_CODES:
        assert f"(rule {code})" not in portable and f"(rule {code})" in shipped, code
    assert not CEL_CODES & QUANTITY_CODES  # each failure belongs to one side
    # the warnings (WARNING_RULES) need the quantity library throughout: the apiserver's
    for code in WARNING_CODES:
        assert f"(rule {code})" not in portable and f"(rule {code})" in shipped, code
    e2e = (Path(__file__).parents[1] / "e2e" / "test_policies.py").read_text()
    assert "CASES" in e2e and "webhook_failures" in e2e and "webhook_warnings" in e2e
