"""CEL expressions the generated policies rely on, with the value Kubernetes gives them
(cel-go: ``matches`` is Go's RE2 regexp, where ``\\s`` is ``[\\t\\n\\f\\r ]`` and ``(?i)``
folds Unicode simply; ``size`` of a string counts code points; ``&&`` and ``||`` absorb
errors; raw string literals). tests/policies/test_cel_library.py holds celpy to them;
benchmarks/cel_libraries.py prints how each PyPI CEL library does."""

from __future__ import annotations

from typing import Any

ACTIVATION: dict[str, Any] = {"o": {"m": {"k": "v"}}}

SEMANTICS: tuple[tuple[str, Any], ...] = (
    ("'abc'.matches('b')", True),  # a search, not a full match
    ("'\u212a'.matches('^(?i:k)$')", True),
    ("'\u00a0'.matches('\\\\s')", False),
    ("'\\x0b'.matches('\\\\s')", False),
    ("'\u00a0'.matches(r'^[\\x{a0}]$')", True),
    ("'\u00a0'.matches(r'^[\\xa0]$')", True),
    ("'a\\tb'.matches(r'^a[\\t-\\r]b$')", True),
    ("size('\u00e9\u3000')", 2),
    ("false && (1 / 0 == 1)", False),
    ("(1 / 0 == 1) || true", True),
    ("[1, 2].all(x, x > 0)", True),
    ("[1, 2, 3].filter(x, x > 1)[0]", 2),
    ("has(o.n)", False),
    ("has(o.m) && 'k' in o.m", True),
    ("o.m['k'] + '\\''", "v'"),
    ("string(size('abc')) + ' characters'", "3 characters"),
    ("{'a': 1} != {}", True),
    ("'a,b,'.matches('^([ab])(,[ab])*$')", False),
)
