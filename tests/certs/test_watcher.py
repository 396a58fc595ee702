"""TLS server context and reload in place: protocol floor, client auth, rotation under load."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import ssl
import time
from pathlib import Path

import pytest
from aiohttp import web
from cryptography import x509

from certs.authority import (
    CertError,
    cert_pem,
    create_ca,
    ensure_serving_certs,
    generate,
    key_pem,
    utcnow,
    write_file,
    write_serving_certs,
)
from certs.watcher import CertWatcher, build_server_context
from tests.certs.tls import (
    client_certificate,
    client_context,
    handshake,
    load_leaf,
    served_serial,
)

HOST = "localhost"


@pytest.fixture
def certs(tmp_path: Path):
    return ensure_serving_certs(tmp_path / "certs")


def renew(paths) -> int:
    """Issue a new serving certificate from the same CA; return its serial."""
    write_serving_certs(paths.cert.parent, ("localhost", "127.0.0.1"), days=30)
    return load_leaf(paths.cert).serial_number


def bump(path: Path) -> None:
    """Make the change visible to the stat gate even within one mtime tick."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))


# --- server context ---------------------------------------------------------------------


def test_context_has_a_tls12_floor_and_no_weak_ciphers(certs) -> None:
    ctx = build_server_context(certs.cert, certs.key)
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    assert ctx.verify_mode == ssl.CERT_NONE
    names = {c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"}
    assert names, "no TLS 1.2 cipher left"
    for name in names:
        assert name.startswith("ECDHE-"), name
        assert "GCM" in name or "CHACHA20" in name, name


def _legacy_client(version: ssl.TLSVersion) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_ciphers("DEFAULT:@SECLEVEL=0")  # let OpenSSL offer the old protocols at all
    ctx.minimum_version = ctx.maximum_version = version
    return ctx


# Deliberately setting the deprecated versions is the point of this test.
@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1:DeprecationWarning")
@pytest.mark.parametrize(
    "version", [ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1], ids=["tls1.0", "tls1.1"]
)
def test_a_client_offering_only_tls10_or_11_is_refused(certs, version) -> None:
    # Control: the same client does complete a handshake with a permissive server, so
    # the refusal below comes from our server's floor, not from the client's OpenSSL.
    permissive = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    permissive.minimum_version = ssl.TLSVersion.TLSv1
    permissive.set_ciphers("DEFAULT:@SECLEVEL=0")
    permissive.load_cert_chain(certs.cert, certs.key)
    assert handshake(permissive, _legacy_client(version), None).version() in ("TLSv1", "TLSv1.1")

    ours = build_server_context(certs.cert, certs.key)
    with pytest.raises(ssl.SSLError):
        handshake(ours, _legacy_client(version), None)


def test_tls12_and_tls13_clients_are_served(certs) -> None:
    ours = build_server_context(certs.cert, certs.key)
    for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
        client = client_context(certs.ca)
        client.minimum_version = client.maximum_version = version
        tls = handshake(ours, client, HOST)
        assert tls.version() == {"TLSv1_2": "TLSv1.2", "TLSv1_3": "TLSv1.3"}[version.name]
        assert tls.selected_alpn_protocol() in (None, "http/1.1")


@pytest.fixture
def client_auth(certs, tmp_path: Path):
    apiserver_ca = create_ca(now=utcnow())
    ca_file = tmp_path / "client-ca.crt"
    ca_file.write_bytes(cert_pem(apiserver_ca.cert))
    server = build_server_context(certs.cert, certs.key, client_ca=ca_file)
    return server, apiserver_ca


@pytest.mark.parametrize(
    "tls_version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3], ids=["tls1.2", "tls1.3"]
)
def test_client_ca_accepts_a_client_cert_signed_by_it(
    certs, client_auth, tmp_path: Path, tls_version
) -> None:
    server, apiserver_ca = client_auth
    assert server.verify_mode == ssl.CERT_REQUIRED
    client = client_context(certs.ca)
    client.maximum_version = tls_version
    client.load_cert_chain(*client_certificate(apiserver_ca, tmp_path, "apiserver"))
    handshake(server, client, HOST)


@pytest.mark.parametrize(
    "tls_version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3], ids=["tls1.2", "tls1.3"]
)
def test_client_ca_refuses_a_client_without_a_cert(certs, client_auth, tls_version) -> None:
    server, _ = client_auth
    client = client_context(certs.ca)
    client.maximum_version = tls_version
    with pytest.raises(ssl.SSLError, match="CERTIFICATE"):
        handshake(server, client, HOST)


def test_client_ca_refuses_a_cert_from_another_ca(certs, client_auth, tmp_path: Path) -> None:
    server, _ = client_auth
    client = client_context(certs.ca)
    client.load_cert_chain(*client_certificate(create_ca(now=utcnow()), tmp_path, "intruder"))
    with pytest.raises(ssl.SSLError, match=r"certificate verify failed|unknown ca"):
        handshake(server, client, HOST)


def test_bad_files_give_a_clear_error(certs, tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.crt"
    garbage.write_text("-----BEGIN CERTIFICATE-----\nnope\n")
    with pytest.raises(CertError, match=r"garbage\.crt: not a PEM certificate chain"):
        build_server_context(garbage, certs.key)
    with pytest.raises(CertError, match=r"cannot read .*missing\.key"):
        build_server_context(certs.cert, tmp_path / "missing.key")
    with pytest.raises(CertError, match=r"client CA .*garbage\.crt: cannot load"):
        build_server_context(certs.cert, certs.key, client_ca=garbage)


# --- reload_if_changed -------------------------------------------------------------------


def test_reload_serves_the_new_certificate_and_counts(certs, caplog) -> None:
    ctx = build_server_context(certs.cert, certs.key)
    calls: list[int] = []
    watcher = CertWatcher(certs.cert, certs.key, ctx, on_reload=lambda: calls.append(1))
    first = load_leaf(certs.cert)
    assert watcher.serial == first.serial_number
    assert watcher.not_after == first.not_valid_after_utc
    assert watcher.reload_if_changed() is False

    with caplog.at_level(logging.INFO, logger="numagate.certs"):
        new_serial = renew(certs)
        assert watcher.reload_if_changed() is True
    assert (watcher.reloads, watcher.errors, calls) == (1, 0, [1])
    assert watcher.serial == new_serial != first.serial_number
    assert served_serial(handshake(ctx, client_context(certs.ca), HOST)) == new_serial
    assert f"serial {new_serial:x}" in caplog.text
    assert watcher.reload_if_changed() is False


def test_touching_without_changing_content_is_not_a_reload(certs) -> None:
    ctx = build_server_context(certs.cert, certs.key)
    watcher = CertWatcher(certs.cert, certs.key, ctx)
    bump(certs.cert)
    assert watcher.reload_if_changed() is False
    assert (watcher.reloads, watcher.errors) == (0, 0)


def test_garbage_is_ignored_and_counted_once(certs, caplog) -> None:
    ctx = build_server_context(certs.cert, certs.key)
    watcher = CertWatcher(certs.cert, certs.key, ctx)
    good = watcher.serial
    certs.cert.write_text("garbage")
    with caplog.at_level(logging.WARNING, logger="numagate.certs"):
        assert watcher.reload_if_changed() is False
    assert "certificate reload failed" in caplog.text
    bump(certs.cert)
    assert watcher.reload_if_changed() is False
    assert (watcher.reloads, watcher.errors) == (0, 1)
    assert served_serial(handshake(ctx, client_context(certs.ca), HOST)) == good


def test_half_written_pair_keeps_the_old_one_until_complete(certs) -> None:
    ctx = build_server_context(certs.cert, certs.key)
    watcher = CertWatcher(certs.cert, certs.key, ctx)
    good = watcher.serial
    old_key = certs.key.read_bytes()
    new_serial = renew(certs)
    new_key_pem = certs.key.read_bytes()
    # The new certificate has landed, the key not yet: a mismatch.
    certs.key.write_bytes(old_key)
    assert watcher.reload_if_changed() is False
    assert watcher.errors == 1
    assert served_serial(handshake(ctx, client_context(certs.ca), HOST)) == good
    certs.key.write_bytes(new_key_pem)
    bump(certs.key)
    assert watcher.reload_if_changed() is True
    assert served_serial(handshake(ctx, client_context(certs.ca), HOST)) == new_serial


def test_removed_files_keep_serving(certs) -> None:
    ctx = build_server_context(certs.cert, certs.key)
    watcher = CertWatcher(certs.cert, certs.key, ctx)
    certs.key.unlink()
    assert watcher.reload_if_changed() is False
    assert watcher.reload_if_changed() is False
    assert watcher.errors == 1
    handshake(ctx, client_context(certs.ca), HOST)


def test_a_failing_callback_does_not_undo_the_reload(certs) -> None:
    ctx = build_server_context(certs.cert, certs.key)

    def boom() -> None:
        raise RuntimeError("metrics down")

    watcher = CertWatcher(certs.cert, certs.key, ctx, on_reload=boom)
    serial = renew(certs)
    assert watcher.reload_if_changed() is True
    assert watcher.serial == serial


def test_watcher_fails_fast_on_a_bad_initial_pair(certs, tmp_path: Path) -> None:
    ctx = build_server_context(certs.cert, certs.key)
    other = ensure_serving_certs(tmp_path / "other")
    with pytest.raises(CertError, match="do not match"):
        CertWatcher(certs.cert, other.key, ctx)
    with pytest.raises(ValueError, match="interval=0"):
        CertWatcher(certs.cert, certs.key, ctx, interval=0)


def test_expiring_certificate_is_logged_as_a_warning(tmp_path: Path, caplog) -> None:
    ca = create_ca(now=utcnow())
    write_file(tmp_path / "ca.crt", cert_pem(ca.cert), mode=0o644)
    write_file(tmp_path / "ca.key", key_pem(ca.key), mode=0o600)
    paths = generate(tmp_path, service="numagate", namespace="default", days=10)
    ctx = build_server_context(paths.cert, paths.key)
    with caplog.at_level(logging.WARNING, logger="numagate.certs"):
        watcher = CertWatcher(paths.cert, paths.key, ctx)
    assert "serving certificate expires in 9 days" in caplog.text
    assert watcher.not_after - utcnow() < dt.timedelta(days=10)


async def test_start_polls_and_stop_ends_the_task(certs) -> None:
    ctx = build_server_context(certs.cert, certs.key)
    reloaded = asyncio.Event()
    watcher = CertWatcher(certs.cert, certs.key, ctx, interval=0.02, on_reload=reloaded.set)
    await watcher.start()
    await watcher.start()  # idempotent
    serial = renew(certs)
    await asyncio.wait_for(reloaded.wait(), timeout=5)
    assert watcher.serial == serial
    await watcher.stop()
    await watcher.stop()
    renew(certs)
    await asyncio.sleep(0.1)
    assert watcher.reloads == 1


# --- rotation under continuous HTTPS requests --------------------------------------------


async def _https_get(port: int, client: ssl.SSLContext) -> tuple[bytes, int]:
    """One request on a fresh TLS connection; returns the status line and served serial."""
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=client, server_hostname=HOST
    )
    try:
        ssl_object = writer.get_extra_info("ssl_object")
        der = ssl_object.getpeercert(binary_form=True)
        writer.write(b"GET /ping HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        await writer.drain()
        response = await reader.read()
    finally:
        writer.close()
        await writer.wait_closed()
    return response.split(b"\r\n", 1)[0], x509.load_der_x509_certificate(der).serial_number


async def _pong(_: web.Request) -> web.Response:
    return web.Response(text="pong")


@pytest.mark.slow
async def test_rotation_under_continuous_requests_has_zero_failures(certs) -> None:
    ctx = build_server_context(certs.cert, certs.key)
    watcher = CertWatcher(certs.cert, certs.key, ctx, interval=0.02)
    app = web.Application()
    app.router.add_get("/ping", _pong)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx)
    await site.start()
    port = runner.addresses[0][1]
    await watcher.start()
    client = client_context(certs.ca)  # the CA is reused: the caBundle never changes
    seen: list[int] = []
    failures: list[str] = []
    stop = asyncio.Event()

    async def load() -> None:
        while not stop.is_set():
            try:
                status, serial = await _https_get(port, client)
            except (OSError, ssl.SSLError) as exc:
                failures.append(repr(exc))
                continue
            if status != b"HTTP/1.1 200 OK":
                failures.append(status.decode())
            seen.append(serial)

    async def wait_served(serial: int) -> None:
        deadline = time.monotonic() + 5
        while not (seen and seen[-1] == serial):
            assert time.monotonic() < deadline, f"serial {serial:x} never served"
            await asyncio.sleep(0.01)

    clients = [asyncio.create_task(load()) for _ in range(3)]
    try:
        expected = [watcher.serial]
        for round_ in range(4):
            # Each renewal happens under load: handshakes made since the last one (waited
            # for, not slept for, so a loaded machine only makes the test slower).
            deadline = time.monotonic() + 10
            while len(seen) < 12 * (round_ + 1):
                assert time.monotonic() < deadline, f"only {len(seen)} handshakes"
                await asyncio.sleep(0.01)
            if round_ == 2:
                # Garbage written in place: ignored, the last good pair keeps serving.
                errors = watcher.errors
                certs.cert.write_text("-----BEGIN CERTIFICATE-----\ntruncated")
                deadline = time.monotonic() + 5
                while watcher.errors == errors:
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.01)
                await asyncio.sleep(0.1)
                assert seen[-1] == expected[-1]
            expected.append(renew(certs))
            await wait_served(expected[-1])
        deadline = time.monotonic() + 10
        while len(seen) < 60:
            assert time.monotonic() < deadline, f"only {len(seen)} handshakes"
            await asyncio.sleep(0.01)
    finally:
        stop.set()
        await asyncio.gather(*clients)
        await watcher.stop()
        await runner.cleanup()

    assert failures == []
    assert watcher.reloads >= 4
    assert watcher.errors >= 1
    # Every certificate was served and nothing else (the garbage never was).
    assert set(seen) == set(expected)
    assert len(seen) >= 60
