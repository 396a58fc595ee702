"""The ``numagate`` command line (also installed as ``kubectl-numagate``), docs/contracts.md: Command line.

Each subcommand lives in its own module and is imported only when called, so
``numagate lint`` does not pay for aiohttp or the kubernetes client; what each one accepts
is in webhook.cli.parsers (argparse only).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple

from webhook.cli import parsers

if TYPE_CHECKING:
    from webhook.cli.parsers import Subparsers

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2

DESCRIPTION = """\
numagate: admission webhook and offline checker for NUMA- and GPU-topology scheduling
policies (Koordinator, Volcano, HAMi, kubelet Topology Manager)."""


class Command(NamedTuple):
    module: str  # the module with ``run(args) -> int``, imported only when the command runs
    add_parser: Callable[[Subparsers], None]  # what the command accepts (webhook.cli.parsers)


# in the order of ``numagate --help``
COMMANDS: dict[str, Command] = {
    "serve": Command("webhook.cli.serve", parsers.add_serve),
    "review": Command("webhook.cli.review", parsers.add_review),
    "explain": Command("webhook.cli.explain", parsers.add_explain),
    "lint": Command("webhook.cli.lint", parsers.add_lint),
    "certs": Command("webhook.cli.certs", parsers.add_certs),
    "pending": Command("webhook.cli.pending", parsers.add_pending),
    "test": Command("webhook.cli.test", parsers.add_test),
    "policies": Command("webhook.cli.policies", parsers.add_policies),
    "completion": Command("webhook.cli.completion", parsers.add_completion),
}


def build_parser() -> argparse.ArgumentParser:
    from webhook.version import __version__

    parser = argparse.ArgumentParser(prog="numagate", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"numagate {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS.values():
        command.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    module = importlib.import_module(COMMANDS[args.command].module)
    try:
        if args.command == "explain":
            from webhook.cli.output import run_explain

            code: int = run_explain(module, args)
        else:
            code = module.run(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `numagate explain ... | head`: the reader left; exit quietly like other CLI tools.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
