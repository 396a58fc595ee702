"""Which CEL library from PyPI evaluates the generated policies' functions as Kubernetes
does: every expression of tests/policies/semantics.py through cel-python (``celpy``, the
test dependency) and, when installed, common-expression-language (``cel``, Rust), with
the count that agree.

    .venv/bin/python benchmarks/cel_libraries.py
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.policies.semantics import ACTIVATION, SEMANTICS


def _celpy(expression: str) -> Any:
    import celpy

    env = celpy.Environment()
    return env.program(env.compile(expression)).evaluate(celpy.json_to_cel(ACTIVATION))


def _cel_rust(expression: str) -> Any:
    import cel  # type: ignore[import-not-found]

    return cel.evaluate(expression, ACTIVATION)


def main() -> int:
    libraries = {"celpy": _celpy, "cel (rust)": _cel_rust}
    agree = dict.fromkeys(libraries, 0)
    print(f"{'expression':44} {'kubernetes':>10} " + " ".join(f"{n:>12}" for n in libraries))
    for expression, expected in SEMANTICS:
        row = []
        for name, run in libraries.items():
            try:
                got: Any = run(expression)
            except ImportError:
                got = "n/a"
            except Exception as exc:  # an evaluation error is a result here
                got = f"error: {type(exc).__name__}"
            if got == expected:
                agree[name] += 1
            row.append(f"{got!s:>12.12}")
        print(f"{expression!r:44.44} {expected!s:>10} " + " ".join(row))
    for name, n in agree.items():
        print(f"{name}: {n} of {len(SEMANTICS)} as Kubernetes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
