"""Node affinity planning for the mutating webhook (docs/contracts.md: Policy semantics): restrict a pod to the nodes
whose topology policy is compatible with its own (by a policy label, or by node names
when the nodes carry no such label), then, optionally, keep it off nodes with scarce
resources it does not use (core.mutation.scarce). Pure: the caller passes the settings and
the inventory; every affinity operation is built from NodeSelectorRequirement values here.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from core.errors import InvalidInput
from core.feasibility.compat import affinity_requirement, compat_key, compatible
from core.model import NodeSelectorRequirement, NodeTopology, PodIntent
from core.mutation.patch import (
    NODE_NAME_FIELD,
    PatchOp,
    affinity_ops,
    apply_ops,
    node_name_ops,
    preferred_ops,
    requirement_json,
)
from core.mutation.scarce import DEFAULT_WEIGHT, avoidance

MEMO_LIMIT = 256  # memoized compatible-name lists per inventory
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
AffinityMode = Literal["off", "auto", "label", "node-names"]


class Inventory(Protocol):
    """What planning reads of an inventory (webhook.inventory.state.InventoryView is one)."""

    @property
    def nodes(self) -> Sequence[NodeTopology]: ...

    @property
    def memo(self) -> MutableMapping[Any, Any]: ...

    def has_label(self, key: str) -> bool: ...


@dataclass(frozen=True, slots=True)
class ScarceSettings:
    resources: tuple[str, ...]
    required: bool = False  # a required term; else a preferred term of ``weight``
    label_keys: Mapping[str, str] = field(default_factory=dict)  # resource -> label key
    weight: int = DEFAULT_WEIGHT

    def __post_init__(self) -> None:
        if not 1 <= self.weight <= 100:  # Kubernetes API validation of a preferred term
            raise InvalidInput(
                f"scarce avoidance weight {self.weight!r} is not allowed; expected 1..100"
            )


@dataclass(frozen=True, slots=True)
class AffinitySettings:
    """The configuration's ``affinity`` and ``scarce`` sections, as plain values."""

    mode: AffinityMode = "auto"
    label_keys: Mapping[str, str] = field(default_factory=dict)  # scheduler -> label key
    default_label_key: str = ""
    max_node_names: int = 100
    scarce: ScarceSettings | None = None  # None: scarce-resource avoidance is off


def label_key(intent: PodIntent, settings: AffinitySettings) -> str:
    """The node label that carries the policy for the pod's scheduler."""
    return settings.label_keys.get(intent.scheduler, settings.default_label_key)


def _compat_fields(intent: PodIntent) -> tuple[Any, ...]:
    """The intent's fields core.feasibility.compat.compatible reads (memo keys)."""
    return compat_key(intent)


def compatible_names(intent: PodIntent, inventory: Inventory) -> tuple[str, ...]:
    """Names of the nodes whose policies are compatible with the pod's, in inventory order.

    Memoized per inventory and per core.feasibility.compat.compat_key: compatible reads
    no other field of the intent (a test checks that the memo agrees with a direct
    computation for intents differing in every other field).
    """
    key = ("compatible", *_compat_fields(intent))
    names: tuple[str, ...] | None = inventory.memo.get(key)
    if names is None:
        names = tuple(n.name for n in inventory.nodes if compatible(intent, n)[0])
        if len(inventory.memo) < MEMO_LIMIT:  # policy strings come from pods: stay bounded
            inventory.memo[key] = names
    return names


def require_ops(
    spec: Mapping[str, Any], requirements: Sequence[NodeSelectorRequirement]
) -> list[PatchOp]:
    """AND every requirement into the pod's required node affinity (each one sees the
    result of the previous ones: the first may create /spec/affinity)."""
    if len(requirements) == 1:
        return affinity_ops(spec, requirements[0])
    ops: list[PatchOp] = []
    work: dict[str, Any] = {"spec": copy.deepcopy(dict(spec))}
    for requirement in requirements:
        step = affinity_ops(work["spec"], requirement)
        # a copy: apply_ops inserts the op's value itself, which the next step extends
        apply_ops(work, copy.deepcopy(step))
        ops += step
    return ops


def prefer_ops(
    spec: Mapping[str, Any], requirements: Sequence[NodeSelectorRequirement], weight: int
) -> list[PatchOp]:
    """One preferred scheduling term of ``weight`` (1..100) that ANDs ``requirements``."""
    expressions = [requirement_json(r) for r in requirements]
    return preferred_ops(spec, {"weight": weight, "preference": {"matchExpressions": expressions}})


def _node_name_ops(
    intent: PodIntent,
    spec: Mapping[str, Any],
    inventory: Inventory | None,
    settings: AffinitySettings,
    *,
    stale: bool,
) -> tuple[list[PatchOp], list[str]]:
    if inventory is None or stale:
        return [], ["node affinity not injected: the inventory is not loaded or is stale"]
    names = compatible_names(intent, inventory)
    if len(names) == len(inventory.nodes):
        return [], []  # every node is compatible: nothing to restrict
    if not names:
        return [], []  # no compatible node: validation explains and decides
    cap = settings.max_node_names
    if len(names) > cap:
        return [], [
            f"node affinity not injected: {len(names)} compatible nodes exceed "
            f"affinity.maxNodeNames={cap}"
        ]
    return node_name_ops(spec, list(names)), []


def policy_ops(
    intent: PodIntent,
    spec: Mapping[str, Any],
    inventory: Inventory | None,
    settings: AffinitySettings,
    *,
    stale: bool = False,
) -> tuple[list[PatchOp], list[str]]:
    """Operations that restrict the pod to nodes with a compatible policy, and warnings."""
    mode = settings.mode
    if mode == "off" or spec.get("nodeName"):
        return [], []
    key = label_key(intent, settings)
    if mode == "auto":
        mode = "label" if inventory is not None and inventory.has_label(key) else "node-names"
    if mode == "node-names":
        return _node_name_ops(intent, spec, inventory, settings, stale=stale)
    spelling = "koordinator" if intent.scheduler == "koordinator" else "kubelet"
    requirement = affinity_requirement(intent, label_key=key, spelling=spelling)
    if requirement is None:
        return [], []
    return require_ops(spec, (requirement,)), []


def scarce_ops(
    intent: PodIntent, spec: Mapping[str, Any], settings: ScarceSettings | None
) -> list[PatchOp]:
    """Optional anti-affinity away from nodes with scarce resources the pod does not use."""
    if settings is None:
        return []
    requirements = avoidance(intent, settings.resources, label_keys=settings.label_keys)
    if not requirements:
        return []
    if settings.required:
        return require_ops(spec, requirements)
    return prefer_ops(spec, requirements, settings.weight)


def spec_ops(
    intent: PodIntent,
    spec: Mapping[str, Any],
    inventory: Inventory | None,
    settings: AffinitySettings,
    *,
    inject: bool,
    stale: bool,
) -> tuple[list[PatchOp], list[str]]:
    """The pod spec's operations: the policy affinity (when ``inject``), then the scarce
    avoidance computed on its result (both may create /spec/affinity), and warnings."""
    ops: list[PatchOp] = []
    warnings: list[str] = []
    if inject:
        ops, warnings = policy_ops(intent, spec, inventory, settings, stale=stale)
    if settings.scarce is not None:
        work: dict[str, Any] = {"spec": _editable(spec, ops)}
        apply_ops(work, ops)
        ops = ops + scarce_ops(intent, work["spec"], settings.scarce)
    return ops, warnings


# ----------------------------------------------------------------------------- recognition
# Validation sees a pod after this module's policy affinity: the nodes it excludes would be
# judged `not-selected` instead of by their policy (`policy-mismatch`), unlike explain and
# the user's own manifest. The functions below undo that affinity when, and only when,
# planning it again on the result reproduces the pod's required node affinity exactly
# (terms compared with their expressions in any order, as the scarce stage appends after).


def _required_selector(spec: Mapping[str, Any]) -> Mapping[str, Any] | None:
    node: Any = spec
    for level in ("affinity", "nodeAffinity", _REQUIRED):
        node = node.get(level) if isinstance(node, Mapping) else None
    return node if isinstance(node, Mapping) else None


def _without_item(term: Any, field_name: str, drop: Callable[[Any, bool], bool]) -> Any:
    """``term`` without the items of ``field_name`` that ``drop(item, is_last)`` selects."""
    if not isinstance(term, Mapping) or not isinstance(term.get(field_name), list):
        return term
    items = term[field_name]
    kept = [item for i, item in enumerate(items) if not drop(item, i == len(items) - 1)]
    if len(kept) == len(items):
        return term
    out = {k: v for k, v in term.items() if k != field_name}
    if kept:
        out[field_name] = kept
    return out


def _is_pin(item: Any) -> bool:
    values = item.get("values") if isinstance(item, Mapping) else None
    return (
        item.get("key") == NODE_NAME_FIELD
        and item.get("operator") == "In"
        and isinstance(values, list)
        and len(values) == 1
    )


def _stripped_terms(terms: list[Any], requirement: NodeSelectorRequirement | None) -> list[Any]:
    """The terms without the pin each got last (node names) or without ``requirement``."""
    if requirement is None:
        strip = [
            _without_item(t, "matchFields", lambda item, last: last and _is_pin(item))
            for t in terms
        ]
    else:
        expr = requirement_json(requirement)
        strip = [_without_item(t, "matchExpressions", lambda item, _: item == expr) for t in terms]
    out: list[Any] = []
    for before, after in zip(terms, strip, strict=True):
        if after is not before and not after:
            continue  # a term the planner created: nothing of the user's is left in it
        if after not in out:
            out.append(after)
    return out


def _canonical(selector: Mapping[str, Any] | None) -> Any:
    def term(t: Any) -> Any:
        if not isinstance(t, Mapping):
            return repr(t)
        return sorted(
            (k, sorted(map(repr, v)) if isinstance(v, list) else repr(v)) for k, v in t.items()
        )

    if selector is None:
        return None
    terms = selector.get("nodeSelectorTerms")
    rest = sorted((k, repr(v)) for k, v in selector.items() if k != "nodeSelectorTerms")
    return rest, [term(t) for t in terms] if isinstance(terms, list) else repr(terms)


def _label_matches(requirement: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    value = labels.get(requirement.key)
    if requirement.operator == "In":
        return value in requirement.values
    return requirement.operator == "NotIn" and value not in requirement.values


def _selects_the_compatible(
    intent: PodIntent, requirement: NodeSelectorRequirement, inventory: Inventory | None
) -> bool:
    """Whether the label ``requirement`` selects exactly the compatible nodes: otherwise
    it also excludes compatible nodes (unlabelled ones), a restriction of its own that
    validation must see. Memoized per inventory, as :func:`compatible_names`."""
    if inventory is None:
        return False
    key = ("label-selects-compatible", *_compat_fields(intent), requirement)
    exact: bool | None = inventory.memo.get(key)
    if exact is None:
        names = set(compatible_names(intent, inventory))
        exact = all(
            _label_matches(requirement, n.labels) == (n.name in names) for n in inventory.nodes
        )
        if len(inventory.memo) < MEMO_LIMIT:
            inventory.memo[key] = exact
    return exact


def _own_affinity(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``spec`` to edit the affinity of: the affinity copied deeply, every other
    field shared (a pod's containers are most of it: a whole deep copy was about half of
    validating a mutated pod, issue 27)."""
    if "affinity" not in spec:
        return dict(spec)
    return {**spec, "affinity": _json_copy(spec["affinity"])}


def _json_copy(value: Any) -> Any:
    """A deep copy of decoded JSON (dicts, lists and atoms, as the review's body and the
    planned ops hold), several times cheaper than ``copy.deepcopy``'s memo; anything else
    goes through ``copy.deepcopy``."""
    kind = type(value)
    if kind is dict:
        return {k: _json_copy(v) for k, v in value.items()}
    if kind is list:
        return [_json_copy(v) for v in value]
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    return copy.deepcopy(value)


def _in_affinity(path: str) -> bool:
    """Whether the JSONPatch ``path`` writes inside the pod's affinity (what
    :func:`_own_affinity` made a copy of) or replaces the affinity as a whole."""
    return path == "/spec/affinity" or path.startswith("/spec/affinity/")


def _editable(spec: Mapping[str, Any], ops: Sequence[PatchOp]) -> dict[str, Any]:
    """A copy of ``spec`` that ``ops`` may be applied to without changing ``spec``: only
    the affinity copied when every op writes there, else all of it."""
    if all(_in_affinity(str(op["path"])) for op in ops):
        return _own_affinity(spec)
    return copy.deepcopy(dict(spec))


def without_policy_affinity(
    intent: PodIntent,
    spec: Mapping[str, Any],
    inventory: Inventory | None,
    settings: AffinitySettings,
    *,
    stale: bool = False,
) -> dict[str, Any] | None:
    """``spec`` without the policy affinity :func:`policy_ops` would have added to it, or
    None when it holds none, not exactly what planning now would add, or a label
    affinity that excludes compatible nodes too. The result shares every field but
    ``affinity`` with ``spec`` (read it, do not change it)."""
    selector = _required_selector(spec)
    terms = selector.get("nodeSelectorTerms") if selector is not None else None
    if settings.mode == "off" or spec.get("nodeName") or not isinstance(terms, list):
        return None
    key = label_key(intent, settings)
    requirement = None
    if settings.mode == "label" or (
        settings.mode == "auto" and inventory is not None and inventory.has_label(key)
    ):
        spelling = "koordinator" if intent.scheduler == "koordinator" else "kubelet"
        requirement = affinity_requirement(intent, label_key=key, spelling=spelling)
        if requirement is None or not _selects_the_compatible(intent, requirement, inventory):
            return None
    stripped = _stripped_terms(terms, requirement)
    if stripped == terms:
        return None
    candidate = _own_affinity(spec)
    node_affinity = candidate["affinity"]["nodeAffinity"]
    if stripped:
        node_affinity[_REQUIRED]["nodeSelectorTerms"] = stripped
    else:
        del node_affinity[_REQUIRED]
    ops, _ = policy_ops(intent, candidate, inventory, settings, stale=stale)
    replanned = apply_ops({"spec": _editable(candidate, ops)}, _json_copy(ops))["spec"]
    if _canonical(_required_selector(replanned)) != _canonical(selector):
        return None
    return candidate
