"""Where ``numagate serve`` watches a cluster: in the worker, or through an inventory
process (``--inventory-process=auto|always|never``; docs/inventory.md, "In the worker, or
in an inventory process").

In the worker is one process and the least memory; at 10,000 nodes it meets every target
of issue 14. At 100,000 nodes the watch threads' parsing shares the worker's GIL with the
reviews (reviews/s 0.78-0.81 of no churn, p99 2.0-2.35x at 1,667 NRT events/s), and the
inventory process keeps them apart (0.91, 1.6-1.9x) for ~0.5 GiB more per worker
(docs/benchmarks.md, rounds 8 and 9). ``auto`` asks the API how many nodes there are,
once at startup, and takes the process from ``--inventory-process-above`` nodes on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MODES = ("auto", "always", "never")
# In the worker, at each size's churn (each node once a minute), reviews/s and p99 as
# ratios of no churn: 10,000 nodes 0.91 / 1.1x, 25,000 0.90 / 1.3x, 50,000 0.83 / 1.8x,
# 100,000 0.81 / 2.0x; the process at 100,000: 0.91 / 1.7x (docs/benchmarks.md, round 9).
# Past 25,000 nodes the worker misses the 10,000-node targets (>= 0.9, <= 1.5x).
AUTO_ABOVE_NODES = 25_000
COUNT_TIMEOUT = (3.0, 5.0)  # connect, read: startup waits at most this for the count


@dataclass(frozen=True)
class Choice:
    """The decision and the reason, for the startup line and the log."""

    process: bool
    reason: str
    nodes: int | None = None


def count_nodes(api_client: Any, timeout: tuple[float, float] = COUNT_TIMEOUT) -> int:
    """The cluster's nodes, from a list of one: the item plus ``remainingItemCount``, in
    one attempt (startup waits at most ``timeout``). Raises LookupError (with the reason)
    when the API cannot be read or does not say: the field is an estimate that servers
    may leave unset (ListMeta)."""
    # Here, not at the top: the CLI's parser reads MODES, and every command would pay for
    # the kubernetes client.
    import copy

    from webhook.inventory.kube import new_api_client
    from webhook.inventory.objects import decode
    from webhook.inventory.stream import api_get, describe_error

    # urllib3 retries a GET three times by default: an API that accepts connections and
    # never answers held startup for 4 x the timeout (12 s measured).
    configuration = copy.deepcopy(api_client.configuration)
    configuration.retries = False
    once = new_api_client(configuration)
    try:
        # No resourceVersion: with resourceVersion=0 the apiserver answers from its watch
        # cache, which ignores limit (the whole list, for one number).
        response = api_get(once, "/api/v1/nodes", {"limit": 1}, timeout)
        try:
            body = decode(response.data)
        finally:
            response.release_conn()
    except Exception as exc:  # unreachable, refused, 403, not JSON: all mean "unknown"
        raise LookupError(describe_error(exc)) from exc
    finally:
        once.close()
    meta = body.get("metadata") if isinstance(body, dict) else None
    items = body.get("items") if isinstance(body, dict) else None
    if not isinstance(meta, dict) or not isinstance(items, list):
        raise LookupError("the node list is not a List")
    if not meta.get("continue"):
        return len(items)  # the whole list fitted in one item
    remaining = meta.get("remainingItemCount")
    if type(remaining) is not int or remaining < 0:
        raise LookupError("the API server does not give remainingItemCount")
    return len(items) + remaining


def choose(mode: str, above: int, count: Callable[[], int]) -> Choice:
    """``always``/``never`` as asked; ``auto``: the process from ``above`` nodes on, the
    worker below, and the worker when ``count`` (:func:`count_nodes`) raises LookupError
    (said in the reason)."""
    if mode == "always":
        return Choice(True, "--inventory-process=always")
    if mode == "never":
        return Choice(False, "--inventory-process=never")
    try:
        nodes = count()
    except LookupError as exc:
        return Choice(
            False,
            f"node count unknown ({exc}); pass --inventory-process=always for clusters "
            f"of {above} nodes or more",
        )
    if nodes >= above:
        return Choice(True, f"{nodes} nodes, at least --inventory-process-above {above}", nodes)
    return Choice(False, f"{nodes} nodes, fewer than --inventory-process-above {above}", nodes)
