"""Where the inventory process's memory goes (issue 31): the generated cluster that
``benchmarks/churn.py`` serves, parsed and put into the real ``Feed`` a page at a time as
the reflectors deliver it, the first build made (and pickled, as for a worker), then every
part it holds size-walked: ``sys.getsizeof`` of everything a part reaches, each object
counted once, in the order printed (a map that a record and its parts share counts for the
records). The reflectors' keys and resourceVersions are modelled as they keep them.

    .venv/bin/python benchmarks/inventory_walk.py --nodes 100000

Prints the CPU of the lists and of the build, RSS, the objects the collector tracks, MiB
per part and per type, and the sharer's table sizes.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

import churn  # noqa: E402

RESOURCES = {"Node": "nodes", "NodeResourceTopology": "noderesourcetopologies",
             "Numatopology": "numatopologies", "Pod": "pods"}  # fmt: skip


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Walk:
    """Sizes of object graphs, each object counted once over every ``size`` call."""

    def __init__(self) -> None:
        self.seen: set[int] = set()
        self.by_type: Counter[str] = Counter()

    def size(self, root: Any) -> int:
        total, stack = 0, [root]
        while stack:
            obj = stack.pop()
            if id(obj) in self.seen or isinstance(obj, type) or callable(obj):
                continue
            self.seen.add(id(obj))
            size = sys.getsizeof(obj)
            total += size
            self.by_type[type(obj).__name__] += size
            if isinstance(obj, dict):
                stack.extend(obj.keys())
                stack.extend(obj.values())
            elif isinstance(obj, list | tuple | set | frozenset):
                stack.extend(obj)
            elif hasattr(type(obj), "__slots__"):
                for cls in type(obj).__mro__:
                    stack.extend(
                        getattr(obj, s) for s in getattr(cls, "__slots__", ()) if hasattr(obj, s)
                    )
            elif hasattr(obj, "__dict__"):
                stack.append(obj.__dict__)
        return total


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=100_000)
    args = p.parse_args(argv)
    from core.inventory.incremental import parse_object
    from webhook.inventory.feed import Fanout, Feed

    feed = Feed(Fanout())
    feed.synced = lambda: False
    stores: dict[str, dict[tuple[str, str], str]] = {kind: {} for kind in RESOURCES}
    started = time.process_time()
    for obj in churn.cluster_objects(args.nodes, distinct=True):
        kind, meta = obj["kind"], obj["metadata"]
        parsed = parse_object(obj, feed.inventory.units)
        store = stores[kind]
        store[(meta.get("namespace") or "", meta["name"])] = str(1000 + len(store))
        feed._queue.append((time.monotonic(), RESOURCES[kind], "ADDED", parsed.key, parsed))
        if len(feed._queue) >= 250:  # a page
            feed._drain_unbuilt()
    del obj, parsed
    lists = time.process_time() - started
    feed.synced = lambda: True
    started = time.process_time()
    feed.step()  # the first build, pickled
    build = time.process_time() - started
    gc.collect()
    print(f"objects {dict((k, len(v)) for k, v in stores.items())}")
    print(f"CPU s: lists {lists:.2f} build {build:.2f}; RSS {rss_mib():.1f} MiB; "
          f"tracked objects {len(gc.get_objects())}")  # fmt: skip
    inventory, walk = feed.inventory, Walk()
    for name, part in (("records", inventory.records), ("parts", inventory._parts),
                       ("objects by key", inventory._objects), ("errors", inventory._errors),
                       ("sharer", inventory.share), ("reflectors' keys", stores)):  # fmt: skip
        print(f"{name:18}{walk.size(part) / 2**20:8.1f} MiB")
    top = walk.by_type.most_common(14)
    print("by type (MiB):", ", ".join(f"{k} {v / 2**20:.1f}" for k, v in top))
    share = inventory.share
    tables = ("_strings", "_maps", "_own", "_amounts", "_settings", "_zones", "_zone_tuples")
    print("sharer entries:", ", ".join(f"{t} {len(getattr(share, t))}" for t in tables))
    return 0


if __name__ == "__main__":
    sys.exit(main())
