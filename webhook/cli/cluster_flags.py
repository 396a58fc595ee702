"""The kubectl-style cluster flags of the CLI (argparse only: building the parser must not
import the kubernetes client)."""

from __future__ import annotations

import argparse


def add_cluster_flags(
    p: argparse.ArgumentParser,
    *,
    all_namespaces: bool = False,
    namespace_help: str = "namespace (default: the context's, else default)",
) -> None:
    """``--kubeconfig``, ``--context``, ``-n`` (and ``-A``), as kubectl spells them."""
    p.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="kubeconfig (default: $KUBECONFIG, else ~/.kube/config)",
    )
    p.add_argument("--context", metavar="NAME", help="kubeconfig context (default: current)")
    p.add_argument("-n", "--namespace", metavar="NS", help=namespace_help)
    if all_namespaces:
        p.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
