"""Serve TLS from a live ``SSLContext`` and reload its certificate in place.

controller-runtime's ``pkg/certwatcher`` swaps the certificate behind ``GetCertificate``
without touching the listener; kopf instead restarts its server when the files change
(an anti-pattern: in-flight requests fail). In Python the equivalent of
``GetCertificate`` is ``SSLContext.load_cert_chain`` on the context the listener already
uses: OpenSSL applies it to every handshake that starts afterwards.

``load_cert_chain`` is not atomic: it installs the certificate, then the key, and a
mismatch leaves the context half-updated. So a new pair is parsed and checked in Python
first, and exactly the validated bytes are loaded (from an in-memory file), never the
paths that may change again in between. Secrets mounted by the kubelet are swapped with
a symlink rename (atomic), but other writers (``cp``, editors) produce half-written files
for a moment; those are ignored and the last good pair keeps serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import hashlib
import logging
import os
import ssl
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization

from certs.authority import CertError, expiry_warning, public_keys_match, utcnow

log = logging.getLogger("numagate.certs")

# TLS 1.2 cipher suites: ECDHE key exchange (forward secrecy) with AEAD ciphers only.
# Go's default client suites (what the kube-apiserver offers) include all of these;
# TLS 1.3 suites are fixed by OpenSSL and all strong.
TLS12_CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20:!aNULL:!eNULL:!MD5:!SHA1:!DSS"

EXPIRY_CHECK_EVERY = 6 * 3600.0  # seconds between expiry warnings for an unchanged cert


@dataclass(frozen=True)
class ServingPair:
    """A validated certificate chain and private key, as the PEM bytes to load."""

    cert_pem: bytes
    key_pem: bytes
    serial: int
    not_after: dt.datetime


def parse_pair(cert_pem: bytes, key_pem: bytes, *, cert_name: str, key_name: str) -> ServingPair:
    """Check that ``cert_pem`` is a PEM chain whose first certificate belongs to ``key_pem``."""
    try:
        chain = x509.load_pem_x509_certificates(cert_pem)
    except ValueError as exc:
        raise CertError(f"{cert_name}: not a PEM certificate chain ({exc})") from None
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise CertError(f"{key_name}: not an unencrypted PEM private key ({exc})") from None
    leaf = chain[0]
    if not public_keys_match(leaf, key):
        raise CertError(
            f"{cert_name} and {key_name} do not match (serial {leaf.serial_number:x}): "
            "the key is not the certificate's key (files still being written?)"
        )
    return ServingPair(cert_pem, key_pem, leaf.serial_number, leaf.not_valid_after_utc)


def read_pair(cert: Path, key: Path) -> ServingPair:
    """Read and validate the pair from disk."""
    try:
        cert_pem, key_pem = cert.read_bytes(), key.read_bytes()
    except OSError as exc:
        raise CertError(f"cannot read {exc.filename}: {exc.strerror}") from None
    return parse_pair(cert_pem, key_pem, cert_name=str(cert), key_name=str(key))


@contextlib.contextmanager
def _memory_file(data: bytes) -> Iterator[str]:
    """A path whose content is ``data``, kept off the disk where the OS allows.

    ``memfd_create`` needs no writable directory, which matters under
    ``readOnlyRootFilesystem: true``; elsewhere a private temp file is used.
    """
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("numagate-cert", os.MFD_CLOEXEC)
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    with tempfile.NamedTemporaryFile(prefix="numagate-") as fh:  # pragma: no cover
        fh.write(data)
        fh.flush()
        yield fh.name


def load_pair_into(ctx: ssl.SSLContext, pair: ServingPair) -> None:
    """Install ``pair`` into ``ctx``: affects every handshake from now on."""
    with _memory_file(pair.cert_pem) as certfile, _memory_file(pair.key_pem) as keyfile:
        ctx.load_cert_chain(certfile, keyfile)


def build_server_context(cert: Path, key: Path, *, client_ca: Path | None = None) -> ssl.SSLContext:
    """A server ``SSLContext``: TLS 1.2 minimum, strong ciphers, optional client CA.

    With ``client_ca`` the client (the kube-apiserver, via its AdmissionConfiguration
    kubeconfig) must present a certificate signed by that CA (like controller-runtime's
    ``ClientCAName`` -> ``RequireAndVerifyClientCert``).
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(TLS12_CIPHERS)
    ctx.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE
    ctx.options |= ssl.OP_NO_RENEGOTIATION
    # The apiserver speaks HTTP/1.1 to webhooks; offering h2 only adds attack surface
    # (Rapid Reset, GHSA-qppj-fm5r-hxr3; kubebuilder disables it by default).
    ctx.set_alpn_protocols(["http/1.1"])
    load_pair_into(ctx, read_pair(Path(cert), Path(key)))
    if client_ca is not None:
        try:
            ctx.load_verify_locations(cafile=str(client_ca))
        except (OSError, ssl.SSLError) as exc:
            raise CertError(f"client CA {client_ca}: cannot load ({exc})") from None
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def _stat_key(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()  # follows the kubelet's ..data symlink
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


class CertWatcher:
    """Polls the certificate and key files and reloads them into a live ``SSLContext``.

    Attributes read by the server's metrics: ``reloads`` (successful reloads),
    ``errors`` (new file contents that were rejected), ``not_after`` (expiry of the
    certificate being served), ``serial``.
    """

    def __init__(
        self,
        cert: Path,
        key: Path,
        ssl_context: ssl.SSLContext,
        *,
        interval: float = 10.0,
        on_reload: Callable[[], None] | None = None,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"interval={interval}: must be a positive number of seconds")
        self.cert, self.key = Path(cert), Path(key)
        self.ssl_context = ssl_context
        self.interval = interval
        self.on_reload = on_reload
        self.reloads = 0
        self.errors = 0
        self._task: asyncio.Task[None] | None = None
        # Fail fast, like controller-runtime's certwatcher.New: no good pair, no server.
        self._stat = self._stats()
        self._current = read_pair(self.cert, self.key)
        load_pair_into(ssl_context, self._current)
        self._digest = self._digest_of(self._current.cert_pem, self._current.key_pem)
        self._rejected: str | None = None
        self._warn_expiry()

    @property
    def not_after(self) -> dt.datetime:
        """Expiry (UTC) of the certificate currently served."""
        return self._current.not_after

    @property
    def serial(self) -> int:
        """Serial number of the certificate currently served."""
        return self._current.serial

    def _stats(self) -> tuple[object, object]:
        return (_stat_key(self.cert), _stat_key(self.key))

    @staticmethod
    def _digest_of(cert_pem: bytes, key_pem: bytes) -> str:
        return hashlib.sha256(cert_pem + b"\0" + key_pem).hexdigest()

    def reload_if_changed(self) -> bool:
        """Reload when the files changed; True when a new pair is now being served.

        A cheap stat comparison gates the read; the content digest decides. A pair that
        fails validation is counted once per distinct content and the old pair stays.
        """
        stat = self._stats()
        if stat == self._stat:
            return False
        try:
            cert_pem, key_pem = self.cert.read_bytes(), self.key.read_bytes()
        except OSError as exc:
            return self._reject(f"cannot read {exc.filename}: {exc.strerror}", digest="unreadable")
        self._stat = stat
        digest = self._digest_of(cert_pem, key_pem)
        if digest in (self._digest, self._rejected):
            return False
        try:
            pair = parse_pair(cert_pem, key_pem, cert_name=str(self.cert), key_name=str(self.key))
            self._install(pair)
        except CertError as exc:
            return self._reject(str(exc), digest=digest)
        self._digest, self._rejected = digest, None
        self._after_reload()
        return True

    def _install(self, pair: ServingPair) -> None:
        try:
            load_pair_into(self.ssl_context, pair)
        except ssl.SSLError as exc:
            # Put the last good pair back: a failed load_cert_chain may leave the
            # context with the new certificate and no matching key.
            load_pair_into(self.ssl_context, self._current)
            raise CertError(f"{self.cert}: OpenSSL refused the pair ({exc})") from None
        self._current = pair

    def _reject(self, reason: str, *, digest: str) -> bool:
        if digest != self._rejected:
            self.errors += 1
            self._rejected = digest
            log.warning(
                "certificate reload failed, still serving serial %x: %s", self.serial, reason
            )
        return False

    def _after_reload(self) -> None:
        self.reloads += 1
        log.info(
            "reloaded serving certificate %s: serial %x, expires %s",
            self.cert,
            self.serial,
            f"{self.not_after:%Y-%m-%dT%H:%M:%SZ}",
        )
        self._warn_expiry()
        if self.on_reload is not None:
            try:
                self.on_reload()
            except Exception:
                log.exception("on_reload callback failed")

    def _warn_expiry(self) -> None:
        message = expiry_warning(self.not_after, utcnow())
        if message:
            log.warning("%s (%s)", message, self.cert)

    async def start(self) -> None:
        """Start polling in the background (idempotent)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """Stop polling and wait for the poller to finish."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _run(self) -> None:
        last_expiry_check = time.monotonic()
        while True:
            await asyncio.sleep(self.interval)
            # A certificate that is never rotated must still warn as expiry nears.
            if time.monotonic() - last_expiry_check >= EXPIRY_CHECK_EVERY:
                last_expiry_check = time.monotonic()
                self._warn_expiry()
            try:
                self.reload_if_changed()
            except Exception:  # the poller must survive anything; the next tick retries
                self.errors += 1
                log.exception("certificate watcher failed")
