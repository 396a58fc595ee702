"""JSONPatch (RFC 6902) operations for the mutating webhook, computed from plain values.

Two rules from the Kubernetes webhook good-practices page shape every function here:

- patches are minimal: ``add`` into the existing maps and lists rather than replacing a
  whole array, so that another mutating webhook's changes survive;
- patches are idempotent: with ``reinvocationPolicy: IfNeeded`` the apiserver may call the
  webhook again with its own output, and a second call must produce no operation.

JSON pointers escape ``~`` as ``~0`` and ``/`` as ``~1`` (RFC 6901 section 3); annotation keys
such as ``volcano.sh/numa-topology-policy`` always contain a ``/``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from core.model import NodeSelectorRequirement

PatchOp = dict[str, Any]
SelectorField = Literal["matchExpressions", "matchFields"]

NODE_NAME_FIELD = "metadata.name"
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_VALUELESS_OPERATORS = frozenset({"Exists", "DoesNotExist"})


def escape_pointer_token(token: str) -> str:
    """Escape one reference token of a JSON pointer (RFC 6901: ``~`` first, then ``/``)."""
    return token.replace("~", "~0").replace("/", "~1")


def _as_mapping(value: Any) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


def annotation_ops(
    metadata: Mapping[str, Any] | None, desired: Mapping[str, str], *, base: str = ""
) -> list[PatchOp]:
    """Operations that turn ``metadata.annotations`` into ``desired``, key by key.

    ``base`` is the pointer of the object (``""`` for a Pod). A missing or null
    annotations map is created in one ``add``; otherwise each changed key gets its own
    ``add``/``replace``/``remove`` so that concurrent mutations of other keys survive.
    """
    if metadata is None:
        if not desired:
            return []
        return [{"op": "add", "path": f"{base}/metadata", "value": {"annotations": dict(desired)}}]
    current = _as_mapping(metadata.get("annotations"))
    prefix = f"{base}/metadata/annotations"
    if current is None:
        if not desired:
            return []
        return [{"op": "add", "path": prefix, "value": dict(desired)}]
    ops: list[PatchOp] = []
    for key, value in desired.items():
        path = f"{prefix}/{escape_pointer_token(key)}"
        if key not in current:
            ops.append({"op": "add", "path": path, "value": value})
        elif current[key] != value:
            ops.append({"op": "replace", "path": path, "value": value})
    for key in current:
        if key not in desired:
            ops.append({"op": "remove", "path": f"{prefix}/{escape_pointer_token(key)}"})
    return ops


def requirement_json(requirement: NodeSelectorRequirement) -> dict[str, Any]:
    """The Kubernetes JSON of a NodeSelectorRequirement (no ``values`` for Exists)."""
    out: dict[str, Any] = {"key": requirement.key, "operator": requirement.operator}
    if requirement.operator not in _VALUELESS_OPERATORS:
        out["values"] = list(requirement.values)
    return out


def _same_requirement(item: Any, requirement: NodeSelectorRequirement) -> bool:
    if not isinstance(item, Mapping):
        return False
    values = item.get("values") or []
    return (
        item.get("key") == requirement.key
        and item.get("operator") == requirement.operator
        and isinstance(values, list)
        and sorted(map(str, values)) == sorted(requirement.values)
    )


def _is_empty_term(term: Any) -> bool:
    # "A null or empty node selector term matches no objects" (core/v1 NodeSelectorTerm):
    # ANDing an expression into it would make it match nodes, so such terms are left alone.
    if not isinstance(term, Mapping):
        return True
    return not term.get("matchExpressions") and not term.get("matchFields")


def _new_affinity_value(term: dict[str, Any], level: str) -> dict[str, Any]:
    """The value to ``add`` at ``level`` when the levels below it are all missing."""
    value: dict[str, Any] = {"nodeSelectorTerms": [term]}
    if level == _REQUIRED:
        return value
    value = {_REQUIRED: value}
    if level == "nodeAffinity":
        return value
    return {"nodeAffinity": value}


def _terms_location(
    spec: Mapping[str, Any] | None, base: str
) -> tuple[str, str | None, list[Any] | None]:
    """Find where the required nodeSelectorTerms live.

    Returns ``(pointer, missing_level, terms)``: ``missing_level`` names the first level
    absent (``affinity``, ``nodeAffinity``, the required selector, ``nodeSelectorTerms``)
    with ``pointer`` the place to add it, or None with ``terms`` the existing list.
    """
    pointer = f"{base}/spec"
    node: Mapping[str, Any] | None = spec
    for level in ("affinity", "nodeAffinity", _REQUIRED, "nodeSelectorTerms"):
        child = node.get(level) if node is not None else None
        pointer = f"{pointer}/{level}"
        if level == "nodeSelectorTerms":
            if isinstance(child, list) and child:
                return pointer, None, child
            return pointer, level, None
        child_map = _as_mapping(child)
        if child_map is None:
            return pointer, level, None
        node = child_map
    raise AssertionError("unreachable")  # pragma: no cover


def affinity_ops(
    spec: Mapping[str, Any] | None,
    requirement: NodeSelectorRequirement,
    *,
    base: str = "",
    field: SelectorField = "matchExpressions",
) -> list[PatchOp]:
    """AND ``requirement`` into every required nodeSelectorTerm of the pod spec.

    The user's own expressions stay untouched: the requirement is appended to each
    non-empty term (terms are ORed, so every term must carry it), and a new term is
    created when there is none. A term that already holds the same requirement is
    skipped, which makes a second review of the mutated pod produce no operation.
    """
    expr = requirement_json(requirement)
    term = {field: [expr]}
    pointer, missing, terms = _terms_location(spec, base)
    if missing == "nodeSelectorTerms":
        return [{"op": "add", "path": pointer, "value": [term]}]
    if missing is not None:
        return [{"op": "add", "path": pointer, "value": _new_affinity_value(term, missing)}]
    assert terms is not None
    ops: list[PatchOp] = []
    for index, existing in enumerate(terms):
        if _is_empty_term(existing):
            continue
        items = existing.get(field)
        if isinstance(items, list) and any(_same_requirement(i, requirement) for i in items):
            continue
        if isinstance(items, list) and items:
            ops.append({"op": "add", "path": f"{pointer}/{index}/{field}/-", "value": expr})
        else:
            ops.append({"op": "add", "path": f"{pointer}/{index}/{field}", "value": [expr]})
    return ops


def _name_pin(term: Any) -> str | None:
    """The node name a term is pinned to by ``matchFields metadata.name In [name]``."""
    if not isinstance(term, Mapping):
        return None
    for item in term.get("matchFields") or ():
        if (
            isinstance(item, Mapping)
            and item.get("key") == NODE_NAME_FIELD
            and item.get("operator") == "In"
            and isinstance(item.get("values"), list)
            and len(item["values"]) == 1
        ):
            return str(item["values"][0])
    return None


def node_name_ops(
    spec: Mapping[str, Any] | None, names: Sequence[str], *, base: str = ""
) -> list[PatchOp]:
    """Restrict the pod to ``names`` with ``matchFields metadata.name``.

    The apiserver accepts exactly one value for ``In`` on a node field selector
    (``validateNodeFieldSelectorRequirement`` in pkg/apis/core/validation: "must be only
    one value when operator is 'In' or 'NotIn' for node field selector"), so each name
    gets its own term, and each of the user's terms is repeated once per name with the
    pin ANDed in (terms are ORed). This rewrites the terms array, unlike ``affinity_ops``:
    there is no smaller patch with the same meaning. Idempotent: when every non-empty term
    is already pinned to one of ``names`` nothing is returned.
    """
    if not names:
        return []
    pointer, missing, terms = _terms_location(spec, base)
    pins = [
        {"matchFields": [{"key": NODE_NAME_FIELD, "operator": "In", "values": [n]}]}
        for n in sorted(names)
    ]
    if missing == "nodeSelectorTerms":
        return [{"op": "add", "path": pointer, "value": pins}]
    if missing is not None:
        value = _new_affinity_value(pins[0], missing)
        _innermost_terms(value)[:] = pins
        return [{"op": "add", "path": pointer, "value": value}]
    assert terms is not None
    allowed = set(names)
    live = [t for t in terms if not _is_empty_term(t)]
    if not live:
        return []  # only empty terms: the pod matches no node whatever we add
    if all(_name_pin(t) in allowed for t in live):
        return []
    merged: list[Any] = []
    for existing in live:
        for pin in pins:
            term = copy.deepcopy(dict(existing))  # no list shared between two terms
            term["matchFields"] = [*(existing.get("matchFields") or []), *pin["matchFields"]]
            merged.append(term)
    return [{"op": "replace", "path": pointer, "value": merged}]


def _innermost_terms(value: dict[str, Any]) -> list[Any]:
    node: Any = value
    while "nodeSelectorTerms" not in node:
        node = next(iter(node.values()))
    terms: list[Any] = node["nodeSelectorTerms"]
    return terms


_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def preferred_ops(
    spec: Mapping[str, Any] | None, term: Mapping[str, Any], *, base: str = ""
) -> list[PatchOp]:
    """Append a preferred scheduling term unless an equal one is already there."""
    affinity = _as_mapping(spec.get("affinity")) if spec is not None else None
    node_affinity = _as_mapping(affinity.get("nodeAffinity")) if affinity is not None else None
    pointer = f"{base}/spec/affinity"
    if affinity is None:
        return [
            {"op": "add", "path": pointer, "value": {"nodeAffinity": {_PREFERRED: [dict(term)]}}}
        ]
    if node_affinity is None:
        return [
            {"op": "add", "path": f"{pointer}/nodeAffinity", "value": {_PREFERRED: [dict(term)]}}
        ]
    existing = node_affinity.get(_PREFERRED)
    if isinstance(existing, list) and existing:
        if any(t == term for t in existing):
            return []
        return [
            {"op": "add", "path": f"{pointer}/nodeAffinity/{_PREFERRED}/-", "value": dict(term)}
        ]
    return [{"op": "add", "path": f"{pointer}/nodeAffinity/{_PREFERRED}", "value": [dict(term)]}]


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def apply_ops(doc: Any, ops: Sequence[Mapping[str, Any]]) -> Any:
    """Apply ``add``/``replace``/``remove`` ops in place (only what this module emits), so
    that a later stage computes its operations against the result of an earlier one."""
    for op in ops:
        tokens = [_unescape(t) for t in str(op["path"]).split("/")[1:]]
        parent = doc
        for token in tokens[:-1]:
            parent = parent[int(token)] if isinstance(parent, list) else parent[token]
        last = tokens[-1]
        if isinstance(parent, list):
            if op["op"] == "remove":
                del parent[int(last)]
            elif last == "-":
                parent.append(op["value"])
            elif op["op"] == "add":
                parent.insert(int(last), op["value"])
            else:
                parent[int(last)] = op["value"]
        elif op["op"] == "remove":
            del parent[last]
        else:
            parent[last] = op["value"]
    return doc
