"""Fixtures shared by the webhook tests."""

from __future__ import annotations

import pytest

from certs.authority import CertPaths, generate
from tests.launch import NAMESPACE, SERVICE


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertPaths:
    """A CA and a serving certificate for the webhook Service name and 127.0.0.1."""
    return generate(
        tmp_path_factory.mktemp("certs"), service=SERVICE, namespace=NAMESPACE, ips=["127.0.0.1"]
    )
