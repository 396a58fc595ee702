"""`numagate explain --inventory FILE [--config FILE] [-o table|json] [--all] MANIFEST`:
per-node verdicts, NUMA placement, ranking and the decision for the first pod spec in
MANIFEST (docs/contracts.md: Command line, explain -o json). The ranking uses the configuration's ``scoring`` section;
the decision is what the webhooks would answer with that configuration and inventory.
Exit 0 with a report (whatever the decision), 2 on unreadable input or a manifest without
a pod spec. The command line runs it through webhook.cli.output, which adds the cluster
inputs (no ``--inventory``, ``pod/NAME``), ``-o yaml`` and exit 1 on a denial."""

from __future__ import annotations

import argparse
import json
import sys

from core.dra.cpu_driver import concurrent_pods
from core.errors import CoreError
from core.intent.read import read_intent
from core.intent.workloads import pod_templates
from webhook.cli.explain_report import ExplainError, build_report, decide_offline, render_table
from webhook.config import ConfigError, load_config
from webhook.dra.report import claims_report
from webhook.dra.state import DraState
from webhook.inventory.loader import LoadError, load_objects
from webhook.inventory.state import InventoryState, InventoryView
from webhook.logs import setup_logging
from webhook.review.pipeline import Runtime

EXIT_OK = 0
EXIT_USAGE = 2


def _err(message: str) -> None:
    print(f"numagate explain: {message}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    # explain prints the inventory's errors itself; the webhook's JSON logs stay quiet
    setup_logging("error")
    try:
        config = load_config(args.config)
        state = InventoryState()
        source = "stdin" if args.inventory == "-" else f"file:{args.inventory}"
        objects = [o.obj for o in load_objects(args.inventory)]
        view: InventoryView = state.load_objects(objects, source=source)
        manifest = load_objects(args.manifest)
    except (LoadError, CoreError, ConfigError, OSError) as exc:
        _err(str(exc))
        return EXIT_USAGE
    for error in view.errors:
        _err(f"inventory: {error}")
    versions = config.core_versions
    found = next(
        ((o.obj, t) for o in manifest for t in pod_templates(o.obj, versions=versions)), None
    )
    if found is None:
        _err(f"{args.manifest}: no Pod or workload with a pod template found")
        return EXIT_USAGE
    obj, template = found
    result = read_intent(template)
    for finding in result.findings:
        _err(f"{finding.severity}: {finding.path}: {finding.message}")
    dra = DraState()
    dra.load_objects(objects, source=source)
    runtime = Runtime(config=lambda: config, inventory=state, dra=dra)
    try:
        report = build_report(
            kind=template.kind,
            namespace=template.namespace,
            name=template.name,
            intent=result.intent,
            snapshot=view.snapshot,
            decision=decide_offline(obj, template, runtime),
            scoring=config.scoring_args,
        )
    except (CoreError, ExplainError) as exc:
        _err(str(exc))
        return EXIT_USAGE
    assert dra.view is not None
    pod = {"metadata": {"namespace": template.namespace}, "spec": template.spec}
    claims = claims_report(
        pod, result.intent, view.nodes, dra.view.inventory, replicas=concurrent_pods(obj)
    )
    if claims is not None:  # only for a pod with DRA claims: the others' report is unchanged
        report["claims"] = claims
    if args.output == "json":
        print(json.dumps(report, indent=2))
    else:
        print(render_table(report, all_rows=args.all))
    return EXIT_OK
