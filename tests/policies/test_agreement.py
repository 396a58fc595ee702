"""The webhook and the generated ValidatingAdmissionPolicies agree, rule by rule (issue 29):
for every object of the table, the validating webhook (the real pipeline, on the object as
written, as when the mutating webhook was skipped) and the policies (evaluated by celpy,
tests/policies/cel_eval.py) fail the same rules of core.intent.rules at the same fields,
with the same messages as far as CEL allows: no "did you mean" (difflib), a chain's bad
token not named, sizes without a thousands separator, a Volcano Job task as ``[*]``.

tests/e2e/test_policies.py runs the same table against the real apiserver.
"""

from __future__ import annotations

import pytest

from core.intent.rules import RULES
from tests.policies.compare import as_cel_words, policy_failures, webhook_failures
from tests.policies.table import CASES, Case


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_webhook_and_policy_fail_the_same_rules(case: Case) -> None:
    webhook = webhook_failures(case, {})
    policy = policy_failures(case, {})
    assert {(p, c) for p, c, _ in webhook} == {(p, c) for p, c, _ in policy}
    assert {(p, c) for p, c, _ in webhook} == set(case.expect)
    assert {(p, c, as_cel_words(t)) for p, c, t in webhook} == policy


def test_the_table_covers_every_rule_both_ways() -> None:
    failed = {code_path for c in CASES for code_path in c.expect}
    for rule in RULES:
        field = rule.key if rule.where == "task" else f"metadata.annotations[{rule.key}]"
        assert any(p.endswith(field) and c == rule.code for p, c in failed), rule.name
        passed = [c for c in CASES if not c.expect and rule.key in str(c.obj)]
        assert passed, f"{rule.name}: no accepted value in the table"
