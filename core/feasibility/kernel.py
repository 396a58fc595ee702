"""Selects the feasibility implementation: the compiled one, or the pure-Python reference
when NUMAGATE_NO_EXTENSIONS is set (or off CPython). ``IMPLEMENTATION`` says which.

A missing compiled module is an error, not a quiet switch to the slow path: run
``make install`` (or ``python setup.py build_ext --inplace``), or ask for the reference
explicitly with NUMAGATE_NO_EXTENSIONS=1.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Final

NO_EXTENSIONS: Final = bool(os.environ.get("NUMAGATE_NO_EXTENSIONS")) or (
    sys.implementation.name != "cpython"
)

if TYPE_CHECKING or NO_EXTENSIONS:
    from core.feasibility._kernel_py import *  # noqa: F403
    from core.feasibility._kernel_py import __all__

    IMPLEMENTATION: Final[str] = "python"
else:
    try:
        from core.feasibility._kernel_c import *  # type: ignore[import-not-found]  # noqa: F403
        from core.feasibility._kernel_c import __all__  # type: ignore[import-not-found]  # noqa: F401
    except ImportError as exc:  # pragma: no cover - exercised by a subprocess test
        raise ImportError(
            "numagate's compiled core (core.feasibility._kernel_c) is not built: run 'make install' "
            "or set NUMAGATE_NO_EXTENSIONS=1 to use the pure-Python reference"
        ) from exc
    IMPLEMENTATION = "cython"
