"""The layering contracts, read from the source (every import statement, function-local and
``TYPE_CHECKING`` ones included): core/ is pure (nothing from webhook or certs, no
aiohttp, kubernetes, pydantic, logging or yaml), certs/ imports nothing from webhook/, and
no two modules of the project import each other, directly or through others."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

from tests.paths import ROOT

PACKAGES = ("core", "webhook", "certs")
CORE_FORBIDDEN = ("webhook", "certs", "aiohttp", "kubernetes", "pydantic", "logging", "yaml")
# Cython: `from X import ...`, `from X cimport ...`, `import X`, `cimport X`
_PYX_IMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+c?import\b|c?import\s+([\w.]+))", re.M)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*")):
            if path.suffix in (".py", ".pyx") and "__pycache__" not in path.parts:
                found[_module_name(path)] = path
    return found


def _imported(path: Path, module: str) -> Iterator[str]:
    text = path.read_text()
    if path.suffix == ".pyx":
        for m in _PYX_IMPORT.finditer(text):
            yield m[1] or m[2]
        return
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    yield from imported_names(text, package)


def imported_names(text: str, package: str) -> Iterator[str]:
    """Every module name an import statement anywhere in ``text`` names (``from X import Y``
    gives both X and X.Y: Y may be a submodule); ``package`` resolves relative imports."""
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def import_graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(module -> project modules it imports, module -> every name it imports)."""
    sources = _sources()
    edges: dict[str, set[str]] = {}
    names: dict[str, set[str]] = {}
    for module, path in sources.items():
        imported = set(_imported(path, module))
        names[module] = imported
        edges[module] = {m for m in imported if m in sources and m != module}
    return edges, names


def strongly_connected(edges: Mapping[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative: the strongly connected components of the graph."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return components


def _top(name: str) -> str:
    return name.partition(".")[0]


def test_every_kind_of_import_is_read() -> None:
    text = """
import a.b, c
from d import e
from . import f
from ..g import h

def later():
    from webhook.x import y

if TYPE_CHECKING:
    import pydantic
"""
    got = set(imported_names(text, "core.pkg"))
    assert {"a.b", "c", "d", "d.e", "core.pkg", "core.pkg.f", "core.g", "core.g.h"} <= got
    assert {"webhook.x", "webhook.x.y", "pydantic"} <= got
    edges, _ = import_graph()
    assert len(edges) > 50
    assert "core.errors" in edges["core.feasibility._kernel_c"]  # the Cython kernel too


def test_core_is_pure() -> None:
    _, names = import_graph()
    bad = {
        module: sorted(n for n in imported if _top(n) in CORE_FORBIDDEN)
        for module, imported in names.items()
        if _top(module) == "core"
    }
    assert {m: n for m, n in bad.items() if n} == {}


def test_certs_imports_nothing_from_webhook() -> None:
    _, names = import_graph()
    bad = {
        module: sorted(n for n in imported if _top(n) == "webhook")
        for module, imported in names.items()
        if _top(module) == "certs"
    }
    assert {m: n for m, n in bad.items() if n} == {}


def test_no_import_cycles() -> None:
    edges, _ = import_graph()
    assert [c for c in strongly_connected(edges) if len(c) > 1] == []


def test_cycle_finder_finds_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert sorted(c for c in strongly_connected(graph) if len(c) > 1) == [["a", "b", "c"]]


def test_no_test_module_imports_another() -> None:
    """Shared test code lives in tests/builders, tests/launch.py, conftest.py files and
    helper modules, never in a test_*.py another test imports (function-local imports too)."""
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        module = _module_name(path)
        names = set(imported_names(path.read_text(), module.rpartition(".")[0]))
        tests = sorted(
            n
            for n in names
            if n.startswith("tests.") and n.split(".")[-1].startswith("test_") and n != module
        )
        if tests:
            found[module] = tests
    assert found == {}


_OUTSIDE_DESIGN = re.compile(r"\bDESIGN \d")


def test_no_citation_of_the_design_outside_the_repository() -> None:
    """The contracts the code cites are in docs/contracts.md, not in a design document
    outside the repository ("DESIGN 4.3")."""
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for top in ("core", "webhook", "certs", "schemas", "docs", "tests", "benchmarks")
        for path in sorted((ROOT / top).rglob("*"))
        if path.suffix in {".py", ".pyx", ".pxd", ".md", ".json", ".yaml"}
        and path != Path(__file__)
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if _OUTSIDE_DESIGN.search(line)
    ]
    assert found == []
