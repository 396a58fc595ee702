"""The configuration file of ``numagate serve`` / ``review``: a pydantic model that agrees
with ``schemas/config.schema.json`` (a test keeps them in step), a loader with errors that
name the field, the value and what is allowed, and a holder that reloads the file on
change and keeps the last good version when the new one is broken."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import jsonschema
import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    StrictInt,
    ValidationError,
    field_validator,
)
from pydantic.alias_generators import to_camel
from referencing import Registry, Resource

from core.intent import limits as core_limits
from core.intent import versions as core_versions
from core.scoring.args import ScoringArgs, parse_scoring_args
from webhook.logs import get_logger

Mode = Literal["enforce", "warn", "dryrun"]
AffinityMode = Literal["label", "node-names", "auto", "off"]
DEFAULT_NAMESPACE = "numagate-system"
# Koordinator's scheduler reads this node label (research/upstream-schedulers.md).
KOORDINATOR_LABEL = "node.koordinator.sh/numa-topology-policy"
# For the other schedulers there is no upstream node label; ours carries the kubelet spelling.
DEFAULT_LABEL = "numagate.io/topology-manager-policy"
log = get_logger("config")


class ConfigError(Exception):
    """The configuration file cannot be used; the message names the file and the field."""


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True
    )


class Modes(_Model):
    annotations: Mode = "enforce"
    feasibility: Mode = "enforce"
    no_room_now: Mode = "warn"


class Mutation(_Model):
    normalize_annotations: StrictBool = True
    inject_affinity: StrictBool = True


class LabelKeys(_Model):
    koordinator: str = Field(KOORDINATOR_LABEL, min_length=1)
    volcano: str = Field(DEFAULT_LABEL, min_length=1)
    hami: str = Field(DEFAULT_LABEL, min_length=1)
    default: str = Field(DEFAULT_LABEL, min_length=1)


class Affinity(_Model):
    mode: AffinityMode = "auto"
    label_keys: LabelKeys = Field(default_factory=LabelKeys)
    max_node_names: StrictInt = Field(100, ge=1, le=1000)


class Scarce(_Model):
    """core.mutation.scarce: keep pods that request none of ``resources`` off nodes that have them."""

    enabled: StrictBool = False
    resources: tuple[str, ...] = ("nvidia.com/gpu",)
    required: StrictBool = False  # required anti-affinity; else a preferred term of ``weight``
    weight: StrictInt = Field(100, ge=1, le=100)
    label_keys: dict[str, str] = Field(default_factory=dict)  # resource -> node label key


class InventorySettings(_Model):
    stale_after_seconds: float = Field(300.0, gt=0, strict=True)
    reload_interval_seconds: float = Field(5.0, gt=0, strict=True)
    # The live source also watches bound Pods: HAMi card usage, kube-scheduler's requested
    # amounts (FitPlus) and Koordinator NUMA states come only from them. Read at startup.
    watch_pods: bool = Field(True, strict=True)


# The apiserver's upper bound on a webhook's timeoutSeconds (admissionregistration/v1):
# no review is waited for longer, so none reads an inventory snapshot longer either.
MAX_TIMEOUT_SECONDS = 30.0


class Timeouts(_Model):
    # The apiserver's default timeoutSeconds is 10 (admissionregistration/v1).
    default_seconds: float = Field(10.0, gt=0, le=MAX_TIMEOUT_SECONDS, strict=True)
    # Answer this long before the deadline: the response still has to cross the network.
    margin_seconds: float = Field(0.25, ge=0, strict=True)
    # Inventories up to this many nodes are always evaluated inline; above that inline when
    # the measured cost fits the deadline budget, else in a thread. 0: always in a thread.
    inline_nodes: StrictInt = Field(256, ge=0)


class DecisionCacheSettings(_Model):
    """webhook.review.decision_cache: answers reused for reviews that differ only in identity."""

    entries: StrictInt = Field(1024, ge=0, le=100_000)  # 0 turns the cache off


class Shutdown(_Model):
    # After SIGTERM the listener stays open this long, every answer saying "Connection:
    # close": the pod's deletion (not our readiness) takes its endpoint out, and kube-proxy
    # and the apiserver's pooled keep-alive connections need time to follow (docs/deploy.md,
    # "Shutdown timing"). Then requests in flight get up to grace_period_seconds.
    # Rule: preStop + delay + grace + 5 <= the pod's terminationGracePeriodSeconds (30).
    delay_seconds: float = Field(10.0, ge=0, strict=True)
    grace_period_seconds: float = Field(15.0, gt=0, strict=True)


class Limits(_Model):
    """What one review reads at most (core.intent.limits; README "Bounded work"): today's
    values are the defaults. Past ``reviewValues`` commas a review is not decoded and is
    allowed unchecked with a warning; past the others the field gets a ``too-large``
    finding. Raising them raises the worst review's CPU (benchmarks/worst_case.py)."""

    review_values: StrictInt = Field(40_000, ge=1_000)
    annotations_bytes: StrictInt = Field(core_limits.ANNOTATIONS_BYTES, ge=1)
    value_chars: StrictInt = Field(core_limits.VALUE_CHARS, ge=64)
    json_values: StrictInt = Field(core_limits.JSON_VALUES, ge=8)
    json_depth: StrictInt = Field(core_limits.JSON_DEPTH, ge=2)
    repair_chars: StrictInt = Field(core_limits.REPAIR_CHARS, ge=0)
    suggestions: StrictInt = Field(core_limits.SUGGESTIONS, ge=0)
    containers: StrictInt = Field(core_limits.CONTAINERS, ge=1)
    resources: StrictInt = Field(core_limits.RESOURCES, ge=1)
    affinity_terms: StrictInt = Field(core_limits.TERMS, ge=1)
    affinity_requirements: StrictInt = Field(core_limits.REQUIREMENTS, ge=1)
    affinity_values: StrictInt = Field(core_limits.VALUES, ge=1)
    node_selector_labels: StrictInt = Field(core_limits.SELECTOR_LABELS, ge=1)
    templates: StrictInt = Field(core_limits.TEMPLATES, ge=1)
    findings: StrictInt = Field(core_limits.FINDINGS, ge=1)

    def core(self) -> core_limits.Limits:
        """The same values as core.intent.limits.Limits (what read_intent takes)."""
        return core_limits.Limits(
            annotations_bytes=self.annotations_bytes,
            value_chars=self.value_chars,
            json_values=self.json_values,
            json_depth=self.json_depth,
            repair_chars=self.repair_chars,
            suggestions=self.suggestions,
            containers=self.containers,
            resources=self.resources,
            terms=self.affinity_terms,
            requirements=self.affinity_requirements,
            values=self.affinity_values,
            selector_labels=self.node_selector_labels,
            templates=self.templates,
            findings=self.findings,
        )


class SchedulerVersions(_Model):
    """The release each scheduler runs (core.intent.versions; the schema checks the form)."""

    hami: str = core_versions.show(core_versions.HAMI_LATEST)

    def core(self) -> core_versions.SchedulerVersions:
        return core_versions.from_texts(self.hami)


class Certificates(_Model):
    # controller-runtime's certwatcher polls every 10 s (defaultWatchInterval).
    reload_interval_seconds: float = Field(10.0, gt=0, strict=True)


def _scoring_problems(section: Mapping[str, Any]) -> list[str]:
    """Problems of the ``scoring`` section: schemas/scheduler-args.schema.json first, then
    what core.scoring.args.parse_scoring_args finds (each names ``scoring.<field>``)."""
    validator = jsonschema.Draft202012Validator(scheduler_args_schema())
    errors = _relevant(list(validator.iter_errors(section)))
    if errors:
        return [_schema_message(e, ("scoring",)) for e in errors[:5]]
    return [f"scoring.{problem}" for problem in parse_scoring_args(section)[1][:5]]


class Config(_Model):
    namespace: str = Field(DEFAULT_NAMESPACE, min_length=1, max_length=63)
    excluded_namespaces: tuple[str, ...] = ("kube-system", "kube-node-lease")
    ignore_label: str = Field("numagate.io/ignore", min_length=1)
    modes: Modes = Field(default_factory=Modes)
    mutation: Mutation = Field(default_factory=Mutation)
    affinity: Affinity = Field(default_factory=Affinity)
    scarce: Scarce = Field(default_factory=Scarce)
    inventory: InventorySettings = Field(default_factory=InventorySettings)
    timeouts: Timeouts = Field(default_factory=Timeouts)
    decision_cache: DecisionCacheSettings = Field(default_factory=DecisionCacheSettings)
    shutdown: Shutdown = Field(default_factory=Shutdown)
    certificates: Certificates = Field(default_factory=Certificates)
    limits: Limits = Field(default_factory=Limits)
    scheduler_versions: SchedulerVersions = Field(default_factory=SchedulerVersions)
    reload_interval_seconds: float = Field(5.0, gt=0, strict=True)
    # The scheduler's own scoring settings, as the scheduler takes them
    # (schemas/scheduler-args.schema.json): `explain` ranks the `fits` nodes with them.
    scoring: dict[str, Any] | None = None
    _scoring_args: ScoringArgs | None = PrivateAttr(default=None)
    _core_limits: core_limits.Limits = PrivateAttr(default=core_limits.DEFAULT)

    @field_validator("scoring")
    @classmethod
    def _valid_scoring(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            problems = _scoring_problems(value)
            if problems:
                raise ValueError("; ".join(problems))
        return value

    def model_post_init(self, context: Any, /) -> None:
        if self.scoring is not None:
            self._scoring_args = parse_scoring_args(self.scoring)[0]
        self._core_limits = self.limits.core()

    @property
    def core_limits(self) -> core_limits.Limits:
        """``limits`` as core.intent.limits.Limits (built once per configuration)."""
        return self._core_limits

    @property
    def core_versions(self) -> core_versions.SchedulerVersions:
        return self.scheduler_versions.core()

    @property
    def scoring_args(self) -> ScoringArgs | None:
        """The parsed ``scoring`` section (None: the schedulers' defaults)."""
        return self._scoring_args

    def is_excluded_namespace(self, namespace: str) -> bool:
        return namespace == self.namespace or namespace in self.excluded_namespaces


def _read_schema(name: str) -> dict[str, Any]:
    text = resources.files("schemas").joinpath(name).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


@cache
def config_schema() -> dict[str, Any]:
    return _read_schema("config.schema.json")


@cache
def scheduler_args_schema() -> dict[str, Any]:
    return _read_schema("scheduler-args.schema.json")


@cache
def _schema_registry() -> Registry:
    # config.schema.json refers to scheduler-args.schema.json by relative name; both are
    # registered so that nothing is ever fetched.
    args = Resource.from_contents(scheduler_args_schema())
    config_id = config_schema()["$id"]
    relative = config_id.rsplit("/", 1)[0] + "/scheduler-args.schema.json"
    registry: Registry = Registry().with_resources(
        [(scheduler_args_schema()["$id"], args), (relative, args)]
    )
    return registry


def _where(path: Any) -> str:
    return ".".join(str(p) for p in path) or "(top level)"


def _schema_message(error: jsonschema.ValidationError, prefix: tuple[str, ...] = ()) -> str:
    where = _where((*prefix, *error.path))
    if error.validator == "not":
        # the scheduler-args rule: plugins/pluginConfig belong inside profiles[]
        return f"{where}: give plugins and pluginConfig inside profiles[], not beside profiles"
    if error.validator in ("oneOf", "anyOf") and isinstance(error.validator_value, list):
        forms = " or ".join(json.dumps(sub, sort_keys=True) for sub in error.validator_value)
        return f"{where}: {error.instance!r} is not allowed; expected {forms}"
    return f"{where}: {error.message}"


def _relevant(errors: list[jsonschema.ValidationError]) -> list[jsonschema.ValidationError]:
    # A non-object fails the `not {required: ...}` rule vacuously: its type error says it all.
    kept = [e for e in errors if not (e.validator == "not" and not isinstance(e.instance, Mapping))]
    return sorted(kept, key=lambda e: list(map(str, e.path)))


def config_validator() -> jsonschema.Draft202012Validator:
    """A validator of schemas/config.schema.json that resolves its ``scoring`` reference."""
    return jsonschema.Draft202012Validator(config_schema(), registry=_schema_registry())


def _schema_errors(data: Any) -> list[str]:
    validator = config_validator()
    errors = _relevant(list(validator.iter_errors(data)))
    return [_schema_message(e) for e in errors[:5]]


def _pydantic_errors(exc: ValidationError) -> list[str]:
    out = []
    for err in exc.errors()[:5]:
        got = "" if err["type"] == "missing" else f" (got {err.get('input')!r})"
        out.append(f"{_where(err['loc'])}: {err['msg']}{got}")
    return out


def parse_config(
    data: Any, *, name: str = "config", env: Mapping[str, str] | None = None
) -> Config:
    """Validate ``data`` (parsed YAML/JSON) against the schema and the model."""
    if data is None:
        data = {}
    problems = _schema_errors(data)
    if problems:
        raise ConfigError(f"{name}: " + "; ".join(problems))
    assert isinstance(data, dict)
    if isinstance(data.get("scoring"), Mapping):
        problems = _scoring_problems(data["scoring"])
        if problems:
            raise ConfigError(f"{name}: " + "; ".join(problems))
    env = os.environ if env is None else env
    if "namespace" not in data and env.get("POD_NAMESPACE"):
        data = {**data, "namespace": env["POD_NAMESPACE"]}
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{name}: " + "; ".join(_pydantic_errors(exc))) from None


def load_config(path: str | Path | None, *, env: Mapping[str, str] | None = None) -> Config:
    """Read a YAML or JSON configuration file (None: the defaults)."""
    if path is None:
        return parse_config({}, env=env)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML or JSON: {exc}") from None
    return parse_config(data, name=str(path), env=env)


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class ConfigHolder:
    """The current configuration; ``check()`` reloads the file when it changed.

    A broken new version is logged and counted and the last good one stays in force:
    a typo in a ConfigMap must not change the webhook's behaviour.
    """

    def __init__(self, path: str | Path | None, *, env: Mapping[str, str] | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._env = env
        self.current = load_config(self.path, env=env)  # fail fast at startup
        self._signature = _signature(self.path) if self.path else None
        self.last_error: str | None = None

    def check(self) -> bool | None:
        """Reload if the file changed: True reloaded, False kept the last good, None unchanged."""
        if self.path is None:
            return None
        sig = _signature(self.path)
        if sig == self._signature:
            return None
        self._signature = sig
        try:
            self.current = load_config(self.path, env=self._env)
        except ConfigError as exc:
            self.last_error = str(exc)
            log.error(
                "configuration reload failed; keeping the last good one", extra={"error": str(exc)}
            )
            return False
        self.last_error = None
        log.info("configuration reloaded", extra={"file": str(self.path)})
        return True
