"""Line numbers for lint findings, from the YAML node marks of the file's text.

The objects are read once by :mod:`webhook.inventory.loader` (plain data, fast); for the
report the same text is composed again into nodes (which keep their line), flattened the
way the loader flattens ``List`` documents, and each finding's field path (``spec.
containers[0].resources.limits[cpu]``) is followed as deep as it goes. A path that does not
resolve gives the deepest line found, at worst the object's first line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import yaml

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# one path step: [key or index] or a dotted name
_STEP = re.compile(r"\[([^\]]*)\]|([^.\[\]]+)")
_LINE_IN_ERROR = re.compile(r"at line (\d+)")


def _scalar(node: yaml.Node | None) -> str | None:
    return str(node.value) if isinstance(node, yaml.ScalarNode) else None


def _get(node: yaml.MappingNode, key: str) -> tuple[yaml.Node, yaml.Node] | None:
    for k, v in node.value:
        if _scalar(k) == key:
            return k, v
    return None


def _flatten(node: yaml.Node) -> Iterator[yaml.Node]:
    """Mirror of the loader's List flattening, on nodes."""
    if isinstance(node, yaml.MappingNode):
        kind = _get(node, "kind")
        items = _get(node, "items")
        kind_name = _scalar(kind[1]) if kind else None
        if (
            kind_name
            and kind_name.endswith("List")
            and items
            and isinstance(items[1], yaml.SequenceNode)
        ):
            for item in items[1].value:
                yield from _flatten(item)
            return
    if not (isinstance(node, yaml.ScalarNode) and node.tag.endswith(":null")):
        yield node


def object_nodes(text: str) -> list[yaml.Node] | None:
    """One node per object the loader returns, in its order (None: the text does not compose)."""
    try:
        docs = list(yaml.compose_all(text, Loader=_LOADER))
    except yaml.YAMLError:
        return None
    return [n for doc in docs if doc is not None for n in _flatten(doc)]


def line_of(node: yaml.Node, path: str) -> int:
    """1-based line of the deepest node ``path`` reaches from ``node``."""
    line = node.start_mark.line + 1
    for m in _STEP.finditer(path):
        step = m[1] if m[1] is not None else m[2]
        if isinstance(node, yaml.MappingNode):
            found = _get(node, step)
            if found is None:
                break
            line, node = found[0].start_mark.line + 1, found[1]
        elif isinstance(node, yaml.SequenceNode) and step.isdigit() and int(step) < len(node.value):
            node = node.value[int(step)]
            line = node.start_mark.line + 1
        else:
            break
    return line


def line_of_error(message: str) -> int | None:
    """The line a loader error names ("not valid YAML or JSON at line 4, ...")."""
    m = _LINE_IN_ERROR.search(message)
    return int(m[1]) if m else None
