"""A kube-apiserver stand-in that speaks the list/watch protocol over real TLS.

It implements, for cluster-wide collections (Nodes, NodeResourceTopologies, Volcano
Numatopologies, Pods across namespaces), what a client of the Kubernetes API relies on
(kubernetes.io "API concepts": "Efficient detection of changes", "Retrieving large results
sets in chunks", "Watch bookmarks", "Semantics for get and list"):

- ``GET <collection>``: a ``<Kind>List`` whose ``metadata.resourceVersion`` is the
  version it was read at. Built-in kinds' items carry no ``kind``/``apiVersion`` (typed
  lists); custom resources' items keep them. ``limit``/``continue`` paging from one
  consistent snapshot; a continue token whose version was compacted is ``410 Expired``
  (with a token to go on inconsistently, as the real one). ``resourceVersion``: unset =
  most recent; ``0`` = from the watch cache (any version; the cache ignores ``limit``);
  ``N`` = not older than N, or exactly N with ``resourceVersionMatch=Exact`` (and, the
  legacy rule, with ``limit`` and no match) -> ``410`` when compacted, ``504`` when newer
  than the store. ``fieldSelector`` with ``=``/``==``/``!=`` on dotted fields.
- ``GET <collection>?watch=true``: a chunked stream of newline-delimited JSON events
  ``{"type": ADDED|MODIFIED|DELETED|BOOKMARK|ERROR, "object": ...}`` for changes after
  ``resourceVersion`` (all current objects as ADDED when it is absent or "0"), BOOKMARK
  events when ``allowWatchBookmarks=true`` (only ``kind``, ``apiVersion`` and
  ``metadata.resourceVersion``), the stream closed after ``timeoutSeconds``, and an
  ERROR event carrying a ``410`` ``Expired`` Status when the requested version has been
  compacted away (or on ``expire_watches``). A watcher that falls ``watch_buffer`` events
  behind is closed, as the apiserver's watch cache does with slow watchers.
- ``404 NotFound`` Status for a resource that is not installed (a missing CRD).
- The namespaced forms of a collection (``/api/v1/namespaces/NS/pods``: the same list or
  watch, for that namespace) and ``GET .../namespaces/NS/pods/NAME`` (one object, or 404).

Objects are kept as pre-serialized JSON (tests/webhook/fake_apiserver_store.py), so
10,000-100,000 nodes are listed and watched cheaply. Churn at a given rate comes from
tests/webhook/fake_apiserver_churn.py.

Test controls (thread-safe, called from the test thread): ``apply``, ``load`` (many
objects at once), ``delete``, ``advance``, ``compact`` (and ``compaction_interval`` for
etcd's periodic compaction), ``send_bookmarks``, ``expire_watches``, ``set_installed``,
``set_forbidden``, ``hold_lists``/``release_lists``, ``down``/``up`` (the listener closed
and every connection dropped, then the same port served again), ``set_unavailable``
(every request answered ``503``), ``cut_off`` (either outage for T seconds, in the
background), ``churn``/``churned``, and ``write_kubeconfig`` so the real kubernetes client
connects with CA verification.

The server runs on 127.0.0.1, port 0, in a background thread with its own event loop.
"""

from __future__ import annotations

import asyncio
import base64
import random
import ssl
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import orjson
import yaml
from aiohttp import web

from tests.webhook.fake_apiserver_churn import Churner, Rewrite
from tests.webhook.fake_apiserver_http import (
    CLOSE,
    DROP,
    ApiHandlers,
    RequestRecord,
    Watch,
    status_object,
)
from tests.webhook.fake_apiserver_objects import node, nrt, numatopology, pod
from tests.webhook.fake_apiserver_store import Change, FakeResource, Key, Store
from tests.webhook.fake_apiserver_tls import TLSFiles, make_tls

__all__ = [
    "DEFAULT_RESOURCES",
    "NODES",
    "NRTS",
    "NRTS_V1ALPHA1",
    "NUMATOPOLOGIES",
    "PODS",
    "FakeApiServer",
    "FakeResource",
    "RequestRecord",
    "TLSFiles",
    "make_tls",
    "node",
    "nrt",
    "numatopology",
    "pod",
    "running_apiserver",
    "status_object",
]

T = TypeVar("T")

NODES = FakeResource("nodes", "", "v1", "Node")
NRTS = FakeResource(
    "noderesourcetopologies", "topology.node.k8s.io", "v1alpha2", "NodeResourceTopology"
)
NRTS_V1ALPHA1 = FakeResource(
    "noderesourcetopologies", "topology.node.k8s.io", "v1alpha1", "NodeResourceTopology"
)
NUMATOPOLOGIES = FakeResource("numatopologies", "nodeinfo.volcano.sh", "v1alpha1", "Numatopology")
PODS = FakeResource("pods", "", "v1", "Pod", namespaced=True)
DEFAULT_RESOURCES = (NODES, NRTS, NUMATOPOLOGIES, PODS)


class FakeApiServer(ApiHandlers):
    """See the module docstring. Use as a context manager or call start()/stop()."""

    def __init__(
        self,
        tls: TLSFiles,
        *,
        resources: tuple[FakeResource, ...] = DEFAULT_RESOURCES,
        token: str | None = None,
        default_watch_timeout: float = 30.0,
        bookmark_interval: float | None = None,
        compaction_interval: float | None = None,
        watch_buffer: int = 0,
    ) -> None:
        self.tls = tls
        self.token = token
        self.default_watch_timeout = default_watch_timeout
        self.bookmark_interval = bookmark_interval
        self.compaction_interval = compaction_interval
        self.watch_buffer = watch_buffer
        self.resources = resources
        self.requests: list[RequestRecord] = []
        self.port = 0
        self._store = Store(resources)
        self._by_path = {r.path: r for r in resources}
        self._installed = {r.path for r in resources}
        self._watches: set[Watch] = set()
        self._list_gates: dict[str, asyncio.Event] = {}
        self._forbidden: set[str] = set()
        self._unavailable = False
        self._churners: dict[str, Churner] = {}
        # resource path -> (position, random state) where its last churner stopped
        self._churn_state: dict[str, tuple[int, random.Random | None]] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self._ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._ssl.load_cert_chain(str(tls.cert), str(tls.key))

    # ------------------------------------------------------------------ lifecycle

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def start(self) -> FakeApiServer:
        self._thread.start()
        self._call_async(self._start())
        return self

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        self._call_async(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    def __enter__(self) -> FakeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def down(self) -> None:
        """Close the listener and drop every open connection (watches end mid-stream)."""
        self._call_async(self._down())

    def up(self) -> None:
        """Serve again on the same port."""
        self._call_async(self._listen())

    def set_unavailable(self, unavailable: bool) -> None:
        """Answer every request ``503 ServiceUnavailable`` (open watches dropped), as an
        apiserver behind a load balancer with no healthy backend does."""

        def do() -> None:
            self._unavailable = unavailable
            if unavailable:
                self._drop_watches(lambda w: True)

        self._call(do)

    def cut_off(self, seconds: float, mode: str = "refuse") -> None:
        """An outage of ``seconds`` in the background: ``refuse`` (connections refused,
        as ``down``) or ``503``; returns at once, the server comes back by itself."""
        if mode not in ("refuse", "503"):
            raise ValueError(f"cut_off mode: {mode!r}, expected 'refuse' or '503'")

        async def outage() -> None:
            if mode == "refuse":
                await self._down()
            else:
                self._unavailable = True
                self._drop_watches(lambda w: True)
            await asyncio.sleep(seconds)
            if mode == "refuse":
                await self._listen()
            else:
                self._unavailable = False

        self._call(lambda: self._spawn(outage()))

    # ------------------------------------------------------------------ test controls

    @property
    def resource_version(self) -> str:
        return self._call(lambda: str(self._store.rv))

    def apply(self, obj: Mapping[str, Any]) -> str:
        """Create or replace ``obj`` (ADDED or MODIFIED); returns its new resourceVersion."""
        raw = orjson.dumps(obj)
        return self._call(lambda: self._apply(orjson.loads(raw)))

    def load(self, objects: Iterable[Mapping[str, Any]], *, batch: int = 2000) -> str:
        """Create or replace many objects (as ``apply``, in batches on the server loop)."""
        pending: list[bytes] = []
        for obj in objects:
            pending.append(orjson.dumps(obj))
            if len(pending) >= batch:
                self._call(lambda chunk=pending: [self._apply(orjson.loads(b)) for b in chunk])
                pending = []
        if pending:
            self._call(lambda: [self._apply(orjson.loads(b)) for b in pending])
        return self.resource_version

    def delete(self, resource: FakeResource, name: str, namespace: str = "") -> str:
        return self._call(lambda: self._publish(self._store.remove(resource, (namespace, name))))

    def advance(self, steps: int = 1) -> str:
        """Bump the global resourceVersion as writes to other kinds would."""

        def bump() -> str:
            self._store.rv += steps
            return str(self._store.rv)

        return self._call(bump)

    def compact(self, to_rv: str | None = None) -> None:
        """Forget history up to ``to_rv`` (default now): watches and exact lists from
        older versions get 410 Expired, and so do continue tokens issued before."""
        self._call(lambda: self._store.compact(None if to_rv is None else int(to_rv)))

    def send_bookmarks(self) -> None:
        """A BOOKMARK at the current resourceVersion on every watch that asked for them."""

        def do() -> None:
            for watch in self._watches:
                if watch.bookmarks:
                    watch.queue.put_nowait(("BOOKMARK", self._store.rv))

        self._call(do)

    def expire_watches(self, resource: FakeResource | None = None) -> int:
        """Every open watch (of ``resource``) gets an ERROR event with a 410 Expired Status
        and ends, as when the apiserver's etcd watch hits a compacted revision."""

        def do() -> int:
            hit = [w for w in self._watches if resource is None or w.resource == resource]
            for watch in hit:
                watch.expired = True
                watch.queue.put_nowait(CLOSE)
            return len(hit)

        return self._call(do)

    def set_installed(self, resource: FakeResource, installed: bool) -> None:
        def do() -> None:
            if installed:
                self._installed.add(resource.path)
            else:
                self._installed.discard(resource.path)
                self._drop_watches(lambda w: w.resource == resource)

        self._call(do)

    def set_forbidden(self, resource: FakeResource, forbidden: bool) -> None:
        """Answer ``403 Forbidden`` for ``resource`` (a service account without RBAC)."""

        def do() -> None:
            if forbidden:
                self._forbidden.add(resource.path)
            else:
                self._forbidden.discard(resource.path)

        self._call(do)

    def hold_lists(self, resource: FakeResource) -> None:
        """List requests of ``resource`` wait until ``release_lists``."""
        self._call(lambda: self._list_gates.setdefault(resource.path, asyncio.Event()))

    def release_lists(self, resource: FakeResource) -> None:
        def do() -> None:
            gate = self._list_gates.pop(resource.path, None)
            if gate is not None:
                gate.set()

        self._call(do)

    def objects(self, resource: FakeResource) -> list[dict[str, Any]]:
        return self._call(lambda: [orjson.loads(b) for b in self._store.all_full(resource)])

    def open_watches(self, resource: FakeResource | None = None) -> int:
        return self._call(
            lambda: sum(1 for w in self._watches if resource is None or w.resource == resource)
        )

    def watch_requests(self, resource: FakeResource) -> list[RequestRecord]:
        return [r for r in list(self.requests) if r.path == resource.path and r.watch]

    def list_requests(self, resource: FakeResource) -> list[RequestRecord]:
        return [r for r in list(self.requests) if r.path == resource.path and not r.watch]

    def churn(
        self,
        resource: FakeResource,
        rate: float,
        rewrite: Rewrite,
        *,
        exclude: Sequence[str] = (),
        seed: int = 1,
    ) -> None:
        """Rewrite the objects of ``resource`` (but ``exclude``d names) round robin with
        ``rewrite`` at ``rate`` events per second, until called again (rate 0 stops).
        The round goes in an order shuffled by ``seed``, not by name: in a cluster each
        node's topology-updater keeps its own timer, so consecutive events come from
        unrelated nodes. A later call carries on where the last one stopped (the round's
        position, the random values): every event writes new content."""

        def do() -> None:
            old = self._churners.pop(resource.path, None)
            if old is not None:
                old.stop()
                self._churn_state[resource.path] = (old.position, old.rng)
            if rate <= 0:
                return
            skip = set(exclude)
            keys = [k for k in sorted(self._store.objects[resource.path]) if k[1] not in skip]
            random.Random(seed).shuffle(keys)
            position, rng = self._churn_state.get(resource.path, (0, None))
            churner = Churner(keys, rate, rewrite, self._rewrite_one(resource), seed=seed,
                              position=position, rng=rng)  # fmt: skip
            churner.start()
            self._churners[resource.path] = churner

        self._call(do)

    def churned(self, resource: FakeResource) -> int:
        """Events written so far by the current churner of ``resource``."""
        return self._call(
            lambda: c.emitted if (c := self._churners.get(resource.path)) is not None else 0
        )

    def write_kubeconfig(self, path: Path) -> Path:
        user: dict[str, Any] = {"token": self.token} if self.token else {}
        ca = base64.b64encode(self.tls.ca.read_bytes()).decode()
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "fake", "cluster": {"server": self.url, "certificate-authority-data": ca}}
            ],
            "users": [{"name": "fake", "user": user}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
            "current-context": "fake",
        }
        path.write_text(yaml.safe_dump(config))
        return path

    # ------------------------------------------------------------------ loop plumbing

    def _call(self, fn: Callable[[], T], timeout: float = 60) -> T:
        async def run() -> T:
            return fn()

        return self._call_async(run(), timeout)

    def _call_async(self, coro: Any, timeout: float = 60) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=timeout)

    def _spawn(self, coro: Any) -> None:
        task = self._loop.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        await self._listen()
        if self.compaction_interval:
            self._spawn(self._compactor(self.compaction_interval))

    async def _listen(self) -> None:
        assert self._runner is not None
        self._site = web.TCPSite(self._runner, "127.0.0.1", self.port, ssl_context=self._ssl)
        await self._site.start()
        sockets = self._site._server.sockets if self._site._server else ()  # type: ignore[union-attr]
        self.port = sockets[0].getsockname()[1]

    async def _down(self) -> None:
        if self._site is not None:
            await self._site.stop()
            self._site = None
        self._drop_watches(lambda w: True)
        assert self._runner is not None and self._runner.server is not None
        for handler in self._runner.server.connections:
            if handler.transport is not None:
                handler.transport.abort()

    async def _shutdown(self) -> None:
        for churner in self._churners.values():
            churner.stop()
        for task in list(self._background):
            task.cancel()
        await self._down()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _compactor(self, interval: float) -> None:
        """etcd's periodic compaction as the apiserver drives it: every ``interval``,
        compact to the version of the previous tick (history spans one to two intervals)."""
        previous = self._store.rv
        while True:
            await asyncio.sleep(interval)
            self._store.compact(previous)
            previous = self._store.rv

    # ------------------------------------------------------------------ state changes

    def _apply(self, obj: dict[str, Any]) -> str:
        change = self._store.put(obj, str(uuid.uuid4()))
        return self._publish(change)

    def _rewrite_one(self, resource: FakeResource) -> Callable[[Key, Rewrite, random.Random], None]:
        def apply_one(key: Key, rewrite: Rewrite, rng: random.Random) -> None:
            entry = self._store.objects[resource.path].get(key)
            if entry is None:
                return
            obj = orjson.loads(entry.full)
            rewrite(obj, rng)
            self._apply(obj)

        return apply_one

    def _publish(self, change: Change) -> str:
        for watch in list(self._watches):
            if watch.resource == change.resource:
                if self.watch_buffer and watch.queue.qsize() >= self.watch_buffer:
                    self._watches.discard(watch)  # too slow: closed, as the watch cache does
                    watch.queue.put_nowait(CLOSE)
                else:
                    watch.queue.put_nowait(change)
        return str(change.rv)

    def _drop_watches(self, which: Callable[[Watch], bool]) -> None:
        for watch in list(self._watches):
            if which(watch):
                watch.queue.put_nowait(DROP)


@contextmanager
def running_apiserver(directory: Path, **kwargs: Any) -> Iterator[FakeApiServer]:
    """A started FakeApiServer with fresh TLS material in ``directory``; stopped on exit."""
    server = FakeApiServer(make_tls(directory / "fake-apiserver-tls"), **kwargs)
    server.start()
    try:
        yield server
    finally:
        server.stop()
