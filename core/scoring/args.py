"""The scheduler settings that change ranking (docs/contracts.md: explain -o json ``scoring``), read from a
scheduler-args document: a KubeSchedulerConfiguration or bare koord-scheduler profile
(plugin weights, NodeResourcesFitPlus and ScarceResourceAvoidance args), a volcano-scheduler
conf (numa-aware weight) and HAMi's scheduler policies. Parsing only; ranking is
core/scoring/rank.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from core.scoring import hami
from core.scoring import koordinator as koord

API_VERSION: Final = "kubescheduler.config.k8s.io/v1"
FIT_PLUS: Final = "NodeResourcesFitPlus"
SCARCE: Final = "ScarceResourceAvoidance"
NODE_NUMA: Final = "NodeNUMAResource"
ARGS_KINDS: Final = {FIT_PLUS: "NodeResourcesFitPlusArgs", SCARCE: "ScarceResourceAvoidanceArgs"}
KOORD_SCHEDULER: Final = "koord-scheduler"
VOLCANO_PLUGIN: Final = "numa-aware"


@dataclass(frozen=True, slots=True)
class ScoringArgs:
    """The scheduler settings that change ranking. ``fit_plus``/``scarce_resources`` None
    means the plugin is not enabled; plugin weights default to 1 (kube-scheduler default)."""

    volcano_weight: int = 1
    numa_weight: int = 1
    fit_plus: tuple[koord.FitPlusResource, ...] | None = None
    fit_plus_weight: int = 1
    scarce_resources: tuple[str, ...] | None = None
    scarce_weight: int = 1
    hami_node_policy: str = hami.DEFAULT_NODE_POLICY
    hami_gpu_policy: tuple[str, ...] = (hami.DEFAULT_GPU_POLICY,)
    hami_weights: hami.ScoringWeights = field(default_factory=hami.ScoringWeights)


# ============================================================================ parsing


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class _Errors(list[str]):
    def add(self, path: str, value: object, allowed: str) -> None:
        self.append(f"{path}: {value!r} is not allowed; expected {allowed}")


def _profile(doc: Mapping[str, Any], errors: _Errors) -> tuple[Mapping[str, Any], str]:
    """The profile to read: the koord-scheduler profile of a KubeSchedulerConfiguration
    (else its first), or the document itself when it is a bare profile."""
    profiles = doc.get("profiles")
    if profiles is None:
        return doc, ""
    if not isinstance(profiles, list) or not profiles:
        errors.add("profiles", profiles, "a non-empty list of profiles")
        return {}, ""
    for key in ("plugins", "pluginConfig"):
        if key in doc:
            errors.append(f"{key}: give it inside profiles[], not beside profiles")
    for i, profile in enumerate(profiles):
        if isinstance(profile, Mapping) and profile.get("schedulerName") == KOORD_SCHEDULER:
            return profile, f"profiles[{i}]."
    if not isinstance(profiles[0], Mapping):
        errors.add("profiles[0]", profiles[0], "an object")
        return {}, ""
    return profiles[0], "profiles[0]."


def _score_weights(plugins: object, prefix: str, errors: _Errors) -> dict[str, int]:
    """Enabled score plugins and weights (plugins.score.enabled, then multiPoint.enabled);
    weight 0 or absent is kube-scheduler's default 1."""
    weights: dict[str, int] = {}
    if plugins is None:
        return weights
    if not isinstance(plugins, Mapping):
        errors.add(f"{prefix}plugins", plugins, "an object")
        return weights
    for point in ("multiPoint", "score"):
        section = plugins.get(point) or {}
        enabled = section.get("enabled", []) if isinstance(section, Mapping) else None
        if not isinstance(enabled, list):
            errors.add(f"{prefix}plugins.{point}.enabled", enabled, "a list of {name, weight}")
            continue
        for i, entry in enumerate(enabled):
            path = f"{prefix}plugins.{point}.enabled[{i}]"
            if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
                errors.add(path, entry, "an object with a string 'name'")
                continue
            weight = entry.get("weight", 0)
            if not _is_int(weight) or weight < 0:
                errors.add(f"{path}.weight", weight, "an integer >= 0")
                continue
            weights[entry["name"]] = weight or 1
    return weights


def _check_header(args: Mapping[str, Any], name: str, path: str, errors: _Errors) -> None:
    for key in sorted(set(args) - {"apiVersion", "kind", "resources"}):
        # Strict decoding in kube-scheduler rejects unknown fields in plugin args.
        errors.add(f"{path}.{key}", args[key], "no such field (apiVersion, kind, resources)")
    api = args.get("apiVersion")
    if api is not None and api != API_VERSION:
        errors.add(f"{path}.apiVersion", api, repr(API_VERSION))
    kind = args.get("kind")
    if kind is not None and kind != ARGS_KINDS[name]:
        # Koordinator issues #2561/#3082: a wrong args type stops koord-scheduler at start.
        errors.add(f"{path}.kind", kind, repr(ARGS_KINDS[name]))


def _fit_plus_args(
    args: Mapping[str, Any], path: str, errors: _Errors
) -> tuple[koord.FitPlusResource, ...]:
    resources = args.get("resources")
    if not isinstance(resources, Mapping):
        errors.add(f"{path}.resources", resources, "a map of resource name to {type, weight}")
        return ()
    result = []
    for name in sorted(resources):
        spec = resources[name]
        where = f"{path}.resources[{name}]"
        if not isinstance(spec, Mapping):
            errors.add(where, spec, "an object {type, weight}")
            continue
        kind, weight = spec.get("type", ""), spec.get("weight", 0)
        if "weight" not in spec:
            errors.append(
                f"{where}.weight: missing; koord-scheduler takes 0 (it then never counts)"
            )
        if not _is_int(weight) or weight < 0:
            errors.add(f"{where}.weight", weight, "an integer >= 0")
            continue
        if kind not in koord.FIT_TYPES:
            # Kept in the args: koord-scheduler scores it 0 and still counts its weight.
            errors.add(f"{where}.type", kind, " or ".join(koord.FIT_TYPES))
        result.append(koord.FitPlusResource(str(name), str(kind), weight))
    return tuple(result)


def _scarce_args(args: Mapping[str, Any], path: str, errors: _Errors) -> tuple[str, ...]:
    resources = args.get("resources")
    if (
        not isinstance(resources, list)
        or not resources
        or not all(isinstance(r, str) and r for r in resources)
    ):
        errors.add(f"{path}.resources", resources, "a list of resource names")
        return ()
    return tuple(resources)


def _plugin_args(
    profile: Mapping[str, Any], prefix: str, errors: _Errors
) -> dict[str, Mapping[str, Any]]:
    found: dict[str, Mapping[str, Any]] = {}
    entries = profile.get("pluginConfig", [])
    if not isinstance(entries, list):
        errors.add(f"{prefix}pluginConfig", entries, "a list of {name, args}")
        return found
    for i, entry in enumerate(entries):
        path = f"{prefix}pluginConfig[{i}]"
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            errors.add(path, entry, "an object with a string 'name'")
            continue
        if entry["name"] in ARGS_KINDS:
            args = entry.get("args")
            if not isinstance(args, Mapping):
                errors.add(f"{path}.args", args, f"{ARGS_KINDS[entry['name']]} object")
                continue
            _check_header(args, entry["name"], f"{path}.args", errors)
            found[entry["name"]] = {"path": f"{path}.args", "args": args}
    return found


def _volcano_weight(volcano: object, errors: _Errors) -> int:
    """numa-aware ``arguments.weight`` from a volcano-scheduler conf (``tiers[].plugins[]``);
    Volcano's arguments are strings or numbers (the CCE seed writes "10")."""
    if volcano is None:
        return 1
    if not isinstance(volcano, Mapping) or not isinstance(volcano.get("tiers", []), list):
        errors.add("volcano", volcano, "a volcano-scheduler conf object with 'tiers'")
        return 1
    for t, tier in enumerate(volcano.get("tiers", [])):
        plugins = tier.get("plugins", []) if isinstance(tier, Mapping) else None
        if not isinstance(plugins, list):
            errors.add(f"volcano.tiers[{t}].plugins", plugins, "a list of plugins")
            continue
        for p, plugin in enumerate(plugins):
            if not isinstance(plugin, Mapping) or plugin.get("name") != VOLCANO_PLUGIN:
                continue
            weight = (plugin.get("arguments") or {}).get("weight", 1)
            path = f"volcano.tiers[{t}].plugins[{p}].arguments.weight"
            if isinstance(weight, str) and weight.strip().isdigit():
                weight = int(weight)
            if not _is_int(weight) or weight < 0:
                errors.add(path, weight, "a non-negative integer (or a string of digits)")
                return 1
            return weight
    return 1


def _hami(section: object, errors: _Errors) -> dict[str, Any]:
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        errors.add("hami", section, "an object")
        return {}
    out: dict[str, Any] = {}
    node = section.get("nodeSchedulerPolicy")
    if node is not None:
        if node in hami.NODE_POLICIES:
            out["hami_node_policy"] = node
        else:
            errors.add("hami.nodeSchedulerPolicy", node, " or ".join(hami.NODE_POLICIES))
    gpu = section.get("gpuSchedulerPolicy")
    if gpu is not None:
        chain = tuple(t.strip() for t in gpu.split(",")) if isinstance(gpu, str) else ()
        if chain and all(t in hami.GPU_POLICIES for t in chain):
            out["hami_gpu_policy"] = chain
        else:
            errors.add(
                "hami.gpuSchedulerPolicy", gpu, "a comma list of " + ", ".join(hami.GPU_POLICIES)
            )
    weights = section.get("deviceScoringWeights")
    if weights is not None:
        keys = ("slot", "core", "memory")
        if (
            isinstance(weights, Mapping)
            and set(weights) <= set(keys)
            and all(_is_int(weights[k]) and weights[k] >= 0 for k in weights)
            and any(weights.get(k, 1) > 0 for k in keys)
        ):
            out["hami_weights"] = hami.ScoringWeights(**{k: float(weights.get(k, 1)) for k in keys})
        else:
            errors.add(
                "hami.deviceScoringWeights", weights, "{slot, core, memory}: integers >= 0, one > 0"
            )
    return out


def parse_scoring_args(doc: Mapping[str, Any]) -> tuple[ScoringArgs, list[str]]:
    """Read :class:`ScoringArgs` from a scheduler-args document (schemas/scheduler-args.schema.json):
    a KubeSchedulerConfiguration (``profiles``) or a bare profile (``plugins``, ``pluginConfig``)
    as koord-scheduler takes it, plus ``volcano`` (a volcano-scheduler conf) and ``hami``.
    Returns the args and every problem found, each naming the field, the value and what is
    allowed. Problems koord-scheduler would not survive or would silently mis-score are
    reported; values that still mean something to ranking are kept (an unknown FitPlus type)."""
    errors = _Errors()
    if not isinstance(doc, Mapping):
        errors.add("(document)", doc, "an object")
        return ScoringArgs(), list(errors)
    profile, prefix = _profile(doc, errors)
    weights = _score_weights(profile.get("plugins"), prefix, errors)
    configured = _plugin_args(profile, prefix, errors)
    values: dict[str, Any] = {"volcano_weight": _volcano_weight(doc.get("volcano"), errors)}
    values["numa_weight"] = weights.get(NODE_NUMA, 1)
    for name, key, weight_key, reader in (
        (FIT_PLUS, "fit_plus", "fit_plus_weight", _fit_plus_args),
        (SCARCE, "scarce_resources", "scarce_weight", _scarce_args),
    ):
        entry = configured.get(name)
        if name in weights and entry is None:
            errors.append(
                f"{prefix}plugins.score.enabled: {name} is enabled without pluginConfig args; "
                f"koord-scheduler fails to start (want args of type {ARGS_KINDS[name]})"
            )
        elif entry is not None and name not in weights:
            errors.append(
                f"{entry['path']}: {name} has args but is not in {prefix}plugins.score.enabled; "
                "koord-scheduler ignores it"
            )
        elif entry is not None:
            values[key] = reader(entry["args"], entry["path"], errors)
            values[weight_key] = weights[name]
    values.update(_hami(doc.get("hami"), errors))
    return ScoringArgs(**values), list(errors)
