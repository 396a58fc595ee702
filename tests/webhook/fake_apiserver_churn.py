"""Churn for the test API server: what the cluster's agents write all day.

NFD's topology-updater rewrites every node's NodeResourceTopology every 60 s by default
(``-sleep-interval``), plus on pod lifecycle events; what changes is the ``available``
amount of each zone's resources. The kubelet updates its Node's conditions (heartbeats)
and labels change now and then. ``nrt_available`` and ``node_heartbeat`` are those
rewrites; ``Churner`` applies one of them to the objects of a resource, round robin, at a
fixed rate (events per second) on the server's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import random
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.webhook.fake_apiserver_objects import nrt

Rewrite = Callable[[dict[str, Any], random.Random], None]

_AMOUNT = re.compile(r"^(\d+)(\D*)$")
TICK = 0.02  # seconds between churn batches at high rates


def nrt_available(obj: dict[str, Any], rng: random.Random) -> None:
    """New ``available`` amounts in every zone, between 0 and ``allocatable`` (same unit),
    as the topology-updater reports after pods came and went."""
    for zone in obj.get("zones") or []:
        for res in zone.get("resources") or []:
            m = _AMOUNT.match(str(res.get("allocatable", "")))
            if m and "available" in res:
                res["available"] = f"{rng.randint(0, int(m[1]))}{m[2]}"


def node_heartbeat(obj: dict[str, Any], rng: random.Random) -> None:
    """The Ready condition's heartbeat moves on, and a label changes value."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = obj.setdefault("status", {})
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != "Ready"]
    conditions.append(
        {"type": "Ready", "status": "True", "reason": "KubeletReady",
         "lastHeartbeatTime": now, "lastTransitionTime": now}
    )  # fmt: skip
    status["conditions"] = conditions
    labels = obj.setdefault("metadata", {}).setdefault("labels", {})
    labels["bench.numagate.io/churn"] = str(rng.randint(0, 9))


@contextlib.contextmanager
def churning(apply: Callable[[dict[str, Any]], Any], names: Sequence[str]) -> Iterator[None]:
    """While the block runs, a thread writes the NRT of a random one of ``names`` with new
    free CPUs every 5 ms (``apply``: the server's), so that events keep coming across
    what the block does (a relist, an outage)."""
    stop = threading.Event()

    def churn() -> None:
        rng = random.Random(5)
        while not stop.is_set():
            apply(nrt(rng.choice(names), free=rng.randint(0, 30)))
            time.sleep(0.005)

    churner = threading.Thread(target=churn, daemon=True)
    churner.start()
    try:
        yield
    finally:
        stop.set()
        churner.join(5)


@dataclass
class Churner:
    """Rewrites ``keys`` round robin at ``rate`` events/s. ``apply_one(key, rewrite, rng)``
    does the write (it is the server's; it runs on the server's loop). ``position`` and
    ``rng`` carry on from an earlier churner of the same objects: a churner started
    afresh would write the values it wrote before, and an event that rewrites an object
    with the content it has changes nothing for a watcher."""

    keys: Sequence[Any]
    rate: float
    rewrite: Rewrite
    apply_one: Callable[[Any, Rewrite, random.Random], None]
    seed: int = 1
    emitted: int = 0
    position: int = 0
    rng: random.Random | None = None
    task: asyncio.Task[None] | None = field(default=None, repr=False)

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run())

    def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()

    async def _run(self) -> None:
        if not self.keys or self.rate <= 0:
            return
        if self.rng is None:
            self.rng = random.Random(self.seed)
        rng = self.rng
        loop = asyncio.get_running_loop()
        started = loop.time()
        done = 0
        # Events are due at a steady rate from the start; a late tick catches up, so the
        # observed rate stays right even when the loop is busy.
        while True:
            due = int((loop.time() - started) * self.rate) - done
            for _ in range(due):
                self.apply_one(self.keys[self.position % len(self.keys)], self.rewrite, rng)
                self.position += 1
            done += due
            self.emitted += due
            await asyncio.sleep(TICK)
