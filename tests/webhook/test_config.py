"""webhook.config: the pydantic model and schemas/config.schema.json agree; errors name the
field; the holder reloads on change and keeps the last good version."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, ValidationError

from core.scoring.args import parse_scoring_args
from tests.paths import FIXTURES
from webhook.config import (
    Config,
    ConfigError,
    ConfigHolder,
    config_schema,
    config_validator,
    load_config,
    parse_config,
)

VALID: list[dict[str, Any]] = [
    {},
    {"namespace": "ops", "excludedNamespaces": ["a", "b"], "ignoreLabel": "x/ignore"},
    {"modes": {"annotations": "warn", "feasibility": "dryrun", "noRoomNow": "enforce"}},
    {"affinity": {"mode": "node-names", "maxNodeNames": 5, "labelKeys": {"default": "k"}}},
    {
        "scarce": {
            "enabled": True,
            "resources": ["nvidia.com/gpu"],
            "required": True,
            "weight": 50,
            "labelKeys": {"nvidia.com/gpu": "gpu"},
        }
    },
    {"inventory": {"staleAfterSeconds": 30, "reloadIntervalSeconds": 0.5}},
    {"timeouts": {"defaultSeconds": 3, "marginSeconds": 0, "inlineNodes": 0}},
    {"shutdown": {"delaySeconds": 0, "gracePeriodSeconds": 5}, "reloadIntervalSeconds": 1},
    {"mutation": {"normalizeAnnotations": False, "injectAffinity": False}},
    {"scoring": {}},
    {
        "scoring": {
            "volcano": {
                "tiers": [{"plugins": [{"name": "numa-aware", "arguments": {"weight": "10"}}]}]
            }
        }
    },
    {
        "scoring": {
            "hami": {
                "nodeSchedulerPolicy": "spread",
                "gpuSchedulerPolicy": "topology-aware,binpack",
            }
        }
    },
]
INVALID: list[tuple[dict[str, Any], str]] = [
    ({"modes": {"feasibility": "deny"}}, "modes.feasibility"),
    ({"modez": {}}, "modez"),
    ({"affinity": {"mode": "names"}}, "affinity.mode"),
    ({"affinity": {"maxNodeNames": 0}}, "affinity.maxNodeNames"),
    ({"inventory": {"staleAfterSeconds": 0}}, "inventory.staleAfterSeconds"),
    ({"timeouts": {"defaultSeconds": 31}}, "timeouts.defaultSeconds"),
    ({"scarce": {"weight": 101}}, "scarce.weight"),
    ({"excludedNamespaces": "kube-system"}, "excludedNamespaces"),
    ({"namespace": ""}, "namespace"),
    ({"mutation": {"injectAffinity": "yes"}}, "mutation.injectAffinity"),
    ({"scoring": []}, "scoring"),
    ({"scoring": {"hami": {"nodeSchedulerPolicy": "pack"}}}, "scoring.hami.nodeSchedulerPolicy"),
    (
        {
            "scoring": {
                "pluginConfig": [{"name": "ScarceResourceAvoidance", "args": {"resources": []}}]
            }
        },
        "scoring.pluginConfig.0.args.resources",
    ),
    (
        {"scoring": {"profiles": [{"schedulerName": "koord-scheduler"}], "plugins": {}}},
        "scoring",
    ),
]


def _model_accepts(data: dict[str, Any]) -> bool:
    try:
        Config.model_validate(data)
    except ValidationError:
        return False
    return True


def _schema_accepts(data: dict[str, Any]) -> bool:
    return config_validator().is_valid(data)


@pytest.mark.parametrize("data", VALID)
def test_schema_and_model_accept_the_same(data: dict[str, Any]) -> None:
    assert _schema_accepts(data) and _model_accepts(data)
    parse_config(data, env={})


@pytest.mark.parametrize(("data", "field"), INVALID, ids=[f for _, f in INVALID])
def test_schema_and_model_reject_the_same_and_name_the_field(
    data: dict[str, Any], field: str
) -> None:
    assert not _schema_accepts(data)
    assert not _model_accepts(data)
    with pytest.raises(ConfigError) as exc:
        parse_config(data, name="cfg.yaml", env={})
    assert "cfg.yaml" in str(exc.value) and field.split(".")[-1] in str(exc.value)


def _walk_model(model: type[BaseModel]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        alias = info.alias or name
        ann = info.annotation
        out[alias] = (
            _walk_model(ann) if isinstance(ann, type) and issubclass(ann, BaseModel) else None
        )
    return out


def _walk_schema(node: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, sub in node.get("properties", {}).items():
        out[name] = (
            _walk_schema(sub) if sub.get("type") == "object" and "properties" in sub else None
        )
    return out


def test_schema_and_model_have_the_same_fields() -> None:
    assert _walk_schema(config_schema()) == _walk_model(Config)


def test_defaults_and_env_namespace() -> None:
    c = parse_config({}, env={"POD_NAMESPACE": "gate"})
    assert c.namespace == "gate"
    assert c.is_excluded_namespace("gate") and c.is_excluded_namespace("kube-system")
    assert not c.is_excluded_namespace("default")
    assert parse_config({"namespace": "own"}, env={"POD_NAMESPACE": "gate"}).namespace == "own"
    assert c.modes.no_room_now == "warn" and c.affinity.mode == "auto"


def test_load_yaml_json_and_errors(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("modes:\n  feasibility: warn\n")
    assert load_config(tmp_path / "c.yaml", env={}).modes.feasibility == "warn"
    (tmp_path / "c.json").write_text('{"affinity": {"mode": "off"}}')
    assert load_config(tmp_path / "c.json", env={}).affinity.mode == "off"
    (tmp_path / "bad.yaml").write_text("modes: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(tmp_path / "bad.yaml")
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")
    (tmp_path / "list.yaml").write_text("- 1\n")
    with pytest.raises(ConfigError, match="is not of type 'object'"):
        load_config(tmp_path / "list.yaml")


def _touch_newer(path: Path, text: str) -> None:
    before = path.stat().st_mtime_ns
    path.write_text(text)
    os.utime(path, ns=(before + 10**9, before + 10**9))


def test_holder_reloads_and_keeps_last_good(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("modes: {feasibility: warn}\n")
    holder = ConfigHolder(path, env={})
    assert holder.check() is None  # unchanged
    _touch_newer(path, "modes: {feasibility: dryrun}\n")
    assert holder.check() is True and holder.current.modes.feasibility == "dryrun"
    _touch_newer(path, "modes: {feasibility: sometimes}\n")
    assert holder.check() is False
    assert holder.current.modes.feasibility == "dryrun"  # last good kept
    assert holder.last_error and "modes.feasibility" in holder.last_error
    path.unlink()
    assert holder.check() is False and holder.current.modes.feasibility == "dryrun"
    path.write_text("{}\n")
    assert holder.check() is True and holder.current.modes.feasibility == "enforce"


def test_holder_fails_fast_on_a_bad_first_file(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("affinity: {mode: sideways}\n")
    with pytest.raises(ConfigError, match=r"affinity\.mode"):
        ConfigHolder(path)


SCORING = FIXTURES / "scoring"
SEEDS = ["volcano-numa-aware.yaml", "koordinator-fitplus.yaml", "kube-scheduler-config.yaml"]


@pytest.mark.parametrize("name", SEEDS)
def test_scoring_section_carries_the_seed_scheduler_args(name: str) -> None:
    """The scoring section is the scheduler args as the schedulers take them, parsed by
    core.scoring.args.parse_scoring_args."""
    doc = yaml.safe_load((SCORING / name).read_text())
    config = parse_config({"scoring": doc}, env={})
    assert _schema_accepts({"scoring": doc})
    expected, problems = parse_scoring_args(doc)
    assert problems == [] and config.scoring_args == expected
    assert config.scoring == doc


def test_scoring_args_values() -> None:
    volcano = parse_config(
        {"scoring": yaml.safe_load((SCORING / "volcano-numa-aware.yaml").read_text())}, env={}
    )
    assert volcano.scoring_args is not None and volcano.scoring_args.volcano_weight == 10
    koord = parse_config(
        {"scoring": yaml.safe_load((SCORING / "kube-scheduler-config.yaml").read_text())}, env={}
    )
    args = koord.scoring_args
    assert args is not None
    assert (args.numa_weight, args.scarce_weight, args.scarce_resources) == (
        3,
        5,
        ("nvidia.com/gpu",),
    )
    assert parse_config({}, env={}).scoring_args is None


@pytest.mark.parametrize(
    ("scoring", "needles"),
    [
        # schema-valid, but koord-scheduler would not start: enabled without its args
        (
            {"plugins": {"score": {"enabled": [{"name": "NodeResourcesFitPlus", "weight": 2}]}}},
            ["scoring.plugins.score.enabled", "NodeResourcesFitPlus", "NodeResourcesFitPlusArgs"],
        ),
        # args for a plugin that is not enabled: koord-scheduler ignores them
        (
            {
                "pluginConfig": [
                    {"name": "ScarceResourceAvoidance", "args": {"resources": ["nvidia.com/gpu"]}}
                ]
            },
            ["scoring.pluginConfig[0].args", "not in plugins.score.enabled"],
        ),
        (
            {
                "pluginConfig": [
                    {
                        "name": "NodeResourcesFitPlus",
                        "args": {"resources": {"cpu": {"type": "MostAllocated", "weight": -1}}},
                    }
                ]
            },
            ["scoring.pluginConfig.0.args.resources.cpu.weight", "-1"],
        ),
        (
            {
                "volcano": {
                    "tiers": [{"plugins": [{"name": "numa-aware", "arguments": {"weight": "ten"}}]}]
                }
            },
            ["scoring.volcano.tiers.0.plugins.0.arguments.weight", "'ten'", "integer"],
        ),
    ],
)
def test_scoring_errors_name_the_field(scoring: dict[str, Any], needles: list[str]) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_config({"scoring": scoring}, name="cfg.yaml", env={})
    message = str(exc.value)
    assert message.startswith("cfg.yaml: ")
    for needle in needles:
        assert needle in message
    assert not _model_accepts({"scoring": scoring})


def test_scoring_config_file_loads_and_reloads(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("scoring:\n" + _indent((SCORING / "volcano-numa-aware.yaml").read_text()))
    holder = ConfigHolder(path, env={})
    assert holder.current.scoring_args is not None
    assert holder.current.scoring_args.volcano_weight == 10
    _touch_newer(path, "scoring: {hami: {nodeSchedulerPolicy: nope}}\n")
    assert holder.check() is False and holder.current.scoring_args.volcano_weight == 10
    assert holder.last_error and "scoring.hami.nodeSchedulerPolicy" in holder.last_error


def _indent(text: str) -> str:
    return "".join(f"  {line}\n" for line in text.splitlines())
