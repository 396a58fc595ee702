"""Scarce-resource avoidance at admission (off by default): a pod that requests none of the
configured scarce resources (e.g. ``nvidia.com/gpu``) gets a node anti-affinity to the nodes
that have them, so CPU-only pods stay off GPU nodes whatever scheduler they use. This is
Koordinator's ScarceResourceAvoidance idea (seed 004) done with plain node affinity.

How a node "has" a resource, in a label-selectable way: the node carries the label
``<resource>.present=true`` by default, which is what NVIDIA GPU feature discovery / the GPU
operator set (``nvidia.com/gpu.present=true``); ``label_keys`` maps a resource to another label
key (still matched against the value ``"true"``). The expression is
``<label> NotIn ["true"]``, which also matches nodes without the label.

Everything here is pure and returns JSON-ready dicts; :func:`merge_affinity` and
:func:`affinity_patch` apply a fragment idempotently (a second application changes nothing).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Final

from core.errors import InvalidInput
from core.model import PodIntent

PRESENT_SUFFIX: Final = ".present"
PRESENT_VALUE: Final = "true"
DEFAULT_WEIGHT: Final = 100  # preferred term weight: 1..100 (Kubernetes API validation)
_REQUIRED: Final = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED: Final = "preferredDuringSchedulingIgnoredDuringExecution"


def presence_label(resource: str, label_keys: Mapping[str, str] | None = None) -> str:
    """The node label key that marks nodes having ``resource``."""
    if label_keys and resource in label_keys:
        return label_keys[resource]
    return resource + PRESENT_SUFFIX


def requests_resource(intent: PodIntent, resource: str) -> bool:
    """True when any container requests or limits ``resource`` or a resource of its family
    (``nvidia.com/gpumem``, ``nvidia.com/gpucores`` for ``nvidia.com/gpu``): HAMi's webhook adds
    ``nvidia.com/gpu: 1`` to such containers (research §3.3), so they are GPU pods."""
    names = set(intent.pod_requests)
    for c in intent.containers:
        names.update(k for k, v in c.requests.items() if v > 0)
        names.update(k for k, v in c.limits.items() if v > 0)
    return any(n == resource or n.startswith(resource) for n in names)


def _targets_label(intent: PodIntent, keys: set[str]) -> bool:
    # A pod that already selects on the presence label chose its nodes on purpose.
    if keys & set(intent.node_selector):
        return True
    return any(r.key in keys for t in intent.required_terms for r in t.match_expressions)


def _expressions(
    scarce: Sequence[str], label_keys: Mapping[str, str] | None
) -> list[dict[str, Any]]:
    keys = sorted({presence_label(r, label_keys) for r in scarce})
    return [{"key": k, "operator": "NotIn", "values": [PRESENT_VALUE]} for k in keys]


def scarce_affinity(
    intent: PodIntent,
    scarce: Sequence[str],
    *,
    required: bool = False,
    label_keys: Mapping[str, str] | None = None,
    weight: int = DEFAULT_WEIGHT,
) -> dict[str, Any] | None:
    """The ``affinity`` fragment to add to a pod requesting none of ``scarce``, or None.

    None when: no scarce resource is configured; the pod requests one of them; the pod is
    already bound (``nodeName``: the kubelet checks required affinity and would reject it on a
    scarce node); or its nodeSelector / required affinity already uses a presence label.
    ``required`` gives a required term (the pod never lands on such nodes), else a preferred
    term of ``weight``."""
    if not 1 <= weight <= 100:
        raise InvalidInput(f"scarce avoidance weight {weight!r} is not allowed; expected 1..100")
    if not scarce or intent.node_name:
        return None
    if any(requests_resource(intent, r) for r in scarce):
        return None
    expressions = _expressions(scarce, label_keys)
    if _targets_label(intent, {e["key"] for e in expressions}):
        return None
    if required:
        term = {"nodeSelectorTerms": [{"matchExpressions": expressions}]}
        return {"nodeAffinity": {_REQUIRED: term}}
    preferred = {"weight": weight, "preference": {"matchExpressions": expressions}}
    return {"nodeAffinity": {_PREFERRED: [preferred]}}


def _child(parent: dict[str, Any], key: str, empty: Any) -> Any:
    # Like setdefault, but an explicit null in the pod spec counts as absent.
    if parent.get(key) is None:
        parent[key] = empty
    return parent[key]


def _merge_required(node_affinity: dict[str, Any], expressions: list[dict[str, Any]]) -> None:
    terms = _child(_child(node_affinity, _REQUIRED, {}), "nodeSelectorTerms", [])
    if not terms:
        terms.append({"matchExpressions": []})
    # Terms are ORed: the expressions must be ANDed into every one of them.
    for term in terms:
        existing = _child(term, "matchExpressions", [])
        existing.extend(e for e in expressions if e not in existing)


def merge_affinity(
    affinity: Mapping[str, Any] | None, fragment: Mapping[str, Any]
) -> dict[str, Any]:
    """``affinity`` (a pod spec's, possibly None) with ``fragment`` merged in, as a new dict.
    Idempotent: merging the same fragment into the result returns an equal dict."""
    merged: dict[str, Any] = copy.deepcopy(dict(affinity or {}))
    wanted = fragment.get("nodeAffinity") or {}
    node_affinity = _child(merged, "nodeAffinity", {})
    if _REQUIRED in wanted:
        for term in wanted[_REQUIRED].get("nodeSelectorTerms", []):
            _merge_required(node_affinity, list(term.get("matchExpressions", [])))
    if _PREFERRED in wanted:
        preferred = _child(node_affinity, _PREFERRED, [])
        preferred.extend(copy.deepcopy(t) for t in wanted[_PREFERRED] if t not in preferred)
    return merged


def affinity_patch(
    pod_spec: Mapping[str, Any], fragment: Mapping[str, Any] | None, *, path: str = "/spec"
) -> list[dict[str, Any]]:
    """JSONPatch ops that merge ``fragment`` into ``pod_spec`` (found at ``path``, e.g.
    ``/spec/template/spec`` for a Deployment); [] when nothing changes."""
    if not fragment:
        return []
    current = pod_spec.get("affinity")
    merged = merge_affinity(current, fragment)
    if current == merged:
        return []
    op = "replace" if current is not None else "add"
    return [{"op": op, "path": f"{path}/affinity", "value": merged}]
