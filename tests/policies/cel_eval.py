"""A ValidatingAdmissionPolicy evaluated as the apiserver does, with cel-python (``celpy``),
the CEL library from PyPI whose semantics match Kubernetes' for the functions the
generated policies use (benchmarks/cel_libraries.py measures it against the other one):
``matches`` is RE2 (google-re2), ``size`` counts code points, ``has``, ``in``, ``all``,
``exists``, ``filter``, the conditional and string concatenation.

What the apiserver does and this does too: match the request against matchConstraints
(resources, operations, namespace and object selectors), evaluate ``variables`` in order
(each may use the ones before), then each validation: false fails it, with the
messageExpression's value as its message; an error in an expression is the policy's
failurePolicy (Ignore: no failure).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import celpy


@dataclass(frozen=True)
class Failure:
    message: str
    reason: str


@cache
def _program(expression: str) -> Any:
    env = celpy.Environment()
    return env.program(env.compile(expression))


def evaluate(expression: str, activation: dict[str, Any]) -> Any:
    return _program(expression).evaluate(activation)


def _selector_allows(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    for req in (selector or {}).get("matchExpressions", []):
        value = labels.get(req["key"])
        if req["operator"] == "NotIn" and value in req["values"]:
            return False
        if req["operator"] == "In" and value not in req["values"]:
            return False
    return True


def matches(
    policy: dict[str, Any], request: dict[str, Any], namespace_labels: dict[str, str]
) -> bool:
    constraints = policy["spec"]["matchConstraints"]
    group, _, version = request["kind"]["group"], None, request["kind"]["version"]
    resource = request["resource"]["resource"]
    found = any(
        group in r["apiGroups"]
        and version in r["apiVersions"]
        and resource in r["resources"]
        and request["operation"] in r["operations"]
        for r in constraints["resourceRules"]
    )
    if not found:
        return False
    if not _selector_allows(constraints.get("namespaceSelector"), namespace_labels):
        return False
    labels = (request["object"].get("metadata") or {}).get("labels") or {}
    return _selector_allows(constraints.get("objectSelector"), labels)


def failures(policy: dict[str, Any], request: dict[str, Any]) -> list[Failure]:
    """The validations of ``policy`` that fail for ``request`` (an AdmissionRequest dict)."""
    spec = policy["spec"]
    base = {
        "object": request["object"],
        "oldObject": request.get("oldObject"),
        "request": {"operation": request["operation"], "namespace": request.get("namespace", "")},
    }
    variables: dict[str, Any] = {}
    try:
        for var in spec.get("variables", []):
            activation = celpy.json_to_cel({**base, "variables": {}})
            activation["variables"] = celpy.celtypes.MapType(variables)
            variables[celpy.celtypes.StringType(var["name"])] = evaluate(
                var["expression"], activation
            )
        activation = celpy.json_to_cel(base)
        activation["variables"] = celpy.celtypes.MapType(variables)
        out = []
        for validation in spec["validations"]:
            if bool(evaluate(validation["expression"], activation)):
                continue
            message = str(evaluate(validation["messageExpression"], activation))
            out.append(Failure(message, validation.get("reason", "Invalid")))
        return out
    except celpy.CELEvalError:
        assert spec["failurePolicy"] == "Ignore"
        return []
