"""JSON Schemas shipped with numagate (annotation payloads, config file, inventory file)."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any


@cache
def load(name: str) -> dict[str, Any]:
    """Return the schema ``schemas/<name>.schema.json`` as a dict."""
    text = resources.files(__package__).joinpath(f"{name}.schema.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data
