"""ValidatingAdmissionPolicy objects (``admissionregistration.k8s.io/v1``) from the rule table
core.intent.rules: the checks that need no cluster state, run by the apiserver itself when
the webhook is down or skipped (issue 29). ``numagate policies`` prints them; the kustomize
component ``manifests/components/policies`` and the Helm chart's ``policies.enabled`` ship
them for the default configuration.

Three policies: Pods and the pod templates of the built-in workloads (``numagate-templates``),
Volcano Jobs, whose tasks carry templates and a ``topologyPolicy``
(``numagate-volcano-jobs``), and the warnings on both (``numagate-warnings``,
webhook.policy_warnings). Each has a binding whose ``validationActions`` follow the
webhook's ``modes.annotations`` (enforce: Deny, warn: Warn, dryrun: Audit; the warnings'
binding warns where the others deny: a binding gives all its policy's rules one action). Scope is the
webhook's: the excluded namespaces and the ignore label, Pods on CREATE, workloads on CREATE
and on an UPDATE that changes a template's annotations or spec. ``failurePolicy: Ignore``:
an expression that cannot be evaluated (the cost budget) admits, as the mutating webhook
fails open; the rules themselves stop at ``limits.VALUE_CHARS`` characters. The rules on
container quantities (``QUANTITY_RULES``) are in webhook.policy_quantities; they need
Kubernetes' CEL quantity library, so ``quantities=False`` leaves them out for a CEL
library without it (the unit tests' cel-python). The annotations a template must not
carry (``PRESENCE_RULES``) are in webhook.policy_presence.
"""

from __future__ import annotations

from typing import Any, Final

from core.intent.rules import PRESENCE_RULES, QUANTITY_RULES, RULES, WARNING_RULES, Rule
from webhook import policy_releases as releases
from webhook.config import Config, Mode
from webhook.policy_presence import task_validations, template_validations
from webhook.policy_quantities import (
    bad_tasks,
    cel_raw,
    cel_string,
    quantity_task_rule,
    quantity_template_validation,
)
from webhook.policy_warnings import WARNINGS, task_part, template_part

API_VERSION: Final = "admissionregistration.k8s.io/v1"
TEMPLATES: Final = "numagate-templates"
VOLCANO_JOBS: Final = "numagate-volcano-jobs"
ACTIONS: Final[dict[Mode, list[str]]] = {
    "enforce": ["Deny"],
    "warn": ["Warn"],
    "dryrun": ["Audit"],
}
# the warnings' binding: the webhook warns for them in every mode but dryrun
WARN_ACTIONS: Final[dict[Mode, list[str]]] = {
    "enforce": ["Warn"],
    "warn": ["Warn"],
    "dryrun": ["Audit"],
}
LABELS: Final = {"app.kubernetes.io/name": "numagate", "app.kubernetes.io/component": "policy"}

_WORKLOADS: Final = (
    ("apps", "v1", ["deployments", "statefulsets", "daemonsets", "replicasets"]),
    ("batch", "v1", ["jobs", "cronjobs"]),
)


# ---- the expressions ------------------------------------------------------------------


def _ok(rule: Rule, value: str, limit: int) -> str:
    """CEL: the value (a string expression) is one the webhook reads."""
    return f"(size({value}) <= {limit} && {value}.matches({cel_raw(rule.pattern)}))"


_MARK: Final = "\x00"


def _message(rule: Rule, path: str, value: str, limit: int) -> str:
    """CEL: the webhook's message for ``value`` failing ``rule``, after ``path`` (a CEL
    string expression): the value quoted as Python's repr quotes a plain one, no
    suggestion (difflib), and a chain's bad token not named."""
    over = f" characters, over numagate's limit of {limit:,}; left as written (rule too-large)"
    before, after = rule.unknown(_MARK).split(_MARK)
    unknown = (
        f"{cel_string(': ' + before + chr(39))} + {value} + "
        f"{cel_string(chr(39) + after + f' (rule {rule.code})')}"
    )
    too_large = f"{cel_string(f': {rule.key}: ')} + string(size({value})) + {cel_string(over)}"
    return f"{path} + (size({value}) > {limit} ? {too_large} : {unknown})"


def _annotation(meta: str, key: str) -> str:
    return f"{meta}.annotations[{cel_string(key)}]"


def _has_annotation(meta: str, key: str) -> str:
    return f"has({meta}.annotations) && {cel_string(key)} in {meta}.annotations"


def _template_validation(rule: Rule, limit: int) -> dict[str, Any]:
    meta = "variables.template.metadata"
    value = _annotation(meta, rule.key)
    present = f"variables.checked && has({meta}) && {_has_annotation(meta, rule.key)}"
    path = f"variables.prefix + {cel_string(f'metadata.annotations[{rule.key}]')}"
    return {
        "expression": f"!({present}) || {_ok(rule, value, limit)}",
        "messageExpression": _message(rule, path, value, limit),
        "reason": "Forbidden",  # the webhook denies with 403 Forbidden
    }


def _task_parts(rule: Rule, t: str) -> tuple[str, str, str]:
    """(present, value, path) of ``rule`` for the task named ``t`` in CEL."""
    if rule.where == "task":  # the job controller copies a non-empty value only
        value = f"{t}.{rule.key}"
        return f"has({value}) && {value} != ''", value, f"spec.tasks[*].{rule.key}"
    meta = f"{t}.template.metadata"
    present = f"has({t}.template) && has({meta}) && {_has_annotation(meta, rule.key)}"
    path = f"spec.tasks[*].template.metadata.annotations[{rule.key}]"
    return present, _annotation(meta, rule.key), path


def _bad_tasks(rule: Rule) -> str:
    return bad_tasks(rule.name)


def _task_variable(rule: Rule, limit: int) -> dict[str, str]:
    present, value, _ = _task_parts(rule, "t")
    ok = _ok(rule, value, limit)
    return {
        "name": _bad_tasks(rule),
        "expression": f"variables.tasks.filter(t, {present} && !{ok})",
    }


def _task_validation(rule: Rule, limit: int) -> dict[str, Any]:
    """A rule over every (changed) task of a Volcano Job: its template's annotation, or its
    field; the message quotes the first task that fails."""
    bad = f"variables.{_bad_tasks(rule)}"
    _, first_value, path = _task_parts(rule, f"{bad}[0]")
    return {
        "expression": f"size({bad}) == 0",
        "messageExpression": _message(rule, cel_string(path), first_value, limit),
        "reason": "Forbidden",  # the webhook denies with 403 Forbidden
    }


def _selectors(config: Config) -> dict[str, Any]:
    excluded = sorted({config.namespace, *config.excluded_namespaces})
    ignore = {"key": config.ignore_label, "operator": "NotIn", "values": ["true"]}
    return {
        "namespaceSelector": {
            "matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": excluded},
                ignore,
            ]
        },
        "objectSelector": {"matchExpressions": [ignore]},
    }


def _rule(group: str, version: str, resources: list[str], ops: list[str]) -> dict[str, Any]:
    return {
        "apiGroups": [group],
        "apiVersions": [version],
        "resources": resources,
        "operations": ops,
        "scope": "Namespaced",
    }


def _policy(name: str, rules: list[dict[str, Any]], spec: dict[str, Any], config: Config) -> Any:
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": dict(LABELS)},
        "spec": {
            "failurePolicy": "Ignore",
            "matchConstraints": {
                "matchPolicy": "Equivalent",
                "resourceRules": rules,
                **_selectors(config),
            },
            **spec,
        },
    }


def _binding(name: str, config: Config, actions: dict[Mode, list[str]] = ACTIONS) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": dict(LABELS)},
        "spec": {"policyName": name, "validationActions": actions[config.modes.annotations]},
    }


# Where a workload keeps its pod template (core.intent.workloads.TEMPLATE_PATHS), as CEL.
_TEMPLATE = (
    "{o}.kind == 'Pod' ? {o} : ({o}.kind == 'CronJob' ? {o}.spec.jobTemplate.spec.template "
    ": {o}.spec.template)"
)
_CHANGED = (
    "request.operation != 'UPDATE' || oldObject == null || "
    "variables.oldTemplate.spec != variables.template.spec || "
    "(has(variables.template.metadata) ? variables.template.metadata : {}) != "
    "(has(variables.oldTemplate.metadata) ? variables.oldTemplate.metadata : {})"
)


def _template_rules() -> list[dict[str, Any]]:
    rules = [_rule("", "v1", ["pods"], ["CREATE"])]
    return rules + [_rule(g, v, r, ["CREATE", "UPDATE"]) for g, v, r in _WORKLOADS]


def _template_variables(template: str) -> list[dict[str, str]]:
    """``template`` (CEL): the object's pod template; the other variables follow from it."""
    return [
        {"name": "template", "expression": template},
        {
            "name": "oldTemplate",
            "expression": f"oldObject == null ? {{}} : ({_TEMPLATE.format(o='oldObject')})",
        },
        {
            "name": "prefix",
            "expression": "object.kind == 'Pod' ? '' : (object.kind == 'CronJob' ? "
            "'spec.jobTemplate.spec.template.' : 'spec.template.')",
        },
        {"name": "checked", "expression": _CHANGED},
    ]


def templates_policy(config: Config, limit: int, quantities: bool = True) -> dict[str, Any]:
    variables = _template_variables(_TEMPLATE.format(o="object"))
    validations = [_template_validation(r, limit) for r in RULES if r.where == "annotation"]
    validations += [v for r in PRESENCE_RULES for v in template_validations(r)]
    validations += releases.template_validations(config.core_versions, limit)
    validations += releases.weights_template_validations(config.core_versions, limit)
    if quantities:
        validations += [
            quantity_template_validation(r) for r in QUANTITY_RULES if r.where == "template"
        ]
    spec = {"variables": variables, "validations": validations}
    return _policy(TEMPLATES, _template_rules(), spec, config)


_VOLCANO_RULE: Final = ("batch.volcano.sh", "v1alpha1", ["jobs"])
# on UPDATE, only tasks that are not in the old object unchanged (the webhook's rule)
_TASKS: Final = (
    "has(object.spec.tasks) ? object.spec.tasks.filter(t, request.operation != 'UPDATE' "
    "|| oldObject == null || !has(oldObject.spec.tasks) || !(t in oldObject.spec.tasks)) "
    ": []"
)


def volcano_jobs_policy(config: Config, limit: int, quantities: bool = True) -> dict[str, Any]:
    rules = [_rule(*_VOLCANO_RULE, ["CREATE", "UPDATE"])]
    variables = [{"name": "tasks", "expression": _TASKS}]
    variables += [_task_variable(r, limit) for r in RULES]
    validations = [_task_validation(r, limit) for r in RULES]
    validations += [v for r in PRESENCE_RULES for v in task_validations(r)]
    for release_rule in (releases.task_rule, releases.weights_task_rule):
        release_variables, release_validations = release_rule(config.core_versions, limit)
        variables += release_variables
        validations += release_validations
    if quantities:
        for variable, validation in map(quantity_task_rule, QUANTITY_RULES):
            variables.append(variable)
            validations.append(validation)
    spec = {"variables": variables, "validations": validations}
    return _policy(VOLCANO_JOBS, rules, spec, config)


def warnings_policy(config: Config, limit: int) -> dict[str, Any]:
    """The warnings (WARNING_RULES) on Pods, workload templates and Volcano Jobs' tasks, in
    a policy of their own: its binding warns where the others deny."""
    rules = [*_template_rules(), _rule(*_VOLCANO_RULE, ["CREATE", "UPDATE"])]
    volcano = "object.apiVersion.startsWith('batch.volcano.sh/')"
    variables = [{"name": "volcanoJob", "expression": volcano}]
    variables += _template_variables(
        f"variables.volcanoJob ? {{}} : ({_TEMPLATE.format(o='object')})"
    )
    variables.append({"name": "tasks", "expression": f"!variables.volcanoJob ? [] : ({_TASKS})"})
    template_variables, template_validations = template_part(limit)
    task_variables, task_validations = task_part(limit)
    validations = [
        v for r in WARNING_RULES for v in (template_validations[r.name], task_validations[r.name])
    ]
    spec = {
        "variables": [*variables, *template_variables, *task_variables],
        "validations": validations,
    }
    return _policy(WARNINGS, rules, spec, config)


def policies(config: Config, value_chars: int, quantities: bool = True) -> list[dict[str, Any]]:
    """The policies and their bindings for ``config`` (``value_chars``: limits.VALUE_CHARS
    or its configured value). ``quantities=False`` leaves out the rules that need
    Kubernetes' quantity library (QUANTITY_RULES) and the policy of the warnings
    (WARNING_RULES), which needs it throughout: what a CEL library without it can run."""
    out = [
        templates_policy(config, value_chars, quantities),
        _binding(TEMPLATES, config),
        volcano_jobs_policy(config, value_chars, quantities),
        _binding(VOLCANO_JOBS, config),
    ]
    if quantities:
        out += [warnings_policy(config, value_chars), _binding(WARNINGS, config, WARN_ACTIONS)]
    return out
