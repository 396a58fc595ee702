"""numagate's version: the one source (setup.py, ``--version``, the User-Agent, the
build_info metric and the image label all read it from here)."""

from __future__ import annotations

import platform

__version__ = "0.1.0"


def user_agent() -> str:
    """``numagate/VERSION (python X.Y.Z; kubernetes-client V)`` for every API call we make."""
    try:
        from kubernetes import __version__ as client_version
    except ImportError:  # pragma: no cover - kubernetes is a hard dependency
        client_version = "unknown"
    return (
        f"numagate/{__version__} (python {platform.python_version()}; "
        f"kubernetes-client {client_version})"
    )
