"""A small kube-apiserver stand-in that speaks the list/watch protocol over real TLS.

It implements, for cluster-wide collections (Nodes, NodeResourceTopologies, Volcano
Numatopologies, Pods across namespaces), what a client of the Kubernetes API relies on
(kubernetes.io "API concepts", "Efficient detection of changes"):

- ``GET <collection>``: a ``<Kind>List`` whose ``metadata.resourceVersion`` is the
  snapshot's version; items carry no ``kind``/``apiVersion`` (as typed lists from the real
  apiserver); ``limit``/``continue`` paging from one consistent snapshot; ``fieldSelector``
  with ``=``/``==``/``!=`` on dotted fields.
- ``GET <collection>?watch=true``: a chunked stream of newline-delimited JSON events
  ``{"type": ADDED|MODIFIED|DELETED|BOOKMARK|ERROR, "object": ...}`` for changes after
  ``resourceVersion`` (all current objects as ADDED when it is absent or "0"), BOOKMARK
  events when ``allowWatchBookmarks=true`` (only ``kind``, ``apiVersion`` and
  ``metadata.resourceVersion``, like the real ones), the stream closed after
  ``timeoutSeconds``, and an ERROR event carrying a ``410`` ``Expired`` Status when the
  requested version has been compacted away.
- ``404 NotFound`` Status for a resource that is not installed (a missing CRD).

Test controls (thread-safe, called from the test thread): ``apply``, ``delete``,
``advance``, ``compact``, ``send_bookmarks``, ``set_installed``, ``set_forbidden``,
``hold_lists``/
``release_lists``, ``down``/``up`` (the
listener closed and every connection dropped, then the same port served again), and
``write_kubeconfig`` so the real kubernetes client connects with CA verification.

The server runs on 127.0.0.1, port 0, in a background thread with its own event loop.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import datetime
import ipaddress
import json
import ssl
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

T = TypeVar("T")

DISCONNECT_POLL = 0.1  # seconds between checks that a watching client is still there


@dataclass(frozen=True)
class FakeResource:
    plural: str
    group: str
    version: str
    kind: str
    namespaced: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def path(self) -> str:
        """The cluster-wide collection URL (all namespaces for namespaced kinds)."""
        if self.group:
            return f"/apis/{self.group}/{self.version}/{self.plural}"
        return f"/api/{self.version}/{self.plural}"


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

Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects


@dataclass(frozen=True)
class Change:
    rv: int
    resource: FakeResource
    type: str  # ADDED | MODIFIED | DELETED
    obj: dict[str, Any]
    prev: dict[str, Any] | None


@dataclass
class RequestRecord:
    path: str
    query: dict[str, str]

    @property
    def watch(self) -> bool:
        return self.query.get("watch") in ("true", "1")


@dataclass(eq=False)
class _Watch:
    resource: FakeResource
    selector: list[tuple[str, str, str]]
    bookmarks: bool
    queue: asyncio.Queue[Change | str | None] = field(default_factory=asyncio.Queue)


@dataclass(frozen=True)
class TLSFiles:
    ca: Path
    cert: Path
    key: Path


def make_tls(directory: Path, hosts: tuple[str, ...] = ("127.0.0.1", "localhost")) -> TLSFiles:
    """A throwaway CA and a serving certificate for ``hosts`` (IP and DNS SANs)."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fake-apiserver-ca")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = []
    for host in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fake-apiserver")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    files = TLSFiles(directory / "ca.crt", directory / "tls.crt", directory / "tls.key")
    files.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return files


def status_object(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": {},
        "code": code,
    }


def parse_field_selector(text: str) -> list[tuple[str, str, str]]:
    """``spec.nodeName!=,status.phase!=Failed`` -> [(field, op, value), ...]."""
    terms: list[tuple[str, str, str]] = []
    for part in filter(None, text.split(",")):
        for op in ("!=", "==", "="):
            if op in part:
                name, value = part.split(op, 1)
                terms.append((name.strip(), "!=" if op == "!=" else "=", value.strip()))
                break
        else:
            raise ValueError(f"invalid field selector term {part!r}")
    return terms


def field_value(obj: Mapping[str, Any], dotted: str) -> str:
    node: Any = obj
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return "" if node is None else str(node)


def matches(obj: Mapping[str, Any] | None, selector: list[tuple[str, str, str]]) -> bool:
    if obj is None:
        return False
    for name, op, value in selector:
        equal = field_value(obj, name) == value
        if equal != (op == "="):
            return False
    return True


def object_key(obj: Mapping[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta["name"]))


class FakeApiServer:
    """See the module docstring. Use as a context manager or call start()/stop()."""

    def __init__(
        self,
        tls: TLSFiles,
        *,
        resources: tuple[FakeResource, ...] = DEFAULT_RESOURCES,
        token: str | None = None,
        default_watch_timeout: float = 30.0,
        bookmark_interval: float | None = None,
    ) -> None:
        self.tls = tls
        self.token = token
        self.default_watch_timeout = default_watch_timeout
        self.bookmark_interval = bookmark_interval
        self.resources = resources
        self.requests: list[RequestRecord] = []
        self.port = 0
        self._by_path = {r.path: r for r in resources}
        self._installed = {r.path for r in resources}
        self._objects: dict[str, dict[Key, dict[str, Any]]] = {r.path: {} for r in resources}
        self._history: list[Change] = []
        self._rv = 100
        self._compacted = 0
        self._watches: set[_Watch] = set()
        self._pages: dict[str, tuple[int, list[dict[str, Any]]]] = {}
        self._list_gates: dict[str, asyncio.Event] = {}
        self._forbidden: set[str] = set()
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

    # ------------------------------------------------------------------ test controls

    @property
    def resource_version(self) -> str:
        return self._call(lambda: str(self._rv))

    def apply(self, obj: Mapping[str, Any]) -> str:
        """Create or replace ``obj`` (ADDED or MODIFIED); returns its new resourceVersion."""
        return self._call(lambda: self._apply(copy.deepcopy(dict(obj))))

    def delete(self, resource: FakeResource, name: str, namespace: str = "") -> str:
        return self._call(lambda: self._delete(resource, (namespace, name)))

    def advance(self, steps: int = 1) -> str:
        """Bump the global resourceVersion as writes to other kinds would."""

        def bump() -> str:
            self._rv += steps
            return str(self._rv)

        return self._call(bump)

    def compact(self) -> None:
        """Forget history up to now: watches from any older version get 410 Expired."""

        def do() -> None:
            self._compacted = self._rv
            self._history.clear()
            self._pages.clear()

        self._call(do)

    def send_bookmarks(self) -> None:
        """A BOOKMARK at the current resourceVersion on every watch that asked for them."""

        def do() -> None:
            for watch in self._watches:
                if watch.bookmarks:
                    watch.queue.put_nowait("BOOKMARK")

        self._call(do)

    def set_installed(self, resource: FakeResource, installed: bool) -> None:
        def do() -> None:
            if installed:
                self._installed.add(resource.path)
            else:
                self._installed.discard(resource.path)
                for watch in list(self._watches):
                    if watch.resource == resource:
                        watch.queue.put_nowait(None)

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
        return self._call(lambda: copy.deepcopy(list(self._objects[resource.path].values())))

    def open_watches(self, resource: FakeResource | None = None) -> int:
        return self._call(
            lambda: sum(1 for w in self._watches if resource is None or w.resource == resource)
        )

    def watch_requests(self, resource: FakeResource) -> list[RequestRecord]:
        return [r for r in list(self.requests) if r.path == resource.path and r.watch]

    def list_requests(self, resource: FakeResource) -> list[RequestRecord]:
        return [r for r in list(self.requests) if r.path == resource.path and not r.watch]

    def write_kubeconfig(self, path: Path) -> Path:
        user: dict[str, Any] = {"token": self.token} if self.token else {}
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "fake",
                    "cluster": {
                        "server": self.url,
                        "certificate-authority-data": base64.b64encode(
                            self.tls.ca.read_bytes()
                        ).decode(),
                    },
                }
            ],
            "users": [{"name": "fake", "user": user}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
            "current-context": "fake",
        }
        path.write_text(yaml.safe_dump(config))
        return path

    # ------------------------------------------------------------------ loop plumbing

    def _call(self, fn: Callable[[], T]) -> T:
        async def run() -> T:
            return fn()

        return self._call_async(run())

    def _call_async(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=10)

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        await self._listen()

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
        for watch in list(self._watches):
            watch.queue.put_nowait(None)
        assert self._runner is not None and self._runner.server is not None
        for handler in self._runner.server.connections:
            if handler.transport is not None:
                handler.transport.abort()

    async def _shutdown(self) -> None:
        await self._down()
        if self._runner is not None:
            await self._runner.cleanup()

    # ------------------------------------------------------------------ state changes

    def _next_rv(self) -> int:
        self._rv += 1
        return self._rv

    def _resource_for(self, obj: Mapping[str, Any]) -> FakeResource:
        for resource in self.resources:
            if resource.kind == obj.get("kind") and resource.api_version == obj.get("apiVersion"):
                return resource
        raise ValueError(f"no fake resource for {obj.get('apiVersion')}/{obj.get('kind')}")

    def _apply(self, obj: dict[str, Any]) -> str:
        resource = self._resource_for(obj)
        key = object_key(obj)
        store = self._objects[resource.path]
        prev = store.get(key)
        rv = self._next_rv()
        meta = obj.setdefault("metadata", {})
        meta["resourceVersion"] = str(rv)
        meta.setdefault("uid", (prev or {}).get("metadata", {}).get("uid") or str(uuid.uuid4()))
        store[key] = obj
        self._publish(Change(rv, resource, "MODIFIED" if prev else "ADDED", obj, prev))
        return str(rv)

    def _delete(self, resource: FakeResource, key: Key) -> str:
        prev = self._objects[resource.path].pop(key)
        rv = self._next_rv()
        gone = copy.deepcopy(prev)
        gone["metadata"]["resourceVersion"] = str(rv)
        self._publish(Change(rv, resource, "DELETED", gone, prev))
        return str(rv)

    def _publish(self, change: Change) -> None:
        self._history.append(change)
        for watch in self._watches:
            if watch.resource == change.resource:
                watch.queue.put_nowait(change)

    # ------------------------------------------------------------------ HTTP

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(RequestRecord(request.path, dict(request.query)))
        if (
            self.token is not None
            and request.headers.get("Authorization") != f"Bearer {self.token}"
        ):
            return web.json_response(status_object(401, "Unauthorized", "Unauthorized"), status=401)
        resource = self._by_path.get(request.path)
        if resource is None or resource.path not in self._installed:
            return web.json_response(
                status_object(404, "NotFound", "the server could not find the requested resource"),
                status=404,
            )
        if resource.path in self._forbidden:
            message = f'{resource.plural}.{resource.group} is forbidden: cannot list resource "{resource.plural}"'
            return web.json_response(status_object(403, "Forbidden", message), status=403)
        try:
            selector = parse_field_selector(request.query.get("fieldSelector", ""))
        except ValueError as exc:
            return web.json_response(status_object(400, "BadRequest", str(exc)), status=400)
        if request.query.get("watch") in ("true", "1"):
            return await self._watch(request, resource, selector)
        gate = self._list_gates.get(resource.path)
        if gate is not None:
            await gate.wait()
        return self._list(request, resource, selector)

    def _list(
        self, request: web.Request, resource: FakeResource, selector: list[tuple[str, str, str]]
    ) -> web.Response:
        token = request.query.get("continue")
        if token:
            if token not in self._pages:
                return web.json_response(
                    status_object(410, "Expired", "The provided continue parameter is too old"),
                    status=410,
                )
            rv, remaining = self._pages.pop(token)
        else:
            rv = self._rv
            remaining = [
                self._list_item(obj)
                for _, obj in sorted(self._objects[resource.path].items())
                if matches(obj, selector)
            ]
        limit = int(request.query.get("limit", "0") or 0)
        page, rest = (remaining[:limit], remaining[limit:]) if limit > 0 else (remaining, [])
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if rest:
            next_token = uuid.uuid4().hex
            self._pages[next_token] = (rv, rest)
            meta["continue"] = next_token
            meta["remainingItemCount"] = len(rest)
        body = {
            "kind": f"{resource.kind}List",
            "apiVersion": resource.api_version,
            "metadata": meta,
            "items": page,
        }
        return web.json_response(body)

    @staticmethod
    def _list_item(obj: Mapping[str, Any]) -> dict[str, Any]:
        # Typed lists from the real apiserver leave kind/apiVersion off each item.
        item = copy.deepcopy(dict(obj))
        item.pop("kind", None)
        item.pop("apiVersion", None)
        return item

    async def _watch(
        self, request: web.Request, resource: FakeResource, selector: list[tuple[str, str, str]]
    ) -> web.StreamResponse:
        since = request.query.get("resourceVersion", "")
        bookmarks = request.query.get("allowWatchBookmarks") in ("true", "1")
        timeout = float(request.query.get("timeoutSeconds") or self.default_watch_timeout)
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        watch = _Watch(resource, selector, bookmarks)
        # Backlog and registration happen with no await in between, so no change is
        # lost or sent twice between the replay and the live queue.
        backlog = self._backlog(resource, selector, since)
        if backlog is None:
            message = f"too old resource version: {since} ({self._compacted})"
            await self._send(response, "ERROR", status_object(410, "Expired", message))
            return response
        self._watches.add(watch)
        try:
            for event_type, obj in backlog:
                await self._send(response, event_type, obj)
            await self._stream(request, response, watch, timeout)
        except (ConnectionResetError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._watches.discard(watch)
        return response

    def _backlog(
        self, resource: FakeResource, selector: list[tuple[str, str, str]], since: str
    ) -> list[tuple[str, dict[str, Any]]] | None:
        if since in ("", "0"):
            return [
                ("ADDED", obj)
                for _, obj in sorted(self._objects[resource.path].items())
                if matches(obj, selector)
            ]
        start = int(since)
        if start < self._compacted:
            return None
        events = []
        for change in self._history:
            if change.rv > start and change.resource == resource:
                translated = self._translate(change, selector)
                if translated is not None:
                    events.append(translated)
        return events

    @staticmethod
    def _translate(
        change: Change, selector: list[tuple[str, str, str]]
    ) -> tuple[str, dict[str, Any]] | None:
        """A change as seen through a field selector: objects entering the selection are
        ADDED, objects leaving it DELETED (as the apiserver's watch filter does)."""
        if not selector:
            return change.type, change.obj
        now = change.type != "DELETED" and matches(change.obj, selector)
        before = change.type != "ADDED" and matches(change.prev, selector)
        if now and before:
            return "MODIFIED", change.obj
        if now:
            return "ADDED", change.obj
        if before:
            return "DELETED", change.obj
        return None

    async def _stream(
        self, request: web.Request, response: web.StreamResponse, watch: _Watch, timeout: float
    ) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        next_bookmark = (
            loop.time() + self.bookmark_interval
            if watch.bookmarks and self.bookmark_interval
            else None
        )
        while True:
            now = loop.time()
            if now >= deadline:
                return
            if request.transport is None or request.transport.is_closing():
                return  # the client went away (aiohttp does not cancel the handler)
            wake = min(deadline, next_bookmark) if next_bookmark is not None else deadline
            wake = min(wake, now + DISCONNECT_POLL)
            try:
                item = await asyncio.wait_for(watch.queue.get(), timeout=max(0.0, wake - now))
            except TimeoutError:
                if next_bookmark is not None and loop.time() >= next_bookmark:
                    item = "BOOKMARK"
                    next_bookmark = loop.time() + (self.bookmark_interval or 0)
                else:
                    continue
            if item is None:
                raise ConnectionResetError("watch closed by the test")
            if item == "BOOKMARK":
                await self._send(response, "BOOKMARK", self._bookmark_object(watch.resource))
                continue
            assert isinstance(item, Change)
            translated = self._translate(item, watch.selector)
            if translated is not None:
                await self._send(response, *translated)

    def _bookmark_object(self, resource: FakeResource) -> dict[str, Any]:
        return {
            "kind": resource.kind,
            "apiVersion": resource.api_version,
            "metadata": {"resourceVersion": str(self._rv)},
        }

    @staticmethod
    async def _send(response: web.StreamResponse, event_type: str, obj: Mapping[str, Any]) -> None:
        line = json.dumps({"type": event_type, "object": obj}, separators=(",", ":")) + "\n"
        await response.write(line.encode())


@contextmanager
def running_apiserver(directory: Path, **kwargs: Any) -> Iterator[FakeApiServer]:
    """A started FakeApiServer with fresh TLS material in ``directory``; stopped on exit."""
    server = FakeApiServer(make_tls(directory / "fake-apiserver-tls"), **kwargs)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def node(name: str, *, labels: Mapping[str, str] | None = None, cpu: str = "64") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "status": {
            "capacity": {"cpu": cpu, "memory": "256Gi", "pods": "110"},
            "allocatable": {"cpu": cpu, "memory": "250Gi", "pods": "110"},
        },
    }


def nrt(
    name: str, *, policy: str = "SingleNUMANodeContainerLevel", zones: int = 2
) -> dict[str, Any]:
    return {
        "apiVersion": "topology.node.k8s.io/v1alpha2",
        "kind": "NodeResourceTopology",
        "metadata": {"name": name},
        "attributes": [{"name": "topologyManagerPolicy", "value": "single-numa-node"}],
        "topologyPolicies": [policy],
        "zones": [
            {
                "name": f"node-{i}",
                "type": "Node",
                "resources": [
                    {"name": "cpu", "capacity": "32", "allocatable": "32", "available": "30"}
                ],
            }
            for i in range(zones)
        ],
    }


def numatopology(name: str, *, policy: str = "single-numa-node") -> dict[str, Any]:
    return {
        "apiVersion": "nodeinfo.volcano.sh/v1alpha1",
        "kind": "Numatopology",
        "metadata": {"name": name},
        "spec": {
            "policies": {"TopologyManagerPolicy": policy, "CPUManagerPolicy": "static"},
            "numares": {"cpu": {"allocatable": "0-31", "capacity": 32}},
        },
    }


def pod(
    name: str, namespace: str = "default", *, node_name: str = "", phase: str = "Running"
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
        "status": {"phase": phase},
    }
