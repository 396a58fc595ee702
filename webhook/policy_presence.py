"""The CEL of the policies' presence rules (core.intent.rules.PRESENCE_RULES): an annotation
a pod template must not carry, HAMi's scheduler-owned allocation (``forged-allocation``).
Checked where the table's annotation rules are (webhook.policies): a Pod on CREATE, a
workload's template on CREATE and on an UPDATE that changes it, a Volcano Job's new or
changed tasks. One validation per named key, so each fails with the webhook's message for
that key; one more for the keys of the pattern (a device list per backend), which names
the first such key in CEL's map order (the webhook names each, sorted).
"""

from __future__ import annotations

from typing import Any

from core.intent.rules import PresenceRule, forged_allocation_message
from webhook.policy_quantities import cel_raw, cel_string, format_words


def _words(rule: PresenceRule, key: str) -> str:
    """CEL: ``<key>: <message> (rule <code>)`` with the CEL string expression ``key``."""
    assert rule.code == "forged-allocation"  # the one presence rule so far
    text = format_words(forged_allocation_message, key)
    return f"{text} + {cel_string(f' (rule {rule.code})')}"


def _has_key(annotations: str, key: str) -> str:
    return f"{cel_string(key)} in {annotations}"


def _matching(annotations: str, rule: PresenceRule) -> str:
    return f"{annotations}.exists(k, k.matches({cel_raw(rule.key_pattern)}))"


def _first_matching(annotations: str, rule: PresenceRule) -> str:
    return f"{annotations}.filter(k, k.matches({cel_raw(rule.key_pattern)}))[0]"


def template_validations(rule: PresenceRule) -> list[dict[str, Any]]:
    """On the policy numagate-templates (its variables ``template``, ``prefix``,
    ``checked``): the template's annotations, on a Pod's CREATE only (its binding's match)."""
    meta = "variables.template.metadata"
    annotations = f"{meta}.annotations"
    scope = f"variables.checked && has({meta}) && has({annotations})"
    out = []
    for key in rule.keys:
        path = f"metadata.annotations[{key}]: "
        out.append(
            {
                "expression": f"!({scope} && {_has_key(annotations, key)})",
                "messageExpression": f"variables.prefix + {cel_string(path)} + "
                + _words(rule, cel_string(key)),
                "reason": "Forbidden",  # the webhook denies with 403 Forbidden
            }
        )
    key = _first_matching(annotations, rule)
    out.append(
        {
            "expression": f"!({scope} && {_matching(annotations, rule)})",
            "messageExpression": f"variables.prefix + 'metadata.annotations[' + {key} + ']: ' + "
            + _words(rule, key),
            "reason": "Forbidden",
        }
    )
    return out


def _task_annotations(t: str) -> tuple[str, str]:
    """(present, annotations) of the task named ``t`` in CEL."""
    meta = f"{t}.template.metadata"
    return f"has({t}.template) && has({meta}) && has({meta}.annotations)", f"{meta}.annotations"


def task_validations(rule: PresenceRule) -> list[dict[str, Any]]:
    """On the policy numagate-volcano-jobs (its variable ``tasks``: the new or changed
    tasks): each task's template annotations."""
    present, annotations = _task_annotations("t")
    prefix = "spec.tasks[*].template.metadata.annotations["
    out = []
    for key in rule.keys:
        out.append(
            {
                "expression": "!variables.tasks.exists(t, "
                f"{present} && {_has_key(annotations, key)})",
                "messageExpression": f"{cel_string(prefix + key + ']: ')} + "
                + _words(rule, cel_string(key)),
                "reason": "Forbidden",
            }
        )
    bad = f"variables.tasks.filter(t, {present} && {_matching(annotations, rule)})"
    _, first = _task_annotations(f"{bad}[0]")
    key = _first_matching(first, rule)
    out.append(
        {
            "expression": f"!variables.tasks.exists(t, {present} && {_matching(annotations, rule)})",
            "messageExpression": f"{cel_string(prefix)} + {key} + ']: ' + " + _words(rule, key),
            "reason": "Forbidden",
        }
    )
    return out
