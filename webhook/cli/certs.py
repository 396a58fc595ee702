"""`numagate certs generate|inject` (docs/contracts.md: Command line).

Exit status: 0 done, 1 the operation failed (bad argument, unusable CA, API error); the
message on stderr names the field or object and the cause, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kubernetes import client

from certs.authority import CertError, generate
from certs.inject import (
    InjectError,
    inject_ca_bundle,
    load_secrets,
    read_ca_bundle,
    store_secrets,
)
from webhook.inventory.kube import SERVICE_ACCOUNT_DIR, KubeConfigError, build_api_client

EXIT_OK = 0
EXIT_FAILED = 1


def api_client(
    kubeconfig: str | None, *, context: str | None = None, sa_dir: Path = SERVICE_ACCOUNT_DIR
) -> client.ApiClient:
    """A client by kubectl's rules: ``kubeconfig``, else $KUBECONFIG, else ~/.kube/config,
    else the in-cluster service account (the Job that runs ``certs`` in a cluster)."""
    try:
        return build_api_client(
            kubeconfig=kubeconfig, context=context, in_cluster_fallback=True, sa_dir=sa_dir
        )
    except KubeConfigError as exc:
        raise InjectError(f"cannot load Kubernetes credentials: {exc}") from None


def run(args: argparse.Namespace) -> int:
    """Dispatch ``numagate certs ACTION``."""
    action = {"generate": _generate, "inject": _inject}[args.certs_command]
    try:
        action(args)
    except (CertError, InjectError) as exc:
        print(f"numagate certs {args.certs_command}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _generate(args: argparse.Namespace) -> None:
    secret = getattr(args, "secret", None)
    if secret is None:
        paths = generate(
            Path(args.out),
            service=args.service,
            namespace=args.namespace,
            days=args.days,
            ips=args.ip,
        )
        print(f"wrote {paths.ca}, {paths.ca.with_suffix('.key')}, {paths.cert}, {paths.key}")
        print(f"caBundle for the webhook configurations: {paths.ca}")
        return
    _generate_into_secret(args, secret)


def _generate_into_secret(args: argparse.Namespace, secret: str) -> None:
    """``--secret NS/NAME``: reuse the CA kept in the cluster, renew, store back."""
    api = api_client(getattr(args, "kubeconfig", None), context=getattr(args, "context", None))
    out = Path(args.out)
    restored = load_secrets(api, secret, out)
    paths = generate(
        out, service=args.service, namespace=args.namespace, days=args.days, ips=args.ip
    )
    store_secrets(api, secret, out)
    reused = "reused the CA" if "ca.key" in restored else "created a new CA"
    print(f"{reused}; stored {secret} and {secret}-ca; CA bundle in {paths.ca}")


def _inject(args: argparse.Namespace) -> None:
    ca_pem = read_ca_bundle(Path(args.ca_file))
    api = api_client(args.kubeconfig, context=args.context)
    for result in inject_ca_bundle(
        api, ca_pem=ca_pem, mutating=args.mutating, validating=args.validating
    ):
        state = "patched" if result.changed else "already up to date"
        print(f"{result.kind} {result.name}: {result.webhooks} webhook(s) {state}")
