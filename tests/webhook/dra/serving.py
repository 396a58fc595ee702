"""numagate served over real TLS with a DRA inventory file, for the DRA admission tests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from certs.authority import CertPaths
from tests.launch import running_server
from tests.webhook.harness import ApiServer
from webhook.server import ServeOptions


def write_inventory(directory: Path, items: Sequence[dict[str, Any]]) -> Path:
    path = directory / "inventory.json"
    path.write_text(json.dumps({"kind": "List", "items": list(items)}))
    return path


@asynccontextmanager
async def served(
    certs: CertPaths, inventory_file: Path, tmp_path: Path
) -> AsyncIterator[ApiServer]:
    """The server on a free port reading ``inventory_file``, and a client posting to it."""
    config = tmp_path / "config.yaml"
    config.write_text("shutdown: {delaySeconds: 0}\n")
    opts = ServeOptions(
        host="127.0.0.1",
        port=0,
        cert=str(certs.cert),
        key=str(certs.key),
        inventory=str(inventory_file),
        config=str(config),
    )
    async with running_server(opts) as port, ApiServer(f"https://127.0.0.1:{port}", certs.ca) as c:
        yield c
