"""Both sides of the agreement test as (field path, code, message text) sets: the validating
webhook's failures (the real pipeline) and the generated policies' (celpy), restricted to
the rules of core.intent.rules; shared by tests/policies/test_agreement.py and
tests/e2e/test_policies.py."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import orjson

from core.intent.dialects import HAMI_SCORING_WEIGHTS
from core.intent.read import read_intent
from core.intent.release_rules import WEIGHTS_CEL_REASON
from core.intent.rules import PRESENCE_RULES, QUANTITY_RULES, RULES, WARNING_RULES
from core.intent.workloads import pod_templates
from tests.builders.objects import build_review
from tests.policies.cel_eval import failures, matches
from tests.policies.table import Case
from tests.webhook.harness import runtime
from webhook.config import parse_config
from webhook.policies import policies
from webhook.review.handlers import HANDLERS
from webhook.review.pipeline import decide_review
from webhook.review.wire import parse_review

# the codes of the rules cel-python evaluates, and of those only the apiserver's CEL can
PRESENCE_CODES = frozenset(r.code for r in PRESENCE_RULES)
# hami.io/device-scoring-weights (webhook.policy_releases: HAMi v2.10.0+, the default)
WEIGHTS = f"metadata.annotations[{HAMI_SCORING_WEIGHTS}]"
CEL_CODES = frozenset({r.code for r in RULES} | {"too-large", "invalid-value"} | PRESENCE_CODES)
QUANTITY_CODES = frozenset(r.code for r in QUANTITY_RULES)
# the rules of the configured release (none for the newest: tests/policies/test_releases.py)
RELEASE_CODES = frozenset({"unsupported-value"})
CODES = CEL_CODES | QUANTITY_CODES | RELEASE_CODES
ANNOTATED = [f"metadata.annotations[{r.key}]" for r in RULES if r.where == "annotation"]
RESOURCES = [
    f"resources.{section}[{name}]"
    for r in QUANTITY_RULES
    for name in r.resources
    for section in ("limits", "requests")
]
FIELDS = (*ANNOTATED, WEIGHTS, "topologyPolicy", *RESOURCES)
_ANNOTATION = re.compile(r"(?:^|\.)metadata\.annotations\[[^\]]+\]$")
_RULE = re.compile(r"^(?P<path>[^:]+): (?P<text>.*) \(rule (?P<code>[a-z-]+)\)$", re.S)


def ours(message: str) -> tuple[str, str, str] | None:
    """(path, code, text) of a failure message, when the rule table covers it."""
    m = _RULE.match(message)
    assert m is not None, message
    path, code = m["path"], m["code"]
    # a presence rule's field is any annotation key it names (a device list per backend)
    field = code in PRESENCE_CODES and _ANNOTATION.search(path) is not None
    if code not in CODES or not (field or path.endswith(FIELDS)):
        return None
    return (
        re.sub(r"(spec\.(?:tasks|initContainers|containers))\[\d+\]", r"\1[*]", path),
        code,
        m["text"],
    )


def as_cel_words(text: str) -> str:
    """The webhook's text without what CEL cannot say: the "did you mean" suggestion
    (difflib), a chain's bad token, the thousands separator of a size, the reason HAMi
    refuses device-scoring-weights."""
    text = re.sub(r"; did you mean [^?]+\?", "", text)
    text = re.sub(r"token '[^']*' is not", "a token is not", text)
    # the weights' reason names an entry or a key: the policy says what is wrong only
    text = re.sub(
        f"^({re.escape(HAMI_SCORING_WEIGHTS)} '[^']*'): .*? \\(allowed: slot=",
        f"\\1: {WEIGHTS_CEL_REASON} (allowed: slot=",
        text,
    )
    return re.sub(r"(\d),(\d{3}) characters,", r"\1\2 characters,", text)


WARNING_CODES = frozenset(r.code for r in WARNING_RULES)
_INDEX = re.compile(r"(spec\.(?:tasks|initContainers|containers))\[\d+\]")


def _decided(case: Case, config: dict[str, Any]) -> Any:
    review = build_review(
        case.obj, operation=case.operation, old=case.old, namespace=case.namespace
    )
    request = parse_review(orjson.dumps(review))
    return asyncio.run(
        decide_review(request, handler=HANDLERS["validate"], runtime=runtime(config), deadline=1e12)
    )


def webhook_warnings(case: Case, config: dict[str, Any]) -> set[tuple[str, str, str]]:
    """The webhook's warnings of WARNING_RULES as (path, code, "path: message (rule
    code)"): the findings of its reading (core.intent.read.read_intent on each template)
    that the validating webhook's answer carries (the pipeline decides which templates it
    reads: an unchanged one on UPDATE, an excluded namespace, the ignore label)."""
    said = set(_decided(case, config).warnings)
    out = set()
    for template in pod_templates(case.obj):
        for f in read_intent(template).findings:
            if f.severity == "warning" and f.code in WARNING_CODES and f.message in said:
                path = _INDEX.sub(r"\1[*]", f.path)
                out.add((path, f.code, f"{path}: {f.message} (rule {f.code})"))
    return out


def webhook_failures(
    case: Case, config: dict[str, Any], codes: frozenset[str] = CODES
) -> set[tuple[str, str, str]]:
    """The webhook's failures of the rules with ``codes``."""
    review = build_review(
        case.obj, operation=case.operation, old=case.old, namespace=case.namespace
    )
    request = parse_review(orjson.dumps(review))
    rt = runtime(config)
    outcome = asyncio.run(
        decide_review(request, handler=HANDLERS["validate"], runtime=rt, deadline=1e12)
    )
    found = {ours(message) for check, _, message in outcome.violations if check == "annotations"}
    return {f for f in found if f is not None and f[1] in codes}


def policy_failures(case: Case, config: dict[str, Any]) -> set[tuple[str, str, str]]:
    """The policies' failures as celpy evaluates them: without QUANTITY_RULES (celpy has no
    quantity library; tests/e2e/test_policies.py holds those to the webhook)."""
    review = build_review(
        case.obj, operation=case.operation, old=case.old, namespace=case.namespace
    )
    request = review["request"]
    namespace_labels = {"kubernetes.io/metadata.name": request["namespace"]}
    out = set()
    for policy in policies(parse_config(config, env={}), 1024, quantities=False)[::2]:
        if matches(policy, request, namespace_labels):
            for failure in failures(policy, request):
                covered = ours(failure.message)
                assert covered is not None, failure.message
                out.add(covered)
    return out
