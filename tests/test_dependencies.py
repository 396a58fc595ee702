"""Dependencies pinned for users: setup.py bounds each runtime dependency below the next
major version that would break numagate, constraints.txt pins the exact versions tested
(each inside those bounds), and the Makefile, the Dockerfile and so CI install with it."""

from __future__ import annotations

import re
from importlib import metadata

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.paths import ROOT


def install_requires() -> list[Requirement]:
    text = (ROOT / "setup.py").read_text()
    block = re.search(r"install_requires=\[(.*?)\]", text, re.S)
    assert block
    return [Requirement(r) for r in re.findall(r'"([^"]+)"', block[1])]


def constraints() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not NAME==VERSION"
            pins[canonicalize_name(name)] = version
    return pins


def test_runtime_dependencies_have_upper_bounds_where_a_major_breaks_us() -> None:
    reqs = {canonicalize_name(r.name): r for r in install_requires()}
    for name in ("kubernetes", "aiohttp", "pydantic", "pyyaml", "prometheus-client"):
        assert any(s.operator == "<" for s in reqs[name].specifier), name
    # the kubernetes client installed here is inside the range it was tested with
    assert metadata.version("kubernetes") in reqs["kubernetes"].specifier


def test_constraints_pin_every_dependency_inside_its_range() -> None:
    pins = constraints()
    assert "numagate" not in pins
    for req in install_requires():
        version = pins.get(canonicalize_name(req.name))
        assert version, f"{req.name} is not pinned in constraints.txt"
        assert version in req.specifier, f"{req.name}=={version} outside {req.specifier}"


def test_constraints_are_what_is_installed() -> None:
    """The pins are the tested versions: those of this environment (for what it has)."""
    for name, version in constraints().items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        if name in {"kubernetes", "aiohttp", "pydantic", "pyyaml", "prometheus-client", "orjson"}:
            assert installed == version, f"{name}: installed {installed}, pinned {version}"


def test_makefile_and_dockerfile_install_with_the_constraints() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert "pip install --quiet -c constraints.txt -e '.[test]'" in makefile
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "COPY pyproject.toml setup.py constraints.txt ./" in dockerfile
    assert "PIP_CONSTRAINT=/src/constraints.txt pip wheel" in dockerfile
    assert "-c /wheels/constraints.txt numagate" in dockerfile
    assert "make test" in (ROOT / ".ci" / "run").read_text()  # CI goes through the Makefile
