"""Issue 31's line figures: ``wc -l`` over the inventory's packages, and the same without
blank, comment and docstring lines (code only), per module and in total; the modules over
400 lines in core/, webhook/ and certs/ (the two kernels aside).

    .venv/bin/python benchmarks/lines.py [--tree DIR] [--modules]
"""

from __future__ import annotations

import argparse
import io
import tokenize
from pathlib import Path

COUNTED = ("webhook/inventory", "core/inventory", "core/snapshot")
KERNELS = {"core/feasibility/_kernel_c.pyx", "core/feasibility/_kernel_py.py"}
LIMIT = 400


def code_lines(source: str) -> int:
    """Lines holding a token other than a comment, a docstring or a newline."""
    lines: set[int] = set()
    previous = tokenize.NEWLINE
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        kind = tok.type
        if kind in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                    tokenize.DEDENT, tokenize.ENDMARKER):  # fmt: skip
            if kind in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
                previous = kind
            continue
        docstring = kind == tokenize.STRING and previous in (
            tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)  # fmt: skip
        previous = kind
        if not docstring:
            lines.update(range(tok.start[0], tok.end[0] + 1))
    return len(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, default=Path("."), help="the checkout to count")
    parser.add_argument("--modules", action="store_true", help="print every module's counts")
    args = parser.parse_args()
    total = total_code = 0
    for area in COUNTED:
        area_lines = area_code = 0
        for path in sorted((args.tree / area).rglob("*.py")):
            text = path.read_text()
            n, c = len(text.splitlines()), code_lines(text)
            area_lines, area_code = area_lines + n, area_code + c
            if args.modules:
                print(f"  {path.relative_to(args.tree)}: {n} lines, {c} code")
        print(f"{area}: {area_lines} lines, {area_code} code")
        total, total_code = total + area_lines, total_code + area_code
    print(f"total: {total} lines, {total_code} code (issue 31's target: <= 4,000 lines)")
    over = [
        f"{p.relative_to(args.tree)} ({len(p.read_text().splitlines())})"
        for top in ("core", "webhook", "certs")
        for p in sorted((args.tree / top).rglob("*.py"))
        if str(p.relative_to(args.tree)) not in KERNELS and len(p.read_text().splitlines()) > LIMIT
    ]
    print(f"modules over {LIMIT} lines: {len(over)}" + (f" ({', '.join(over)})" if over else ""))


if __name__ == "__main__":
    main()
