"""The C heap of a server process (glibc): what the collector and reference counting
free, malloc keeps unless told. Used by the workers and the inventory process."""

from __future__ import annotations

import ctypes


def release_free_heap() -> bool:
    """Return the C heap's free pages to the system (glibc ``malloc_trim``; False where
    there is none). The first list leaves several MiB of them behind, freed page buffers
    and parse garbage that RSS would otherwise keep counting."""
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    return bool(trim(0)) if trim is not None else False


# glibc's M_ARENA_MAX (malloc.h). Each thread that allocates under contention gets a
# malloc arena of its own, up to 8 per core, and keeps its pages: the watch threads and
# the evaluation threads cost ~5 MiB of RSS per worker at 10,000 nodes that two arenas
# do not (docs/benchmarks.md, round 4).
_M_ARENA_MAX = -8
MALLOC_ARENAS = 2


def limit_malloc_arenas(count: int = MALLOC_ARENAS) -> bool:
    """Cap glibc's malloc arenas (as ``MALLOC_ARENA_MAX`` would); False where there is no
    glibc ``mallopt``. Takes effect for threads that have not allocated yet."""
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    return bool(mallopt(_M_ARENA_MAX, count)) if mallopt is not None else False


# glibc's M_TRIM_THRESHOLD and M_MMAP_THRESHOLD (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
TRIM_THRESHOLD = 16 << 20
MMAP_THRESHOLD = 32 << 20  # glibc's own ceiling for the threshold it adjusts


def fix_malloc_thresholds(trim: int = TRIM_THRESHOLD, mmap: int = MMAP_THRESHOLD) -> bool:
    """Fixed malloc thresholds instead of glibc's moving ones (False where there is no
    glibc ``mallopt``). glibc raises its trim threshold to twice the largest mmapped
    block freed so far, up to 64 MiB: once startup has freed the pickled view or a
    list's buffers, up to 64 MiB of free memory at the heap's top stays resident. Review
    traffic then grew a 10,000-node worker by ~26 MiB that the heap kept (80.5 -> 106.9
    MiB after 10 s of wrk); with these, by ~4 (docs/benchmarks.md, round 9)."""
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is None:
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, mmap)) and bool(mallopt(_M_TRIM_THRESHOLD, trim))
