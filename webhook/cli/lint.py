"""`numagate lint [--inventory FILE] [--config FILE] [-o text|json] FILE...` (DESIGN 4.1).

Exit status: 0 no errors, 1 errors found, 2 usage error or unreadable input (the reason on
stderr, never a traceback). Readable files are still checked and reported when another
file cannot be read.
"""

from __future__ import annotations

import argparse
import sys

from webhook.cli.lint_report import (
    FeasibilityCheck,
    LintFinding,
    feasibility_from_inventory,
    has_errors,
    lint_objects,
    render_json,
    render_text,
)
from webhook.inventory.loader import LoadedObject, LoadError, load_objects

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2


def _err(message: str) -> None:
    print(f"numagate lint: {message}", file=sys.stderr)


def _load_inventory(path: str) -> tuple[FeasibilityCheck, list[LintFinding]] | None:
    try:
        objects = load_objects(path)
    except LoadError as exc:
        _err(f"--inventory {exc}")
        return None
    try:
        check, errors = feasibility_from_inventory(o.obj for o in objects)
    except ImportError as exc:
        _err(f"--inventory: the feasibility core is not available in this build ({exc})")
        return None
    name = "<stdin>" if path == "-" else path
    notes = [LintFinding(name, "inventory", "", "warning", "inventory-error", e) for e in errors]
    return check, notes


def run(args: argparse.Namespace) -> int:
    files: list[str] = list(args.files)
    if files.count("-") > 1 or ("-" in files and getattr(args, "inventory", None) == "-"):
        _err("standard input ('-') can be read only once")
        return EXIT_USAGE
    config = getattr(args, "config", None)
    if config:
        # the same loader and checks as `serve` (schema, model, scoring args): a config
        # that lint accepts is one the webhook starts with
        from webhook.config import ConfigError, load_config

        try:
            load_config(config)
        except ConfigError as exc:
            _err(f"--config {exc}")
            return EXIT_USAGE

    feasibility: FeasibilityCheck | None = None
    findings: list[LintFinding] = []
    inventory = getattr(args, "inventory", None)
    if inventory:
        loaded_inventory = _load_inventory(inventory)
        if loaded_inventory is None:
            return EXIT_USAGE
        feasibility, findings = loaded_inventory[0], list(loaded_inventory[1])

    unreadable = False
    objects: list[LoadedObject] = []
    for path in files:
        try:
            objects.extend(load_objects(path))
        except LoadError as exc:
            _err(str(exc))
            unreadable = True
    findings.extend(lint_objects(objects, feasibility))

    if args.output == "json":
        sys.stdout.write(render_json(findings))
    else:
        sys.stdout.write(render_text(findings, objects=len(objects), files=len(files)))
    if unreadable:
        return EXIT_USAGE
    return EXIT_FINDINGS if has_errors(findings) else EXIT_OK
