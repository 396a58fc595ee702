"""The inventory the request path reads, and the sources that feed it: one attribute,
``InventoryState.view``, holding an immutable :class:`InventoryView`, swapped in whole;
a source that fails keeps the last good view. A large static file is built in a helper
process (docs/inventory.md, "Startup from a file" and "Memory")."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import hashlib
import os
import pickle
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from core.errors import CoreError
from core.inventory.build import build_inventory
from core.model import NodeTopology
from core.snapshot.snapshot import Snapshot
from webhook.inventory.file_build import ISOLATE_ABOVE_BYTES, FileBuildProcess
from webhook.inventory.loader import LoadError, parse_objects, read_text
from webhook.logs import get_logger
from webhook.metrics import WebhookMetrics

log = get_logger("inventory")
DEMO_RESOURCE = "data/demo-inventory.yaml"
# A file modified this recently may be modified again within the same timestamp tick
# (Linux file times come from a coarse clock), so its stat signature is not trusted yet
# (git's "racy git" rule): its content is re-read and hashed on the next check.
RACY_SECONDS = 2.0
Signature = tuple[int, int, int]  # (st_mtime_ns, st_size, st_ino)
# InventoryView.memo key of the slowest recent feasibility evaluation (seconds of CPU),
# kept by webhook.review.feasibility to decide whether the kernel may run on the event loop.
EVALUATION_COST = "evaluation-cost"


@dataclass(frozen=True, slots=True)
class InventoryView:
    """One immutable inventory: the nodes, the packed snapshot, the build errors.

    ``memo`` holds per-view results the request path derives from the nodes (e.g. the
    names of the nodes compatible with a scheduler and policy): computed once per view,
    dropped with it. It is not part of the view's value.
    """

    nodes: tuple[NodeTopology, ...]
    snapshot: Snapshot
    errors: tuple[str, ...]
    source: str
    built_at: float  # time.monotonic() when it was built
    memo: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    def has_label(self, key: str) -> bool:
        # The snapshot indexes label keys once per inventory: a set lookup per review
        # instead of a scan of every node.
        return key in self.snapshot.key_bits

    def __getstate__(self) -> tuple[Any, ...]:
        # The memo is per process (and may hold compiled-kernel state): never pickled.
        return (self.nodes, self.snapshot, self.errors, self.source, self.built_at)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        for name, value in zip(
            ("nodes", "snapshot", "errors", "source", "built_at"), state, strict=True
        ):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "memo", {})


def build_view(objects: Iterable[Mapping[str, Any]], *, source: str, now: float) -> InventoryView:
    """Build a view from raw Kubernetes objects (CPU work: call it off the request path)."""
    result = build_inventory(objects)
    nodes = tuple(result.nodes)
    return InventoryView(nodes, Snapshot.build(nodes), tuple(result.errors), source, now)


class InventoryState:
    """Holds the current view and knows how fresh it is.

    ``last_sync`` returns the monotonic time of the last successful synchronization
    (None before the first). Only live sources are ever stale: a static file is the
    truth by definition.
    """

    def __init__(
        self,
        *,
        metrics: WebhookMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.view: InventoryView | None = None
        self.clock = clock
        self.metrics = metrics
        self.live = False
        self.last_sync: Callable[[], float | None] = lambda: (
            self.view.built_at if self.view else None
        )
        self.synced: Callable[[], bool] = lambda: self.view is not None
        if metrics is not None:
            metrics.inventory_age.set_function(self.age)

    def install(self, view: InventoryView, *, quiet: bool = False) -> None:
        """Swap in a new view (one assignment: readers see the old or the new, never a mix).
        ``quiet``: an incremental update; its errors were logged when they appeared."""
        _carry_cost(self.view, view)
        self.view = view
        if self.metrics is not None:
            self.metrics.inventory_nodes.set(len(view.nodes))
            self.metrics.inventory_errors.set(len(view.errors))
        for error in () if quiet else view.errors[:20]:
            log.warning("inventory object skipped", extra={"error": error, "source": view.source})

    def load_objects(self, objects: Iterable[Mapping[str, Any]], *, source: str) -> InventoryView:
        view = build_view(objects, source=source, now=self.clock())
        self.install(view)
        return view

    def record_failure(self, message: str) -> None:
        if self.metrics is not None:
            self.metrics.inventory_load_failures.inc()
        log.error(
            "inventory load failed; keeping the last good inventory", extra={"error": message}
        )

    def age(self) -> float | None:
        last = self.last_sync()
        return None if last is None else max(0.0, self.clock() - last)

    def is_stale(self, threshold: float) -> bool:
        """A live inventory not synchronized for ``threshold`` seconds (never denies then)."""
        if not self.live:
            return False
        age = self.age()
        return age is None or age > threshold

    @property
    def ready(self) -> bool:
        return self.view is not None and self.synced()


def _carry_cost(old: InventoryView | None, new: InventoryView) -> None:
    """A live cluster replaces its view every few seconds: the new view of a similar size
    starts from the old one's evaluation cost instead of calibrating again in a thread."""
    if old is None or EVALUATION_COST not in old.memo:
        return
    if len(new.nodes) <= 2 * len(old.nodes):
        new.memo.setdefault(EVALUATION_COST, old.memo[EVALUATION_COST])


def demo_objects() -> list[dict[str, Any]]:
    """The embedded demo cluster (webhook/data/demo-inventory.yaml)."""
    text = resources.files("webhook").joinpath(DEMO_RESOURCE).read_text(encoding="utf-8")
    return [o.obj for o in parse_objects(text, "demo-inventory.yaml")]


def load_demo(state: InventoryState) -> InventoryView:
    return state.load_objects(demo_objects(), source="demo")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def file_signature(path: str) -> Signature | None:
    """(mtime, size, inode) of ``path`` (following symlinks, as a ConfigMap volume's
    ``..data`` swap needs), or None when it cannot be stat'ed."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _trusted(sig: Signature | None) -> Signature | None:
    if sig is None or time.time() - sig[0] / 1e9 < RACY_SECONDS:
        return None
    return sig


@dataclass(frozen=True, slots=True)
class FileBuild:
    """A static file turned into a view, with what the source needs to notice changes."""

    view: InventoryView
    digest: str
    signature: Signature | None  # taken before the read: a later change is noticed


def build_file(
    path: str, *, now: float, isolate: bool = False, text: str | None = None
) -> FileBuild:
    """Read, parse and build ``path`` (LoadError for unreadable or unparsable files, the
    build's own errors as themselves); ``isolate``: in a short-lived helper process
    (:class:`FileBuildProcess` running :func:`pickled_file_build`), which reads the file
    itself; else ``text``, when given, is the content read already."""
    if isolate:
        return received(FileBuildProcess(path, pickled_file_build).result(), now)
    signature = file_signature(path)
    if text is None:
        text = read_text(path)
    digest = _digest(text)
    objects = [o.obj for o in parse_objects(text, path)]
    del text
    view = build_view(objects, source=f"file:{path}", now=now)
    return FileBuild(view, digest, signature)


def received(pickled: bytes, now: float) -> FileBuild:
    """A FileBuild a helper process built, stamped with this process's clock ``now`` (the
    age metric and staleness use it)."""
    built: FileBuild = pickle.loads(pickled)
    return dataclasses.replace(built, view=dataclasses.replace(built.view, built_at=now))


def pickled_file_build(path: str) -> bytes:
    """What the helper process runs (webhook/inventory/file_build.py): :func:`build_file`,
    pickled. Not for other callers: it turns the collector off in the process it runs in,
    which exits afterwards."""
    # The parse and build allocate millions of objects that all live until the pickle is
    # written: the cyclic collector would traverse them again and again for nothing (40%
    # of the build's CPU at 10,000 nodes, docs/benchmarks.md); the process is short-lived.
    gc.disable()
    built = build_file(path, now=time.monotonic())
    return pickle.dumps(built, protocol=pickle.HIGHEST_PROTOCOL)


class StaticFileSource:
    """An inventory file, re-read when it changes; garbage keeps the last good.

    ``check`` stats the file first and reads and hashes it only when (mtime, size, inode)
    changed: a 20 MB inventory is not re-read every few seconds in every worker.
    """

    def __init__(
        self,
        path: str | Path,
        state: InventoryState,
        *,
        interval: float = 5.0,
        isolate_above: int = ISOLATE_ABOVE_BYTES,
    ) -> None:
        self.path = str(path)
        self.state = state
        self.interval = interval
        self.isolate_above = isolate_above
        self._digest: str | None = None
        self._signature: Signature | None = None
        self.last_error: str | None = None
        self.reads = 0  # how many times the content was read and hashed

    def _remember(self, digest: str | None, signature: Signature | None) -> None:
        self._digest, self._signature = digest, _trusted(signature)

    def load(self, pickled: bytes | None = None) -> InventoryView:
        """First load: errors propagate (a bad file at startup is a usage error).
        ``pickled``: the FileBuild a helper made already (serve's parent builds it once for
        all workers: :func:`received`), installed as if this source had loaded it."""
        now = self.state.clock()
        if pickled is not None:
            built = received(pickled, now)
        else:
            self.reads += 1
            built = build_file(self.path, now=now, isolate=self._large(file_signature(self.path)))
        self.state.install(built.view)
        self._remember(built.digest, built.signature)
        return built.view

    def check(self) -> bool | None:
        """Reload if the content changed: True reloaded, False kept last good, None unchanged."""
        sig = file_signature(self.path)
        if sig is not None and sig == self._signature:
            return None
        try:
            text = read_text(self.path)
        except LoadError as exc:
            return self._fail(str(exc))
        self.reads += 1
        digest = _digest(text)
        unchanged = digest == self._digest
        # Remembered before parsing: a broken file is reported once, not on every poll.
        self._remember(digest, sig)
        if unchanged:
            return None
        if not text.strip():
            # `>`-redirects and most editors truncate before writing: an empty read is a
            # file being written, not a wish to forget every node. Keep the last good.
            return self._fail(
                f"{self.path}: file is empty (being written?); an empty inventory needs 'kind: List' with no items"
            )
        large = self._large(sig)
        try:
            # A helper reads the file again; if it changed meanwhile, its stat differs from
            # the signature remembered above and the next check reloads.
            now = self.state.clock()
            view = build_file(self.path, now=now, isolate=large, text=text).view
        except (LoadError, CoreError, ValueError, TypeError) as exc:
            return self._fail(f"{self.path}: {exc}")
        self.state.install(view)
        self.last_error = None
        log.info("inventory reloaded", extra={"file": self.path})
        return True

    def _large(self, sig: Signature | None) -> bool:
        return sig is not None and sig[1] > self.isolate_above

    def _fail(self, message: str) -> bool:
        if message != self.last_error:
            self.state.record_failure(message)
        self.last_error = message
        return False

    async def run(self) -> None:
        """Poll forever; the stat (and, on change, the read and build) run in a thread."""
        while True:
            await asyncio.sleep(self.interval)
            await asyncio.to_thread(self.check)
