"""``numagate review``: one AdmissionReview through exactly the code the endpoint runs
(:func:`webhook.review.pipeline.answer`), offline; prints the response AdmissionReview JSON as
the server would send it.

Exit status: 0 a response was printed (allowed or denied), 1 internal error, 2 unusable
input (unreadable file, not an AdmissionReview v1, bad inventory or configuration).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from webhook.config import ConfigError, load_config
from webhook.dra.state import DraFileSource, DraState
from webhook.inventory.loader import LoadError
from webhook.inventory.state import InventoryState, StaticFileSource
from webhook.logs import setup_logging
from webhook.review.pipeline import Runtime, answer

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE = 0, 1, 2


def _read_review(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise LoadError(f"{path}: cannot read: {exc}") from exc


def run(args: argparse.Namespace) -> int:
    setup_logging("warning")
    if args.inventory == "-" and args.review == "-":
        print(
            "numagate review: --inventory - and the review cannot both read stdin", file=sys.stderr
        )
        return EXIT_USAGE
    try:
        config = load_config(args.config)
        state = InventoryState()
        StaticFileSource(args.inventory, state).load()
        dra = DraState()
        if args.inventory != "-":  # stdin is read once, by the NRT source
            DraFileSource(args.inventory, dra).load()
        raw = _read_review(args.review)
    except (ConfigError, LoadError) as exc:
        print(f"numagate review: {exc}", file=sys.stderr)
        return EXIT_USAGE
    runtime = Runtime(config=lambda: config, inventory=state, dra=dra)
    result = asyncio.run(answer(raw, webhook=args.webhook, runtime=runtime))
    if result.is_review:
        sys.stdout.buffer.write(result.body + b"\n")
        sys.stdout.flush()
        return EXIT_OK
    print(f"numagate review: HTTP {result.status}: {result.body.decode().strip()}", file=sys.stderr)
    return EXIT_USAGE if result.status < 500 else EXIT_INTERNAL
