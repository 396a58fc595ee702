"""``numagate lint -o yaml|sarif|junit``: the findings for CI systems.

- ``yaml``: the ``-o json`` document in YAML.
- ``sarif``: SARIF 2.1.0 (OASIS), one run, one rule per finding code, levels error /
  warning / note, the file and line of each finding (GitHub code scanning reads it).
- ``junit``: JUnit XML as kubeconform writes it: a ``testsuite`` per file, a ``testcase``
  per object (``failure`` for its errors, warnings and info in ``system-out``,
  ``skipped`` when the webhook ignores it), an ``error`` case for a file that cannot be read.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from xml.etree import ElementTree as ET

import yaml

from webhook.cli.lint_report import LintFinding
from webhook.version import __version__

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
# Finding codes of files and objects that were not checked (see webhook.cli.lint).
PARSE_ERROR = "parse-error"
IGNORED = "ignored"


@dataclass(frozen=True, slots=True)
class Checked:
    """One object lint looked at (for JUnit, which lists passes too)."""

    file: str
    object: str


def render_yaml(findings: Sequence[LintFinding]) -> str:
    doc = {"findings": [f.as_dict() for f in findings]}
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=1 << 16)


def _uri(file: str) -> str:
    return "stdin" if file == "<stdin>" else file


def _result(f: LintFinding, rule_index: int) -> dict[str, Any]:
    physical: dict[str, Any] = {"artifactLocation": {"uri": _uri(f.file)}}
    if f.line:
        physical["region"] = {"startLine": f.line}
    location: dict[str, Any] = {"physicalLocation": physical}
    if f.object:
        name = f"{f.object}:{f.path}" if f.path else f.object
        location["logicalLocations"] = [{"fullyQualifiedName": name, "kind": "object"}]
    where = ": ".join(p for p in (f.object, f.path) if p)
    return {
        "ruleId": f.code,
        "ruleIndex": rule_index,
        "level": SARIF_LEVEL.get(f.severity, "note"),
        "message": {"text": f"{where}: {f.message}" if where else f.message},
        "locations": [location],
    }


def render_sarif(findings: Sequence[LintFinding]) -> str:
    codes: list[str] = []
    for f in findings:
        if f.code not in codes:
            codes.append(f.code)
    rules = [{"id": code, "shortDescription": {"text": f"numagate lint: {code}"}} for code in codes]
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "numagate", "version": __version__, "rules": rules}},
                "results": [_result(f, codes.index(f.code)) for f in findings],
            }
        ],
    }
    return json.dumps(log, indent=2) + "\n"


def _line(f: LintFinding) -> str:
    path = f"{f.path}: " if f.path else ""
    return f"{f.where()}: {path}{f.severity} {f.code}: {f.message}"


def _case(suite: ET.Element, file: str, name: str, found: Sequence[LintFinding]) -> dict[str, int]:
    case = ET.SubElement(suite, "testcase", name=name or file, classname=file, time="0")
    errors = [f for f in found if f.severity == "error"]
    if any(f.code == PARSE_ERROR for f in errors):
        err = ET.SubElement(case, "error", message=errors[0].message, type=PARSE_ERROR)
        err.text = "\n".join(_line(f) for f in errors)
        return {"errors": 1}
    if errors:
        failure = ET.SubElement(
            case, "failure", message=f"{len(errors)} error(s): {errors[0].message}", type="lint"
        )
        failure.text = "\n".join(_line(f) for f in errors)
    elif any(f.code == IGNORED for f in found):
        ET.SubElement(case, "skipped", message=next(f.message for f in found if f.code == IGNORED))
        return {"skipped": 1}
    notes = [f for f in found if f.severity != "error"]
    if notes:
        ET.SubElement(case, "system-out").text = "\n".join(_line(f) for f in notes)
    return {"failures": 1 if errors else 0}


def render_junit(findings: Sequence[LintFinding], checked: Sequence[Checked]) -> str:
    by_case: dict[tuple[str, str], list[LintFinding]] = defaultdict(list)
    for f in findings:
        by_case[(f.file, f.object)].append(f)
    cases: dict[str, list[str]] = {}
    for c in checked:
        cases.setdefault(c.file, [])
        if c.object not in cases[c.file]:
            cases[c.file].append(c.object)
    for file, obj in by_case:  # findings of a file that did not parse, or of the inventory
        cases.setdefault(file, [])
        if obj not in cases[file]:
            cases[file].append(obj)
    root = ET.Element("testsuites", name="numagate lint")
    totals: dict[str, int] = defaultdict(int)
    for file, names in cases.items():
        suite = ET.SubElement(root, "testsuite", name=file)
        counts: dict[str, int] = defaultdict(int)
        for name in names:
            for key, n in _case(suite, file, name, by_case.get((file, name), [])).items():
                counts[key] += n
        counts["tests"] = len(names)
        for key in ("tests", "failures", "errors", "skipped"):
            suite.set(key, str(counts[key]))
            totals[key] += counts[key]
        suite.set("time", "0")
    for key in ("tests", "failures", "errors", "skipped"):
        root.set(key, str(totals[key]))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
