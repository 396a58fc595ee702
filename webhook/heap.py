"""The C heap of a server process (glibc): what the collector and reference counting
free, malloc keeps unless told. Used by the workers and the inventory process."""

from __future__ import annotations

import ctypes
import gc
import time
from collections.abc import Callable


def release_free_heap() -> bool:
    """Return the C heap's free pages to the system (glibc ``malloc_trim``; False where
    there is none). The first list leaves several MiB of them behind, freed page buffers
    and parse garbage that RSS would otherwise keep counting."""
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    return bool(trim(0)) if trim is not None else False


def settle_records(unfreeze: bool) -> None:
    """After a worker applied a Whole: everything alive now, the snapshot's records above
    all (they live until the next Whole: usage is written beside them), out of the cyclic
    collector's reach, and the freed pages back to the system. Each full collection walked
    those records, ~200 ms at 100,000 nodes, twice a minute under churn: the longest
    stalls of a worker, and what wrk's p99 measured (docs/inventory.md, "The stalls behind
    wrk's p99"). Once per Whole, never per batch.

    ``unfreeze`` (every Whole but a worker's first): what the last Whole froze goes back
    to the collector first, so that an object dropped since inside a reference cycle is
    still collected (reference counting frees the others, frozen or not). Not at the
    first: what is frozen then is what the serving process froze before forking the
    workers (``settle_heap``), and a collection walking it writes to pages the workers
    share with it (a replica of 2 workers at 100,000 nodes: 1,026 MiB at ready, counted
    once, against 1,005 without)."""
    if unfreeze:
        gc.unfreeze()
    gc.collect()
    gc.freeze()
    release_free_heap()


# How often survivors_frozen lets a full collection walk everything again.
FULL_WALK_SECONDS = 600.0


def survivors_frozen(clock: Callable[[], float] = time.monotonic) -> None:
    """For the inventory process: after each full collection, what survived it is frozen
    (``gc.freeze``), so the next full collection walks only what was made since. The
    process holds every node's record and watch object; each full collection walked
    them all, 0.8-1.0 s at 100,000 nodes under churn, every 12-30 s. No batch left the
    process meanwhile, and the workers then applied the backlog as a run of 256-event
    batches, each holding their loop 13-20 ms (docs/inventory.md, round 22). Frozen
    objects are still freed by reference counting; a reference cycle among them is
    collected only at the next full walk: every ``FULL_WALK_SECONDS`` a full collection
    starts with everything unfrozen."""
    last_walk = [clock()]

    def callback(phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start" and clock() - last_walk[0] >= FULL_WALK_SECONDS:
            gc.unfreeze()
            last_walk[0] = clock()
        elif phase == "stop":
            gc.freeze()

    gc.callbacks.append(callback)


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
