"""The admission handlers: one :class:`Handler` per endpoint (``/mutate``, ``/validate``),
each a decision from a parsed request to an :class:`~webhook.review.response.Outcome`.

mutate (Pods, CREATE): normalized annotations, mirrored into the dialect of the pod's
scheduler (core.intent.read), and the node affinity that selects exactly the compatible
nodes (core.mutation.affinity, docs/contracts.md: Policy semantics). validate (Pods and workload templates, CREATE
and UPDATE of the template): annotation errors, impossible pods, pods with no room now
(webhook.review.feasibility), each under its own enforcement mode (enforce / warn /
dryrun, as Gatekeeper's enforcementAction).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from core.errors import CoreError
from core.intent.limits import DEFAULT, Limits
from core.intent.read import read_intent, with_spec_affinity
from core.intent.versions import LATEST, SchedulerVersions
from core.intent.workloads import PodTemplate, pod_templates, structure_findings
from core.model import Finding, PodIntent, is_map
from core.mutation.affinity import (
    AffinitySettings,
    ScarceSettings,
    spec_ops,
    without_policy_affinity,
)
from core.mutation.patch import PatchOp, annotation_ops
from webhook.config import Config
from webhook.dra.admission import check_claims
from webhook.review.feasibility import _apply_modes, _at, _Checks, _feasibility
from webhook.review.response import Outcome, allowed, denied, patched
from webhook.review.runtime import InventoryRead, Runtime
from webhook.review.wire import AdmissionRequest, WebhookName

# Static (mirror) pods are created by the kubelet from files; mutating them is futile
# (Kubernetes webhook good-practices page).
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


# (request, runtime, configuration, deadline on runtime.clock, the inventory the review
# reads) -> the decision
Decide = Callable[[AdmissionRequest, Runtime, Config, float, InventoryRead], Awaitable[Outcome]]


@dataclass(frozen=True, slots=True)
class Handler:
    """One admission webhook: its endpoint name and its decision. ``mutating``: its answer
    may carry a patch, and it fails open on an internal error (webhook.review.errors)."""

    name: WebhookName
    mutating: bool
    decide: Decide


# ----------------------------------------------------------------------------- scoping


def _labels(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    meta = obj.get("metadata") if is_map(obj) else None
    labels = meta.get("labels") if is_map(meta) else None
    return labels if is_map(labels) else {}


def exclusion_reason(request: AdmissionRequest, config: Config) -> str | None:
    """Why this request is out of scope (namespace excluded or opt-out label), or None."""
    if request.namespace and config.is_excluded_namespace(request.namespace):
        return f"namespace {request.namespace} is excluded"
    for obj in (request.object, request.old_object):
        if str(_labels(obj).get(config.ignore_label, "")).lower() == "true":
            return f"label {config.ignore_label}=true"
    return None


def _is_pod(request: AdmissionRequest) -> bool:
    return request.kind.group == "" and request.kind.kind == "Pod" and not request.sub_resource


def _template_key(t: PodTemplate) -> bytes:
    annotations = t.metadata.get("annotations")
    return orjson.dumps(
        [t.path, annotations, t.spec, dict(t.extra_annotations)],
        option=orjson.OPT_SORT_KEYS,
        default=dict,
    )


def changed_templates(
    request: AdmissionRequest, limits: Limits = DEFAULT, versions: SchedulerVersions = LATEST
) -> list[PodTemplate]:
    """Templates to check: all on CREATE, on UPDATE only those whose pod spec or
    annotations changed (scaling a Deployment must not re-run the checks)."""
    assert request.object is not None
    templates = pod_templates(request.object, limits, versions)
    if request.operation != "UPDATE" or request.old_object is None:
        return templates
    before = {_template_key(t) for t in pod_templates(request.old_object, limits)}
    return [t for t in templates if _template_key(t) not in before]


# ----------------------------------------------------------------------------- mutate


_settings_cache: tuple[Config, AffinitySettings] | None = None
_core_cache: tuple[Config, Limits, SchedulerVersions] | None = None


def core_settings(config: Config) -> tuple[Limits, SchedulerVersions]:
    """``config.core_limits`` and ``config.core_versions``, remembered per configuration
    object: pydantic reads a private attribute through ``BaseModel.__getattr__``, whose
    ``hasattr`` probe raises and catches an AttributeError on every read, and the versions
    are parsed from their texts on every read (several microseconds a review, issue 27)."""
    global _core_cache
    if _core_cache is None or _core_cache[0] is not config:
        _core_cache = (config, config.core_limits, config.core_versions)
    return _core_cache[1], _core_cache[2]


def affinity_settings(config: Config) -> AffinitySettings:
    """The configuration's affinity and scarce sections as core.mutation.affinity's values
    (built once per configuration object)."""
    global _settings_cache
    if _settings_cache is not None and _settings_cache[0] is config:
        return _settings_cache[1]
    keys, scarce = config.affinity.label_keys, config.scarce
    settings = AffinitySettings(
        mode=config.affinity.mode,
        label_keys={"koordinator": keys.koordinator, "volcano": keys.volcano, "hami": keys.hami},
        default_label_key=keys.default,
        max_node_names=config.affinity.max_node_names,
        scarce=ScarceSettings(
            tuple(scarce.resources),
            required=scarce.required,
            label_keys=dict(scarce.label_keys),
            weight=scarce.weight,
        )
        if scarce.enabled
        else None,
    )
    _settings_cache = (config, settings)
    return settings


def mutate(request: AdmissionRequest, config: Config, inventory: InventoryRead) -> Outcome:
    """The mutating webhook: Pods on CREATE only; everything else passes unchanged.

    A pod the core cannot read is admitted unchanged with a warning: the validating
    webhook denies it with the reason (a broken mutation must never block creation).
    """
    try:
        return _mutate(request, config, inventory)
    except CoreError as exc:
        return allowed(warnings=[f"pod not mutated: {exc}"])


def _mutate(request: AdmissionRequest, config: Config, inventory: InventoryRead) -> Outcome:
    obj = request.object
    if request.operation != "CREATE" or not _is_pod(request) or not isinstance(obj, dict):
        return allowed()
    if exclusion_reason(request, config) is not None:
        return allowed()
    meta = obj.get("metadata")
    meta_is_map = is_map(meta)
    annotations = meta.get("annotations") if meta_is_map else None
    if is_map(annotations) and MIRROR_ANNOTATION in annotations:
        return allowed()
    spec = obj.get("spec")
    if not is_map(spec) or not (meta_is_map or meta is None):
        return allowed()  # malformed: JSON pointers into it would not apply; validate denies
    templates = pod_templates(obj, *core_settings(config))
    if not templates:
        return allowed()
    result = read_intent(templates[0])
    ops: list[PatchOp] = []
    if config.mutation.normalize_annotations and result.changed:
        ops += annotation_ops(meta if meta_is_map else None, result.annotations)
    errors = [f for f in result.findings if f.severity == "error"]
    if errors:
        # No affinity from a broken intent; validation denies it. What is over a limit of
        # core.intent.limits is left as written, and said here.
        return patched(ops, warnings=[f.message for f in errors if f.code == "too-large"])
    warnings = [f.message for f in result.findings if f.severity == "warning"]
    inject = config.mutation.inject_affinity
    stale = inject and inventory.stale
    view = inventory.view if inject else None
    volatile = inject and (stale or view is None)
    spec_ops_, more_warnings = spec_ops(
        result.intent, spec, view, affinity_settings(config), inject=inject, stale=stale
    )
    warnings += more_warnings
    outcome = patched(ops + spec_ops_, warnings=warnings)
    return dataclasses.replace(outcome, volatile=True) if volatile else outcome


def judged_intent(
    request: AdmissionRequest,
    template: PodTemplate,
    intent: PodIntent,
    inventory: InventoryRead,
    config: Config,
) -> PodIntent:
    """The intent validation judges: for a Pod, without the policy affinity mutate added
    (core.mutation.affinity.without_policy_affinity), so that its verdicts are those of
    the pod as written, which explain shows (an excluded node's `policy-mismatch`, not the
    `not-selected` of numagate's own affinity)."""
    if not _is_pod(request) or not config.mutation.inject_affinity or not intent.required_terms:
        return intent
    try:
        settings = affinity_settings(config)
        spec = without_policy_affinity(
            intent, template.spec, inventory.view, settings, stale=inventory.stale
        )
        return intent if spec is None else with_spec_affinity(intent, template, spec)
    except CoreError:  # what mutate could not plan it did not inject: judge the pod as is
        return intent


async def _decide_mutate(
    request: AdmissionRequest,
    runtime: Runtime,
    config: Config,
    deadline: float,
    inventory: InventoryRead,
) -> Outcome:
    return mutate(request, config, inventory)


MUTATE = Handler("mutate", mutating=True, decide=_decide_mutate)


# ----------------------------------------------------------------------------- validate


def _finding_message(path: str, message: str, code: str) -> str:
    return f"{path}: {message} (rule {code})" if path else f"{message} (rule {code})"


def _unchecked_size(finding: Finding) -> bool:
    """Over one of numagate's own bounds on the object's structure (containers, resources,
    affinity, nodeSelector, templates): Kubernetes accepts such an object, so it is allowed
    unchecked. Over a bound of the annotations it is an error: the API server refuses
    annotations over 256 KiB itself, and a policy value past its bound is invalid whatever
    it holds (the ValidatingAdmissionPolicy refuses it too)."""
    return finding.code == "too-large" and "metadata.annotations" not in finding.path


def _not_checked(findings: list[Finding], runtime: Runtime) -> Outcome:
    """Allowed, with a warning per finding that numagate did not check the pod template,
    counted (reason too-large)."""
    runtime.metrics.unchecked.inc(webhook="validate", reason="too-large")
    return allowed(warnings=[f"numagate: not checked: {f.message}" for f in findings])


async def validate(
    request: AdmissionRequest,
    runtime: Runtime,
    config: Config,
    deadline: float,
    inventory: InventoryRead,
) -> Outcome:
    """The validating webhook for Pods and the pod templates of workloads."""
    if request.operation not in ("CREATE", "UPDATE") or not isinstance(request.object, dict):
        return allowed()
    if request.sub_resource or exclusion_reason(request, config) is not None:
        return allowed()
    if request.operation == "UPDATE" and _is_pod(request):
        # A pod's placement is decided at CREATE; its spec is immutable apart from a few
        # fields, and schedulers write status annotations on running pods (Koordinator's
        # resource-status): re-checking them could block the scheduler itself.
        return allowed()
    limits, versions = core_settings(config)
    malformed = [f for f in structure_findings(request.object, limits) if f.severity == "error"]
    if malformed and all(_unchecked_size(f) for f in malformed):
        return _not_checked(malformed, runtime)
    if malformed:
        message = "; ".join(_finding_message(f.path, f.message, f.code) for f in malformed)
        return denied(message, code=400, reason="BadRequest")
    try:
        templates = changed_templates(request, limits, versions)
    except CoreError as exc:
        return denied(str(exc), code=400, reason="BadRequest")
    checks = _Checks()
    pairs: list[tuple[PodTemplate, PodIntent]] = []
    for template in templates:
        try:
            result = read_intent(template)
        except CoreError as exc:
            return denied(_at(template, str(exc)), code=400, reason="BadRequest")
        errors = [f for f in result.findings if f.severity == "error"]
        sizes = [f for f in errors if _unchecked_size(f)]
        for f in errors:
            if f not in sizes:
                checks.fail("annotations", _finding_message(f.path, f.message, f.code))
        checks.warnings += [f.message for f in result.findings if f.severity == "warning"]
        if sizes:
            checks.warnings += _not_checked(sizes, runtime).warnings
        elif not errors:
            pairs.append(
                (template, judged_intent(request, template, result.intent, inventory, config))
            )
    if pairs:
        try:
            await _feasibility(
                checks, pairs, inventory, runtime=runtime, config=config, deadline=deadline
            )
        except CoreError as exc:  # e.g. an affinity operator the API would have rejected
            return denied(str(exc), code=400, reason="BadRequest")
        await _dra_claims(checks, request, pairs, runtime, config, deadline, inventory)
    return _apply_modes(checks, config)


async def _dra_claims(
    checks: _Checks,
    request: AdmissionRequest,
    pairs: list[tuple[PodTemplate, PodIntent]],
    runtime: Runtime,
    config: Config,
    deadline: float,
    inventory: InventoryRead,
) -> None:
    """The templates' DRA claims (webhook/dra/admission.py); a template without claims
    is not looked at, so its answer is unchanged."""
    found = await check_claims(
        pairs,
        namespace=request.namespace or "",
        nodes=inventory.view.nodes if inventory.view is not None else None,
        nrt_stale=inventory.stale,
        dra=runtime.dra,
        stale_after=config.inventory.stale_after_seconds,
        remaining=deadline - runtime.clock(),
        workload=request.object,
    )
    if found.judged:
        checks.failures += found.failures
        checks.warnings += found.warnings
        checks.volatile = True


VALIDATE = Handler("validate", mutating=False, decide=validate)
HANDLERS: dict[WebhookName, Handler] = {"mutate": MUTATE, "validate": VALIDATE}
