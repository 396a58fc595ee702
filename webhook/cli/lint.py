"""`numagate lint [--inventory FILE] [--config FILE] [--kubeconfig FILE] [--context NAME]
[-n NS] [-o text|json|yaml|sarif|junit] FILE...` (docs/contracts.md: Command line).

Exit status: 0 no errors, 1 errors found, 2 usage error or unreadable input (the reason on
stderr, never a traceback; with ``-o json|yaml|sarif|junit`` also a ``parse-error``
finding on stdout). Readable files are still checked and reported when another file
cannot be read. Objects the webhook would not look at (its ignore label, an excluded
namespace: ``webhook.review.handlers.exclusion_reason``) get one info ``ignored`` finding
instead of checks. Findings carry the line of the field in the file.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Mapping
from typing import Any

from webhook.cli.lint_formats import (
    IGNORED,
    PARSE_ERROR,
    Checked,
    render_junit,
    render_sarif,
    render_yaml,
)
from webhook.cli.lint_lines import line_of, line_of_error, object_nodes
from webhook.cli.lint_report import (
    FeasibilityCheck,
    LintFinding,
    feasibility_from_inventory,
    has_errors,
    lint_object,
    object_label,
    render_json,
    render_text,
)
from webhook.inventory.loader import LoadedObject, LoadError, load_objects, parse_objects, read_text

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
OUTPUTS = ("text", "json", "yaml", "sarif", "junit")


def _err(message: str) -> None:
    print(f"numagate lint: {message}", file=sys.stderr)


def _inventory_objects(args: argparse.Namespace) -> tuple[str, list[Any]] | None:
    """The inventory's objects and where they came from: ``--inventory FILE``, or the
    cluster when ``--kubeconfig`` or ``--context`` names one (lint stays offline otherwise)."""
    path = getattr(args, "inventory", None)
    if path:
        try:
            return ("<stdin>" if path == "-" else path), [o.obj for o in load_objects(path)]
        except LoadError as exc:
            _err(f"--inventory {exc}")
            return None
    from webhook.cli import cluster

    try:
        api = cluster.client(args)
        return str(api.configuration.host), cluster.read_inventory(api)
    except cluster.ClusterError as exc:
        _err(str(exc))
        return None


def _load_inventory(args: argparse.Namespace) -> tuple[FeasibilityCheck, list[LintFinding]] | None:
    found = _inventory_objects(args)
    if found is None:
        return None
    name, objects = found
    try:
        check, errors = feasibility_from_inventory(objects)
    except ImportError as exc:
        _err(f"--inventory: the feasibility core is not available in this build ({exc})")
        return None
    notes = [LintFinding(name, "inventory", "", "warning", "inventory-error", e) for e in errors]
    return check, notes


@dataclasses.dataclass
class _Read:
    objects: list[LoadedObject] = dataclasses.field(default_factory=list)
    nodes: dict[str, list[Any] | None] = dataclasses.field(default_factory=dict)
    failed: list[LintFinding] = dataclasses.field(default_factory=list)


def _read(files: list[str]) -> _Read:
    """Every object of every file, the YAML nodes for line numbers, and the files that
    could not be read or parsed (as ``parse-error`` findings)."""
    out = _Read()
    for path in files:
        name = "<stdin>" if path == "-" else path
        try:
            text = read_text(path)
            objects = parse_objects(text, name)
        except LoadError as exc:
            _err(str(exc))
            out.failed.append(
                LintFinding(name, "", "", "error", PARSE_ERROR, str(exc), line_of_error(str(exc)))
            )
            continue
        nodes = object_nodes(text)
        out.nodes[name] = nodes if nodes is not None and len(nodes) == len(objects) else None
        out.objects.extend(objects)
    return out


def _exclusion(obj: Mapping[str, Any], config: Any, default_namespace: str) -> str | None:
    """What the webhook would say for this object: the same function, on the CREATE request
    the apiserver would send for it."""
    from webhook.review.handlers import exclusion_reason
    from webhook.review.wire import AdmissionRequest, GroupVersionKind, GroupVersionResource

    metadata = obj.get("metadata")
    namespace = metadata.get("namespace") if isinstance(metadata, dict) else None
    group, _, version = str(obj.get("apiVersion") or "v1").rpartition("/")
    kind = str(obj.get("kind") or "")
    request = AdmissionRequest(
        uid="numagate-lint",
        kind=GroupVersionKind(version, kind, group),
        resource=GroupVersionResource(version, kind.lower() + "s", group),
        operation="CREATE",
        namespace=namespace if isinstance(namespace, str) and namespace else default_namespace,
        object=dict(obj),
    )
    return exclusion_reason(request, config)


def _lint(
    read: _Read, feasibility: FeasibilityCheck | None, config: Any, namespace: str
) -> list[LintFinding]:
    """Findings per object; ``namespace``: where objects without one would be created."""
    out: list[LintFinding] = []
    for loaded in read.objects:
        nodes = read.nodes.get(loaded.file)
        node = nodes[loaded.index] if nodes else None
        reason = _exclusion(loaded.obj, config, namespace)
        if reason is not None:
            found = [
                LintFinding(
                    loaded.file,
                    object_label(loaded.obj),
                    "",
                    "info",
                    IGNORED,
                    f"not checked: the webhook ignores it ({reason})",
                )
            ]
        else:
            found = lint_object(loaded, feasibility, config.core_limits, config.core_versions)
        if node is not None:
            found = [dataclasses.replace(f, line=line_of(node, f.path)) for f in found]
        out.extend(found)
    return out


def _render(args: argparse.Namespace, findings: list[LintFinding], read: _Read) -> str:
    output = args.output
    if output == "text":
        shown = [f for f in findings if f.code != PARSE_ERROR]  # those went to stderr
        return render_text(shown, objects=len(read.objects), files=len(args.files))
    if output == "json":
        return render_json(findings)
    if output == "yaml":
        return render_yaml(findings)
    if output == "sarif":
        return render_sarif(findings)
    checked = [Checked(o.file, object_label(o.obj)) for o in read.objects]
    return render_junit(findings, checked)


def run(args: argparse.Namespace) -> int:
    files: list[str] = list(args.files)
    if files.count("-") > 1 or ("-" in files and getattr(args, "inventory", None) == "-"):
        _err("standard input ('-') can be read only once")
        return EXIT_USAGE
    # the same loader and checks as `serve` (schema, model, scoring args): a config that
    # lint accepts is one the webhook starts with; its ignore label and namespaces apply
    from webhook.config import ConfigError, load_config

    try:
        config = load_config(getattr(args, "config", None))
    except ConfigError as exc:
        _err(f"--config {exc}")
        return EXIT_USAGE

    feasibility: FeasibilityCheck | None = None
    findings: list[LintFinding] = []
    cluster = getattr(args, "kubeconfig", None) or getattr(args, "context", None)
    if getattr(args, "inventory", None) or cluster:
        loaded_inventory = _load_inventory(args)
        if loaded_inventory is None:
            return EXIT_USAGE
        feasibility, findings = loaded_inventory[0], list(loaded_inventory[1])

    read = _read(files)
    findings.extend(read.failed)
    findings.extend(_lint(read, feasibility, config, getattr(args, "namespace", None) or ""))
    sys.stdout.write(_render(args, findings, read))
    if read.failed:
        return EXIT_USAGE
    return EXIT_FINDINGS if has_errors(findings) else EXIT_OK
