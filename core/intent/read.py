"""Read one pod template into a normalized :class:`PodIntent`, with findings and the
normalized annotation map.

Scheduler detection (DESIGN 5):

1. ``spec.schedulerName`` ``koord-scheduler`` -> koordinator, ``volcano`` -> volcano,
   ``hami-scheduler`` -> hami.
2. Otherwise by the keys present: a Volcano key (``volcano.sh/numa-topology-policy``, or a
   Volcano Job task, whose pods Volcano schedules) -> volcano; else Koordinator keys
   (``scheduling.koordinator.sh/numa-topology-spec`` or ``resource-spec``) -> koordinator.
3. Otherwise, when ``schedulerName`` is empty or ``default-scheduler`` and the pod asks for a
   resource only HAMi serves (``nvidia.com/gpumem``, ``gpucores``, ``gpumem-percentage``), or
   carries a HAMi policy key and asks for ``nvidia.com/gpu`` -> hami (HAMi's webhook rewrites
   ``schedulerName`` to ``hami-scheduler`` for such pods, research §3.3).
4. Otherwise ``default`` (the kubelet alone decides).

Normalization writes every value in its owner's spelling, moves Koordinator NUMA fields
found in ``resource-spec`` into ``numa-topology-spec``, repairs lenient JSON, and mirrors a
policy into the key the pod's scheduler reads. It never drops a key, and never guesses
when two keys disagree. JSON it rewrites is compact with sorted keys, so normalizing the
output again changes nothing.

Finding codes (severity in brackets; ``error`` is what the webhook denies):

==================== ==========================================================
unknown-policy       [error] a NUMA policy value not in the owner's vocabulary
unknown-value        [error] any other enumerated value (exclusive, bind, HAMi)
unknown-field        [warning] an unknown JSON field close to a known one (kept)
conflicting-policies [error] two keys state different policies
invalid-json         [error] an annotation that must be JSON and is not
invalid-value        [error] a value of the wrong type or shape
invalid-quantity     [error] a resource quantity that does not parse
repaired-json        [warning] trailing commas / comments removed
respelled            [warning] case, separators or whitespace rewritten
typo-fixed           [warning] a known typo (``Reuqired``) rewritten
misplaced-field      [warning] NUMA fields moved out of ``resource-spec``
node-only-value      [warning] ``FullPCPUsOnly`` on a pod, rewritten ``FullPCPUs``
not-guaranteed       [warning] a NUMA policy on a pod that gets no exclusive CPUs
fractional-cpu       [warning; error for Volcano Job tasks] non-integer CPU
no-effect            [warning/info] a key the pod's scheduler does not read
mirrored             [warning] policy copied into the key the scheduler reads
out-of-range         [error] HAMi percentage resource outside 0-100
==================== ==========================================================
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from core.errors import InvalidInput
from core.intent import dialects as d
from core.intent.lenient_json import dump_compact, parse_lenient
from core.intent.workloads import PodTemplate
from core.model import (
    POLICY_NONE,
    ContainerDemand,
    Finding,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodIntent,
    Scheduler,
    Severity,
    is_map,
)
from core.quantity import format_quantity, is_whole_cpu, to_core_units

QoS = Literal["Guaranteed", "Burstable", "BestEffort"]
QOS_RESOURCES = ("cpu", "memory")
OWNER = {"koordinator": "Koordinator", "volcano": "Volcano", "hami": "HAMi"}
KEY_OWNER = {
    d.KOORD_NUMA_SPEC: "koordinator",
    d.KOORD_RESOURCE_SPEC: "koordinator",
    d.VOLCANO_NUMA_POLICY: "volcano",
    d.HAMI_NODE_POLICY: "hami",
    d.HAMI_GPU_POLICY: "hami",
    d.HAMI_NUMA_BIND: "hami",
}

_KOORD_KEYS = frozenset(d.KOORD_KEYS)
_HAMI_KEYS = frozenset(d.HAMI_KEYS)
_HAMI_ONLY_RESOURCES = frozenset(d.HAMI_ONLY_RESOURCES)
_HAMI_PERCENT = frozenset(d.HAMI_PERCENT_RESOURCES)


@dataclass(frozen=True, slots=True)
class IntentResult:
    intent: PodIntent
    findings: tuple[Finding, ...]
    annotations: dict[str, str]
    changed: bool


# ---- collecting findings ----------------------------------------------------------------


@dataclass(slots=True)
class _Ctx:
    prefix: str
    findings: list[Finding] = field(default_factory=list)

    def path(self, rel: str) -> str:
        return f"{self.prefix}.{rel}" if self.prefix else rel

    def ann(self, key: str) -> str:
        return self.path(f"metadata.annotations[{key}]")

    def add(self, path: str, severity: Severity, code: str, message: str) -> None:
        self.findings.append(Finding(path, severity, code, message))


def _change_code(m: d.ValueMatch) -> str:
    return "typo-fixed" if m.how == "typo" else "respelled"


# ---- annotations ------------------------------------------------------------------------


def _string_annotations(meta: Mapping[str, Any], ctx: _Ctx) -> dict[str, str]:
    """The annotations as strings; a non-string value is an error (the API server rejects
    it) and is carried on in its JSON text so no key is lost."""
    raw = meta.get("annotations")
    if raw is None:
        return {}
    if not is_map(raw):
        ctx.add(
            ctx.path("metadata.annotations"),
            "error",
            "invalid-value",
            f"metadata.annotations must be a map of strings, got {type(raw).__name__}",
        )
        return {}
    out: dict[str, str] = {}
    for key, value in raw.items():
        k = str(key)
        if isinstance(value, str):
            out[k] = value
            continue
        text = (
            json.dumps(value)
            if value is None or isinstance(value, bool | int | float)
            else str(value)
        )
        ctx.add(
            ctx.ann(k),
            "error",
            "invalid-value",
            f"annotation values must be strings; {k} is {value!r}; quote it: {text!r}",
        )
        out[k] = text
    return out


@dataclass(slots=True)
class _Json:
    """A JSON annotation being normalized."""

    key: str
    doc: dict[str, Any] | None  # None: absent or unusable
    dirty: bool = False  # must be re-serialized

    def write(self, annotations: dict[str, str]) -> None:
        if self.doc is not None and self.dirty:
            annotations[self.key] = dump_compact(self.doc)


def _load_json(key: str, annotations: dict[str, str], ctx: _Ctx) -> _Json:
    if key not in annotations:
        return _Json(key, None)
    text = annotations[key]
    parsed = parse_lenient(text)
    if not parsed.ok:
        ctx.add(
            ctx.ann(key),
            "error",
            "invalid-json",
            f"annotation {key} is not valid JSON ({parsed.error}); koord-scheduler rejects "
            f'the pod. Expected e.g. {{"{d.F_NUMA_POLICY}":"SingleNUMANode"}}'
            if key == d.KOORD_NUMA_SPEC
            else f"annotation {key} is not valid JSON ({parsed.error}); koord-scheduler "
            "rejects the pod",
        )
        return _Json(key, None)
    if not isinstance(parsed.value, dict):
        ctx.add(
            ctx.ann(key),
            "error",
            "invalid-json",
            f"annotation {key} must be a JSON object, got {type(parsed.value).__name__} "
            f"{text.strip()[:40]!r}",
        )
        return _Json(key, None)
    doc = _Json(key, parsed.value, dirty=bool(parsed.repairs))
    if parsed.repairs:
        ctx.add(
            ctx.ann(key),
            "warning",
            "repaired-json",
            f"annotation {key} is not strict JSON (Go's json.Unmarshal rejects it and "
            f"koord-scheduler fails the pod): {', '.join(parsed.repairs)}; rewritten as strict JSON",
        )
    return doc


def _canonical_fields(doc: _Json, known: tuple[str, ...], ctx: _Ctx) -> None:
    """Rename fields that differ from a known one only in case (Go's decoder matches
    them case-insensitively, so this changes nothing upstream), and point out unknown
    fields that look like a known one. Unknown fields are always kept."""
    assert doc.doc is not None
    for name in list(doc.doc):
        if name in known:
            continue
        same_case = [k for k in known if k.lower() == name.lower()]
        if same_case and same_case[0] not in doc.doc:
            doc.doc[same_case[0]] = doc.doc.pop(name)
            doc.dirty = True
            ctx.add(
                ctx.ann(doc.key),
                "warning",
                "respelled",
                f"field {name!r} in {doc.key} renamed {same_case[0]!r} (the field's spelling)",
            )
            continue
        close = d.suggest(name, known)
        if close is not None and close not in doc.doc:
            ctx.add(
                ctx.ann(doc.key),
                "warning",
                "unknown-field",
                f"field {name!r} in {doc.key} is not read by Koordinator (known fields: "
                f"{', '.join(known)}); did you mean {close}? Kept as written",
            )


def _normalize_field(
    doc: _Json,
    name: str,
    matcher: Any,
    allowed: tuple[str, ...],
    ctx: _Ctx,
    *,
    code: str = "unknown-value",
    note: str = "",
) -> str | None:
    """Normalize one string field of a Koordinator JSON document; return its value in the
    owner's spelling, or None when absent or unknown."""
    assert doc.doc is not None
    if name not in doc.doc:
        return None
    value = doc.doc[name]
    if not isinstance(value, str):
        ctx.add(
            ctx.ann(doc.key),
            "error",
            "invalid-value",
            f"{doc.key} field {name} must be a string, got {json.dumps(value)} "
            f"(allowed: {d.allowed_list(allowed)})",
        )
        return None
    m: d.ValueMatch = matcher(value)
    if m.value is None:
        ctx.add(
            ctx.ann(doc.key),
            "error",
            code,
            f"{doc.key} field {name}: {d.describe_unknown(m, allowed)}{note}",
        )
        return None
    if m.changed:
        doc.doc[name] = m.value
        doc.dirty = True
        ctx.add(
            ctx.ann(doc.key),
            "warning",
            _change_code(m),
            f"{doc.key} field {name}: {d.describe_change(m, 'Koordinator')}{note}",
        )
    return m.value


_EXCLUSIVE_NOTE = " (only the exact 'Required' enables exclusivity in koord-scheduler)"


def _koord_numa_fields(doc: _Json, ctx: _Ctx) -> tuple[str | None, str | None, bool]:
    """(policy in kubelet spelling, exclusive value, exclusive field present)."""
    if doc.doc is None:
        return None, None, False
    _canonical_fields(doc, d.NUMA_SPEC_FIELDS, ctx)
    policy = _normalize_field(
        doc, d.F_NUMA_POLICY, d.match_koord_policy, d.KOORD_POLICIES, ctx, code="unknown-policy"
    )
    exclusive = _normalize_field(
        doc,
        d.F_NUMA_EXCLUSIVE,
        d.match_koord_exclusive,
        d.KOORD_EXCLUSIVE,
        ctx,
        note=_EXCLUSIVE_NOTE,
    )
    kubelet = d.kubelet_from_koord(policy) if policy is not None else None
    return kubelet, exclusive, d.F_NUMA_EXCLUSIVE in doc.doc


def _koord_values(doc: _Json) -> tuple[str | None, str | None]:
    """(policy in kubelet spelling, exclusive) of a normalized numa-topology-spec; None for
    absent or unknown values (already reported)."""
    if doc.doc is None:
        return None, None
    policy = doc.doc.get(d.F_NUMA_POLICY)
    exclusive = doc.doc.get(d.F_NUMA_EXCLUSIVE)
    return (
        d.kubelet_from_koord(policy) if policy in d.KOORD_POLICIES else None,
        exclusive if exclusive in d.KOORD_EXCLUSIVE else None,
    )


def _bind_field(doc: _Json, name: str, ctx: _Ctx) -> str | None:
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
    return _normalize_field(doc, name, d.match_koord_bind, d.KOORD_BIND_POLICIES, ctx)


def _resource_spec_fields(doc: _Json, ctx: _Ctx) -> str | None:
    """Normalize the CPU bind fields; return the bind policy (required, else preferred)."""
    if doc.doc is None:
        return None
    _canonical_fields(doc, d.RESOURCE_SPEC_FIELDS + d.NUMA_SPEC_FIELDS, ctx)
    required = _bind_field(doc, d.F_REQUIRED_BIND, ctx)
    preferred = _bind_field(doc, d.F_PREFERRED_BIND, ctx)
    _normalize_field(
        doc, d.F_CPU_EXCLUSIVE, d.match_koord_cpu_exclusive, d.KOORD_CPU_EXCLUSIVE_POLICIES, ctx
    )
    return required or preferred


def _spell_misplaced(resource: _Json, ctx: _Ctx) -> None:
    """Spell the NUMA fields found in resource-spec before they are moved."""
    if resource.doc is None:
        return
    _canonical_fields(resource, d.RESOURCE_SPEC_FIELDS + d.NUMA_SPEC_FIELDS, ctx)
    for f in d.NUMA_SPEC_FIELDS:
        if f in resource.doc:
            policy = f == d.F_NUMA_POLICY
            _normalize_field(
                resource,
                f,
                d.match_koord_policy if policy else d.match_koord_exclusive,
                d.KOORD_POLICIES if policy else d.KOORD_EXCLUSIVE,
                ctx,
                code="unknown-policy" if policy else "unknown-value",
            )


def _has_numa_variants(resource: _Json) -> bool:
    if resource.doc is None:
        return False
    wanted = {f.lower() for f in d.NUMA_SPEC_FIELDS}
    return any(k.lower() in wanted and k not in d.NUMA_SPEC_FIELDS for k in resource.doc)


def _move_misplaced(
    resource: _Json, numa: _Json, numa_broken: bool, annotations: dict[str, str], ctx: _Ctx
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
            f"{d.KOORD_NUMA_SPEC}); not moved because {d.KOORD_NUMA_SPEC} is not valid JSON",
        )
        return
    target = numa.doc if numa.doc is not None else {}
    clashes = [f for f in misplaced if f in target and target[f] != resource.doc[f]]
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


def _volcano_value(raw: str, path: str, ctx: _Ctx) -> tuple[str | None, str]:
    """(policy, normalized text) for a Volcano policy value."""
    m = d.match_volcano_policy(raw)
    if m.value is None:
        ctx.add(
            path,
            "error",
            "unknown-policy",
            f"Volcano NUMA policy {d.describe_unknown(m, d.VOLCANO_POLICIES)}",
        )
        return None, raw
    if m.changed:
        ctx.add(
            path,
            "warning",
            _change_code(m),
            f"Volcano NUMA policy {d.describe_change(m, 'Volcano')}",
        )
    return m.value, m.value


def _task_policy(raw: str, path: str, ctx: _Ctx) -> str | None:
    """A Volcano Job task's ``topologyPolicy``: the CRD enum (none, best-effort, restricted,
    single-numa-node) rejects any other spelling, so a respelling is an error here, with
    the value it should be; numagate does not rewrite Job fields."""
    m = d.match_volcano_policy(raw)
    if m.how == "exact":
        return m.value
    suggestion = m.value if m.value is not None else m.suggestion
    unknown = d.ValueMatch(raw, None, "unknown", suggestion)
    ctx.add(
        path,
        "error",
        "unknown-policy",
        f"topologyPolicy {d.describe_unknown(unknown, d.VOLCANO_POLICIES)} (the Volcano Job "
        "CRD enum rejects it)",
    )
    return m.value


def _hami_values(annotations: dict[str, str], ctx: _Ctx) -> tuple[str | None, tuple[str, ...]]:
    node_policy: str | None = None
    gpu_policy: tuple[str, ...] = ()
    if d.HAMI_NODE_POLICY in annotations:
        raw = annotations[d.HAMI_NODE_POLICY]
        m = d.match_hami_node_policy(raw)
        if m.value is None:
            ctx.add(
                ctx.ann(d.HAMI_NODE_POLICY),
                "error",
                "unknown-value",
                f"HAMi node policy {d.describe_unknown(m, d.HAMI_NODE_POLICIES)} (HAMi "
                "silently treats it as binpack, #2767)",
            )
        else:
            node_policy = m.value
            if m.changed:
                annotations[d.HAMI_NODE_POLICY] = m.value
                ctx.add(
                    ctx.ann(d.HAMI_NODE_POLICY),
                    "warning",
                    _change_code(m),
                    f"HAMi node policy {d.describe_change(m, 'HAMi')} (#2767, #2854)",
                )
    if d.HAMI_GPU_POLICY in annotations:
        raw = annotations[d.HAMI_GPU_POLICY]
        c = d.match_hami_gpu_policy(raw)
        if c.value is None:
            bad = c.unknown[0]
            text = d.describe_unknown(bad, d.HAMI_GPU_POLICIES)
            ctx.add(
                ctx.ann(d.HAMI_GPU_POLICY),
                "error",
                "unknown-value",
                f"HAMi GPU policy {raw!r}: token {text}; a chain is comma-separated, e.g. "
                "binpack,numa (HAMi silently treats unknown values as spread, #2767)",
            )
        else:
            gpu_policy = c.tokens
            if c.changed:
                annotations[d.HAMI_GPU_POLICY] = c.value
                ctx.add(
                    ctx.ann(d.HAMI_GPU_POLICY),
                    "warning",
                    "respelled",
                    f"HAMi GPU policy {raw!r} is not HAMi's spelling (HAMi compares exactly, "
                    f"#2767, #2854); rewritten as {c.value!r}",
                )
    if d.HAMI_NUMA_BIND in annotations:
        raw = annotations[d.HAMI_NUMA_BIND]
        m = d.match_numa_bind(raw)
        path = ctx.ann(d.HAMI_NUMA_BIND)
        if m.value is None:
            ctx.add(
                path,
                "error",
                "unknown-value",
                f"{d.HAMI_NUMA_BIND} {d.describe_unknown(m, ('true', 'false'))} (HAMi reads it "
                "with Go's strconv.ParseBool and silently treats anything else as false)",
            )
        elif m.changed:
            annotations[d.HAMI_NUMA_BIND] = m.value
            ctx.add(
                path, "warning", "respelled", f"{d.HAMI_NUMA_BIND} {d.describe_change(m, 'HAMi')}"
            )
    return node_policy, gpu_policy


# ---- containers, QoS, pod requests ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _RawContainer:
    name: str
    kind: Literal["init", "sidecar", "app"]
    path: str  # relative to the object
    requests: dict[str, int]
    limits: dict[str, int]
    requests_given: bool  # requests map non-empty as written (Volcano's rule)
    written_requests: dict[str, int]  # before defaulting from limits


def _quantities(
    res: Any, field_name: str, cpath: str, ctx: _Ctx, names: set[str]
) -> dict[str, int]:
    """Core units of ``resources.<field_name>``; every resource name seen goes to ``names``
    (even when its value is bad: scheduler detection looks at names as written)."""
    out: dict[str, int] = {}
    if res is None:
        return out
    if not (type(res) is dict or isinstance(res, Mapping)):
        path = f"{cpath}.resources.{field_name}"
        ctx.add(path, "error", "invalid-value", f"{field_name} must be a map, got {res!r}")
        return out
    for name, value in res.items():
        rname = name if type(name) is str else str(name)
        names.add(rname)
        try:
            out[rname] = to_core_units(rname, value)
        except InvalidInput as exc:
            path = f"{cpath}.resources.{field_name}[{rname}]"
            ctx.add(path, "error", "invalid-quantity", f"{rname}: {exc}")
    return out


def _hami_ranges(spec: Mapping[str, Any], ctx: _Ctx) -> None:
    """HAMi percentage resources must be 0-100 (its webhook rejects others, research §3.2)."""
    for list_name in ("initContainers", "containers"):
        items = spec.get(list_name)
        if not isinstance(items, list):
            continue
        for i, c in enumerate(items):
            res = c.get("resources") if is_map(c) else None
            if not is_map(res):
                continue
            for section in ("limits", "requests"):
                values = res.get(section)
                if not is_map(values):
                    continue
                for name in d.HAMI_PERCENT_RESOURCES:
                    if name not in values:
                        continue
                    try:
                        v = to_core_units(name, values[name])
                    except InvalidInput:
                        continue  # reported as invalid-quantity already
                    if v > 100:
                        path = ctx.path(f"spec.{list_name}[{i}].resources.{section}[{name}]")
                        ctx.add(
                            path,
                            "error",
                            "out-of-range",
                            f"{name} is {values[name]!r}; HAMi allows 0-100 (a percentage of "
                            "one GPU)",
                        )


def _scan_containers(spec: Mapping[str, Any], ctx: _Ctx) -> tuple[list[_RawContainer], set[str]]:
    """One walk over the containers: their quantities and every resource name they ask for
    (as written, even if its value is bad). The HAMi range checks walk them again only
    when a HAMi percentage resource was named; their findings come after the others."""
    out: list[_RawContainer] = []
    names: set[str] = set()
    for list_name in ("initContainers", "containers"):
        items = spec.get(list_name)
        if items is None:
            continue
        if not isinstance(items, list):
            ctx.add(
                ctx.path(f"spec.{list_name}"),
                "error",
                "invalid-value",
                f"spec.{list_name} must be a list",
            )
            continue
        init = list_name == "initContainers"
        for i, c in enumerate(items):
            cpath = ctx.path(f"spec.{list_name}[{i}]")
            if not (type(c) is dict or isinstance(c, Mapping)):
                ctx.add(cpath, "error", "invalid-value", f"container {i} is not an object")
                continue
            kind: Literal["init", "sidecar", "app"] = "app"
            if init:
                # A restartable init container is a sidecar (KEP-753).
                kind = "sidecar" if c.get("restartPolicy") == "Always" else "init"
            res = c.get("resources")
            if not (type(res) is dict or isinstance(res, Mapping)):
                res = {}
            raw_requests = res.get("requests")
            requests = _quantities(raw_requests, "requests", cpath, ctx, names)
            limits = _quantities(res.get("limits"), "limits", cpath, ctx, names)
            given = is_map(raw_requests) and bool(raw_requests)
            # API defaulting: a request left unset takes the limit's value.
            merged = {**limits, **requests} if limits else dict(requests)
            name = c.get("name", _NO_NAME)
            if name is _NO_NAME:
                name = f"#{i}"
            elif type(name) is not str:
                name = str(name)
            out.append(_RawContainer(name, kind, cpath, merged, limits, given, requests))
    if not _HAMI_PERCENT.isdisjoint(names):
        _hami_ranges(spec, ctx)
    return out, names


_NO_NAME = object()


def pod_qos(containers: list[_RawContainer]) -> QoS:
    """Kubernetes QoS class (pkg/apis/core/helper/qos GetPodQOS), init containers included,
    over cpu and memory only."""
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    guaranteed = True
    for c in containers:
        creq, clim = c.requests, c.limits
        for r in QOS_RESOURCES:
            v = creq.get(r, 0)
            if v > 0:
                requests[r] = requests.get(r, 0) + v
            v = clim.get(r, 0)
            if v > 0:
                limits[r] = limits.get(r, 0) + v
            else:
                guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and requests == limits:
        return "Guaranteed"
    return "Burstable"


def pod_requests(containers: list[_RawContainer] | tuple[ContainerDemand, ...]) -> dict[str, int]:
    """Effective pod-level requests, per resource, the kubelet way (podGuaranteedCPUs,
    getPodRequestedResources, resourcehelper.PodRequests): max(largest regular init
    container plus the sidecars started before it, sum(app) + sum(sidecars))."""
    total: dict[str, int] = {}
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for c in containers:
        if c.kind == "app":
            for r, v in c.requests.items():
                total[r] = total.get(r, 0) + v
        elif c.kind == "sidecar":
            for r, v in c.requests.items():
                total[r] = total.get(r, 0) + v
                sidecars[r] = sidecars.get(r, 0) + v
            for r, v in sidecars.items():
                init_peak[r] = max(init_peak.get(r, 0), v)
        else:
            for r in set(c.requests) | set(sidecars):
                v = c.requests.get(r, 0) + sidecars.get(r, 0)
                init_peak[r] = max(init_peak.get(r, 0), v)
    for r, v in init_peak.items():
        total[r] = max(total.get(r, 0), v)
    return total


def _demands(containers: list[_RawContainer], qos: QoS) -> tuple[ContainerDemand, ...]:
    # The raw containers are private to one read_intent call: their maps are handed over
    # without copying.
    guaranteed = qos == "Guaranteed"
    out = []
    for c in containers:
        cpu = c.requests.get("cpu", 0)
        exclusive = cpu // 1000 if guaranteed and is_whole_cpu(cpu) else 0
        out.append(ContainerDemand(c.name, c.kind, c.requests, c.limits, exclusive))
    return tuple(out)


# ---- exclusive-CPU checks ---------------------------------------------------------------


def _volcano_cpu(c: _RawContainer) -> tuple[int, str]:
    """Volcano's Job webhook rule (admit_job.go validateTaskTopoPolicy): the CPU request,
    or the limit when the requests map is empty."""
    if c.requests_given:
        return c.written_requests.get("cpu", 0), "requests"
    return c.limits.get("cpu", 0), "limits"


def _check_exclusive_cpus(
    policy: str,
    policy_path: str,
    containers: list[_RawContainer],
    qos: QoS,
    strict: bool,
    ctx: _Ctx,
) -> None:
    what = f"NUMA policy {policy!r}"
    if strict:
        # Volcano's Job webhook denies a task whose containers lack integer CPUs.
        for c in containers:
            cpu, section = _volcano_cpu(c)
            if not is_whole_cpu(cpu):
                shown = format_quantity("cpu", cpu) if cpu else "0 (unset)"
                ctx.add(
                    f"{c.path}.resources.{section}[cpu]",
                    "error",
                    "fractional-cpu",
                    f"container {c.name!r} CPU {section} is {shown}; with topologyPolicy "
                    f"{policy!r} Volcano requires every container and init container to "
                    "request a positive integer number of CPUs (e.g. 1, 2)",
                )
    if qos != "Guaranteed":
        ctx.add(
            policy_path,
            "warning",
            "not-guaranteed",
            f"{what} has no effect on CPU placement: the pod's QoS class is {qos}, and only "
            "Guaranteed pods (requests == limits for cpu and memory in every container) get "
            "exclusive CPUs and CPU topology hints",
        )
        return
    if strict:
        return
    for c in containers:
        cpu = c.requests.get("cpu", 0)
        if not is_whole_cpu(cpu):
            ctx.add(
                f"{c.path}.resources.requests[cpu]",
                "warning",
                "fractional-cpu",
                f"container {c.name!r} requests {format_quantity('cpu', cpu)} CPU; with "
                f"{what} only integer CPU requests get exclusive CPUs (kubelet "
                "guaranteedCPUs), so this container is not NUMA-aligned",
            )


# ---- node selection ---------------------------------------------------------------------


def _requirements(items: Any) -> tuple[NodeSelectorRequirement, ...]:
    out = []
    if isinstance(items, list):
        for e in items:
            if not is_map(e):
                continue
            values = e.get("values")
            vals = tuple(str(v) for v in values) if isinstance(values, list) else ()
            out.append(
                NodeSelectorRequirement(str(e.get("key", "")), str(e.get("operator", "")), vals)
            )
    return tuple(out)


def _required_terms(spec: Mapping[str, Any]) -> tuple[NodeSelectorTerm, ...]:
    cur: Any = spec.get("affinity")
    for key in (
        "nodeAffinity",
        "requiredDuringSchedulingIgnoredDuringExecution",
        "nodeSelectorTerms",
    ):
        cur = cur.get(key) if is_map(cur) else None
    if not isinstance(cur, list):
        return ()
    return tuple(
        NodeSelectorTerm(
            _requirements(t.get("matchExpressions")), _requirements(t.get("matchFields"))
        )
        for t in cur
        if is_map(t)
    )


# ---- scheduler --------------------------------------------------------------------------


def detect_scheduler(
    scheduler_name: str,
    keys: set[str],
    *,
    volcano_job: bool,
    resources: set[str],
) -> Scheduler:
    """The rule in the module docstring."""
    if scheduler_name in d.SCHEDULER_BY_NAME:
        return d.SCHEDULER_BY_NAME[scheduler_name]  # type: ignore[return-value]
    if volcano_job or d.VOLCANO_NUMA_POLICY in keys:
        return "volcano"
    if not _KOORD_KEYS.isdisjoint(keys):
        return "koordinator"
    if scheduler_name in d.DEFAULT_SCHEDULER_NAMES and (
        not _HAMI_ONLY_RESOURCES.isdisjoint(resources)
        or (not _HAMI_KEYS.isdisjoint(keys) and d.HAMI_GPU in resources)
    ):
        return "hami"
    return "default"


def _no_effect(
    key: str, scheduler: Scheduler, scheduler_name: str, ctx: _Ctx, severity: Severity = "warning"
) -> None:
    owner = OWNER[KEY_OWNER[key]]
    shown = scheduler_name or "default-scheduler"
    ctx.add(
        ctx.ann(key),
        severity,
        "no-effect",
        f"{key} is read only by {owner}; this pod is scheduled by {shown} ({scheduler}), so it "
        "has no effect",
    )


def _mirror(
    scheduler: Scheduler,
    scheduler_name: str,
    koord: _Json,
    koord_policy: str | None,
    volcano_policy: str | None,
    volcano_in_template: bool,
    annotations: dict[str, str],
    ctx: _Ctx,
) -> tuple[str | None, str | None]:
    """Add the key the pod's scheduler reads when only the other scheduler's key states a
    policy; report keys that have no effect. Returns the (koord, volcano) policies after."""
    shown = scheduler_name or scheduler
    if scheduler == "volcano" and koord.doc is not None:
        if koord_policy not in (None, POLICY_NONE) and volcano_policy is None:
            annotations[d.VOLCANO_NUMA_POLICY] = koord_policy
            ctx.add(
                ctx.ann(koord.key),
                "warning",
                "mirrored",
                f"{koord.key} is read only by Koordinator but the pod is scheduled by {shown}; "
                f"added {d.VOLCANO_NUMA_POLICY}: {koord_policy}, the key Volcano reads",
            )
            return koord_policy, koord_policy
        sev: Severity = "info" if koord_policy == volcano_policy else "warning"
        _no_effect(koord.key, scheduler, scheduler_name, ctx, sev)
    elif scheduler == "koordinator" and volcano_in_template:
        usable = koord.doc is not None or koord.key not in annotations
        if volcano_policy not in (None, POLICY_NONE) and koord_policy is None and usable:
            doc = koord.doc if koord.doc is not None else {}
            assert volcano_policy is not None
            doc[d.F_NUMA_POLICY] = d.koord_from_kubelet(volcano_policy)
            annotations[d.KOORD_NUMA_SPEC] = dump_compact(doc)
            koord.doc = doc
            ctx.add(
                ctx.ann(d.VOLCANO_NUMA_POLICY),
                "warning",
                "mirrored",
                f"{d.VOLCANO_NUMA_POLICY} is read only by Volcano but the pod is scheduled by "
                f"{shown}; added {d.KOORD_NUMA_SPEC} {annotations[d.KOORD_NUMA_SPEC]}, the key "
                "Koordinator reads",
            )
            return volcano_policy, volcano_policy
        sev = "info" if koord_policy == volcano_policy else "warning"
        _no_effect(d.VOLCANO_NUMA_POLICY, scheduler, scheduler_name, ctx, sev)
    return koord_policy, volcano_policy


def _other_keys_no_effect(
    scheduler: Scheduler,
    scheduler_name: str,
    annotations: dict[str, str],
    ctx: _Ctx,
    mirrored: set[str],
) -> None:
    for key in sorted(annotations):
        owner = KEY_OWNER.get(key)
        if owner is None or owner == scheduler or key in mirrored:
            continue
        if scheduler in ("volcano", "koordinator") and key in (
            d.KOORD_NUMA_SPEC,
            d.VOLCANO_NUMA_POLICY,
        ):
            continue  # handled by _mirror
        _no_effect(key, scheduler, scheduler_name, ctx)


@dataclass(slots=True)
class _Koord:
    numa: _Json
    resource: _Json
    bind: str | None
    policy: str | None  # kubelet spelling
    exclusive: str | None


def _read_koordinator(annotations: dict[str, str], ctx: _Ctx) -> _Koord:
    """Parse, respell and move the Koordinator JSON annotations; write them back."""
    numa = _load_json(d.KOORD_NUMA_SPEC, annotations, ctx)
    numa_broken = d.KOORD_NUMA_SPEC in annotations and numa.doc is None
    resource = _load_json(d.KOORD_RESOURCE_SPEC, annotations, ctx)
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
    return _Koord(numa, resource, bind, policy, exclusive)


def _read_volcano(
    template: PodTemplate, annotations: dict[str, str], ctx: _Ctx
) -> tuple[str | None, str, str | None]:
    """(policy, path it came from, the Job task's raw topologyPolicy or None). A Job task's
    field wins over the template's annotation: the job controller overwrites it."""
    policy: str | None = None
    path = ctx.ann(d.VOLCANO_NUMA_POLICY)
    in_template = d.VOLCANO_NUMA_POLICY in annotations
    if in_template:
        policy, text = _volcano_value(annotations[d.VOLCANO_NUMA_POLICY], path, ctx)
        annotations[d.VOLCANO_NUMA_POLICY] = text
    extra = template.extra_annotations.get(d.VOLCANO_NUMA_POLICY)
    if extra is None:
        return policy, path, None
    task_path = template.extra_paths.get(d.VOLCANO_NUMA_POLICY, path)
    task_policy = _task_policy(extra, task_path, ctx)
    if in_template and None not in (task_policy, policy) and task_policy != policy:
        ctx.add(
            path,
            "error",
            "conflicting-policies",
            f"{d.VOLCANO_NUMA_POLICY} is {policy!r} but the task's topologyPolicy is "
            f"{task_policy!r}; the Volcano job controller overwrites the annotation. Remove one",
        )
    return task_policy, task_path, extra


# ---- entry point ------------------------------------------------------------------------


def read_intent(template: PodTemplate) -> IntentResult:
    """Parse, normalize and validate one pod template (see the module docstring)."""
    ctx = _Ctx(template.path)
    annotations = _string_annotations(template.metadata, ctx)
    raw_annotations = template.metadata.get("annotations")
    original = dict(raw_annotations) if is_map(raw_annotations) else {}
    spec = template.spec
    raw_name = spec.get("schedulerName")
    scheduler_name = raw_name.strip() if isinstance(raw_name, str) else ""
    if not scheduler_name and template.strict_cpu:
        scheduler_name = "volcano"

    koord = _read_koordinator(annotations, ctx)
    numa, resource, bind = koord.numa, koord.resource, koord.bind
    koord_policy, exclusive_value = koord.policy, koord.exclusive
    volcano_in_template = d.VOLCANO_NUMA_POLICY in annotations
    volcano_policy, volcano_path, extra = _read_volcano(template, annotations, ctx)

    node_policy, gpu_policy = _hami_values(annotations, ctx)

    raw, resources = _scan_containers(spec, ctx)
    keys = set(annotations) | set(template.extra_annotations)
    scheduler = detect_scheduler(
        scheduler_name, keys, volcano_job=template.strict_cpu, resources=resources
    )

    # Two keys that disagree: an error, and no mirroring.
    conflict = (
        koord_policy is not None and volcano_policy is not None and koord_policy != volcano_policy
    )
    if conflict:
        ctx.add(
            volcano_path if scheduler == "volcano" else ctx.ann(d.KOORD_NUMA_SPEC),
            "error",
            "conflicting-policies",
            f"{d.KOORD_NUMA_SPEC} asks for {koord_policy!r} but {d.VOLCANO_NUMA_POLICY} asks "
            f"for {volcano_policy!r}; state one policy",
        )
    mirrored: set[str] = set()
    if not conflict:
        before = set(annotations)
        koord_policy, volcano_policy = _mirror(
            scheduler,
            scheduler_name,
            numa,
            koord_policy,
            volcano_policy,
            volcano_in_template,
            annotations,
            ctx,
        )
        mirrored = set(annotations) - before
    elif scheduler in ("volcano", "koordinator"):
        mirrored = {d.KOORD_NUMA_SPEC, d.VOLCANO_NUMA_POLICY}
    if resource.doc == {}:
        mirrored.add(d.KOORD_RESOURCE_SPEC)  # emptied by the move: nothing left to report
    _other_keys_no_effect(scheduler, scheduler_name, annotations, ctx, mirrored)

    policy: str | None = None
    policy_path = ctx.ann(d.KOORD_NUMA_SPEC)
    exclusive: Literal["required", "preferred"] | None = None
    if scheduler == "koordinator":
        policy = koord_policy
        if policy not in (None, POLICY_NONE):
            # koord-scheduler: unset defaults to Required; anything but the exact
            # "Required" disables exclusivity (plugin.go, checkExclusivePolicy).
            if exclusive_value is None and d.F_NUMA_EXCLUSIVE not in (numa.doc or {}):
                exclusive = "required"
            else:
                exclusive = "required" if exclusive_value == "Required" else "preferred"
    elif scheduler == "volcano":
        policy = volcano_policy
        policy_path = volcano_path

    qos = pod_qos(raw)
    if policy not in (None, POLICY_NONE) and raw:
        assert policy is not None
        strict = template.strict_cpu and extra is not None
        _check_exclusive_cpus(policy, policy_path, raw, qos, strict, ctx)

    node_name = spec.get("nodeName")
    selector = spec.get("nodeSelector")
    intent = PodIntent(
        scheduler=scheduler,
        scheduler_name=scheduler_name,
        policy=policy,
        exclusive=exclusive,
        scope=None,  # no dialect lets a pod state a scope; the node's scope decides
        qos=qos,
        containers=_demands(raw, qos),
        pod_requests=pod_requests(raw),
        cpu_bind_policy=bind,
        hami_node_policy=node_policy,
        hami_gpu_policy=gpu_policy,
        node_name=node_name if isinstance(node_name, str) and node_name else None,
        node_selector=({str(k): str(v) for k, v in selector.items()} if is_map(selector) else {}),
        required_terms=_required_terms(spec),
    )
    findings = tuple(dict.fromkeys(ctx.findings))  # a repeated round reports once
    return IntentResult(intent, findings, annotations, annotations != original)
