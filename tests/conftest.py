"""Shared fixtures. ``impl`` runs a test against both feasibility implementations
(the compiled one is absent only in a pure build, where it is deselected, not skipped)."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

PURE = bool(os.environ.get("NUMAGATE_NO_EXTENSIONS"))
IMPLS = ["python"] if PURE else ["python", "cython"]


@pytest.fixture(params=IMPLS, ids=IMPLS)
def impl(request: pytest.FixtureRequest) -> ModuleType:
    name = (
        "core.feasibility._kernel_py" if request.param == "python" else "core.feasibility._kernel_c"
    )
    return importlib.import_module(name)
