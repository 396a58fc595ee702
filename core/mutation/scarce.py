"""Scarce-resource avoidance at admission (off by default): a pod that requests none of the
configured scarce resources (e.g. ``nvidia.com/gpu``) gets a node anti-affinity to the nodes
that have them, so CPU-only pods stay off GPU nodes whatever scheduler they use. This is
Koordinator's ScarceResourceAvoidance idea (seed 004) done with plain node affinity.

How a node "has" a resource, in a label-selectable way: the node carries the label
``<resource>.present=true`` by default, which is what NVIDIA GPU feature discovery / the GPU
operator set (``nvidia.com/gpu.present=true``); ``label_keys`` maps a resource to another label
key (still matched against the value ``"true"``). The requirement is
``<label> NotIn ["true"]``, which also matches nodes without the label.

Pure: :func:`avoidance` returns the requirements; core.mutation.affinity turns them into a
required or a preferred term of the pod's node affinity.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from core.model import NodeSelectorRequirement, PodIntent

PRESENT_SUFFIX: Final = ".present"
PRESENT_VALUE: Final = "true"
DEFAULT_WEIGHT: Final = 100  # preferred term weight: 1..100 (Kubernetes API validation)


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


def avoidance(
    intent: PodIntent, scarce: Sequence[str], *, label_keys: Mapping[str, str] | None = None
) -> tuple[NodeSelectorRequirement, ...]:
    """The requirements (one per presence label, sorted) that keep a pod requesting none of
    ``scarce`` off the nodes having them; () when there is nothing to avoid.

    Nothing when: no scarce resource is configured; the pod requests one of them; the pod is
    already bound (``nodeName``: the kubelet checks required affinity and would reject it on a
    scarce node); or its nodeSelector / required affinity already uses a presence label."""
    if not scarce or intent.node_name:
        return ()
    if any(requests_resource(intent, r) for r in scarce):
        return ()
    keys = sorted({presence_label(r, label_keys) for r in scarce})
    if _targets_label(intent, set(keys)):
        return ()
    return tuple(NodeSelectorRequirement(k, "NotIn", (PRESENT_VALUE,)) for k in keys)
