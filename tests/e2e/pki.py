"""The control plane's certificates and keys, made with numagate's own certs package.

One CA (``certs.authority.create_ca``) signs the kube-apiserver's serving certificate
(``issue_serving_cert``) and the client certificates: an admin in ``system:masters`` and
the kube-scheduler as ``system:kube-scheduler`` (the user its bootstrap ClusterRole is bound
to). The service-account signing key is a P-256 key (ES256 tokens).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from certs.authority import (
    Authority,
    cert_pem,
    create_ca,
    issue_serving_cert,
    key_pem,
    new_key,
    utcnow,
    write_file,
)

# The in-cluster names of the apiserver: the `kubernetes` Service's first IP and DNS names.
APISERVER_HOSTS = (
    "127.0.0.1",
    "10.0.0.1",
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)


@dataclass(frozen=True)
class Pki:
    """Paths of everything the processes read."""

    ca: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    scheduler_cert: Path
    scheduler_key: Path
    sa_public: Path
    sa_private: Path


def issue_client_cert(
    ca: Authority, user: str, groups: tuple[str, ...], *, now: dt.datetime, days: int = 2
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A clientAuth certificate: the apiserver reads the user from CN and groups from O."""
    key = new_key()
    subject = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
    subject.append(x509.NameAttribute(NameOID.COMMON_NAME, user))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(subject))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca.key, hashes.SHA256())
    )
    return cert, key


def write_pki(out: Path) -> Pki:
    """Create the CA, the apiserver's serving pair, the client pairs and the SA key pair."""
    out.mkdir(parents=True, exist_ok=True)
    now = utcnow()
    ca = create_ca(now=now)
    paths = Pki(
        ca=out / "ca.crt",
        serving_cert=out / "apiserver.crt",
        serving_key=out / "apiserver.key",
        admin_cert=out / "admin.crt",
        admin_key=out / "admin.key",
        scheduler_cert=out / "scheduler.crt",
        scheduler_key=out / "scheduler.key",
        sa_public=out / "sa.pub",
        sa_private=out / "sa.key",
    )
    write_file(paths.ca, cert_pem(ca.cert), mode=0o644)
    cert, key = issue_serving_cert(ca, APISERVER_HOSTS, now=now, days=2)
    write_file(paths.serving_cert, cert_pem(cert), mode=0o644)
    write_file(paths.serving_key, key_pem(key), mode=0o600)
    for user, groups, cert_path, key_path in (
        ("admin", ("system:masters",), paths.admin_cert, paths.admin_key),
        ("system:kube-scheduler", (), paths.scheduler_cert, paths.scheduler_key),
    ):
        cert, key = issue_client_cert(ca, user, groups, now=now)
        write_file(cert_path, cert_pem(cert), mode=0o644)
        write_file(key_path, key_pem(key), mode=0o600)
    sa_key = new_key()
    write_file(paths.sa_private, key_pem(sa_key), mode=0o600)
    public = sa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    write_file(paths.sa_public, public, mode=0o644)
    return paths
