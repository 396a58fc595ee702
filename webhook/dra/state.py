"""The DRA inventory the request path reads, and its sources.

Like the NRT inventory (webhook/inventory/state.py), the request path reads one attribute,
``DraState.view``, holding an immutable :class:`DraView`; a source builds a new one off the
request path and swaps it in with one assignment. A source that fails keeps the last good
view. The sources:

- the inventory file (``--inventory``): the DRA objects of the same file, read with the
  same loader (webhook/inventory/loader.py), re-read when its (mtime, size, inode) or
  content changes (:class:`DraFileSource`);
- the cluster: one reflector per resource.k8s.io/v1 type (webhook/inventory/reflector.py
  through ``LiveSource``), every event applied to the objects it touches
  (webhook/dra/live.py; docs/dra.md);
- none (demo inventory): an empty DRA inventory, every claim unchecked.

Staleness follows the NRT inventory's rule: a live DRA inventory not synchronized for
``inventory.staleAfterSeconds`` never denies (webhook/dra/admission.py)."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import os
import pickle
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from core.dra.inventory import DraInventory, read_inventory
from webhook.inventory.file_build import ISOLATE_ABOVE_BYTES, FileBuildProcess
from webhook.inventory.loader import LoadError, parse_objects, read_text
from webhook.inventory.objects import WatchedResource
from webhook.logs import get_logger

log = get_logger("dra")

GROUP: Final = "resource.k8s.io"
RESOURCE_SLICES = WatchedResource(
    "resourceslices", "ResourceSlice", GROUP, ("v1",), "resourceslices"
)
DEVICE_CLASSES = WatchedResource("deviceclasses", "DeviceClass", GROUP, ("v1",), "deviceclasses")
RESOURCE_CLAIMS = WatchedResource(
    "resourceclaims", "ResourceClaim", GROUP, ("v1",), "resourceclaims"
)
RESOURCE_CLAIM_TEMPLATES = WatchedResource(
    "resourceclaimtemplates", "ResourceClaimTemplate", GROUP, ("v1",), "resourceclaimtemplates"
)
# Every type optional: a cluster without DRA (or without our grant) reports it once and
# leaves the DRA inventory empty, which makes claims unchecked, never denied.
DRA_RESOURCES: Final = (RESOURCE_SLICES, DEVICE_CLASSES, RESOURCE_CLAIMS, RESOURCE_CLAIM_TEMPLATES)
DRA_KINDS: Final = frozenset(r.kind for r in DRA_RESOURCES)


@dataclass(frozen=True, slots=True)
class DraView:
    """One immutable DRA inventory, where it came from and when it was built."""

    inventory: DraInventory
    source: str
    built_at: float  # time.monotonic() when it was built
    objects: int  # DRA objects read (unreadable ones included)


def build_dra_view(objects: Iterable[Mapping[str, Any]], *, source: str, now: float) -> DraView:
    """The DRA objects among ``objects`` (other kinds ignored) as a view; an unreadable
    object is left out and its error kept (``inventory.errors``)."""
    dra = [o for o in objects if isinstance(o, Mapping) and o.get("kind") in DRA_KINDS]
    return DraView(read_inventory(dra), source, now, len(dra))


@dataclass(frozen=True, slots=True)
class DraRead:
    """What one review reads: the view (None before the first build) and its staleness."""

    view: DraView | None
    stale: bool


class DraState:
    """Holds the current DRA view and knows how fresh it is (only a live source is ever
    stale: a file is the truth by definition)."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.view: DraView | None = None
        self.clock = clock
        self.live = False
        self.last_sync: Callable[[], float | None] = lambda: (
            self.view.built_at if self.view else None
        )

    def install(self, view: DraView) -> None:
        before = frozenset(self.view.inventory.errors) if self.view else frozenset()
        self.view = view  # one assignment: a review reads the old or the new view
        for error in [e for e in view.inventory.errors if e not in before][:20]:
            log.warning("DRA object skipped", extra={"error": error, "source": view.source})

    def load_objects(self, objects: Iterable[Mapping[str, Any]], *, source: str) -> DraView:
        view = build_dra_view(objects, source=source, now=self.clock())
        self.install(view)
        return view

    def is_stale(self, threshold: float) -> bool:
        if not self.live:
            return False
        last = self.last_sync()
        return last is None or self.clock() - last > threshold

    def read(self, threshold: float) -> DraRead:
        return DraRead(self.view, self.is_stale(threshold))


def _signature(path: str) -> tuple[int, int, int] | None:
    """(mtime, size, inode), following symlinks (a ConfigMap volume's ``..data`` swap)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class DraFileSource:
    """The DRA objects of the inventory file, re-read when the file changes (the stat
    first; the content only when (mtime, size, inode) changed); garbage keeps the last good."""

    def __init__(self, path: str, state: DraState, *, interval: float = 5.0) -> None:
        self.path = path
        self.state = state
        self.interval = interval
        self._signature: tuple[int, int, int] | None = None
        self._digest: str | None = None
        self.last_error: str | None = None

    def load(self) -> DraView:
        """First load: errors propagate (the NRT source reports a bad file at startup)."""
        self._signature = _signature(self.path)
        text = read_text(self.path)
        self._digest = hashlib.sha256(text.encode()).hexdigest()
        view = self._build(text, self._signature)
        self.state.install(view)
        return view

    def _build(self, text: str, sig: tuple[int, int, int] | None) -> DraView:
        """Parsed here, or for a large file in a short-lived helper process as the NRT
        source does (webhook/inventory/file_build.py: the parse's garbage would stay in
        this process's heap); the helper sends back only the DRA view."""
        now = self.state.clock()
        if sig is not None and sig[1] > ISOLATE_ABOVE_BYTES:
            built: DraView = pickle.loads(FileBuildProcess(self.path, pickled_dra_build).result())
            return dataclasses.replace(built, built_at=now)
        objects = [o.obj for o in parse_objects(text, self.path)]
        return build_dra_view(objects, source=f"file:{self.path}", now=now)

    def check(self) -> bool | None:
        """True reloaded, False kept the last good, None unchanged."""
        sig = _signature(self.path)
        # A file changed within the clock's tick may change again unseen ("racy git"):
        # its content is hashed again on the next check, as the NRT source does.
        if sig is not None and sig == self._signature and time.time() - sig[0] / 1e9 >= 2.0:
            return None
        try:
            text = read_text(self.path)
        except LoadError as exc:
            return self._fail(str(exc))
        self._signature = sig
        digest = hashlib.sha256(text.encode()).hexdigest()
        if digest == self._digest:
            return None
        self._digest = digest
        if not text.strip():
            return self._fail(f"{self.path}: file is empty (being written?)")
        try:
            view = self._build(text, sig)
        except LoadError as exc:
            return self._fail(str(exc))
        self.state.install(view)
        self.last_error = None
        return True

    def _fail(self, message: str) -> bool:
        if message != self.last_error:
            log.error("DRA inventory not reloaded; keeping the last good", extra={"error": message})
        self.last_error = message
        return False

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            await asyncio.to_thread(self.check)


def pickled_dra_build(path: str) -> bytes:
    """What the helper process runs (webhook/inventory/file_build.py): the file's DRA
    view, pickled."""
    objects = [o.obj for o in parse_objects(read_text(path), path)]
    view = build_dra_view(objects, source=f"file:{path}", now=0.0)
    return pickle.dumps(view, protocol=pickle.HIGHEST_PROTOCOL)


def start_live(api_client: Any, state: DraState, **timings: Any) -> Any:
    """Watch the four DRA types (a LiveSource of their own, every change applied by
    webhook/dra/live.py's DraUpdates). Returns an object whose ``stop()`` ends both."""
    from webhook.dra.live import DraUpdates
    from webhook.inventory.live import LiveSource

    def install(inventory: DraInventory, objects: int) -> None:
        state.install(DraView(inventory, "live", state.clock(), objects))

    updates = DraUpdates(install)
    live = LiveSource(api_client, updates, resources=DRA_RESOURCES, **timings)
    updates.synced = lambda: live.synced
    state.live = True
    state.last_sync = lambda: live.last_sync if state.view is not None else None
    updates.start()
    live.start()
    return _Running(live, updates)


class _Running:
    """The live DRA source: the watch and the flush thread, stopped together."""

    def __init__(self, live: Any, updates: Any) -> None:
        self.live, self.updates = live, updates

    def stop(self) -> None:
        self.live.stop()
        self.updates.stop()


def start_sources(
    state: DraState,
    *,
    inventory: str | None,
    kubeconfig: str | None,
    context: str | None,
    in_cluster: bool,
    interval: float,
) -> tuple[Callable[[], None], list[asyncio.Task[Any]]]:
    """The DRA source matching the NRT inventory's (``numagate serve``): the inventory
    file, the cluster, or nothing (demo: an empty DRA inventory). Returns the stop function
    and the polling task, if any. A bad file fails here as it fails the NRT source."""
    if inventory:
        source = DraFileSource(inventory, state, interval=interval)
        source.load()
        return (lambda: None), [asyncio.get_running_loop().create_task(source.run())]
    if kubeconfig or in_cluster:
        from webhook.inventory.kube import build_api_client

        client = build_api_client(
            kubeconfig=kubeconfig, context=context, in_cluster=in_cluster, use_default=False
        )
        return start_live(client, state).stop, []
    state.load_objects((), source="demo")
    return (lambda: None), []


def start_for(
    state: DraState | None, opts: Any, interval: float
) -> tuple[Callable[[], None], list[asyncio.Task[Any]]]:
    """:func:`start_sources` for ``numagate serve``'s options (none when ``state`` is None)."""
    if state is None:
        return (lambda: None), []
    return start_sources(
        state,
        inventory=opts.inventory,
        kubeconfig=opts.kubeconfig,
        context=opts.context,
        in_cluster=opts.in_cluster,
        interval=interval,
    )


def chain(*stops: Callable[[], None]) -> Callable[[], None]:
    def stop() -> None:
        for s in stops:
            s()

    return stop
