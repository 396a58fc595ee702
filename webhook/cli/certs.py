"""`numagate certs generate|inject` (DESIGN 4.1).

Exit status: 0 done, 1 the operation failed (bad argument, unusable CA, API error); the
message on stderr names the field or object and the cause, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from certs.authority import CertError, generate
from certs.inject import (
    InjectError,
    api_client,
    inject_ca_bundle,
    load_secrets,
    read_ca_bundle,
    store_secrets,
)

EXIT_OK = 0
EXIT_FAILED = 1


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
