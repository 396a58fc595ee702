"""`numagate explain --inventory FILE [--config FILE] [-o table|json] [--all] MANIFEST`:
per-node verdicts, NUMA placement, ranking and the decision for the first pod spec in
MANIFEST (DESIGN 4.1, 4.4). Exit 0 with a report (whatever the decision), 2 on unreadable
input or a manifest without a pod spec."""

from __future__ import annotations

import argparse
import json
import sys

from core.errors import CoreError
from core.intent import read_intent
from core.inventory import build_inventory
from core.snapshot import Snapshot
from core.workloads import pod_templates
from webhook.explain import build_report, render_table
from webhook.loader import LoadError, load_objects

EXIT_OK = 0
EXIT_USAGE = 2


def run(args: argparse.Namespace) -> int:
    from webhook.config import ConfigError, load_config

    try:
        if args.config:
            load_config(args.config)
        inventory = build_inventory(o.obj for o in load_objects(args.inventory))
        manifest = load_objects(args.manifest)
    except (LoadError, CoreError, ConfigError, OSError) as exc:
        print(f"numagate explain: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for err in inventory.errors:
        print(f"numagate explain: inventory: {err}", file=sys.stderr)
    template = next((t for o in manifest for t in pod_templates(o.obj)), None)
    if template is None:
        print(
            f"numagate explain: {args.manifest}: no Pod or workload with a pod template found",
            file=sys.stderr,
        )
        return EXIT_USAGE
    result = read_intent(template)
    for finding in result.findings:
        print(
            f"numagate explain: {finding.severity}: {finding.path}: {finding.message}",
            file=sys.stderr,
        )
    try:
        report = build_report(
            kind=template.kind,
            namespace=template.namespace,
            name=template.name,
            intent=result.intent,
            snapshot=Snapshot.build(inventory.nodes),
        )
    except CoreError as exc:
        print(f"numagate explain: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.output == "json":
        print(json.dumps(report, indent=2))
    else:
        print(render_table(report, all_rows=args.all))
    return EXIT_OK
