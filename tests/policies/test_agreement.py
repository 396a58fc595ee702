"""The webhook and the generated ValidatingAdmissionPolicies agree, rule by rule (issue 29):
for every object of the table, the validating webhook (the real pipeline, on the object as
written, as when the mutating webhook was skipped) and the policies (evaluated by celpy,
tests/policies/cel_eval.py) fail the same rules of core.intent.rules at the same fields,
with the same messages as far as CEL allows: no "did you mean" (difflib), a chain's bad
token not named, sizes without a thousands separator, a Volcano Job task as ``[*]``.

tests/e2e/test_policies.py runs the same table against the real apiserver.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import orjson
import pytest

from core.intent.rules import RULES
from tests.builders.objects import build_review
from tests.policies.cel_eval import failures, matches
from tests.policies.table import CASES, Case
from tests.webhook.harness import runtime
from webhook.config import parse_config
from webhook.policies import policies
from webhook.review.handlers import HANDLERS
from webhook.review.pipeline import decide_review
from webhook.review.wire import parse_review

CODES = {r.code for r in RULES} | {"too-large"}
ANNOTATED = [f"metadata.annotations[{r.key}]" for r in RULES if r.where == "annotation"]
FIELDS = (*ANNOTATED, "topologyPolicy")
_RULE = re.compile(r"^(?P<path>[^:]+): (?P<text>.*) \(rule (?P<code>[a-z-]+)\)$", re.S)


def _ours(message: str) -> tuple[str, str, str] | None:
    """(path, code, text) of a failure message, when the rule table covers it."""
    m = _RULE.match(message)
    assert m is not None, message
    path, code = m["path"], m["code"]
    if code not in CODES or not path.endswith(FIELDS):
        return None
    return re.sub(r"spec\.tasks\[\d+\]", "spec.tasks[*]", path), code, m["text"]


def _as_cel_words(text: str) -> str:
    """The webhook's text without what CEL cannot say (see the module docstring)."""
    text = re.sub(r"; did you mean [^?]+\?", "", text)
    text = re.sub(r"token '[^']*' is not", "a token is not", text)
    return re.sub(r"(\d),(\d{3}) characters,", r"\1\2 characters,", text)


def webhook_failures(case: Case, config: dict[str, Any]) -> set[tuple[str, str, str]]:
    review = build_review(
        case.obj, operation=case.operation, old=case.old, namespace=case.namespace
    )
    request = parse_review(orjson.dumps(review))
    rt = runtime(config)
    outcome = asyncio.run(
        decide_review(request, handler=HANDLERS["validate"], runtime=rt, deadline=1e12)
    )
    found = {_ours(message) for check, _, message in outcome.violations if check == "annotations"}
    return {f for f in found if f is not None}


def policy_failures(case: Case, config: dict[str, Any]) -> set[tuple[str, str, str]]:
    review = build_review(
        case.obj, operation=case.operation, old=case.old, namespace=case.namespace
    )
    request = review["request"]
    namespace_labels = {"kubernetes.io/metadata.name": request["namespace"]}
    out = set()
    for policy in policies(parse_config(config, env={}), 1024)[::2]:
        if matches(policy, request, namespace_labels):
            for failure in failures(policy, request):
                ours = _ours(failure.message)
                assert ours is not None, failure.message
                out.add(ours)
    return out


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_webhook_and_policy_fail_the_same_rules(case: Case) -> None:
    webhook = webhook_failures(case, {})
    policy = policy_failures(case, {})
    assert {(p, c) for p, c, _ in webhook} == {(p, c) for p, c, _ in policy}
    assert {(p, c) for p, c, _ in webhook} == set(case.expect)
    assert {(p, c, _as_cel_words(t)) for p, c, t in webhook} == policy


def test_the_table_covers_every_rule_both_ways() -> None:
    failed = {code_path for c in CASES for code_path in c.expect}
    for rule in RULES:
        field = rule.key if rule.where == "task" else f"metadata.annotations[{rule.key}]"
        assert any(p.endswith(field) and c == rule.code for p, c in failed), rule.name
        passed = [c for c in CASES if not c.expect and rule.key in str(c.obj)]
        assert passed, f"{rule.name}: no accepted value in the table"
