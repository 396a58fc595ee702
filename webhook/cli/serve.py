"""``numagate serve``: the admission webhook over TLS (docs/contracts.md: Command line).

A large inventory file starts building in a helper process first thing, and a watched
cluster's inventory process starts listing; the heavy imports, the certificates and the
TLS setup come after, beside them (``run``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from webhook.cli.parsers import REMOVED_SERVE_FLAGS
from webhook.inventory.file_build import FileBuildProcess, start_file_build

if TYPE_CHECKING:
    from webhook.inventory.owner import InventoryOwner

EXIT_USAGE = 2
SAMPLE_REVIEW = "tests/fixtures/reviews/koordinator-pod-create.json"


def _usage(message: str) -> int:
    print(f"numagate serve: {message}", file=sys.stderr)
    return EXIT_USAGE


def _curl_line(ca: Path, host: str, port: int) -> str:
    return (
        f"curl --cacert {ca} -H 'Content-Type: application/json' "
        f"--data @{SAMPLE_REVIEW} https://{host}:{port}/mutate"
    )


def _check_args(args: argparse.Namespace) -> str | None:
    for flag, replaced in REMOVED_SERVE_FLAGS.items():
        if getattr(args, flag[2:].replace("-", "_")) is not None:
            return f"{flag} was removed: {replaced}"
    if args.workers < 1:
        return f"--workers {args.workers}: must be at least 1"
    if not 0 <= args.port <= 65535:
        return f"--port {args.port}: must be 0..65535"
    for flag, value in (("--inventory", args.inventory), ("--client-ca", args.client_ca)):
        if value and not Path(value).is_file():
            return f"{flag} {value!r}: no such file"
    if args.context and not args.kubeconfig:
        return "--context needs --kubeconfig FILE"
    return None


def _check_cluster(args: argparse.Namespace) -> str | None:
    """A named cluster source is checked before certificates are written or a listening
    line printed: the file, its context, the server URL; the in-cluster account."""
    if not (args.kubeconfig or args.in_cluster):
        return None
    from webhook.inventory.kube import KubeConfigError, build_api_client

    try:
        client = build_api_client(
            kubeconfig=args.kubeconfig,
            context=args.context,
            in_cluster=args.in_cluster,
            use_default=False,
        )
    except KubeConfigError as exc:
        return str(exc)
    client.close()
    return None


def run(args: argparse.Namespace) -> int:
    problem = _check_args(args)
    if problem:
        return _usage(problem)
    # Started now, before the imports below: they run beside serve's own start. The
    # inventory process imports while the cluster source is checked here, and waits.
    owner = _spawn_inventory(args)
    problem = _check_cluster(args)
    if problem:
        if owner is not None:
            owner.stop()
        return _usage(problem)
    if owner is not None:
        owner.release()
    build = start_file_build(args.inventory, _build_file)  # forked: one thread here
    try:
        return _serve(args, build, owner)
    finally:
        if build is not None:
            build.cancel()  # a no-op once its result was taken
        if owner is not None:
            owner.stop()


def _spawn_inventory(args: argparse.Namespace) -> InventoryOwner | None:
    """A watched cluster's inventory process, spawned before serve's own start: its
    imports and lists, most of the time to ready, overlap serve's imports, certificates
    and workers on the second core."""
    if args.inventory:
        return None  # the file is the inventory (webhook/inventory/start.py)
    from webhook.inventory.owner import owner_for

    owner = owner_for(args)
    if owner is not None:
        owner.spawn(held=True)  # released once the cluster source is checked
    return owner


def _build_file(path: str) -> bytes:
    # In the helper: the build's modules are imported there, beside the server's own.
    from webhook.inventory.state import pickled_file_build

    return pickled_file_build(path)


def _serve(
    args: argparse.Namespace, build: FileBuildProcess | None, owner: InventoryOwner | None
) -> int:
    import asyncio

    from certs.authority import CertError, ensure_serving_certs
    from webhook.config import ConfigError, load_config
    from webhook.logs import get_logger, setup_logging
    from webhook.server import ServeOptions, reserve_port, run_workers, serve_worker, settle_heap

    setup_logging(args.log_level)
    if owner is not None:  # spawned before the logger was set up: said now
        get_logger("inventory").info("inventory process started", extra={"pid": owner.pid})
    try:
        load_config(args.config)  # fail fast with a clear message, before any worker starts
        paths = ensure_serving_certs(Path(args.cert_dir))
    except (ConfigError, CertError) as exc:
        return _usage(str(exc))
    reservation = reserve_port(args.host, args.port)
    port = reservation.getsockname()[1]
    opts = ServeOptions(
        host=args.host,
        port=port,
        cert=str(paths.cert),
        key=str(paths.key),
        client_ca=args.client_ca,
        inventory=args.inventory,
        kubeconfig=args.kubeconfig,
        context=args.context,
        in_cluster=args.in_cluster,
        config=args.config,
        log_level=args.log_level,
        inventory_address=owner.address if owner is not None else None,
    )
    source = args.inventory or args.kubeconfig or ("in-cluster" if args.in_cluster else "demo")
    if args.kubeconfig or args.in_cluster:
        source += "; watched in one inventory process per replica"
    print(f"numagate: CA certificate: {paths.ca}", flush=True)
    print(
        f"numagate: listening on https://{args.host}:{port} "
        f"(workers: {args.workers}, inventory: {source})",
        flush=True,
    )
    print(f"numagate: try: {_curl_line(paths.ca, args.host, port)}", flush=True)
    try:
        # The build's result is passed, not kept here: its holder drops it once used (a
        # bad file fails here, before any worker starts).
        if args.workers == 1:
            if owner is not None:
                owner.supervise()  # this process forks nothing from here on
            settle_heap()
            asyncio.run(serve_worker(opts, preloaded=build.result() if build else None))
            return 0
        return run_workers(
            opts, args.workers, preloaded=build.result() if build else None, owner=owner
        )
    except Exception as exc:  # startup failure: one line, no traceback
        return _usage(f"{type(exc).__name__}: {exc}")
    finally:
        reservation.close()
