"""TLS helpers for the certificate tests: an in-memory handshake, client contexts and
certificates, the serial a server served."""

from __future__ import annotations

import datetime as dt
import ssl
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from certs.authority import (
    Authority,
    cert_pem,
    key_pem,
    new_key,
    utcnow,
    write_file,
)


def handshake(
    server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext, server_hostname: str | None
) -> ssl.SSLObject:
    """Run a complete TLS handshake in memory; raise ssl.SSLError from whichever side fails."""
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname=server_hostname)
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(20):
        for side, obj, out, peer_in in (
            ("client", client, c_out, s_in),
            ("server", server, s_out, c_in),
        ):
            if not done[side]:
                try:
                    obj.do_handshake()
                    done[side] = True
                except ssl.SSLWantReadError:
                    pass
            peer_in.write(out.read())
        if all(done.values()):
            # TLS 1.3: the server checks a client certificate after the client finished;
            # exchange application data so a rejection surfaces on the client too.
            client.write(b"ping")
            s_in.write(c_out.read())
            assert server.read(4) == b"ping"
            return client
    raise AssertionError("handshake did not finish")


def client_context(ca: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(ca))


def load_leaf(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificates(path.read_bytes())[0]


def served_serial(tls: ssl.SSLObject) -> int:
    der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def client_certificate(ca: Authority, tmp: Path, name: str) -> tuple[Path, Path]:
    """A clientAuth certificate for "kube-apiserver" signed by ``ca``: (cert, key) files."""
    key = new_key()
    now = utcnow()
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca.key, hashes.SHA256())
    )
    write_file(tmp / f"{name}.crt", cert_pem(cert), mode=0o644)
    write_file(tmp / f"{name}.key", key_pem(key), mode=0o600)
    return tmp / f"{name}.crt", tmp / f"{name}.key"
