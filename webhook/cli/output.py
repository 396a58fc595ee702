"""``numagate explain`` as a kubectl plugin and a CI step: its inputs from the cluster when
no file is given (the inventory, ``pod/NAME``), its output as asked (``-o table|json|
yaml``), and exit status 1 when the decision is a denial (as ``kubectl auth can-i``
answers "no" with 1), so a CI step fails on a pod the webhook would reject.

explain reads files and builds its report (a JSON document, docs/contracts.md: explain -o json): the cluster's
objects are handed to it as a List file in a private temporary directory, and the report
is rendered here.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import yaml

from webhook.cli import cluster

EXIT_DENIED = 1
EXIT_USAGE = 2


def render_yaml(doc: Any) -> str:
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=1 << 16)


@contextlib.contextmanager
def cluster_inputs(args: argparse.Namespace) -> Iterator[None]:
    """No ``--inventory``: the cluster's inventory; ``pod/NAME``: that pod, from ``-n``
    (else the context's namespace)."""
    name = cluster.pod_ref(args.manifest)
    if args.inventory is not None and name is None:
        yield
        return
    api = cluster.client(args)
    with cluster.temporary_dir() as tmpdir:
        if name is not None:
            pod = cluster.read_pod(api, cluster.namespace(args), name)
            args.manifest = cluster.snapshot_file([pod], tmpdir, "pod")
        if args.inventory is None:
            inventory = cluster.read_inventory(api)
            args.inventory = cluster.snapshot_file(inventory, tmpdir, "inventory")
        yield


def run_explain(module: ModuleType, args: argparse.Namespace) -> int:
    try:
        with cluster_inputs(args):
            return _explain(module, args)
    except cluster.ClusterError as exc:
        print(f"numagate explain: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _explain(module: ModuleType, args: argparse.Namespace) -> int:
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
