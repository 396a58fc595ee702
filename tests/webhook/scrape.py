"""A strict parser of the Prometheus text format, for the tests that scrape /metrics."""

from __future__ import annotations

import re

SAMPLE = re.compile(
    r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*"'
    r'(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*")*)\})? (?P<value>[-+]?(?:\d+(?:\.\d*)?(?:e[-+]?\d+)?|Inf|NaN))$'
)


PAIR = re.compile(r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*"')


def _normal(key: str) -> str:
    """'name{b="2",a="1"}' -> 'name{a="1",b="2"}': the exposition's label order is free
    (prometheus-client sorts them), the tests write them in declaration order."""
    name, _, labels = key.partition("{")
    return f"{name}{{{','.join(sorted(PAIR.findall(labels)))}}}"


class Samples(dict[str, float]):
    """Samples keyed by 'name{labels}' whatever the label order."""

    def __getitem__(self, key: str) -> float:
        return super().__getitem__(_normal(key))

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and super().__contains__(_normal(key))

    def get(self, key: str, default: float | None = None) -> float | None:  # type: ignore[override]
        return super().get(_normal(key), default)


def parse(text: str) -> Samples:
    """Every sample as 'name{labels}' -> value; fails on any malformed line."""
    out = Samples()
    types: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in {"counter", "gauge", "histogram"}
            types[name] = kind
            continue
        if line.startswith("# HELP "):
            continue
        m = SAMPLE.match(line)
        assert m, f"malformed sample line: {line!r}"
        base = re.sub(r"_(bucket|sum|count)$", "", m["name"])
        assert m["name"] in types or base in types, f"sample without TYPE: {line!r}"
        dict.__setitem__(out, _normal(f"{m['name']}{{{m['labels'] or ''}}}"), float(m["value"]))
    return out
