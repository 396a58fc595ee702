"""The lint engine behind ``numagate lint`` (docs/contracts.md: Command line, lint -o json): Kubernetes objects in,
findings out, rendered as text for people or JSON for tools.

Every pod template of every object goes through exactly the reading the webhook does
(``core.intent.workloads.pod_templates`` then ``core.intent.read.read_intent``). With an inventory,
each template's intent also goes through the feasibility check (``core.feasibility.verdicts`` and ``decision``): a
denial becomes an ``impossible`` error, "no node has room now" a ``no-room-now`` warning,
and any other caveat of the decision (empty inventory, nodes without NUMA data) an info
``not-checked``. Finding codes of the intent are documented in ``core.intent.findings``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.intent.limits import DEFAULT, Limits
from core.intent.read import read_intent
from core.intent.versions import LATEST, SchedulerVersions
from core.intent.workloads import object_identity, pod_templates, structure_findings
from core.model import Finding, PodIntent
from webhook.inventory.loader import LoadedObject

# (intent, path of the pod template's spec) -> findings of the feasibility check
FeasibilityCheck = Callable[[PodIntent, str], list[Finding]]

SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


@dataclass(frozen=True, slots=True)
class LintFinding:
    file: str
    object: str  # Kind/namespace/name
    path: str
    severity: str
    code: str
    message: str
    line: int | None = None  # 1-based, in ``file`` (None: not known, e.g. stdin JSON)

    def as_dict(self) -> dict[str, str | int | None]:
        """The docs/contracts.md: lint -o json shape, plus ``line``."""
        return {
            "file": self.file,
            "object": self.object,
            "path": self.path,
            "severity": self.severity,
            "code": self.code,
            "message": self.message,
            "line": self.line,
        }

    def where(self) -> str:
        """``FILE:LINE`` (or ``FILE``), as compilers print it."""
        return f"{self.file}:{self.line}" if self.line else self.file


def object_label(obj: Mapping[str, Any]) -> str:
    kind, namespace, name = object_identity(obj)
    return f"{kind or '?'}/{namespace}/{name or '?'}"


def _spec_path(template_path: str) -> str:
    return f"{template_path}.spec" if template_path else "spec"


def lint_object(
    loaded: LoadedObject,
    feasibility: FeasibilityCheck | None = None,
    limits: Limits = DEFAULT,
    versions: SchedulerVersions = LATEST,
) -> list[LintFinding]:
    """Findings for one object, in the order the problems appear, duplicates removed;
    ``limits`` and ``versions``: the configuration's (the webhook's)."""
    obj = loaded.obj
    label = object_label(obj)
    found: list[Finding] = []
    if not isinstance(obj.get("kind"), str) or not obj.get("kind"):
        found.append(Finding("kind", "warning", "invalid-value", "object has no kind; not checked"))
    found.extend(structure_findings(obj, limits))
    for template in pod_templates(obj, limits, versions):
        result = read_intent(template)
        found.extend(result.findings)
        if feasibility is not None:
            found.extend(feasibility(result.intent, _spec_path(template.path)))
    out: list[LintFinding] = []
    seen: set[Finding] = set()
    for f in found:
        if f in seen:
            continue
        seen.add(f)
        out.append(LintFinding(loaded.file, label, f.path, f.severity, f.code, f.message))
    return out


def lint_objects(
    objects: Iterable[LoadedObject], feasibility: FeasibilityCheck | None = None
) -> list[LintFinding]:
    out: list[LintFinding] = []
    for loaded in objects:
        out.extend(lint_object(loaded, feasibility))
    return out


def has_errors(findings: Sequence[LintFinding]) -> bool:
    return any(f.severity == "error" for f in findings)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def render_text(findings: Sequence[LintFinding], *, objects: int, files: int) -> str:
    """One line per finding, ``FILE:LINE: KIND/NAMESPACE/NAME: PATH: SEVERITY CODE:
    MESSAGE``, then a summary line."""
    lines = [
        f"{f.where()}: {f.object}: {f.path}: {f.severity} {f.code}: {f.message}" for f in findings
    ]
    counts = Counter(f.severity for f in findings)
    lines.append(
        f"{_plural(counts['error'], 'error')}, {_plural(counts['warning'], 'warning')}, "
        f"{counts['info']} info in {_plural(objects, 'object')} ({_plural(files, 'file')})"
    )
    return "\n".join(lines) + "\n"


def render_json(findings: Sequence[LintFinding]) -> str:
    return json.dumps({"findings": [f.as_dict() for f in findings]}, indent=2) + "\n"


def feasibility_from_inventory(
    inventory_objects: Iterable[Mapping[str, Any]],
) -> tuple[FeasibilityCheck, tuple[str, ...]]:
    """Build the feasibility check from inventory objects with the shared core interfaces
    (core.inventory.build, core.snapshot.snapshot, core.feasibility.verdicts and decision). Returns the check and the inventory's
    own errors (each names the object and the field)."""
    from core.feasibility.decision import decide
    from core.feasibility.verdicts import evaluate
    from core.inventory.build import build_inventory
    from core.snapshot.snapshot import Snapshot

    inventory = build_inventory(inventory_objects)
    snapshot = Snapshot.build(inventory.nodes)

    def check(intent: PodIntent, path: str) -> list[Finding]:
        decision = decide(evaluate(intent, snapshot))
        if decision.outcome == "impossible":
            return [Finding(path, "error", "impossible", decision.message)]
        if decision.outcome == "no-room-now":
            message = "; ".join(decision.warnings) or (
                "no node has room for the pod now; some would if their usage were gone"
            )
            return [Finding(path, "warning", "no-room-now", message)]
        # Allowed with a caveat (empty inventory, no NUMA data, nothing selected).
        return [Finding(path, "info", "not-checked", w) for w in decision.warnings]

    return check, tuple(inventory.errors)
