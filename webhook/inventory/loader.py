"""Reading Kubernetes objects from files: one object, a ``List``, or a multi-document YAML
or JSON stream; ``-`` is standard input. Used by lint, explain, review and the static
inventory source, so all of them accept the same inputs and report the same errors."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import yaml

# libyaml's loader is much faster than the pure one (docs/inventory.md); same safe subset.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class LoadError(Exception):
    """A file that cannot be read or parsed; the message names the file and the place."""


@dataclass(frozen=True, slots=True)
class LoadedObject:
    file: str
    index: int  # position of the object in the file, counting List items
    obj: dict[str, Any]


def read_text(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LoadError(f"{path}: cannot read: {exc}") from exc


def _flatten(doc: Any) -> Iterator[Any]:
    if (
        isinstance(doc, dict)
        and (doc.get("kind") == "List" or str(doc.get("kind", "")).endswith("List"))
        and isinstance(doc.get("items"), list)
    ):
        for item in doc["items"]:
            yield from _flatten(item)
    elif doc is not None:
        yield doc


def _json_document(text: str) -> list[Any] | None:
    """One JSON document through orjson (far faster than the YAML loader on a large
    ``kubectl get -o json``: docs/inventory.md); None when ``text`` is not exactly one JSON document, which
    the YAML loader then reads (a JSON stream, YAML, or an error to report with its place)."""
    start = text.lstrip()[:1]
    if start not in ("{", "["):
        return None
    try:
        return [orjson.loads(text)]
    except orjson.JSONDecodeError:
        return None


def parse_objects(text: str, name: str) -> list[LoadedObject]:
    """Parse every object in ``text``: one JSON document with orjson, anything else
    (YAML, multi-document streams) with libyaml's safe loader (JSON is YAML)."""
    try:
        docs = _json_document(text)
        if docs is None:
            docs = list(yaml.load_all(text, Loader=_LOADER))
    except yaml.YAMLError as exc:
        where = ""
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            where = f" at line {mark.line + 1}, column {mark.column + 1}"
        problem = getattr(exc, "problem", None) or str(exc)
        raise LoadError(f"{name}: not valid YAML or JSON{where}: {problem}") from exc
    out: list[LoadedObject] = []
    for doc in docs:
        for obj in _flatten(doc):
            if not isinstance(obj, dict):
                raise LoadError(
                    f"{name}: document {len(out) + 1} is a {type(obj).__name__}, not a Kubernetes object"
                )
            out.append(LoadedObject(name, len(out), obj))
    return out


def load_objects(path: str) -> list[LoadedObject]:
    return parse_objects(read_text(path), "<stdin>" if path == "-" else path)
