"""`numagate review`: not implemented yet."""

from __future__ import annotations

import argparse
import sys


def run(args: argparse.Namespace) -> int:
    print("numagate review: not implemented yet", file=sys.stderr)
    return 2
