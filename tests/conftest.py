"""Shared fixtures. ``impl`` runs a test against both feasibility implementations
(the compiled one is absent only in a pure build, where it is deselected, not skipped);
``apiserver`` is the small fake API server of `certs inject` and the Secret mode."""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from certs.authority import ensure_serving_certs
from tests.certs.fake_admission_api import (
    MUTATING,
    VALIDATING,
    FakeApiServer,
    webhook_configuration,
)

PURE = bool(os.environ.get("NUMAGATE_NO_EXTENSIONS"))
IMPLS = ["python"] if PURE else ["python", "cython"]


@pytest.fixture(params=IMPLS, ids=IMPLS)
def impl(request: pytest.FixtureRequest) -> ModuleType:
    name = (
        "core.feasibility._kernel_py" if request.param == "python" else "core.feasibility._kernel_c"
    )
    return importlib.import_module(name)


@pytest.fixture
def apiserver(tmp_path: Path) -> Iterator[FakeApiServer]:
    server = FakeApiServer(ensure_serving_certs(tmp_path / "apiserver"))
    server.put(MUTATING, webhook_configuration("MutatingWebhookConfiguration", "numagate",
                                               ["mutate.numagate.io"]))  # fmt: skip
    server.put(VALIDATING, webhook_configuration("ValidatingWebhookConfiguration", "numagate",
                                                 ["pods.numagate.io", "workloads.numagate.io"]))  # fmt: skip
    server.start()
    try:
        yield server
    finally:
        server.stop()
