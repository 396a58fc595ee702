"""What each ``numagate`` command accepts: one function per command adds its subparser.

argparse only: building the parser must not import aiohttp or the kubernetes client, so
that ``numagate lint`` does not pay for them (the command modules are imported when run).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

KUBECONFIG_RULES = "default: $KUBECONFIG, else ~/.kube/config"
# Flags ``serve`` no longer has, and what replaced them (as kubectl names a removed flag).
REMOVED_SERVE_FLAGS = {
    "--inventory-process": "a watched cluster is always kept by one inventory process per "
    "replica, shared by its workers (docs/inventory.md)",
    "--inventory-process-above": "there is no choice by node count any more: a watched "
    "cluster is always kept by one inventory process per replica (docs/inventory.md)",
}


def _add_inventory_config(p: argparse.ArgumentParser, *, inventory_required: bool) -> None:
    p.add_argument(
        "--inventory",
        metavar="FILE",
        required=inventory_required,
        help="Kubernetes objects describing the cluster (Node, NodeResourceTopology, "
        "Numatopology, Pod), YAML or JSON, one object, a List or a multi-document stream; "
        "'-' reads standard input",
    )
    p.add_argument("--config", metavar="FILE", help="numagate configuration file (YAML or JSON)")


def _add_context(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--context", metavar="NAME", help="kubeconfig context (default: its current-context)"
    )


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


def add_serve(sub: Subparsers) -> None:
    serve = sub.add_parser(
        "serve",
        help="serve /mutate, /validate, /healthz, /readyz and /metrics over TLS",
        description="Serve the admission webhook over TLS. With no inventory flag the embedded "
        "demo inventory is served; with no certificates in --cert-dir a self-signed CA and "
        "serving certificate are generated there (ca.crt, tls.crt, tls.key).",
    )
    src = serve.add_mutually_exclusive_group()
    src.add_argument(
        "--inventory", metavar="FILE", help="static inventory file, reloaded on change"
    )
    src.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="watch a live cluster via this kubeconfig (checked before anything starts: the "
        "file, the context, the server URL); one inventory process per replica lists and "
        "watches it for every worker (docs/inventory.md)",
    )
    src.add_argument("--in-cluster", action="store_true", help="watch the cluster numagate runs in")
    _add_context(serve)
    for flag in REMOVED_SERVE_FLAGS:  # accepted only to say what replaced them
        serve.add_argument(flag, nargs="?", const="", default=None, help=argparse.SUPPRESS)
    serve.add_argument("--config", metavar="FILE", help="configuration file, reloaded on change")
    serve.add_argument(
        "--cert-dir",
        metavar="DIR",
        default=".numagate/certs",
        help="directory with tls.crt and tls.key (and ca.crt); default: %(default)s",
    )
    serve.add_argument(
        "--client-ca", metavar="FILE", help="require client certificates signed by this CA"
    )
    serve.add_argument("--host", default="127.0.0.1", help="listen address; default: %(default)s")
    serve.add_argument("--port", type=int, default=8443, help="listen port; default: %(default)s")
    serve.add_argument(
        "--workers",
        type=int,
        default=1,
        help="worker processes sharing the port (/metrics, whichever worker answers, counts "
        "them all); default: %(default)s",
    )
    serve.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="log level",
    )


def add_review(sub: Subparsers) -> None:
    review = sub.add_parser(
        "review",
        help="run one AdmissionReview through the webhook code offline",
        description="Run one AdmissionReview (admission.k8s.io/v1) through exactly the code the "
        "endpoint runs and print the response AdmissionReview as JSON.",
    )
    _add_inventory_config(review, inventory_required=True)
    review.add_argument(
        "--webhook", required=True, choices=["mutate", "validate"], help="which endpoint"
    )
    review.add_argument(
        "review", nargs="?", default="-", metavar="REVIEW.json", help="'-' or omitted: stdin"
    )


def add_explain(sub: Subparsers) -> None:
    explain = sub.add_parser(
        "explain",
        help="per-node verdicts, NUMA placement and ranking for a pod",
        description="Show, for the first pod spec in MANIFEST (a Pod or a workload, or pod/NAME "
        "in the cluster), the verdict of every node, the NUMA nodes it would get, the ranking "
        "and the admission decision. Without --inventory the cluster's inventory is read from "
        "the kubeconfig (--kubeconfig, else $KUBECONFIG, else ~/.kube/config) as kubectl does. "
        "Exit status: 0 allowed, 1 denied, 2 unusable input.",
    )
    _add_inventory_config(explain, inventory_required=False)
    add_cluster_flags(explain)
    explain.add_argument(
        "-o",
        "--output",
        choices=["table", "json", "yaml"],
        default="table",
        help="output format; default: %(default)s",
    )
    explain.add_argument(
        "--all", action="store_true", help="list every node, even on large clusters"
    )
    what = explain.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "manifest",
        metavar="MANIFEST",
        nargs="?",
        default=argparse.SUPPRESS,  # else an absent MANIFEST would overwrite -f's value
        help="file with the Pod or workload ('-' for stdin), or pod/NAME: a pod in the cluster",
    )
    what.add_argument(
        "-f",
        "--filename",
        dest="manifest",
        metavar="FILE",
        help="the same as MANIFEST, as kubectl spells it",
    )


def add_lint(sub: Subparsers) -> None:
    lint = sub.add_parser(
        "lint",
        help="check NUMA/GPU scheduling annotations in manifests",
        description="Check every object in FILEs (multi-document YAML or JSON, List accepted, "
        "'-' for stdin). With --inventory, or the cluster named by --kubeconfig or --context, "
        "the feasibility checks run too (otherwise lint stays offline). Objects the webhook "
        "ignores (its ignore label, an excluded namespace) get an info 'ignored' finding. "
        "Exit status: 0 no errors, 1 errors found, 2 usage error or unreadable input.",
    )
    _add_inventory_config(lint, inventory_required=False)
    add_cluster_flags(
        lint,
        namespace_help="the namespace objects without one would be created in (for the "
        "webhook's excluded namespaces)",
    )
    lint.add_argument(
        "-o",
        "--output",
        choices=["text", "json", "yaml", "sarif", "junit"],
        default="text",
        help="output format: text, json, yaml, sarif (SARIF 2.1.0, e.g. for GitHub code "
        "scanning) or junit (JUnit XML, a test case per object); default: %(default)s",
    )
    lint.add_argument("files", nargs="+", metavar="FILE", help="manifest files; '-' for stdin")


def add_certs(sub: Subparsers) -> None:
    certs = sub.add_parser("certs", help="generate certificates or inject the CA bundle")
    csub = certs.add_subparsers(dest="certs_command", metavar="ACTION", required=True)
    gen = csub.add_parser(
        "generate",
        help="write ca.crt, ca.key, tls.crt, tls.key",
        description="Write a CA and a serving certificate for the webhook Service. An existing CA "
        "in --out is reused and only the serving certificate is renewed.",
    )
    gen.add_argument("--service", required=True, help="Service name of the webhook")
    gen.add_argument("--namespace", required=True, help="namespace of the Service")
    gen.add_argument("--out", required=True, metavar="DIR", help="output directory")
    gen.add_argument(
        "--days", type=int, default=365, help="serving certificate lifetime; default: %(default)s"
    )
    gen.add_argument(
        "--ip", action="append", default=[], metavar="IP", help="extra IP SAN (repeatable)"
    )
    gen.add_argument(
        "--secret",
        metavar="NAMESPACE/NAME",
        help="keep the certificates in the cluster: Secret NAME (tls.crt, tls.key, ca.crt) and "
        "NAME-ca (ca.crt, ca.key); a CA found there is reused",
    )
    gen.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help=f"for --secret ({KUBECONFIG_RULES}, else the in-cluster service account)",
    )
    _add_context(gen)
    inj = csub.add_parser(
        "inject",
        help="patch caBundle into the webhook configurations",
        description="Patch the CA bundle into the cluster's Mutating and Validating webhook "
        "configurations using the kubernetes client (kubeconfig or in-cluster).",
    )
    inj.add_argument("--ca-file", required=True, metavar="F", help="PEM CA bundle")
    inj.add_argument(
        "--mutating", required=True, metavar="NAME", help="MutatingWebhookConfiguration name"
    )
    inj.add_argument(
        "--validating", required=True, metavar="NAME", help="ValidatingWebhookConfiguration name"
    )
    inj.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help=f"kubeconfig ({KUBECONFIG_RULES}, else the in-cluster service account)",
    )
    _add_context(inj)


def add_pending(sub: Subparsers) -> None:
    pending = sub.add_parser(
        "pending",
        help="list the Pending pods that wait on a topology rule, and the closest node",
        description="List the Pending pods of the namespace (-n, default: the context's) or "
        "of all namespaces (-A) whose topology policy or NUMA demand is why they wait: the "
        "rule, the outcome (impossible, or no-room-now), the verdicts per node summarized "
        "and the closest node with its reason. Reads the cluster of the kubeconfig "
        "($KUBECONFIG, else ~/.kube/config) as kubectl does.",
    )
    add_cluster_flags(pending, all_namespaces=True)
    pending.add_argument(
        "-o",
        "--output",
        choices=["table", "json", "yaml"],
        default="table",
        help="output format; default: %(default)s",
    )


def add_test(sub: Subparsers) -> None:
    test = sub.add_parser(
        "test",
        help="run test-suite files: manifests with the expected allow/deny",
        description="Run every case of each SUITE file (name, inventory, optional config, "
        "cases: a manifest file or an inline object, the webhook to call (mutate, validate, "
        "or admit: both, as the apiserver does), the expected answer: allowed, optionally a "
        "message substring, warnings, a patch) through the webhook's own review code. Exit "
        "status: 0 every case passed, 1 a case failed, 2 an unusable suite.",
    )
    test.add_argument("suites", nargs="+", metavar="SUITE", help="test-suite YAML files")


def add_policies(sub: Subparsers) -> None:
    policies = sub.add_parser(
        "policies",
        help="print ValidatingAdmissionPolicies for the checks that need no cluster state",
        description="Print ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding "
        "objects (admissionregistration.k8s.io/v1, Kubernetes 1.30+) that make the apiserver "
        "run numagate's stateless checks itself (the Volcano and HAMi policy values, a "
        "Volcano Job task's topologyPolicy, HAMi percentages, a Volcano task's integer CPUs, "
        "HAMi's scheduler-owned allocation annotations), "
        "with the webhook's codes and messages, for when the webhook is down or skipped; and, "
        "in a policy of their own (numagate-warnings), the warnings not-guaranteed and "
        "fractional-cpu under Volcano's annotation or a task's topologyPolicy. From --config: "
        "the excluded namespaces, the ignore label, limits.valueChars, schedulerVersions.hami "
        "(the GPU policies that release cannot read: unsupported-value), and modes.annotations "
        "for validationActions (enforce: Deny, warn: Warn, dryrun: Audit; the warnings' "
        "binding: Warn, Warn, Audit). Apply with 'numagate policies | kubectl apply -f "
        "-'. Rules that stay in the webhook are listed in the README. Exit status: 0 printed, "
        "2 unusable configuration.",
    )
    policies.add_argument("--config", metavar="FILE", help="configuration file (YAML or JSON)")
    policies.add_argument(
        "-o",
        "--output",
        choices=["yaml", "json"],
        default="yaml",
        help="yaml: a multi-document stream; json: a v1 List; default: %(default)s",
    )


def add_completion(sub: Subparsers) -> None:
    completion = sub.add_parser(
        "completion",
        help="print a shell completion script (bash or zsh)",
        description="Print a completion script for numagate and kubectl-numagate. bash: "
        "'source <(numagate completion bash)' (or save it under /etc/bash_completion.d/); "
        "zsh: 'source <(numagate completion zsh)' in ~/.zshrc.",
    )
    completion.add_argument("shell", choices=["bash", "zsh"], help="the shell")
