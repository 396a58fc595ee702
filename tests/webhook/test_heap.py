"""webhook.heap.survivors_frozen (the inventory process's collector policy): what a full
collection leaves alive is frozen, a young collection freezes nothing, and a reference
cycle among frozen objects is collected at the next full walk, once FULL_WALK_SECONDS
have passed. Run in a child process: the policy is process-wide."""

from __future__ import annotations

import subprocess
import sys

CHILD = r"""
import gc, weakref
from webhook import heap

class Node:
    pass

now = [0.0]
heap.survivors_frozen(clock=lambda: now[0])
gc.collect()
base = gc.get_freeze_count()
a, b = Node(), Node()
a.peer, b.peer = b, a  # a cycle, alive
gone = weakref.ref(a)
gc.collect(0)
print("young pass froze", gc.get_freeze_count() > base)
gc.collect()
print("full pass froze", gc.get_freeze_count() > base)
del a, b  # the cycle is garbage now, frozen
gc.collect()
print("frozen cycle kept", gone() is not None)
now[0] += heap.FULL_WALK_SECONDS
gc.collect()
print("full walk collected it", gone() is None)
"""


def test_full_collections_freeze_their_survivors_and_a_full_walk_frees_frozen_cycles() -> None:
    out = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, check=True, timeout=60
    ).stdout.splitlines()
    assert out == [
        "young pass froze False",
        "full pass froze True",
        "frozen cycle kept True",
        "full walk collected it True",
    ]
