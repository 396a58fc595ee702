"""rank(): each scheduler's own ordering (Volcano seed example 750/500/0, the default
scheduler's LeastNUMANodes-like order), the scheduler-args parser, and its JSON Schema."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import pytest
import yaml

from core.model import NodeVerdict
from core.scoring import koordinator as koord
from core.scoring.args import ScoringArgs, parse_scoring_args
from core.scoring.rank import rank
from tests.builders.model import container, fits, intent, plain_node, zone
from tests.paths import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "scoring"
SCHEMA = json.loads((ROOT / "schemas" / "scheduler-args.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def load(name: str) -> dict[str, Any]:
    return yaml.safe_load((FIXTURES / name).read_text())


GUARANTEED = [container(requests={"cpu": 4000, "memory": 2**30})]
ABC = [fits("node-a", (0,)), fits("node-b", (0, 1), False), fits("node-c", (0, 1, 2, 3), False)]
ABC_NODES = [plain_node(n, {"cpu": 64000}) for n in ("node-a", "node-b", "node-c")]


# ------------------------------------------------------------------ Volcano


def test_volcano_seed_example_750_500_0() -> None:
    args, errors = parse_scoring_args(load("volcano-numa-aware.yaml"))
    assert errors == []
    assert args.volcano_weight == 10
    pod = intent("volcano", policy="best-effort", containers=GUARANTEED)
    ranked = rank(pod, ABC_NODES, list(reversed(ABC)), args)
    assert [(v.name, v.score) for v in ranked] == [("node-a", 750), ("node-b", 500), ("node-c", 0)]
    assert "10 * (100 - 100*1/4) = 750" in ranked[0].reason


def test_volcano_default_weight_is_1_and_max_is_over_fits_nodes_only() -> None:
    pod = intent("volcano", policy="restricted", containers=GUARANTEED)
    verdicts = [*ABC[:2], NodeVerdict("node-c", "no-room-now", (0, 1, 2, 3))]
    ranked = rank(pod, ABC_NODES, verdicts)
    assert [(v.name, v.score) for v in ranked] == [("node-a", 50), ("node-b", 0)]


def test_volcano_weight_as_string_like_the_cce_console() -> None:
    doc = {
        "volcano": {"tiers": [{"plugins": [{"name": "numa-aware", "arguments": {"weight": "10"}}]}]}
    }
    assert parse_scoring_args(doc) == (ScoringArgs(volcano_weight=10), [])
    assert VALIDATOR.is_valid(doc)


@pytest.mark.parametrize(
    "pod",
    [
        intent("volcano", policy=None, containers=GUARANTEED),
        intent("volcano", policy="none", containers=GUARANTEED),
        intent("volcano", policy="best-effort", containers=GUARANTEED, qos="Burstable"),
    ],
)
def test_volcano_scores_only_guaranteed_pods_with_a_policy(pod: Any) -> None:
    ranked = rank(pod, ABC_NODES, ABC)
    assert [v.score for v in ranked] == [0, 0, 0]
    assert [v.name for v in ranked] == ["node-a", "node-b", "node-c"]  # by name


# ------------------------------------------------------------------ default scheduler


def test_default_scheduler_least_numa_nodes_then_preferred_then_name() -> None:
    verdicts = [
        fits("z", (0, 1), True),
        fits("y", (0,), False),
        fits("x", (1,), True),
        fits("w", (0,), True),
        NodeVerdict("v", "never-fits"),
    ]
    ranked = rank(intent(), [], verdicts)
    assert [(v.name, v.score) for v in ranked] == [("w", 95), ("x", 95), ("y", 90), ("z", 85)]


def test_verdict_without_numa_counts_every_zone_and_keeps_reason() -> None:
    zones = [zone(i, {"cpu": 8000}) for i in range(4)]
    n4 = plain_node("four", {"cpu": 32000}, zones)
    verdicts = [fits("four", (), False, reason="policy none"), fits("one", (0,), False)]
    ranked = rank(intent(), [n4], verdicts)
    assert [(v.name, v.score) for v in ranked] == [("one", 90), ("four", 60)]
    assert ranked[1].reason.startswith("policy none; least NUMA nodes: 4")


def test_rank_returns_only_fits_and_empty_for_none() -> None:
    assert rank(intent(), [], [NodeVerdict("a", "no-room-now", (0,))]) == []
    assert rank(intent("volcano", policy="restricted"), [], []) == []


def test_koordinator_numa_score_ranks_single_numa_first() -> None:
    zones = [zone(0, {"cpu": 16000}, {"cpu": 4000}), zone(1, {"cpu": 16000}, {"cpu": 16000})]
    nodes = [plain_node("busy", {"cpu": 32000}, zones), plain_node("wide", {"cpu": 32000}, zones)]
    pod = intent("koordinator", policy="single-numa-node", containers=GUARANTEED)
    ranked = rank(pod, nodes, [fits("wide", (0, 1)), fits("busy", (1,))])
    # busy: (100-10) + 10*(12000+4000)/32000 = 95; wide: (100-20) + 5 = 85
    assert [(v.name, v.score) for v in ranked] == [("busy", 95), ("wide", 85)]


# ------------------------------------------------------------------ parse_scoring_args


def test_parse_seed_koordinator_config() -> None:
    args, errors = parse_scoring_args(load("koordinator-fitplus.yaml"))
    assert errors == []
    assert args.fit_plus == (
        koord.FitPlusResource("cpu", "LeastAllocated", 1),
        koord.FitPlusResource("memory", "LeastAllocated", 1),
        koord.FitPlusResource("nvidia.com/gpu", "MostAllocated", 2),
    )
    assert (args.fit_plus_weight, args.scarce_resources, args.scarce_weight) == (
        2,
        ("nvidia.com/gpu",),
        2,
    )


def test_parse_full_configuration_uses_the_koord_scheduler_profile() -> None:
    args, errors = parse_scoring_args(load("kube-scheduler-config.yaml"))
    assert errors == []
    assert (args.numa_weight, args.scarce_resources, args.scarce_weight) == (
        3,
        ("nvidia.com/gpu",),
        5,
    )
    assert args.fit_plus is None


def _seed() -> dict[str, Any]:
    return copy.deepcopy(load("koordinator-fitplus.yaml"))


def _mutate(path: list[Any], value: Any) -> dict[str, Any]:
    doc = _seed()
    target: Any = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return doc


BAD_DOCS = [
    pytest.param(
        _mutate(["pluginConfig", 0, "args", "resources", "cpu", "type"], "Balanced"),
        "pluginConfig[0].args.resources[cpu].type: 'Balanced' is not allowed; expected MostAllocated or LeastAllocated",
        id="fitplus-type-enum",
    ),
    pytest.param(
        _mutate(["pluginConfig", 0, "args", "resources", "cpu", "weight"], "1"),
        "pluginConfig[0].args.resources[cpu].weight: '1' is not allowed; expected an integer >= 0",
        id="fitplus-weight-type",
    ),
    pytest.param(
        _mutate(["pluginConfig", 0, "args", "kind"], "NodeResourcesArgs"),
        "pluginConfig[0].args.kind: 'NodeResourcesArgs' is not allowed; expected 'NodeResourcesFitPlusArgs'",
        id="fitplus-kind",
    ),
    pytest.param(
        _mutate(["pluginConfig", 1, "args", "apiVersion"], "kubescheduler.config.k8s.io/v1beta3"),
        "pluginConfig[1].args.apiVersion: 'kubescheduler.config.k8s.io/v1beta3' is not allowed",
        id="scarce-apiversion",
    ),
    pytest.param(
        _mutate(["pluginConfig", 1, "args", "resources"], "nvidia.com/gpu"),
        "pluginConfig[1].args.resources: 'nvidia.com/gpu' is not allowed; expected a list of resource names",
        id="scarce-resources-type",
    ),
    pytest.param(
        _mutate(["pluginConfig", 0, "args", "resources", "cpu"], {"type": "LeastAllocated"}),
        "pluginConfig[0].args.resources[cpu].weight: missing",
        id="fitplus-weight-missing",
    ),
    pytest.param(
        _mutate(["pluginConfig", 0, "args", "resource"], {}),
        "pluginConfig[0].args.resource: {} is not allowed; expected no such field",
        id="fitplus-unknown-field",
    ),
    pytest.param(
        _mutate(["pluginConfig", 1, "args", "resources"], []),
        "pluginConfig[1].args.resources: [] is not allowed",
        id="scarce-resources-empty",
    ),
    pytest.param(
        _mutate(["plugins", "score", "enabled", 0, "weight"], -1),
        "plugins.score.enabled[0].weight: -1 is not allowed; expected an integer >= 0",
        id="plugin-weight",
    ),
    pytest.param(
        {**_seed(), "hami": {"nodeSchedulerPolicy": "Binpack"}},
        "hami.nodeSchedulerPolicy: 'Binpack' is not allowed; expected binpack or spread",
        id="hami-node-enum",
    ),
    pytest.param(
        {**_seed(), "hami": {"gpuSchedulerPolicy": "binpack,fastest"}},
        "hami.gpuSchedulerPolicy: 'binpack,fastest' is not allowed",
        id="hami-gpu-enum",
    ),
    pytest.param(
        {
            "volcano": {
                "tiers": [{"plugins": [{"name": "numa-aware", "arguments": {"weight": "ten"}}]}]
            }
        },
        "volcano.tiers[0].plugins[0].arguments.weight: 'ten' is not allowed",
        id="volcano-weight",
    ),
]


@pytest.mark.parametrize(("doc", "message"), BAD_DOCS)
def test_schema_and_parser_both_reject_bad_values(doc: dict[str, Any], message: str) -> None:
    assert not VALIDATOR.is_valid(doc)
    _, errors = parse_scoring_args(doc)
    assert any(e.startswith(message) for e in errors), errors


def test_unknown_fit_plus_type_is_reported_but_kept_for_ranking() -> None:
    args, errors = parse_scoring_args(
        _mutate(["pluginConfig", 0, "args", "resources", "cpu", "type"], "Balanced")
    )
    assert len(errors) == 1
    assert args.fit_plus is not None
    assert koord.FitPlusResource("cpu", "Balanced", 1) in args.fit_plus


def test_enabled_without_args_and_args_without_enabled_are_reported() -> None:
    doc = _seed()
    doc["pluginConfig"] = doc["pluginConfig"][:1]
    doc["plugins"]["score"]["enabled"] = doc["plugins"]["score"]["enabled"][1:]
    args, errors = parse_scoring_args(doc)
    assert args.fit_plus is None and args.scarce_resources is None
    assert any("ScarceResourceAvoidance is enabled without pluginConfig args" in e for e in errors)
    assert any(
        e.startswith("pluginConfig[0].args: NodeResourcesFitPlus has args but is not in")
        for e in errors
    )


def test_hami_section_sets_defaults() -> None:
    doc = {
        "hami": {
            "nodeSchedulerPolicy": "spread",
            "gpuSchedulerPolicy": "binpack,numa",
            "deviceScoringWeights": {"slot": 0, "core": 2, "memory": 1},
        }
    }
    assert VALIDATOR.is_valid(doc)
    args, errors = parse_scoring_args(doc)
    assert errors == []
    assert (args.hami_node_policy, args.hami_gpu_policy) == ("spread", ("binpack", "numa"))
    assert (args.hami_weights.slot, args.hami_weights.core, args.hami_weights.memory) == (0, 2, 1)


def test_schema_is_valid_and_accepts_every_fixture() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    for name in (
        "koordinator-fitplus.yaml",
        "kube-scheduler-config.yaml",
        "volcano-numa-aware.yaml",
    ):
        errors = [e.message for e in VALIDATOR.iter_errors(load(name))]
        assert errors == [], name


def test_schema_rejects_profiles_beside_top_level_plugin_config() -> None:
    doc = {**load("kube-scheduler-config.yaml"), "pluginConfig": []}
    assert not VALIDATOR.is_valid(doc)
    assert any("give it inside profiles[]" in e for e in parse_scoring_args(doc)[1])


def test_parser_never_raises_on_junk() -> None:
    for junk in (
        [],
        {"profiles": "x"},
        {"plugins": 3},
        {"pluginConfig": {}},
        {"volcano": []},
        {"hami": 1},
    ):
        _, errors = parse_scoring_args(junk)  # type: ignore[arg-type]
        assert errors, junk
