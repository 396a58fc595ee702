"""numagate served over real TLS with a DRA inventory file, for the DRA admission tests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from certs.authority import CertPaths
from tests.webhook import harness
from tests.webhook.harness import ApiServer


def write_inventory(directory: Path, items: Sequence[dict[str, Any]]) -> Path:
    path = directory / "inventory.json"
    path.write_text(json.dumps({"kind": "List", "items": list(items)}))
    return path


@asynccontextmanager
async def served(
    certs: CertPaths, inventory_file: Path, tmp_path: Path
) -> AsyncIterator[ApiServer]:
    """The server reading ``inventory_file``, with a configuration that stops at once."""
    config = tmp_path / "config.yaml"
    config.write_text("shutdown: {delaySeconds: 0}\n")
    async with harness.served(certs, inventory=inventory_file, config=config) as client:
        yield client
