"""The CEL of the policies' rules on container quantities (core.intent.rules.QUANTITY_RULES),
which need Kubernetes' CEL quantity library (``isQuantity``, ``quantity``,
``isGreaterThan``, ``isLessThan``, ``asApproximateFloat``; Kubernetes 1.29+), and the CEL
literals webhook.policies also uses. Each rule reads the containers as the webhook does
(core.intent.hami.hami_ranges, core.intent.containers.check_exclusive_cpus) and words its
failure with the webhook's message from the rule table; a container is named ``[*]``
(finding its index needs comprehensions newer than Kubernetes 1.30). A value the
webhook cannot read as a quantity fails nothing here (the webhook's ``invalid-quantity``;
the apiserver's own validation refuses it in a Pod or a workload).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final

from core.intent import dialects as d
from core.intent.rules import (
    HAMI_PERCENT_MAX,
    VOLCANO_CPU_POLICIES,
    QuantityRule,
    hami_range_message,
    volcano_cpu_message,
)


def cel_string(text: str) -> str:
    """A CEL string literal (single-quoted, backslashes and quotes escaped)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def cel_raw(text: str) -> str:
    """A raw CEL string literal (backslashes kept as written: RE2 patterns)."""
    if "'" in text or "\n" in text:
        raise ValueError(f"not a raw CEL string: {text[:40]!r}")
    return f"r'{text}'"


def bad_tasks(rule_name: str) -> str:
    """The variable holding the (changed) Volcano Job tasks that fail the rule."""
    return "bad_" + rule_name.replace("-", "_")


# ``[x].map(v, f(v))[0]`` and ``[x].exists(v, p(v))`` bind a value once (plain CEL macros,
# in every Kubernetes version the policies support).

# core.quantity.MAX_VALUE in core units: a larger quantity is the webhook's invalid-quantity
MAX_COUNT: Final = "4611686018427387904"
MAX_CPU: Final = "4611686018427387"  # cores: MAX_VALUE millicores


def format_words(words: Callable[..., str], *args: str) -> str:
    """CEL: the text ``words(...)`` makes, with the CEL string expressions ``args`` in
    place of its arguments."""
    parts = re.split("\x00(\\d+)\x00", words(*(f"\x00{i}\x00" for i in range(len(args)))))
    out = [f"({args[int(p)]})" if i % 2 else cel_string(p) for i, p in enumerate(parts) if p]
    return " + ".join(out)


def _quoted(value: str) -> str:
    """CEL: a quantity as Python's repr shows it (a string quoted, a number not)."""
    return f'(type({value}) == string ? "\'" + {value} + "\'" : string({value}))'


def containers(spec: str, name: str) -> str:
    return f"(has({spec}.{name}) ? {spec}.{name} : [])"


LISTS: Final = ("initContainers", "containers")  # the webhook's order


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
                f"'{MAX_COUNT}')))"
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
        said = format_words(hami_range_message, cel_string(name), _quoted(value))
        here = f"{cel_string(f'{path}.{field}: ')} + {said} + {cel_string(f' (rule {rule.code})')}"
        text = f"({over} ? {here} : {text})"
    return text


def first_bad(spec: str, bad: Callable[[str], str], message: Callable[[str, str], str]) -> str:
    """CEL: the message of the first container of pod spec ``spec`` that is ``bad``, init
    containers first; ``message(c, list_name)``."""
    init, app = (containers(spec, n) for n in LISTS)
    first_init = f"[{init}.filter(c, {bad('c')})[0]].map(k, {message('k', 'initContainers')})[0]"
    first_app = f"[{app}.filter(c, {bad('c')})[0]].map(k, {message('k', 'containers')})[0]"
    return f"({init}.exists(c, {bad('c')}) ? {first_init} : {first_app})"


def _any_bad(spec: str, bad: Callable[[str], str]) -> str:
    return " || ".join(f"{containers(spec, n)}.exists(c, {bad('c')})" for n in LISTS)


def quantity_template_validation(rule: QuantityRule) -> dict[str, Any]:
    spec = "variables.template.spec"
    present = f"variables.checked && has({spec})"
    message = first_bad(spec, _hami_bad, lambda c, n: _hami_message(rule, c, f"spec.{n}[*]"))
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
    readable = f"isQuantity(s) && !quantity(s).isLessThan(quantity('0')) && !quantity(s).isGreaterThan(quantity('{MAX_CPU}'))"
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
    Volcano's (the webhook's scheduler rule: not another scheduler named, the name
    stripped as the webhook strips it)."""
    others = sorted(n for n, s in d.SCHEDULER_BY_NAME.items() if s != "volcano")
    spec = f"{t}.template.spec"
    return (
        f"has({t}.topologyPolicy) && {t}.topologyPolicy in {list(VOLCANO_CPU_POLICIES)} && "
        f"has({t}.template) && has({spec}) && !(has({spec}.schedulerName) && "
        f"{spec}.schedulerName.trim() in {others})"
    )


def _cpu_message(rule: QuantityRule, t: str) -> Callable[[str, str], str]:
    def message(c: str, list_name: str) -> str:
        section = _cpu_section(c)
        shown = f"[{_cpu_millis(c)}].map(m, m == 0 ? '0 (unset)' : string(m) + 'm')[0]"
        name = f'(has({c}.name) ? "\'" + {c}.name + "\'" : "\'#\'")'
        policy = f'"\'" + {t}.topologyPolicy + "\'"'
        path = cel_string(f"spec.tasks[*].template.spec.{list_name}[*].resources.")
        said = format_words(volcano_cpu_message, name, section, shown, policy)
        return f"{path} + {section} + '[cpu]: ' + {said} + {cel_string(f' (rule {rule.code})')}"

    return message


def _quantity_task_parts(rule: QuantityRule) -> tuple[str, str]:
    """(the filter over tasks ``t`` that fail ``rule``, the message of ``T``: the first)."""
    spec, first = "t.template.spec", f"variables.{bad_tasks(rule.name)}[0]"
    if rule.code == "out-of-range":
        bad = f"has(t.template) && has({spec}) && ({_any_bad(spec, _hami_bad)})"
        message = first_bad(
            f"{first}.template.spec",
            _hami_bad,
            lambda c, n: _hami_message(rule, c, f"spec.tasks[*].template.spec.{n}[*]"),
        )
        return bad, message
    bad = f"{_volcano_task_strict('t')} && ({_any_bad(spec, _fractional)})"
    return bad, first_bad(f"{first}.template.spec", _fractional, _cpu_message(rule, first))


def quantity_task_rule(rule: QuantityRule) -> tuple[dict[str, str], dict[str, Any]]:
    bad, message = _quantity_task_parts(rule)
    variable = {"name": bad_tasks(rule.name), "expression": f"variables.tasks.filter(t, {bad})"}
    validation = {
        "expression": f"size(variables.{bad_tasks(rule.name)}) == 0",
        "messageExpression": message,
        "reason": "Forbidden",
    }
    return variable, validation
