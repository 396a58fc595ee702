"""A rolling restart (issue 17): real ``numagate serve`` processes over TLS are replaced one
after the other while one client keeps sending reviews, and not one request fails.

The client plays the kube-apiserver behind a Service: a few concurrent senders, each on a
keep-alive connection that it reuses for as long as the server lets it (the apiserver's
HTTP/1.1 connection pool), and a routing table of the ready endpoints for every new
connection (kube-proxy, or the apiserver's endpoint resolver). A server's removal is
modelled as the Kubernetes pod deletion does it: the endpoint leaves the routing table and
the server gets SIGTERM. Connections already open keep going to the old server; only its
``Connection: close`` answers (sent during ``shutdown.delaySeconds``) move them to the
new one, which is the production mechanism, here with a 1 s delay instead of 10 s. (With
``delaySeconds: 0`` the same test loses requests: "Remote end closed connection without
response" on connections the server closed while a review was on its way.)
"""

from __future__ import annotations

import http.client
import itertools
import shutil
import signal
import ssl
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from certs.authority import ensure_serving_certs
from tests.launch import ServeProcess, start_serve, wait_for, write_config
from tests.reliability.corpus import Client, Reply, check_review, encode, good_review

pytestmark = pytest.mark.slow

DELAY_SECONDS = 1.0  # shutdown.delaySeconds for the test (production: 10)
GRACE_SECONDS = 5.0
SENDERS = 3  # concurrent requests, each on its own keep-alive connection
PHASE_SECONDS = 1.5  # traffic on each server before the next step


@dataclass
class Router:
    """The routing table for new connections: the ports of the ready endpoints."""

    ports: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    _turn: itertools.count = field(default_factory=itertools.count)

    def add(self, port: int) -> None:
        with self.lock:
            self.ports.append(port)

    def remove(self, port: int) -> None:
        with self.lock:
            self.ports.remove(port)

    def pick(self) -> int:
        with self.lock:
            return self.ports[next(self._turn) % len(self.ports)]


@dataclass
class Traffic:
    """What the senders saw: answers per server port, and every failure."""

    answered: Counter[int] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    redials: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def snapshot(self) -> Counter[int]:
        with self.lock:
            return Counter(self.answered)


def _send(conn: http.client.HTTPSConnection, uid: str) -> tuple[Reply, bool]:
    """One review on ``conn``; returns the reply and whether the server closes the
    connection after it ("Connection: close")."""
    conn.request(
        "POST",
        "/validate?timeout=10s",
        body=encode(good_review(uid)),
        headers={"Content-Type": "application/json"},
    )
    resp = conn.getresponse()
    reply = Reply(resp.status, resp.getheader("Content-Type", ""), resp.read())
    return reply, resp.will_close


def _sender(
    index: int, router: Router, context: ssl.SSLContext, stop: threading.Event, seen: Traffic
) -> None:
    conn: http.client.HTTPSConnection | None = None
    port = 0
    for n in itertools.count():
        if stop.is_set():
            break
        uid = f"sender{index}-{n}"
        try:
            if conn is None:  # a new connection goes where the routing table says
                port = router.pick()
                conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
                with seen.lock:
                    seen.redials += 1
            reply, closing = _send(conn, uid)
            response = check_review(reply, uid=uid, webhook="validate")
            assert response["allowed"] is True, response
            with seen.lock:
                seen.answered[port] += 1
            if closing:
                conn.close()
                conn = None
        except Exception as exc:  # every failure is reported by the test
            with seen.lock:
                seen.failures.append(f"{uid} -> :{port}: {type(exc).__name__}: {exc}")
            if conn is not None:
                conn.close()
            conn = None
    if conn is not None:
        conn.close()


def _start(directory: Path, certs: Path, config: Path) -> ServeProcess:
    """``numagate serve`` with the shared serving certificate (as every replica mounts the
    same Secret), ready before it enters the routing table."""
    shutil.copytree(certs, directory / "certs")
    server = start_serve(directory, config=config)
    probe = Client(server.port, server.ca)
    wait_for(lambda: probe.get("/readyz").status == 200, 20, f"server :{server.port} ready")
    return server


def _retire(server: ServeProcess, router: Router, seen: Traffic) -> None:
    """The pod deletion: the endpoint leaves the routing table and SIGTERM is sent. Its
    connections move away, it stops answering, and it exits 0 within the grace period."""
    router.remove(server.port)
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(timeout=DELAY_SECONDS + GRACE_SECONDS + 5) == 0, "".join(server.log)
    final = seen.snapshot()[server.port]
    time.sleep(0.3)
    assert seen.snapshot()[server.port] == final, "answers after the server exited"


def _grow(seen: Traffic, port: int, at_least: int, timeout: float = 10.0) -> None:
    start = seen.snapshot()[port]
    wait_for(lambda: seen.snapshot()[port] >= start + at_least, timeout, f"traffic on :{port}")


def test_rolling_restart_loses_no_request(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "config.json",
        shutdown={"delaySeconds": DELAY_SECONDS, "gracePeriodSeconds": GRACE_SECONDS},
    )
    certs = ensure_serving_certs(tmp_path / "certs")
    context = ssl.create_default_context(cafile=str(certs.ca))
    router, seen, stop = Router(), Traffic(), threading.Event()
    servers: list[ServeProcess] = []
    senders = [
        threading.Thread(target=_sender, args=(i, router, context, stop, seen), daemon=True)
        for i in range(SENDERS)
    ]
    try:
        old = _start(tmp_path / "old", certs.ca.parent, config)
        servers.append(old)
        router.add(old.port)
        for thread in senders:
            thread.start()
        time.sleep(PHASE_SECONDS)
        _grow(seen, old.port, 20)

        # Surge: the new replica becomes ready and joins the table. The senders' open
        # connections stay where they are (keep-alive), as the apiserver's do.
        new = _start(tmp_path / "new", certs.ca.parent, config)
        servers.append(new)
        router.add(new.port)
        time.sleep(PHASE_SECONDS)
        _retire(old, router, seen)
        _grow(seen, new.port, 20)

        # The next replica replaces the one that just took over.
        last = _start(tmp_path / "last", certs.ca.parent, config)
        servers.append(last)
        router.add(last.port)
        time.sleep(PHASE_SECONDS)
        _retire(new, router, seen)
        _grow(seen, last.port, 20)
    finally:
        stop.set()
        for thread in senders:
            if thread.is_alive():
                thread.join(15)
        for server in servers:
            server.stop()

    assert not seen.failures, seen.failures[:5]
    answered = seen.snapshot()
    # Every server answered its share and traffic changed hands twice.
    assert set(answered) == {s.port for s in servers}, answered
    assert all(answered[s.port] >= 20 for s in servers), answered
    assert seen.redials >= SENDERS * 2, seen.redials  # connections moved at each retirement
    print(
        f"\nrolling restart: {sum(answered.values())} reviews, 0 failed; per server "
        f"{[answered[s.port] for s in servers]}; {seen.redials} connections dialled"
    )
