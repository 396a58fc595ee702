"""The one place tests start the real server, of each kind: in a thread of this process
(``ThreadedServer``/``threaded_server``, and ``running_server`` for async tests) and as a
``numagate serve`` process (``start_process``; ``start_serve`` with generated certificates),
plus the few client calls the process tests make over TLS."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from certs.authority import CertPaths, ensure_serving_certs
from tests.paths import ROOT
from webhook.server import ServeOptions, serve_worker

SERVICE = "numagate"
NAMESPACE = "numagate-system"
SERVER_NAME = f"{SERVICE}.{NAMESPACE}.svc"  # what the apiserver verifies (TLS ServerName)
LISTEN = re.compile(r"listening on https://127\.0\.0\.1:(\d+)")
SERVING = re.compile(r"serving https://127\.0\.0\.1:(\d+)")


def wait_for(
    predicate: Callable[[], bool], timeout: float, what: str = "the condition", step: float = 0.05
) -> None:
    """Poll ``predicate`` every ``step`` seconds until it holds or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def write_config(path: Path, **overrides: Any) -> Path:
    """A config file with fast shutdown (tests must not wait 2 s for readiness to drain)."""
    doc: dict[str, Any] = {"shutdown": {"delaySeconds": 0.0, "gracePeriodSeconds": 5.0}}
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(doc.get(key), dict):
            doc[key] = {**doc[key], **value}
        else:
            doc[key] = value
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- in a thread


class ThreadedServer:
    """``serve_worker`` (the real server) on port 0 in a thread with its own event loop."""

    def __init__(self, opts: ServeOptions) -> None:
        self.opts = opts
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, daemon=True, name="numagate-test")

    def _main(self) -> None:
        async def run() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()

            def ready(port: int) -> None:
                self.port = port
                self._ready.set()

            await serve_worker(self.opts, stop=self._stop, on_ready=ready)

        try:
            asyncio.run(run())
        except BaseException as exc:  # surfaced by start()/stop()
            self._error = exc
        finally:
            self._ready.set()

    def start(self, timeout: float = 20.0) -> ThreadedServer:
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError("server did not start")
        if self._error is not None:
            raise self._error
        return self

    def request_stop(self) -> None:
        loop = self._loop
        if loop is None or self._stop is None:
            return
        # A server stopped already (a test's own request_stop, then the with block's
        # stop) has closed its loop: nothing left to tell.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._stop.set)

    def stop(self, timeout: float = 20.0) -> None:
        self.request_stop()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "server did not stop"

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()


@contextmanager
def threaded_server(opts: ServeOptions) -> Iterator[ThreadedServer]:
    server = ThreadedServer(opts).start()
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def serving(directory: Path) -> Iterator[tuple[ThreadedServer, CertPaths]]:
    """The real server in a thread, over fresh TLS material in ``directory`` and the tests'
    configuration (write_config: no shutdown delay)."""
    paths = ensure_serving_certs(directory / "certs")
    opts = ServeOptions(
        host="127.0.0.1",
        port=0,
        cert=str(paths.cert),
        key=str(paths.key),
        config=str(write_config(directory / "config.json")),
    )
    with threaded_server(opts) as server:
        yield server, paths


@contextlib.asynccontextmanager
async def running_server(opts: ServeOptions) -> AsyncIterator[int]:
    """For async tests: a ``ThreadedServer`` started and stopped off the test's loop;
    yields its port."""
    server = await asyncio.to_thread(ThreadedServer(opts).start)
    try:
        yield server.port
    finally:
        await asyncio.to_thread(server.stop)


# ----------------------------------------------------------------------------- process


@dataclass
class ServeProcess:
    """A running ``numagate serve``: its stdout lines (read until ready, then drained) and
    its stderr (the JSON log), both collected."""

    proc: subprocess.Popen[str]
    port: int
    ca: Path | None
    log: list[str]
    lines: list[str] = field(default_factory=list)

    def stop(self) -> None:
        """Terminate (killed after 10 s)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def sigterm(self) -> int:
        """SIGTERM and the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)


def start_process(
    args: list[str],
    *,
    cwd: Path = ROOT,
    ca: Path | None = None,
    workers: int = 1,
    timeout: float = 30.0,
) -> ServeProcess:
    """``numagate serve --port 0 ARGS`` on 127.0.0.1, ready once every worker printed its
    ``serving`` line; the port is the one the parent announces (or the worker's)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "webhook", "serve", "--host", "127.0.0.1", "--port", "0",
         "--workers", str(workers), *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    log: list[str] = []
    threading.Thread(target=lambda: log.extend(proc.stderr), daemon=True).start()  # type: ignore[arg-type]
    lines: list[str] = []
    port = serving = 0
    deadline = time.monotonic() + timeout
    while serving < workers and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip())
        if m := LISTEN.search(line) or (None if port else SERVING.search(line)):
            port = int(m[1])
        serving += line.count("serving https://")
    if serving < workers or not port:
        proc.kill()
        raise AssertionError(
            f"numagate serve did not start ({proc.wait()}): {lines} {''.join(log)[-2000:]}"
        )
    threading.Thread(
        target=lambda: lines.extend(x.rstrip() for x in proc.stdout), daemon=True
    ).start()  # type: ignore[union-attr]
    return ServeProcess(proc, port, ca, log, lines)


def start_serve(directory: Path, *extra: str, config: Path | None = None) -> ServeProcess:
    """``numagate serve`` with certificates generated in ``directory``/certs and ``config``
    (or a default one), run in ``directory``."""
    if config is None:
        config = write_config(directory / "config.json")
    args = ["--cert-dir", str(directory / "certs"), "--config", str(config), *extra]
    return start_process(args, cwd=directory, ca=directory / "certs" / "ca.crt", timeout=20)


def tls_socket(port: int, ca: Path, name: str = SERVER_NAME) -> ssl.SSLSocket:
    ctx = ssl.create_default_context(cafile=str(ca))
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    return ctx.wrap_socket(raw, server_hostname=name)


def http(
    port: int, ca: Path, method: str, path: str, body: bytes = b"", *, name: str = SERVER_NAME
) -> tuple[int, bytes]:
    """One request on its own connection; (status, body)."""
    with tls_socket(port, ca, name) as s:
        head = f"{method} {path} HTTP/1.1\r\nHost: {SERVER_NAME}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        s.sendall(head.encode() + body)
        return read_response(s)


def read_response(s: ssl.SSLSocket) -> tuple[int, bytes]:
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    if not data:
        # the server closed without answering (a connection that raced a shutdown)
        raise ConnectionResetError("connection closed before any response")
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body
