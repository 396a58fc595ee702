"""``numagate policies``: the ValidatingAdmissionPolicies of the checks that need no cluster
state (webhook.policies, from the rule table core.intent.rules), for the configuration
given, as YAML documents or a JSON List.

Exit status: 0 printed, 2 unusable configuration.
"""

from __future__ import annotations

import argparse
import json
import sys

import yaml

from webhook.config import ConfigError, load_config
from webhook.policies import policies

EXIT_OK, EXIT_USAGE = 0, 2

HEADER = """\
# numagate's stateless checks as ValidatingAdmissionPolicies (numagate policies): the
# apiserver runs them itself, with the webhook's codes and messages, when the webhook is
# down or skipped. Generated from the rule table core/intent/rules.py; do not edit.
"""


class _NoAliases(yaml.SafeDumper):
    def ignore_aliases(self, data: object) -> bool:
        return True


def dump_yaml(objects: list[dict[str, object]]) -> str:
    """YAML documents, each expression on one line, no anchors."""
    return yaml.dump_all(objects, Dumper=_NoAliases, sort_keys=False, width=1_000_000)


def run(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"numagate policies: {exc}", file=sys.stderr)
        return EXIT_USAGE
    objects = policies(config, config.limits.value_chars)
    if args.output == "json":
        doc = {"apiVersion": "v1", "kind": "List", "items": objects}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        sys.stdout.write(HEADER + dump_yaml(objects))
    return EXIT_OK
