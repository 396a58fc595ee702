"""`numagate serve`: not implemented yet."""

from __future__ import annotations

import argparse
import sys


def run(args: argparse.Namespace) -> int:
    print("numagate serve: not implemented yet", file=sys.stderr)
    return 2
