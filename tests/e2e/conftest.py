"""The end-to-end suite's fixtures: one real control plane per session (``control_plane``),
numagate installed into it from its own manifests (``installed``), and the cluster's nodes.

Every test here starts or talks to processes, so each is marked slow. When a binary is
missing (Go absent, ``make e2e-build`` not run), the fixture fails with the message naming
it: the suite never skips.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.cluster import TEST_NS, Install, create_nodes, install, install_crds
from tests.e2e.controlplane import ControlPlane
from tests.e2e.watches import start_watches

_PLANE: list[ControlPlane] = []
_INSTALL: list[Install] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if report.failed and _PLANE:
        report.sections.append(("control plane logs", _PLANE[0].logs()))
    if report.failed and _INSTALL and _INSTALL[0].serve is not None:
        lines = [x for x in _INSTALL[0].serve.log if '"numagate.admission"' not in x]
        report.sections.append(
            ("numagate serve log (admission lines left out)", "\n".join(lines[-40:]))
        )


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """etcd, kube-apiserver, kube-scheduler and kwok, started once for the session."""
    workdir = Path(tmp_path_factory.mktemp("control-plane"))
    plane = ControlPlane(workdir)
    _PLANE.append(plane)
    try:
        plane.start()
        yield plane
    finally:
        plane.stop()
        _PLANE.clear()
        if os.environ.get("NUMAGATE_E2E_KEEP"):
            print(f"control plane data and logs kept in {workdir}")
        else:
            shutil.rmtree(workdir / "etcd", ignore_errors=True)


@pytest.fixture(scope="session")
def installed(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Install]:
    """The CRDs, the mixed-policy nodes and numagate installed and serving."""
    install_crds(control_plane)
    create_nodes(control_plane)
    control_plane.create_namespace(TEST_NS)
    result = install(control_plane, Path(tmp_path_factory.mktemp("numagate")))
    result.watches = start_watches(control_plane, str(result.sa_kubeconfig))
    _INSTALL.append(result)
    try:
        yield result
    finally:
        result.watches.stop()
        result.stop_serve()
        _INSTALL.clear()


@pytest.fixture
def serving(installed: Install) -> Install:
    """numagate running (restarted if a previous test stopped it)."""
    if installed.serve is None or installed.serve.proc.poll() is not None:
        installed.start_serve()
    return installed
