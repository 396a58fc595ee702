"""One vocabulary for both kernels: the compiled kernel was built with the values of
core/feasibility/codes.py (read back from its PXD_CODES), both kernels return a
KernelResult, and the compiled kernel's helpers carry the reference's names."""

from __future__ import annotations

import importlib
import os
import re
from types import ModuleType

import pytest

from core.feasibility import _kernel_py as ref
from core.feasibility import codes
from core.snapshot.snapshot import Demand, Snapshot
from tests.builders.model import container, cpu_node, pod
from tests.paths import ROOT

PURE = bool(os.environ.get("NUMAGATE_NO_EXTENSIONS"))
needs_compiled = pytest.mark.skipif(PURE, reason="pure build: no compiled kernel")

# Constants the compiled kernel takes from codes.py at import time, not from codes.pxd.
_PYTHON_ONLY = {"KERNEL_VERSION", "UNLIMITED"}

# Compiled-only helpers, each standing for Python the reference writes inline: C buffers
# and struct setup (what the reference's constructors and lists do), and the loops behind
# the reference's comprehensions over memory types.
_C_ONLY = {
    "_ptr",
    "_int64s",  # a Demand column's buffer (Kernel.check)
    "_count_classes",  # class_selection's nogil pass
    "_scan",  # Kernel.scan's nogil loop, its state, columns, errors and results
    "_ScanState",
    "_column",
    "_scan_error",
    "_result",
    "_demand",  # a Demand's buffers (Kernel.check, Kernel.scan)
    "_check",
    "_scratch_alloc",
    "_scratch_free",
    "_state_init",
    "_first_memory_type",
    "_memory_short",
    "_Packed",
    "_Demand",
    "_Scratch",
    "_KernelResult",
}


def _int_constants() -> dict[str, int]:
    return {
        k: v
        for k, v in vars(codes).items()
        if k.isupper() and type(v) is int and k not in _PYTHON_ONLY
    }


@needs_compiled
def test_pxd_values_equal_the_python_codes() -> None:
    comp = importlib.import_module("core.feasibility._kernel_c")
    assert _int_constants() == comp.PXD_CODES


def test_every_reason_code_is_distinct() -> None:
    reasons = {k: v for k, v in _int_constants().items() if k.startswith("R_")}
    assert len(set(reasons.values())) == len(reasons) == 11


def test_both_kernels_return_a_kernel_result(impl: ModuleType) -> None:
    snap = Snapshot.build([cpu_node([6, 6], [4, 6], policy="restricted")])
    res = snap.kernel(impl).check(Demand.build(pod(container(cpu=5)), snap), 0, 2, 0)
    assert type(res) is codes.KernelResult
    assert (res.admitted, res.mask, res.preferred, res.reason) == (1, 0b10, 1, codes.R_OK)
    short = snap.kernel(impl).check(Demand.build(pod(container(cpu=13)), snap), 0, 2, 0)
    assert (short.reason, short.need, short.limit) == (codes.R_CPU_SHORT, 13, 10)


def test_reference_reexports_the_codes() -> None:
    assert ref.KernelResult is codes.KernelResult
    assert ref.RES_DEVICE == codes.RES_DEVICE and ref.UNLIMITED == codes.UNLIMITED


def _names(pattern: str, path: str) -> set[str]:
    return set(re.findall(pattern, (ROOT / path).read_text(), flags=re.M))


def test_compiled_helpers_carry_the_reference_names() -> None:
    """Every function and struct of the .pyx exists under the same name in the reference
    (or is one of the listed C-only helpers)."""
    pyx = _names(
        r"^(?:cdef|cpdef|def)\s+(?:inline\s+)?(?:struct\s+|class\s+)?"
        r"(?:[\w*]+\s+)*?(\w+)\s*[(:]",
        "core/feasibility/_kernel_c.pyx",
    )
    py = _names(r"^(?:def|class)\s+(\w+)", "core/feasibility/_kernel_py.py") | {"_ok", "_fail"}
    assert pyx - py - _C_ONLY == set()
    assert pyx >= _C_ONLY
