"""Fixtures of the live inventory tests: the test API server and a client of it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest

from tests.webhook.fake_apiserver import FakeApiServer, running_apiserver
from webhook.inventory.kube import build_api_client


@pytest.fixture
def server(tmp_path: Path) -> Iterator[FakeApiServer]:
    with running_apiserver(tmp_path, token="t0ken") as srv:
        yield srv


@pytest.fixture
def api(server: FakeApiServer, tmp_path: Path) -> Iterator[kubernetes.client.ApiClient]:
    client = build_api_client(kubeconfig=server.write_kubeconfig(tmp_path / "kubeconfig"))
    yield client
    client.close()
