"""numagate policies (webhook/policies.py, webhook/cli/policies.py): the objects validate
against the official Kubernetes schemas (kubernetes-validate; the real apiserver's
``kubectl apply --dry-run=server`` is tests/e2e/test_policies.py), every expression
compiles as CEL, validationActions follow modes.annotations, the scope follows the
configuration, and the shipped kustomize file is the generator's output."""

from __future__ import annotations

import json
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from tests.manifests import K8S_VERSIONS, MANIFESTS
from tests.policies.cel_eval import _program
from webhook.cli.main import main
from webhook.config import parse_config
from webhook.policies import TEMPLATES, VOLCANO_JOBS, WARNINGS, policies

COMPONENT = MANIFESTS / "components" / "policies" / "policies.yaml"


def _objects(config: dict | None = None) -> list[dict]:
    return policies(parse_config(config or {}, env={}), 1024)


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_objects_validate_against_the_official_schemas(version: str) -> None:
    for obj in _objects():
        kubernetes_validate.validate(obj, version, strict=True)


def test_every_expression_compiles() -> None:
    for obj in _objects():
        spec = obj["spec"]
        for item in (*spec.get("variables", []), *spec.get("validations", [])):
            for key in ("expression", "messageExpression"):
                if key in item:
                    _program(item[key])


@pytest.mark.parametrize(
    ("mode", "actions", "warnings"),
    [
        ("enforce", ["Deny"], ["Warn"]),
        ("warn", ["Warn"], ["Warn"]),
        ("dryrun", ["Audit"], ["Audit"]),
    ],
)
def test_validation_actions_follow_the_annotations_mode(
    mode: str, actions: list[str], warnings: list[str]
) -> None:
    """The denials' bindings follow the mode; the warnings' binding warns where they deny."""
    bindings = {
        o["spec"]["policyName"]: o["spec"]["validationActions"]
        for o in _objects({"modes": {"annotations": mode}})
        if o["kind"].endswith("Binding")
    }
    assert bindings == {TEMPLATES: actions, VOLCANO_JOBS: actions, WARNINGS: warnings}


def test_scope_follows_the_configuration() -> None:
    objs = _objects({"namespace": "gate", "excludedNamespaces": ["infra"], "ignoreLabel": "x/skip"})
    for policy in (o for o in objs if o["kind"] == "ValidatingAdmissionPolicy"):
        constraints = policy["spec"]["matchConstraints"]
        names, label = constraints["namespaceSelector"]["matchExpressions"]
        assert names == {
            "key": "kubernetes.io/metadata.name",
            "operator": "NotIn",
            "values": ["gate", "infra"],
        }
        assert label == {"key": "x/skip", "operator": "NotIn", "values": ["true"]}
        assert constraints["objectSelector"]["matchExpressions"] == [label]
        assert policy["spec"]["failurePolicy"] == "Ignore"


def test_the_value_limit_follows_the_configuration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("limits: {valueChars: 100}\n")
    assert main(["policies", "--config", str(config), "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "List" and len(doc["items"]) == 6
    text = json.dumps(doc)
    assert "<= 100 &&" in text and "<= 1024" not in text


def test_a_bad_configuration_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("modes: {annotations: deny}\n")
    assert main(["policies", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "modes.annotations" in err and "deny" in err


def test_the_kustomize_component_is_the_generated_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    configmap = yaml.safe_load((MANIFESTS / "base" / "configmap.yaml").read_text())
    config = tmp_path / "config.yaml"
    config.write_text(configmap["data"]["config.yaml"])
    assert main(["policies", "--config", str(config)]) == 0
    assert capsys.readouterr().out == COMPONENT.read_text(), (
        "regenerate: numagate policies --config <the base ConfigMap's config.yaml> > "
        f"{COMPONENT.relative_to(MANIFESTS.parent)}"
    )
