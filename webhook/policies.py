"""ValidatingAdmissionPolicy objects (``admissionregistration.k8s.io/v1``) from the rule table
core.intent.rules: the checks that need no cluster state, run by the apiserver itself when
the webhook is down or skipped (issue 29). ``numagate policies`` prints them; the kustomize
component ``manifests/components/policies`` and the Helm chart's ``policies.enabled`` ship
them for the default configuration.

Two policies: Pods and the pod templates of the built-in workloads (``numagate-templates``),
and Volcano Jobs, whose tasks carry templates and a ``topologyPolicy``
(``numagate-volcano-jobs``). Each has a binding whose ``validationActions`` follow the
webhook's ``modes.annotations`` (enforce: Deny, warn: Warn, dryrun: Audit). Scope is the
webhook's: the excluded namespaces and the ignore label, Pods on CREATE, workloads on CREATE
and on an UPDATE that changes a template's annotations or spec. ``failurePolicy: Ignore``:
an expression that cannot be evaluated (the cost budget) admits, as the mutating webhook
fails open; the rules themselves stop at ``limits.VALUE_CHARS`` characters.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final

from core.intent import dialects as d
from core.intent.rules import (
    HAMI_PERCENT_MAX,
    QUANTITY_RULES,
    RULES,
    VOLCANO_CPU_POLICIES,
    QuantityRule,
    Rule,
    hami_range_message,
    volcano_cpu_message,
)
from webhook.config import Config, Mode

API_VERSION: Final = "admissionregistration.k8s.io/v1"
TEMPLATES: Final = "numagate-templates"
VOLCANO_JOBS: Final = "numagate-volcano-jobs"
ACTIONS: Final[dict[Mode, list[str]]] = {
    "enforce": ["Deny"],
    "warn": ["Warn"],
    "dryrun": ["Audit"],
}
LABELS: Final = {"app.kubernetes.io/name": "numagate", "app.kubernetes.io/component": "policy"}

_WORKLOADS: Final = (
    ("apps", "v1", ["deployments", "statefulsets", "daemonsets", "replicasets"]),
    ("batch", "v1", ["jobs", "cronjobs"]),
)


def cel_string(text: str) -> str:
    """A CEL string literal (single-quoted, backslashes and quotes escaped)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def cel_raw(text: str) -> str:
    """A raw CEL string literal (backslashes kept as written: RE2 patterns)."""
    if "'" in text or "\n" in text:
        raise ValueError(f"not a raw CEL string: {text[:40]!r}")
    return f"r'{text}'"


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


def _bad_tasks(rule: Rule | QuantityRule) -> str:
    """The variable holding the (changed) tasks that fail ``rule``."""
    return "bad_" + rule.name.replace("-", "_")


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


# ---- the quantity rules (Kubernetes' CEL quantity library; core.intent.rules) ---------
# ``[x].map(v, f(v))[0]`` and ``[x].exists(v, p(v))`` bind a value once (no cel.bind in 1.30).

# core.quantity.MAX_VALUE in core units: a larger quantity is the webhook's invalid-quantity
_MAX_COUNT: Final = "4611686018427387904"
_MAX_CPU: Final = "4611686018427387"  # cores: MAX_VALUE millicores


def _format(words: Callable[..., str], *args: str) -> str:
    """CEL: the text ``words(...)`` makes, with the CEL string expressions ``args`` in
    place of its arguments."""
    parts = re.split("\x00(\\d+)\x00", words(*(f"\x00{i}\x00" for i in range(len(args)))))
    out = [f"({args[int(p)]})" if i % 2 else cel_string(p) for i, p in enumerate(parts) if p]
    return " + ".join(out)


def _quoted(value: str) -> str:
    """CEL: a quantity as Python's repr shows it (a string quoted, a number not)."""
    return f'(type({value}) == string ? "\'" + {value} + "\'" : string({value}))'


def _containers(spec: str, name: str) -> str:
    return f"(has({spec}.{name}) ? {spec}.{name} : [])"


_LISTS: Final = ("initContainers", "containers")  # the webhook's order


def _hami_entries(c: str) -> list[tuple[str, str, str]]:
    """(over 100, value, field) of each HAMi percentage of container ``c``, in the
    webhook's order."""
    out = []
    for section in ("limits", "requests"):
        for name in d.HAMI_PERCENT_RESOURCES:
            values = f"{c}.resources.{section}"
            value = f"{values}[{cel_string(name)}]"
            text = f"string({value})"
            over = (
                f"(has({c}.resources) && has({values}) && {cel_string(name)} in {values} && "
                f"isQuantity({text}) && quantity({text}).isGreaterThan(quantity("
                f"'{HAMI_PERCENT_MAX}')) && !quantity({text}).isGreaterThan(quantity("
                f"'{_MAX_COUNT}')))"
            )
            out.append((over, value, f"resources.{section}[{name}]"))
    return out


def _hami_bad(c: str) -> str:
    return "(" + " || ".join(over for over, _, _ in _hami_entries(c)) + ")"


def _hami_message(rule: QuantityRule, c: str, path: str) -> str:
    """CEL: the message of container ``c``'s first HAMi percentage over 100."""
    text = "''"
    for over, value, field in reversed(_hami_entries(c)):
        name = field.split("[", 1)[1][:-1]
        said = _format(hami_range_message, cel_string(name), _quoted(value))
        here = f"{cel_string(f'{path}.{field}: ')} + {said} + {cel_string(f' (rule {rule.code})')}"
        text = f"({over} ? {here} : {text})"
    return text


def _first_bad(spec: str, bad: Callable[[str], str], message: Callable[[str, str], str]) -> str:
    """CEL: the message of the first container of pod spec ``spec`` that is ``bad``, init
    containers first; ``message(c, list_name)``."""
    init, app = (_containers(spec, n) for n in _LISTS)
    first_init = f"[{init}.filter(c, {bad('c')})[0]].map(k, {message('k', 'initContainers')})[0]"
    first_app = f"[{app}.filter(c, {bad('c')})[0]].map(k, {message('k', 'containers')})[0]"
    return f"({init}.exists(c, {bad('c')}) ? {first_init} : {first_app})"


def _any_bad(spec: str, bad: Callable[[str], str]) -> str:
    return " || ".join(f"{_containers(spec, n)}.exists(c, {bad('c')})" for n in _LISTS)


def _hami_template_validation(rule: QuantityRule) -> dict[str, Any]:
    spec = "variables.template.spec"
    present = f"variables.checked && has({spec})"
    message = _first_bad(spec, _hami_bad, lambda c, n: _hami_message(rule, c, f"spec.{n}[*]"))
    return {
        "expression": f"!({present}) || !({_any_bad(spec, _hami_bad)})",
        "messageExpression": f"variables.prefix + {message}",
        "reason": "Forbidden",
    }


def _cpu_millis(c: str) -> str:
    """CEL: container ``c``'s CPU in millicores, rounded up, as Volcano's rule reads it
    (the request, or the limit when the requests map is empty); 0 when unset or not a
    quantity the webhook reads (its invalid-quantity)."""
    given = f"has({c}.resources) && has({c}.resources.requests) && size({c}.resources.requests) > 0"
    limits = f"has({c}.resources) && has({c}.resources.limits) && 'cpu' in {c}.resources.limits"
    text = (
        f"({given} ? ('cpu' in {c}.resources.requests ? string({c}.resources.requests['cpu']) "
        f": '0') : ({limits} ? string({c}.resources.limits['cpu']) : '0'))"
    )
    # exact ceiling: the float's rounding is off by under half a millicore
    ceiling = (
        "[int(quantity(s).asApproximateFloat() * 1000.0 + 0.5)].map(r, "
        "quantity(string(r) + 'm').isLessThan(quantity(s)) ? r + 1 : r)[0]"
    )
    readable = f"isQuantity(s) && !quantity(s).isLessThan(quantity('0')) && !quantity(s).isGreaterThan(quantity('{_MAX_CPU}'))"
    return f"[{text}].map(s, {readable} ? {ceiling} : 0)[0]"


def _cpu_section(c: str) -> str:
    return (
        f"(has({c}.resources) && has({c}.resources.requests) && size({c}.resources.requests) "
        "> 0 ? 'requests' : 'limits')"
    )


def _fractional(c: str) -> str:
    return f"[{_cpu_millis(c)}].exists(m, m <= 0 || m % 1000 != 0)"


def _volcano_task_strict(t: str) -> str:
    """CEL: task ``t`` has a policy under which Volcano wants integer CPUs, and its pods are
    Volcano's (the webhook's scheduler rule: not another scheduler named)."""
    others = sorted(n for n, s in d.SCHEDULER_BY_NAME.items() if s != "volcano")
    spec = f"{t}.template.spec"
    return (
        f"has({t}.topologyPolicy) && {t}.topologyPolicy in {list(VOLCANO_CPU_POLICIES)} && "
        f"has({t}.template) && has({spec}) && !(has({spec}.schedulerName) && "
        f"{spec}.schedulerName in {others})"
    )


def _cpu_message(rule: QuantityRule, t: str) -> Callable[[str, str], str]:
    def message(c: str, list_name: str) -> str:
        section = _cpu_section(c)
        shown = f"[{_cpu_millis(c)}].map(m, m == 0 ? '0 (unset)' : string(m) + 'm')[0]"
        name = f'(has({c}.name) ? "\'" + {c}.name + "\'" : "\'#\'")'
        policy = f'"\'" + {t}.topologyPolicy + "\'"'
        path = cel_string(f"spec.tasks[*].template.spec.{list_name}[*].resources.")
        said = _format(volcano_cpu_message, name, section, shown, policy)
        return f"{path} + {section} + '[cpu]: ' + {said} + {cel_string(f' (rule {rule.code})')}"

    return message


def _quantity_task_parts(rule: QuantityRule) -> tuple[str, str]:
    """(the filter over tasks ``t`` that fail ``rule``, the message of ``T``: the first)."""
    spec, first = "t.template.spec", "variables." + _bad_tasks(rule) + "[0]"
    if rule.code == "out-of-range":
        bad = f"has(t.template) && has({spec}) && ({_any_bad(spec, _hami_bad)})"
        message = _first_bad(
            f"{first}.template.spec",
            _hami_bad,
            lambda c, n: _hami_message(rule, c, f"spec.tasks[*].template.spec.{n}[*]"),
        )
        return bad, message
    bad = f"{_volcano_task_strict('t')} && ({_any_bad(spec, _fractional)})"
    return bad, _first_bad(f"{first}.template.spec", _fractional, _cpu_message(rule, first))


def _quantity_task_rule(rule: QuantityRule) -> tuple[dict[str, str], dict[str, Any]]:
    bad, message = _quantity_task_parts(rule)
    variable = {"name": _bad_tasks(rule), "expression": f"variables.tasks.filter(t, {bad})"}
    validation = {
        "expression": f"size(variables.{_bad_tasks(rule)}) == 0",
        "messageExpression": message,
        "reason": "Forbidden",
    }
    return variable, validation


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


def _binding(name: str, config: Config) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": dict(LABELS)},
        "spec": {"policyName": name, "validationActions": ACTIONS[config.modes.annotations]},
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


def templates_policy(config: Config, limit: int, quantities: bool = True) -> dict[str, Any]:
    rules = [_rule("", "v1", ["pods"], ["CREATE"])]
    rules += [_rule(g, v, r, ["CREATE", "UPDATE"]) for g, v, r in _WORKLOADS]
    variables = [
        {"name": "template", "expression": _TEMPLATE.format(o="object")},
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
    validations = [_template_validation(r, limit) for r in RULES if r.where == "annotation"]
    if quantities:
        validations += [
            _hami_template_validation(r) for r in QUANTITY_RULES if r.where == "template"
        ]
    spec = {"variables": variables, "validations": validations}
    return _policy(TEMPLATES, rules, spec, config)


def volcano_jobs_policy(config: Config, limit: int, quantities: bool = True) -> dict[str, Any]:
    rules = [_rule("batch.volcano.sh", "v1alpha1", ["jobs"], ["CREATE", "UPDATE"])]
    # on UPDATE, only tasks that are not in the old object unchanged (the webhook's rule)
    tasks = (
        "has(object.spec.tasks) ? object.spec.tasks.filter(t, request.operation != 'UPDATE' "
        "|| oldObject == null || !has(oldObject.spec.tasks) || !(t in oldObject.spec.tasks)) "
        ": []"
    )
    variables = [{"name": "tasks", "expression": tasks}]
    variables += [_task_variable(r, limit) for r in RULES]
    validations = [_task_validation(r, limit) for r in RULES]
    if quantities:
        for variable, validation in map(_quantity_task_rule, QUANTITY_RULES):
            variables.append(variable)
            validations.append(validation)
    spec = {"variables": variables, "validations": validations}
    return _policy(VOLCANO_JOBS, rules, spec, config)


def policies(config: Config, value_chars: int, quantities: bool = True) -> list[dict[str, Any]]:
    """The policies and their bindings for ``config`` (``value_chars``: limits.VALUE_CHARS
    or its configured value). ``quantities=False`` leaves out the rules that need
    Kubernetes' quantity library (QUANTITY_RULES): what a CEL library without it can run."""
    return [
        templates_policy(config, value_chars, quantities),
        _binding(TEMPLATES, config),
        volcano_jobs_policy(config, value_chars, quantities),
        _binding(VOLCANO_JOBS, config),
    ]
