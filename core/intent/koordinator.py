"""The Koordinator annotations: ``numa-topology-spec`` (policy, exclusivity) and
``resource-spec`` (CPU bind policy), and the NUMA fields misplaced in the latter."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.intent import dialects as d
from core.intent.annotations import (
    JsonDoc,
    canonical_fields,
    load_json,
    normalize_field,
)
from core.intent.findings import Ctx
from core.intent.lenient_json import strict_loads

_EXCLUSIVE_NOTE = " (only the exact 'Required' enables exclusivity in koord-scheduler)"


def _koord_numa_fields(doc: JsonDoc, ctx: Ctx) -> tuple[str | None, str | None, bool]:
    """(policy in kubelet spelling, exclusive value, exclusive field present)."""
    if doc.doc is None:
        return None, None, False
    canonical_fields(doc, d.NUMA_SPEC_FIELDS, ctx)
    policy = normalize_field(
        doc, d.F_NUMA_POLICY, d.match_koord_policy, d.KOORD_POLICIES, ctx, code="unknown-policy"
    )
    exclusive = normalize_field(
        doc,
        d.F_NUMA_EXCLUSIVE,
        d.match_koord_exclusive,
        d.KOORD_EXCLUSIVE,
        ctx,
        note=_EXCLUSIVE_NOTE,
    )
    kubelet = d.kubelet_from_koord(policy) if policy is not None else None
    return kubelet, exclusive, d.F_NUMA_EXCLUSIVE in doc.doc


def _koord_values(doc: JsonDoc) -> tuple[str | None, str | None]:
    """(policy in kubelet spelling, exclusive) of a normalized numa-topology-spec; None for
    absent or unknown values (already reported)."""
    if doc.doc is None:
        return None, None
    policy, exclusive = (_known(doc.doc, f) for f in (d.F_NUMA_POLICY, d.F_NUMA_EXCLUSIVE))
    return (d.kubelet_from_koord(policy) if policy is not None else None, exclusive)


# The values numagate reads in each field of numa-topology-spec; any other is unknown.
_KNOWN = {d.F_NUMA_POLICY: d.KOORD_POLICIES, d.F_NUMA_EXCLUSIVE: d.KOORD_EXCLUSIVE}


def _known(spec: dict[str, Any], field: str) -> str | None:
    """``spec``'s value of ``field`` when numagate knows it, else None."""
    value = spec.get(field)
    return value if value in _KNOWN[field] else None


def _bind_field(doc: JsonDoc, name: str, ctx: Ctx) -> str | None:
    assert doc.doc is not None
    value = doc.doc.get(name)
    if isinstance(value, str) and value.strip() in d.KOORD_NODE_ONLY_BIND:
        pod_value = d.KOORD_NODE_ONLY_BIND[value.strip()]
        doc.doc[name] = pod_value
        doc.dirty = True
        ctx.add(
            ctx.ann(doc.key),
            "warning",
            "node-only-value",
            f"{doc.key} field {name}: {value!r} is a node label value "
            f"(node.koordinator.sh/cpu-bind-policy), not a pod bind policy (koordinator "
            f"#1890); rewritten as {pod_value!r} (allowed: {d.allowed_list(d.KOORD_BIND_POLICIES)})",
        )
        return pod_value
    return normalize_field(doc, name, d.match_koord_bind, d.KOORD_BIND_POLICIES, ctx)


def _resource_spec_fields(doc: JsonDoc, ctx: Ctx) -> str | None:
    """Normalize the CPU bind fields; return the bind policy (required, else preferred)."""
    if doc.doc is None:
        return None
    canonical_fields(doc, d.RESOURCE_SPEC_FIELDS + d.NUMA_SPEC_FIELDS, ctx)
    required = _bind_field(doc, d.F_REQUIRED_BIND, ctx)
    preferred = _bind_field(doc, d.F_PREFERRED_BIND, ctx)
    normalize_field(
        doc, d.F_CPU_EXCLUSIVE, d.match_koord_cpu_exclusive, d.KOORD_CPU_EXCLUSIVE_POLICIES, ctx
    )
    return required or preferred


def _spell_misplaced(resource: JsonDoc, ctx: Ctx) -> None:
    """Spell the NUMA fields found in resource-spec before they are moved."""
    if resource.doc is None:
        return
    canonical_fields(resource, d.RESOURCE_SPEC_FIELDS + d.NUMA_SPEC_FIELDS, ctx)
    for f in d.NUMA_SPEC_FIELDS:
        if f in resource.doc:
            policy = f == d.F_NUMA_POLICY
            normalize_field(
                resource,
                f,
                d.match_koord_policy if policy else d.match_koord_exclusive,
                d.KOORD_POLICIES if policy else d.KOORD_EXCLUSIVE,
                ctx,
                code="unknown-policy" if policy else "unknown-value",
            )


def _has_numa_variants(resource: JsonDoc) -> bool:
    if resource.doc is None:
        return False
    wanted = {f.lower() for f in d.NUMA_SPEC_FIELDS}
    return any(k.lower() in wanted and k not in d.NUMA_SPEC_FIELDS for k in resource.doc)


def _move_misplaced(
    resource: JsonDoc, numa: JsonDoc, numa_broken: bool, annotations: dict[str, str], ctx: Ctx
) -> None:
    """Move numaTopologyPolicy / singleNUMANodeExclusive from resource-spec (the proposal's
    placement, which the shipped koord-scheduler never reads) into numa-topology-spec."""
    if resource.doc is None:
        return
    misplaced = [f for f in d.NUMA_SPEC_FIELDS if f in resource.doc]
    if not misplaced:
        return
    rpath = ctx.ann(resource.key)
    if numa_broken:
        ctx.add(
            rpath,
            "warning",
            "misplaced-field",
            f"{', '.join(misplaced)} in {resource.key} is ignored by koord-scheduler (it reads "
            f"{d.KOORD_NUMA_SPEC}); not moved because {d.KOORD_NUMA_SPEC} "
            + ("is over numagate's limits" if numa.over_limit else "is not valid JSON"),
        )
        return
    target = numa.doc if numa.doc is not None else {}
    # A null in numa-topology-spec is no value to koord-scheduler (Go's encoding/json leaves
    # a string field as it was on null), and an unknown one (reported already) none that
    # numagate reads (_known), so either yields to the moved one: were it a clash,
    # a later step that fills it (the Volcano mirror) would make the move happen only on
    # the next normalization, and normalizing would not be idempotent.
    clashes = [f for f in misplaced if _known(target, f) not in (None, resource.doc[f])]
    if clashes:
        f = clashes[0]
        ctx.add(
            rpath,
            "error",
            "conflicting-policies",
            f"{resource.key} field {f} is {resource.doc[f]!r} but {d.KOORD_NUMA_SPEC} says "
            f"{target[f]!r}; koord-scheduler reads only {d.KOORD_NUMA_SPEC}. Remove one",
        )
        return
    for f in misplaced:
        target[f] = resource.doc.pop(f)
    resource.dirty = True
    numa.doc = target
    numa.dirty = True
    ctx.add(
        rpath,
        "warning",
        "misplaced-field",
        f"{', '.join(misplaced)} in {resource.key} is ignored by koord-scheduler (the "
        f"proposal's placement; the scheduler reads {d.KOORD_NUMA_SPEC}); moved to "
        f"{d.KOORD_NUMA_SPEC}, other {resource.key} fields kept",
    )


@dataclass(slots=True)
class Koord:
    numa: JsonDoc
    resource: JsonDoc
    bind: str | None
    policy: str | None  # kubelet spelling
    exclusive: str | None


# The fields of each annotation and the values that need no work: the owner's exact
# spelling ("" policy is "no policy"; "" exclusive is rewritten, FullPCPUsOnly too).
_PLAIN_NUMA: dict[str, tuple[str, ...]] = {
    d.F_NUMA_POLICY: d.KOORD_POLICIES,
    d.F_NUMA_EXCLUSIVE: d.KOORD_EXCLUSIVE,
}
_PLAIN_RESOURCE: dict[str, tuple[str, ...]] = {
    d.F_REQUIRED_BIND: d.KOORD_BIND_POLICIES,
    d.F_PREFERRED_BIND: d.KOORD_BIND_POLICIES,
    d.F_CPU_EXCLUSIVE: d.KOORD_CPU_EXCLUSIVE_POLICIES,
}


def _plain_doc(
    key: str, annotations: dict[str, str], plain: dict[str, tuple[str, ...]], ctx: Ctx
) -> JsonDoc | None:
    """The annotation as the full reader would leave it, when it is absent or a strict JSON
    object of known fields in their exact spelling (nothing to report, respell, move or
    write back); None for anything else."""
    text = annotations.get(key)
    if text is None:
        return JsonDoc(key, None)
    try:
        doc = strict_loads(text)
    except (ValueError, RecursionError):
        return None
    if type(doc) is not dict or len(doc) > ctx.limits.json_values or ctx.limits.json_depth < 1:
        return None
    for name, value in doc.items():
        allowed = plain.get(name)
        if allowed is None or type(value) is not str or value not in allowed:
            return None
    return JsonDoc(key, doc)


def _read_plain(annotations: dict[str, str], ctx: Ctx) -> Koord | None:
    """read_koordinator's result for the common shapes (the well-formed pair of the
    Koordinator docs, or no Koordinator key) without its rounds of respelling and moving,
    about 160k instructions per pod (docs/benchmarks.md); None: the full reader decides."""
    numa = _plain_doc(d.KOORD_NUMA_SPEC, annotations, _PLAIN_NUMA, ctx)
    if numa is None:
        return None
    resource = _plain_doc(d.KOORD_RESOURCE_SPEC, annotations, _PLAIN_RESOURCE, ctx)
    if resource is None:
        return None
    fields = resource.doc
    bind = (
        None if fields is None else fields.get(d.F_REQUIRED_BIND) or fields.get(d.F_PREFERRED_BIND)
    )
    policy, exclusive = _koord_values(numa)
    return Koord(numa, resource, bind, policy, exclusive)


def read_koordinator(annotations: dict[str, str], ctx: Ctx) -> Koord:
    """Parse, respell and move the Koordinator JSON annotations; write them back."""
    plain = _read_plain(annotations, ctx)
    return plain if plain is not None else read_koordinator_full(annotations, ctx)


def read_koordinator_full(annotations: dict[str, str], ctx: Ctx) -> Koord:
    """read_koordinator for any input (the fast path's reference)."""
    numa = load_json(d.KOORD_NUMA_SPEC, annotations, ctx)
    numa_broken = d.KOORD_NUMA_SPEC in annotations and numa.doc is None
    resource = load_json(d.KOORD_RESOURCE_SPEC, annotations, ctx)
    _koord_numa_fields(numa, ctx)  # spelled first, so moved fields compare like for like
    bind: str | None = None
    # A case variant left behind when its canonical twin moved is renamed and moved on the
    # next round, so the result is a fixed point (idempotent).
    for _ in range(len(d.NUMA_SPEC_FIELDS) + 1):
        _spell_misplaced(resource, ctx)
        bind = _resource_spec_fields(resource, ctx)
        _move_misplaced(resource, numa, numa_broken, annotations, ctx)
        if not _has_numa_variants(resource):
            break
    policy, exclusive = _koord_values(numa)
    numa.write(annotations)
    resource.write(annotations)
    return Koord(numa, resource, bind, policy, exclusive)
