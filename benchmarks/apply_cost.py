"""A worker's CPU to apply the inventory process's messages, without an event loop or a
ticker (what ``benchmarks/inventory.py --child worker`` runs with both): one recording,
applied by any checkout, so that two commits apply the same bytes.

    python benchmarks/apply_cost.py record TREE INVENTORY OUT --rate R --seconds S
    python benchmarks/apply_cost.py apply TREE OUT       # CPU of the editor and the batches
    python benchmarks/apply_cost.py load TREE OUT        # unpickling only (callgrind: subtract)

TREE is the checkout whose code runs (its ``core`` and ``webhook`` are imported first):
``record`` uses its ``_recorded_feed`` (benchmarks/inventory.py), ``apply`` its editor, as
webhook/inventory/fed.py applies a Batch (``with_available`` per usage delta, then
``SnapshotEditor.apply``).
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from typing import Any


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("mode", choices=("record", "apply", "load"))
    p.add_argument("tree")
    p.add_argument("paths", nargs="+", help="record: INVENTORY OUT; apply, load: OUT")
    p.add_argument("--rate", type=float, default=170.0)
    p.add_argument("--seconds", type=float, default=20.0)
    args = p.parse_args()
    sys.path[:0] = [args.tree, f"{args.tree}/benchmarks"]
    if args.mode == "record":
        from inventory import _recorded_feed  # type: ignore[import-not-found]

        sent = _recorded_feed(args.paths[0], args.rate, args.seconds)
        with open(args.paths[1], "wb") as f:
            pickle.dump(sent, f)
        print(f"recorded {len(sent)} messages")
        return
    from core.inventory.incremental import with_available
    from core.snapshot.delta import SnapshotEditor

    try:  # a Whole made by a checkout that compresses it (webhook/inventory/feed.py)
        from webhook.inventory.feed import decode
    except ImportError:
        decode = pickle.loads
    with open(args.paths[0], "rb") as f:
        messages: list[Any] = [decode(m) for m in pickle.load(f)]
    if args.mode == "load":
        print(f"loaded {len(messages)} messages")
        return
    t0 = time.process_time()
    editor = SnapshotEditor(messages[0].snapshot, reserve=True)
    t1 = time.process_time()
    events = 0
    for m in messages[1:]:
        index, nodes = editor.snapshot.name_index, editor.snapshot.nodes
        changes = {name: with_available(nodes[index[name]], free) for name, free in m.usage}
        changes.update(m.records)
        events += len(m.events)
        if changes:
            editor.apply(changes)
    t2 = time.process_time()
    batches = len(messages) - 1
    print(
        f"whole {t1 - t0:.3f} s, {batches} batches, {events} events: "
        f"{(t2 - t1) / max(events, 1) * 1e6:.1f} us per event, "
        f"{(t2 - t1) / max(batches, 1) * 1e6:.0f} us per batch (CPU)"
    )


if __name__ == "__main__":
    main()
