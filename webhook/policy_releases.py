"""The CEL of the release rules (core.intent.release_rules): ``unsupported-value`` for a
HAMi GPU policy the configured HAMi (``schedulerVersions.hami``) does not read, generated
for that release by ``numagate policies --config``. Like the webhook, it looks only at a
value the table's rule ``hami-gpu-policy`` accepts (else that rule fails), and names the
first token the release does not know, else the chain; the value is quoted as the webhook
quotes it after rewriting it to HAMi's spelling, except a respelled chain, quoted as
written (_shown). For the newest release nothing is generated: every value the table's
rule accepts is read.
"""

from __future__ import annotations

from typing import Any

from core.intent import dialects as d
from core.intent import release_rules as rr
from core.intent import versions as v
from core.intent.rules import HAMI_GPU, anchored, rule, value_pattern
from webhook.policy_quantities import cel_raw, cel_string, format_words

CODE = "unsupported-value"
_KEY = d.HAMI_GPU_POLICY


def needed(versions: v.SchedulerVersions) -> bool:
    """False for a release that reads every value of the table's rule."""
    return bool(rr.late_tokens(versions)) or versions.hami < v.HAMI_CHAIN_SINCE


def _task_annotation(t: str, key: str) -> tuple[str, str]:
    """(whether task ``t``'s template has annotation ``key``, its value), as CEL."""
    meta = f"{t}.template.metadata"
    present = f"has({t}.template) && has({meta}) && has({meta}.annotations) && "
    present += f"{cel_string(key)} in {meta}.annotations"
    return present, f"{meta}.annotations[{cel_string(key)}]"


def _readable(value: str, limit: int) -> str:
    """CEL: the table's rule accepts ``value`` (so the webhook reads its tokens)."""
    return f"size({value}) <= {limit} && {value}.matches({cel_raw(rule(HAMI_GPU).pattern)})"


def _supported(value: str, versions: v.SchedulerVersions) -> str:
    return f"{value}.matches({cel_raw(rr.release_pattern(versions))})"


def _what(value: str, versions: v.SchedulerVersions) -> str:
    """CEL: late_token_words of the first unknown token, else chain_words."""
    out = cel_string(rr.chain_words())
    for token in reversed(rr.late_tokens(versions)):
        words = rr.late_token_words(repr(token), v.HAMI_GPU_POLICY_SINCE[token])
        first = cel_raw(rr.first_late_pattern(token, versions))
        out = f"({value}.matches({first}) ? {cel_string(words)} : {out})"
    return out


def _shown(value: str) -> str:
    """CEL: the value as the webhook quotes it, after it rewrote a respelled one to HAMi's
    spelling: a single token's, else (a chain, which CEL cannot rewrite token by token
    without Kubernetes' strings library) as written."""
    out = f"{cel_string(chr(39))} + {value} + {cel_string(chr(39))}"
    for token in reversed(d.HAMI_GPU_POLICIES):
        one = cel_raw(anchored(value_pattern((token,))))
        out = f"({value}.matches({one}) ? {cel_string(repr(token))} : {out})"
    return out


def _message(path: str, value: str, versions: v.SchedulerVersions) -> str:
    """CEL: ``path`` (a CEL string expression) + the webhook's message."""
    words = format_words(
        lambda shown, what: rr.hami_release_message(shown, what, versions),
        _shown(value),
        _what(value, versions),
    )
    return f"{path} + {words} + {cel_string(f' (rule {CODE})')}"


def template_validations(versions: v.SchedulerVersions, limit: int) -> list[dict[str, Any]]:
    """On the policy numagate-templates (its variables ``template``, ``prefix``, ``checked``)."""
    if not needed(versions):
        return []
    meta = "variables.template.metadata"
    value = f"{meta}.annotations[{cel_string(_KEY)}]"
    present = f"variables.checked && has({meta}) && has({meta}.annotations) && "
    present += f"{cel_string(_KEY)} in {meta}.annotations"
    path = f"variables.prefix + {cel_string(f'metadata.annotations[{_KEY}]: ')}"
    return [
        {
            "expression": f"!({present} && {_readable(value, limit)}) || "
            + _supported(value, versions),
            "messageExpression": _message(path, value, versions),
            "reason": "Forbidden",  # the webhook denies with 403 Forbidden
        }
    ]


def task_rule(
    versions: v.SchedulerVersions, limit: int
) -> tuple[list[dict[str, str]], list[dict[str, Any]]]:
    """(variables, validations) on the policy numagate-volcano-jobs (its variable ``tasks``:
    the new or changed tasks): each task template's annotation; the first failing task's
    value in the message."""
    if not needed(versions):
        return [], []

    present, value = _task_annotation("t", _KEY)
    bad = "bad_hami_gpu_release"
    variable = {
        "name": bad,
        "expression": f"variables.tasks.filter(t, {present} && {_readable(value, limit)} && "
        f"!{_supported(value, versions)})",
    }
    _, first = _task_annotation(f"variables.{bad}[0]", _KEY)
    path = cel_string(f"spec.tasks[*].template.metadata.annotations[{_KEY}]: ")
    validation = {
        "expression": f"size(variables.{bad}) == 0",
        "messageExpression": _message(path, first, versions),
        "reason": "Forbidden",
    }
    return [variable], [validation]


# ---- hami.io/device-scoring-weights (read from HAMi v2.10.0) ----------------------------

WEIGHTS_CODE = "invalid-value"
_WEIGHTS = d.HAMI_SCORING_WEIGHTS


def weights_needed(versions: v.SchedulerVersions) -> bool:
    """Before v2.10.0 HAMi ignores the annotation (the webhook's no-effect warning)."""
    return versions.hami >= v.HAMI_SCORING_WEIGHTS_SINCE


def _weights_ok(value: str, limit: int) -> str:
    """CEL: ParseDeviceScoringWeights reads ``value``; one over ``limit`` characters is the
    webhook's too-large, not this rule's."""
    every, zeros = rr.weights_patterns()
    return (
        f"(size({value}) > {limit} || ({value}.matches({cel_raw(every)}) && "
        f"!{value}.matches({cel_raw(zeros)})))"
    )


def _weights_message(path: str, value: str) -> str:
    shown = f"{cel_string(chr(39))} + {value} + {cel_string(chr(39))}"
    words = format_words(lambda s: rr.scoring_weights_message(s, rr.WEIGHTS_CEL_REASON), shown)
    return f"{path} + {words} + {cel_string(f' (rule {WEIGHTS_CODE})')}"


def weights_template_validations(versions: v.SchedulerVersions, limit: int) -> list[Any]:
    """On the policy numagate-templates."""
    if not weights_needed(versions):
        return []
    meta = "variables.template.metadata"
    value = f"{meta}.annotations[{cel_string(_WEIGHTS)}]"
    present = f"variables.checked && has({meta}) && has({meta}.annotations) && "
    present += f"{cel_string(_WEIGHTS)} in {meta}.annotations"
    path = f"variables.prefix + {cel_string(f'metadata.annotations[{_WEIGHTS}]: ')}"
    return [
        {
            "expression": f"!({present}) || {_weights_ok(value, limit)}",
            "messageExpression": _weights_message(path, value),
            "reason": "Forbidden",  # the webhook denies with 403 Forbidden
        }
    ]


def weights_task_rule(
    versions: v.SchedulerVersions, limit: int
) -> tuple[list[dict[str, str]], list[dict[str, Any]]]:
    """On the policy numagate-volcano-jobs: each (changed) task template's annotation."""
    if not weights_needed(versions):
        return [], []

    present, value = _task_annotation("t", _WEIGHTS)
    bad = "bad_hami_weights"
    variable = {
        "name": bad,
        "expression": f"variables.tasks.filter(t, {present} && !{_weights_ok(value, limit)})",
    }
    _, first = _task_annotation(f"variables.{bad}[0]", _WEIGHTS)
    path = cel_string(f"spec.tasks[*].template.metadata.annotations[{_WEIGHTS}]: ")
    validation = {
        "expression": f"size(variables.{bad}) == 0",
        "messageExpression": _weights_message(path, first),
        "reason": "Forbidden",
    }
    return [variable], [validation]
