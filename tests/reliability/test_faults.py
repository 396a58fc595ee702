"""Faults: the cluster API going away and back, a garbage inventory file, certificates
replaced under load, SIGTERM under load, a slow feasibility path under ``?timeout=``.

Each runs the real server (``serve_worker``, or ``numagate serve`` as a subprocess for
signals) over real TLS, with short intervals from the configuration file so that every
scenario takes seconds.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import re
import shutil
import signal
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509

from certs.authority import CertPaths, ensure_serving_certs, generate
from tests.launch import start_serve, threaded_server, wait_for, write_config
from tests.reliability.corpus import (
    Client,
    Reply,
    check_review,
    encode,
    good_pod,
    good_review,
    impossible_pod,
    review_of,
)
from tests.webhook.fake_apiserver import node, nrt, running_apiserver
from webhook.review import feasibility as feasibility_module
from webhook.server import ServeOptions


def _serve_options(
    tmp_path: Path, source: dict[str, str], **config: Any
) -> tuple[ServeOptions, CertPaths]:
    """Options for a real server on port 0 with fresh certificates and a config file."""
    certs = ensure_serving_certs(tmp_path / "certs")
    opts = ServeOptions(
        host="127.0.0.1",
        port=0,
        cert=str(certs.cert),
        key=str(certs.key),
        config=str(write_config(tmp_path / "config.json", **config)),
        **source,
    )
    return opts, certs


def write_inventory(path: Path, *names: str) -> Path:
    """Nodes with NUMA data (two 32-CPU NUMA nodes each): the good pod fits, the
    impossible pod (40 CPUs on one NUMA node) is denied."""
    docs = [doc for name in names for doc in (node(name), nrt(name))]
    path.write_text(yaml.safe_dump_all(docs), encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- helpers


def metric(client: Client, name: str) -> float:
    """The value of an unlabelled metric (or the sum over its label sets)."""
    text = client.get("/metrics").body.decode()
    values = [
        float(m.group(1))
        for m in re.finditer(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text, re.M)
    ]
    # A counter that never moved may have no sample yet, but it is declared.
    assert values or f"# TYPE {name} " in text, f"{name} not in /metrics"
    return sum(values)


def validate(client: Client, obj: dict[str, Any], uid: str, timeout: str = "10s") -> dict[str, Any]:
    reply = client.review("validate", review_of(obj, uid=uid), timeout_query=timeout)
    return check_review(reply, uid=uid, webhook="validate")


class Captured(logging.Handler):
    """Collects numagate's log records (the server in a thread logs through ``logging``)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def messages(self, level: int = logging.DEBUG) -> list[str]:
        return [
            f"{r.getMessage()} {getattr(r, 'error', '')}"
            for r in self.records
            if r.levelno >= level
        ]


@pytest.fixture
def captured_logs() -> Iterator[Captured]:
    handler = Captured()
    logger = logging.getLogger("numagate")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)


# ----------------------------------------------------------------------------- cluster API outage

STALE_AFTER = 1.0


@pytest.mark.slow
def test_cluster_api_outage_never_denies_falsely_and_resyncs(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The apiserver goes away: once the inventory is older than staleAfterSeconds the
    webhook stops denying on feasibility (allow + warning), reports the age in /metrics;
    when the apiserver returns, the source relists, changes made meanwhile appear and
    denials resume."""
    with running_apiserver(tmp_path, bookmark_interval=0.2) as fake:
        fake.apply(node("numa-1"))
        fake.apply(nrt("numa-1"))
        kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
        opts, certs = _serve_options(
            tmp_path,
            {"kubeconfig": str(kubeconfig)},
            inventory={"staleAfterSeconds": STALE_AFTER},
        )
        with threaded_server(opts) as srv:
            client = Client(srv.port, certs.ca)
            wait_for(lambda: client.get("/readyz").status == 200, 10, "readiness")
            wait_for(lambda: metric(client, "numagate_inventory_nodes") == 1, 5, "first sync")
            # Fresh inventory: the impossible pod is denied, the good pod allowed.
            assert validate(client, impossible_pod(), "fresh-deny")["allowed"] is False
            assert validate(client, good_pod(), "fresh-allow")["allowed"] is True

            fake.down()
            fake.apply(node("numa-2"))  # a change the webhook cannot see yet
            fake.apply(nrt("numa-2"))
            outage_answers: list[dict[str, Any]] = []

            def stale_and_answering() -> bool:
                response = validate(client, impossible_pod(), f"outage-{len(outage_answers)}")
                outage_answers.append(response)
                return metric(client, "numagate_inventory_age_seconds") > STALE_AFTER and (
                    response["allowed"] is True
                )

            wait_for(stale_and_answering, 6, "the inventory to turn stale", step=0.2)
            stale = outage_answers[-1]
            assert any("stale" in w for w in stale.get("warnings", [])), stale
            # The good pod is never denied during the outage either.
            assert validate(client, good_pod(), "outage-good")["allowed"] is True
            # Liveness holds (a restart would not bring the apiserver back).
            assert client.get("/healthz").status == 200
            # The lost connection is in the log, naming what is being watched: the inventory
            # process's (it watches for the replica), on the stderr it shares with us.
            seen: list[str] = []
            wait_for(lambda: _logged_reconnect(capfd, seen), 5, "the reconnect logged")

            fake.up()
            wait_for(
                lambda: metric(client, "numagate_inventory_nodes") == 2,
                15,
                "the relist after the apiserver returned",
                step=0.1,
            )
            wait_for(
                lambda: metric(client, "numagate_inventory_age_seconds") < STALE_AFTER,
                5,
                "fresh inventory",
            )
            # Denials resume once numa-2's NodeResourceTopology (watched by its own thread,
            # reconnecting on its own backoff) is in too: a node without NUMA data never
            # grounds a denial.
            wait_for(
                lambda: validate(client, impossible_pod(), "resynced")["allowed"] is False,
                10,
                "denials to resume",
                step=0.1,
            )
            assert client.get("/readyz").status == 200


def _logged_reconnect(capfd: pytest.CaptureFixture[str], seen: list[str]) -> bool:
    """The inventory process's reconnect warning is on the stderr read so far (``seen``
    keeps it across reads: a line may be cut at one)."""
    seen.append(capfd.readouterr().err)
    lines = []
    for line in "".join(seen).splitlines():
        with contextlib.suppress(ValueError):  # not a log line
            lines.append(json.loads(line))
    return any(
        isinstance(x, dict)
        and x.get("logger") == "numagate.live"
        and x.get("level") in ("warning", "error")
        and "reconnecting" in x.get("msg", "")
        for x in lines
    )


# ----------------------------------------------------------------------------- inventory garbage

GARBAGE: tuple[tuple[str, bytes], ...] = (
    ("binary", bytes(range(256)) * 4),
    ("yaml-syntax", b"apiVersion: v1\nkind: Node\nmetadata: {name: [unclosed\n"),
    ("not-objects", b"- 1\n- 2\n- [3]\n"),
    ("truncated-json", b'{"apiVersion": "v1", "kind": "List", "items": [{"kind": "Node"'),
    ("scalar", b"just a sentence\n"),
)


@pytest.mark.slow
def test_inventory_file_replaced_with_garbage_keeps_last_good(
    tmp_path: Path, captured_logs: Captured
) -> None:
    inventory = write_inventory(tmp_path / "inventory.yaml", "numa-1", "numa-2")
    opts, certs = _serve_options(
        tmp_path, {"inventory": str(inventory)}, inventory={"reloadIntervalSeconds": 0.05}
    )
    with threaded_server(opts) as srv:
        client = Client(srv.port, certs.ca)
        assert metric(client, "numagate_inventory_nodes") == 2
        assert validate(client, impossible_pod(), "before")["allowed"] is False
        for i, (label, garbage) in enumerate(GARBAGE, start=1):
            inventory.write_bytes(garbage)
            wait_for(
                lambda i=i: metric(client, "numagate_inventory_load_failures_total") >= i,
                5,
                f"the {label} reload to fail",
            )
            # The last good inventory is still in force: same nodes, same decisions.
            assert metric(client, "numagate_inventory_nodes") == 2, label
            assert validate(client, impossible_pod(), f"{label}-deny")["allowed"] is False
            assert validate(client, good_pod(), f"{label}-allow")["allowed"] is True
            assert client.get("/readyz").status == 200
        inventory.unlink()  # gone altogether (a ConfigMap mount being swapped)
        wait_for(
            lambda: metric(client, "numagate_inventory_load_failures_total") > len(GARBAGE),
            5,
            "the missing file to be reported",
        )
        assert validate(client, impossible_pod(), "missing-deny")["allowed"] is False
        errors = captured_logs.messages(logging.ERROR)
        assert sum("inventory load failed" in m for m in errors) >= len(GARBAGE) + 1, errors
        assert any(str(inventory) in m for m in errors), errors
        # A good file again: reloaded (a third node shows the new content is in force).
        write_inventory(inventory, "numa-1", "numa-2", "numa-3")
        wait_for(lambda: metric(client, "numagate_inventory_nodes") == 3, 5, "the reload")
        assert validate(client, impossible_pod(), "after-deny")["allowed"] is False


# ----------------------------------------------------------------------------- certificates


def _serial(client: Client) -> int:
    conn = client.connect()
    try:
        conn.connect()
        assert isinstance(conn.sock, ssl.SSLSocket)
        der = conn.sock.getpeercert(binary_form=True)
    finally:
        conn.close()
    assert der is not None
    return int(x509.load_der_x509_certificate(der).serial_number)


def _load(client: Client, stop: threading.Event, results: list[str]) -> None:
    i = 0
    while not stop.is_set():
        i += 1
        uid = f"{threading.get_ident()}-{i}"
        try:
            reply = client.review("validate", good_review(uid))
            response = check_review(reply, uid=uid, webhook="validate")
            results.append("ok" if response["allowed"] else f"denied {response}")
        except Exception as exc:
            results.append(f"{type(exc).__name__}: {exc}")


def _rotate_in_place(cert_dir: Path, staging: Path) -> None:
    """Non-atomic: the certificate and the key are rewritten one after the other, so for a
    moment they do not match (the watcher must keep the old pair then)."""
    generate(staging, service="numagate", namespace="numagate-system", ips=["127.0.0.1"])
    (cert_dir / "tls.crt").write_bytes((staging / "tls.crt").read_bytes())
    time.sleep(0.1)
    (cert_dir / "tls.key").write_bytes((staging / "tls.key").read_bytes())


def _rotate_with_generate(cert_dir: Path, staging: Path) -> None:
    """What ``numagate certs generate`` does: same CA, new serving pair."""
    generate(cert_dir, service="numagate", namespace="numagate-system", ips=["127.0.0.1"])


@pytest.mark.slow
def test_certificates_replaced_under_load_lose_nothing(tmp_path: Path) -> None:
    cert_dir = tmp_path / "certs"
    paths = generate(cert_dir, service="numagate", namespace="numagate-system", ips=["127.0.0.1"])
    staging = tmp_path / "staging"
    staging.mkdir()
    for name in ("ca.crt", "ca.key"):
        shutil.copyfile(cert_dir / name, staging / name)
    opts = ServeOptions(
        host="127.0.0.1",
        port=0,
        cert=str(paths.cert),
        key=str(paths.key),
        # The default poll is 10 s (controller-runtime's); 50 ms keeps this test short.
        config=str(
            write_config(tmp_path / "config.json", certificates={"reloadIntervalSeconds": 0.05})
        ),
    )
    with threaded_server(opts) as srv:
        client = Client(srv.port, paths.ca)
        serials = [_serial(client)]
        stop = threading.Event()
        results: list[str] = []
        workers = [threading.Thread(target=_load, args=(client, stop, results)) for _ in range(4)]
        for w in workers:
            w.start()
        try:
            for i, rotate in enumerate((_rotate_in_place, _rotate_with_generate) * 2):
                # Each rotation happens under load: requests served since the last one
                # (waited for, not slept for, so a loaded machine only makes it slower).
                wait_for(lambda i=i: len(results) >= 10 * (i + 1), 10, "requests under load")
                rotate(cert_dir, staging)
                wait_for(lambda: _serial(client) != serials[-1], 5, "the new certificate")
                serials.append(_serial(client))
            wait_for(lambda: len(results) >= 50, 10, "requests after the last rotation")
        finally:
            stop.set()
            for w in workers:
                w.join(10)
        failures = [r for r in results if r != "ok"]
        assert not failures, failures[:5]
        assert len(results) >= 50, len(results)
        assert len(set(serials)) == 5, serials  # every rotation was served


# ----------------------------------------------------------------------------- SIGTERM


def _half_sent(client: Client, uid: str) -> tuple[http.client.HTTPSConnection, bytes]:
    """A request in flight: headers and half the body sent."""
    body = encode(good_review(uid))
    conn = client.connect()
    conn.putrequest("POST", "/validate?timeout=10s")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Content-Length", str(len(body)))
    conn.endheaders()
    conn.send(body[: len(body) // 2])
    return conn, body[len(body) // 2 :]


def _finish(conn: http.client.HTTPSConnection, rest: bytes, uid: str) -> None:
    conn.send(rest)
    resp = conn.getresponse()
    reply = Reply(resp.status, resp.getheader("Content-Type", ""), resp.read())
    conn.close()
    assert check_review(reply, uid=uid, webhook="validate")["allowed"] is True


def _serve_for_sigterm(
    tmp_path: Path, delay: float, grace: float
) -> tuple[subprocess.Popen[str], Client]:
    config = write_config(
        tmp_path / "config.json", shutdown={"delaySeconds": delay, "gracePeriodSeconds": grace}
    )
    served = start_serve(tmp_path, config=config)
    proc, client = served.proc, Client(served.port, served.ca, timeout=grace + 2)
    wait_for(lambda: client.get("/readyz").status == 200, 10, "readiness")
    return proc, client


def _stop_process(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()


@pytest.mark.slow
def test_sigterm_under_load_drains_and_refuses_new_connections(tmp_path: Path) -> None:
    """``numagate serve`` receives SIGTERM while under load: /readyz turns 503 at once
    while requests are still served, a request in flight completes, then the listener
    closes (new connections refused) and the process exits 0."""
    delay = 3.0  # readiness must turn false within it even on a loaded machine
    proc, client = _serve_for_sigterm(tmp_path, delay, 10.0)
    try:
        stop = threading.Event()
        results: list[str] = []
        workers = [threading.Thread(target=_load, args=(client, stop, results)) for _ in range(3)]
        for w in workers:
            w.start()
        inflight, rest = _half_sent(client, "inflight")
        wait_for(lambda: len(results) >= 10, 10, "requests under load")
        proc.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        # Readiness goes false first, while the listener still accepts (the endpoint
        # controller needs that time to take the pod out of the Service).
        wait_for(lambda: client.get("/readyz").status == 503, delay, "readiness to turn false")
        assert time.monotonic() - signalled < delay
        stop.set()  # the apiserver stops sending once the endpoint is gone
        for w in workers:
            w.join(10)
        _finish(inflight, rest, "inflight")
        wait_for(lambda: _refused(client), delay + 3, "the listener to close")
        assert proc.wait(timeout=15) == 0
        failures = [r for r in results if r != "ok"]
        assert not failures, failures[:5]
        assert len(results) >= 10
    finally:
        _stop_process(proc)


@pytest.mark.slow
def test_sigterm_completes_a_request_whose_body_is_still_arriving(tmp_path: Path) -> None:
    """A request whose headers arrived before the listener closed but whose body is still
    in transit is in flight too: it must be answered within the grace period, not dropped
    when the grace period ends."""
    delay, grace = 0.5, 3.0
    proc, client = _serve_for_sigterm(tmp_path, delay, grace)
    try:
        late, rest = _half_sent(client, "late")
        proc.send_signal(signal.SIGTERM)
        wait_for(lambda: _refused(client), delay + 3, "the listener to close")
        _finish(late, rest, "late")
        assert proc.wait(timeout=grace + 5) == 0
    finally:
        _stop_process(proc)


@pytest.mark.slow
def test_stop_under_load_completes_requests_being_evaluated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shutdown sequence (the event SIGTERM sets) while a request is inside the
    feasibility evaluation: it is answered correctly, after readiness turned false."""
    real = feasibility_module.evaluate
    entered = threading.Event()

    def slow_evaluate(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        time.sleep(1.0)
        return real(*args, **kwargs)

    monkeypatch.setattr(feasibility_module, "evaluate", slow_evaluate)
    opts, certs = _serve_options(
        tmp_path,
        {"inventory": str(write_inventory(tmp_path / "inventory.yaml", "numa-1"))},
        timeouts={"inlineNodes": 0},
        shutdown={"delaySeconds": 0.2, "gracePeriodSeconds": 5.0},
    )
    with threaded_server(opts) as srv:
        client = Client(srv.port, certs.ca)
        answers: list[dict[str, Any]] = []
        request = threading.Thread(
            target=lambda: answers.append(validate(client, impossible_pod(), "busy"))
        )
        request.start()
        assert entered.wait(5)
        srv.request_stop()
        wait_for(lambda: _refused(client), 3, "the listener to close")
        request.join(10)
        assert answers and answers[0]["allowed"] is False, answers


def _refused(client: Client) -> bool:
    """True once a new connection is refused. A probe caught by the close itself (its TCP
    handshake done in the backlog, then reset or cut mid-TLS) proves nothing yet: poll on."""
    try:
        client.get("/healthz")
    except ConnectionRefusedError:
        return True
    except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
        return False
    return False


# ----------------------------------------------------------------------------- slow feasibility


@pytest.mark.slow
def test_slow_feasibility_is_answered_within_the_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """?timeout=1s with an evaluation that would take 2 s: the answer comes in time, allowed
    with a warning (never a denial for lack of time), and the next request is unaffected."""
    real = feasibility_module.evaluate
    slow = threading.Event()

    def slow_evaluate(*args: Any, **kwargs: Any) -> Any:
        if slow.is_set():
            time.sleep(2.0)
        return real(*args, **kwargs)

    monkeypatch.setattr(feasibility_module, "evaluate", slow_evaluate)
    # inlineNodes 0: every evaluation runs in a thread, under the deadline.
    opts, certs = _serve_options(
        tmp_path,
        {"inventory": str(write_inventory(tmp_path / "inventory.yaml", "numa-1"))},
        timeouts={"inlineNodes": 0},
    )
    with threaded_server(opts) as srv:
        client = Client(srv.port, certs.ca)
        slow.set()
        started = time.monotonic()
        response = validate(client, impossible_pod(), "slow", timeout="1s")
        elapsed = time.monotonic() - started
        assert elapsed < 1.0, elapsed
        assert response["allowed"] is True
        assert any("timeout" in w or "deadline" in w for w in response["warnings"]), response
        assert metric(client, "numagate_feasibility_skipped_total") >= 1
        slow.clear()
        assert validate(client, impossible_pod(), "fast")["allowed"] is False
