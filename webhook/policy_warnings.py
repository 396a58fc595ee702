"""The policy of the warnings (core.intent.rules.WARNING_RULES): a NUMA policy on a pod that
is not Guaranteed (``not-guaranteed``), and, on a Guaranteed one, a container without
integer CPUs (``fractional-cpu``), as core.intent.containers.check_exclusive_cpus finds
them. A binding gives one action to all its policy's validations, so these have a policy of
their own (``numagate-warnings``) whose binding warns where the denials deny (enforce and
warn: Warn, dryrun: Audit).

CEL reads the NUMA policy where it is a plain string: Volcano's pod annotation (Pods and
workload templates) and a Volcano Job task's ``topologyPolicy`` (which wins over its
template's annotation, as the job controller overwrites it). Koordinator's is inside a JSON
annotation, which CEL cannot parse: the webhook stays its only home. Each value is folded
as the webhook folds it (its RE2 per policy, core.intent.rules), quantities are read in
the webhook's core units (millicores and bytes, rounded up), and the QoS class is
Kubernetes' over cpu and memory, init containers and sidecars included. Needs Kubernetes'
CEL quantity and list libraries (``quantity``, ``sum``), the apiserver's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from core.intent import dialects as d
from core.intent.rules import (
    NOT_GUARANTEED,
    WHOLE_CPUS,
    anchored,
    not_guaranteed_message,
    value_pattern,
    whole_cpu_message,
)
from webhook.policy_quantities import (
    LISTS,
    MAX_COUNT,
    MAX_CPU,
    cel_raw,
    cel_string,
    containers,
    first_bad,
    format_words,
)

WARNINGS: Final = "numagate-warnings"
_OTHERS: Final = sorted(n for n, s in d.SCHEDULER_BY_NAME.items() if s != "volcano")
_ANNOTATION: Final = cel_string(d.VOLCANO_NUMA_POLICY)
_QOS: Final = ("cpu", "memory")  # core.intent.containers.QOS_RESOURCES


def policy_value(value: str, limit: int) -> str:
    """CEL: the Volcano policy the webhook reads in the string ``value`` (any spelling it
    folds), '' for none, an unknown value or one over ``limit`` characters."""
    text = "''"
    for policy in reversed([p for p in d.VOLCANO_POLICIES if p != d.POLICY_NONE]):
        pattern = cel_raw(anchored(value_pattern([policy])))
        text = f"(v.matches({pattern}) ? {cel_string(policy)} : {text})"
    return f"[{value}].map(v, size(v) <= {limit} ? {text} : '')[0]"


def _volcano_scheduled(spec: str) -> str:
    """The webhook's scheduler rule: a pod with Volcano's policy is Volcano's unless its
    (stripped) schedulerName names another scheduler."""
    return f"!(has({spec}.schedulerName) && {spec}.schedulerName.trim() in {_OTHERS})"


# ---- container quantities in the webhook's core units ---------------------------------


def _text(c: str, section: str, resource: str) -> str:
    values = f"{c}.resources.{section}"
    key = cel_string(resource)
    return (
        f"(has({c}.resources) && has({values}) && {key} in {values} ? string({values}[{key}]) : '')"
    )


def _readable(s: str, resource: str) -> str:
    """A quantity core.quantity.to_core_units reads: not negative, not over MAX_VALUE."""
    top = MAX_CPU if resource == "cpu" else MAX_COUNT
    return (
        f"(isQuantity({s}) && !quantity({s}).isLessThan(quantity('0')) && "
        f"!quantity({s}).isGreaterThan(quantity('{top}')))"
    )


def _units(s: str, resource: str) -> str:
    """Core units of the readable quantity ``s``, rounded up: exact for an integer, else
    the float's nearest value corrected by one comparison."""
    if resource == "cpu":
        exact = f"quantity({s}).asInteger() * 1000"
        near, unit = f"int(quantity({s}).asApproximateFloat() * 1000.0 + 0.5)", "'m'"
    else:
        exact = f"quantity({s}).asInteger()"
        near, unit = f"int(quantity({s}).asApproximateFloat() + 0.5)", "''"
    ceiling = (
        f"[{near}].map(r, quantity(string(r) + {unit}).isLessThan(quantity({s})) ? r + 1 : r)[0]"
    )
    return f"(quantity({s}).isInteger() ? {exact} : {ceiling})"


def _limit(c: str, resource: str) -> str:
    text = _text(c, "limits", resource)
    return f"[{text}].map(s, {_readable('s', resource)} ? {_units('s', resource)} : 0)[0]"


def _request(c: str, resource: str) -> str:
    """The request after API defaulting: an unset (or unreadable) request takes the limit."""
    given, limit = _text(c, "requests", resource), _text(c, "limits", resource)
    merged = f"[{given}].map(q, {_readable('q', resource)} ? q : {limit})[0]"
    return f"[{merged}].map(s, {_readable('s', resource)} ? {_units('s', resource)} : 0)[0]"


def all_containers(spec: str) -> str:
    return " + ".join(containers(spec, n) for n in LISTS)


def qos(items: str) -> str:
    """CEL: Kubernetes' QoS class (GetPodQOS over cpu and memory) of the containers
    ``items``, as core.intent.containers.pod_qos computes it."""
    limited = " && ".join(f"{_limit('c', r)} > 0" for r in _QOS)
    sums = " && ".join(
        f"{items}.map(c, {_request('c', r)}).sum() == {items}.map(c, {_limit('c', r)}).sum()"
        for r in _QOS
    )
    none = " && ".join(f"{f('c', r)} == 0" for r in _QOS for f in (_request, _limit))
    return (
        f"({items}.all(c, {limited}) && {sums} ? 'Guaranteed' : "
        f"({items}.all(c, {none}) ? 'BestEffort' : 'Burstable'))"
    )


def _fractional(c: str) -> str:
    return f"[{_request(c, 'cpu')}].exists(m, m <= 0 || m % 1000 != 0)"


def _quoted(text: str) -> str:
    return f'"\'" + {text} + "\'"'


def _whole_cpu_words(policy: str) -> Callable[[str, str], str]:
    def message(c: str, list_name: str) -> str:
        name = f"(has({c}.name) ? {_quoted(f'{c}.name')} : \"'#'\")"
        cpu = (
            f"[{_request(c, 'cpu')}].map(m, m % 1000 == 0 ? string(m / 1000) : string(m) + 'm')[0]"
        )
        path = cel_string(f"spec.{list_name}[*].resources.requests[cpu]: ")
        said = format_words(whole_cpu_message, name, cpu, _quoted(policy))
        return f"{path} + {said} + {cel_string(' (rule fractional-cpu)')}"

    return message


def _not_guaranteed_words(policy: str, qos_class: str) -> str:
    said = format_words(not_guaranteed_message, _quoted(policy), qos_class)
    return f"{said} + {cel_string(f' (rule {NOT_GUARANTEED})')}"


# ---- Pods and workload templates: Volcano's annotation ---------------------------------


def template_part(limit: int) -> tuple[list[dict[str, str]], dict[str, dict[str, Any]]]:
    """Variables and validations over ``variables.template`` (webhook.policies), which the
    caller defines; skipped for a Volcano Job (``variables.volcanoJob``)."""
    meta, spec = "variables.template.metadata", "variables.template.spec"
    present = (
        f"!variables.volcanoJob && variables.checked && has({meta}) && has({meta}.annotations)"
        f" && {_ANNOTATION} in {meta}.annotations && has({spec}) && {_volcano_scheduled(spec)}"
    )
    value = policy_value(f"{meta}.annotations[{_ANNOTATION}]", limit)
    variables = [
        {"name": "numaPolicy", "expression": f"{present} ? {value} : ''"},
        {"name": "containers", "expression": f"has({spec}) ? {all_containers(spec)} : []"},
        {"name": "qos", "expression": qos("variables.containers")},
    ]
    path = cel_string(f"metadata.annotations[{d.VOLCANO_NUMA_POLICY}]: ")
    words = _not_guaranteed_words("variables.numaPolicy", "variables.qos")
    fraction = first_bad(spec, _fractional, _whole_cpu_words("variables.numaPolicy"))
    validations = {
        NOT_GUARANTEED: {
            "expression": "variables.numaPolicy == '' || size(variables.containers) == 0 || "
            "variables.qos == 'Guaranteed'",
            "messageExpression": f"variables.prefix + {path} + {words}",
        },
        WHOLE_CPUS: {
            "expression": "variables.numaPolicy == '' || variables.qos != 'Guaranteed' || "
            f"!variables.containers.exists(c, {_fractional('c')})",
            "messageExpression": f"variables.prefix + {fraction}",
        },
    }
    return variables, validations


# ---- Volcano Jobs: each (changed) task's policy ------------------------------------------


def _task_field(t: str) -> str:
    return f"has({t}.topologyPolicy) && {t}.topologyPolicy != ''"


def _task_policy(t: str, limit: int) -> str:
    """CEL: the policy of task ``t`` as the webhook reads it: the non-empty topologyPolicy,
    else its template's annotation; '' when none applies."""
    meta, spec = f"{t}.template.metadata", f"{t}.template.spec"
    annotated = f"has({meta}) && has({meta}.annotations) && {_ANNOTATION} in {meta}.annotations"
    chosen = (
        f"{_task_field(t)} ? {policy_value(f'{t}.topologyPolicy', limit)} : ({annotated} ? "
        f"{policy_value(f'{meta}.annotations[{_ANNOTATION}]', limit)} : '')"
    )
    scheduled = f"has({t}.template) && has({spec}) && {_volcano_scheduled(spec)}"
    return f"({scheduled} ? ({chosen}) : '')"


def task_part(limit: int) -> tuple[list[dict[str, str]], dict[str, dict[str, Any]]]:
    """Variables and validations over ``variables.tasks`` (the changed tasks)."""
    spec = "t.template.spec"
    items = f"({all_containers(spec)})"
    ng_bad = (
        f"[{_task_policy('t', limit)}].exists(p, p != '') && size({items}) > 0 && "
        f"{qos(items)} != 'Guaranteed'"
    )
    # with a topologyPolicy, Volcano's own rule (an error, webhook.policy_quantities) applies
    fc_bad = (
        f"!({_task_field('t')}) && [{_task_policy('t', limit)}].exists(p, p != '') && "
        f"{qos(items)} == 'Guaranteed' && {items}.exists(c, {_fractional('c')})"
    )
    variables = [
        {"name": "warnNotGuaranteed", "expression": f"variables.tasks.filter(t, {ng_bad})"},
        {"name": "warnFractionalCpu", "expression": f"variables.tasks.filter(t, {fc_bad})"},
    ]
    first = "variables.warnNotGuaranteed[0]"
    first_spec = f"{first}.template.spec"
    path = (
        f"({_task_field(first)} ? 'spec.tasks[*].topologyPolicy: ' : "
        f"{cel_string(f'spec.tasks[*].template.metadata.annotations[{d.VOLCANO_NUMA_POLICY}]: ')})"
    )
    words = _not_guaranteed_words(
        _task_policy(first, limit), qos(f"({all_containers(first_spec)})")
    )
    fc_first = "variables.warnFractionalCpu[0]"
    fraction = first_bad(
        f"{fc_first}.template.spec", _fractional, _whole_cpu_words(_task_policy(fc_first, limit))
    )
    validations = {
        NOT_GUARANTEED: {
            "expression": "size(variables.warnNotGuaranteed) == 0",
            "messageExpression": f"{path} + {words}",
        },
        WHOLE_CPUS: {
            "expression": "size(variables.warnFractionalCpu) == 0",
            "messageExpression": f"'spec.tasks[*].template.' + {fraction}",
        },
    }
    return variables, validations
