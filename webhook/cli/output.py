"""Output of ``numagate explain`` as the command line asks for it: ``-o table|json|yaml``,
and exit status 1 when the decision is a denial (as ``kubectl auth can-i`` answers "no"
with 1), so a CI step fails on a pod the webhook would reject.

explain builds its report (a JSON document, DESIGN 4.4); this renders it.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from types import ModuleType
from typing import Any

import yaml

EXIT_DENIED = 1


def render_yaml(doc: Any) -> str:
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=1 << 16)


def run_explain(module: ModuleType, args: argparse.Namespace) -> int:
    """Run explain for its JSON report, then print it as ``args.output``."""
    wanted = args.output
    args.output = "json"
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code: int = module.run(args)
    text = buffer.getvalue()
    try:
        report = json.loads(text) if code == 0 else None
    except ValueError:
        report = None
    if not isinstance(report, dict) or not isinstance(report.get("decision"), dict):
        sys.stdout.write(text)  # not a report (an error path): pass it on unchanged
        return code
    if wanted == "json":
        sys.stdout.write(text)
    elif wanted == "yaml":
        sys.stdout.write(render_yaml(report))
    else:
        from webhook.cli.explain_report import render_table

        print(render_table(report, all_rows=args.all))
    return code if report["decision"].get("allowed", True) else EXIT_DENIED
