"""A small certificate authority for the webhook's serving certificate.

The kube-apiserver verifies the webhook's certificate against the ``caBundle`` of the
webhook configuration and checks the Service DNS name ``<svc>.<ns>.svc`` against the
certificate's subjectAltNames. Two upstream rules shape this module:

- CN-only certificates fail since Kubernetes 1.19 (Go 1.15: "x509: certificate relies on
  legacy Common Name field"), so every name goes into the SAN extension.
- SHA-1 signatures fail since Go 1.18 (kubernetes#125689), so everything is SHA-256.

Keys are ECDSA P-256 (fast handshakes, accepted by every Go TLS client). ``generate``
reuses an existing CA so that a renewal does not invalidate the ``caBundle`` already
injected into the cluster (stale bundles are a reported outage: kubevirt#15210).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_CERT = "ca.crt"
CA_KEY = "ca.key"
TLS_CERT = "tls.crt"
TLS_KEY = "tls.key"

CA_LIFETIME = dt.timedelta(days=3650)
# Refuse to sign with a CA this close to expiry: the apiserver would reject the chain
# soon after, and a new CA means a new caBundle (cert-manager#5861, rancher/webhook#58).
CA_MIN_REMAINING = dt.timedelta(days=30)
# Backdate notBefore so that a node whose clock is slightly behind still accepts the cert.
CLOCK_SKEW = dt.timedelta(minutes=5)
# Warn this long before the serving certificate expires (apache/yunikorn renews 90 d
# ahead; 30 d leaves time for a human to react to a log line or an alert).
EXPIRY_WARNING = dt.timedelta(days=30)
MAX_DAYS = 3650

# RFC 1123 label, as Kubernetes validates Service and Namespace names.
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_NAME = re.compile(
    r"^(?=.{1,253}$)([a-z0-9*]([-a-z0-9]{0,61}[a-z0-9])?)(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$"
)


class CertError(Exception):
    """A certificate or key is missing, invalid, mismatched or about to expire."""


@dataclass(frozen=True)
class CertPaths:
    """Where the CA certificate and the serving certificate and key live."""

    ca: Path
    cert: Path
    key: Path


@dataclass(frozen=True)
class Authority:
    """A CA certificate with its private key."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey


def utcnow() -> dt.datetime:
    """The current time, timezone-aware (certificates carry UTC)."""
    return dt.datetime.now(dt.UTC)


def service_dns_names(service: str, namespace: str) -> list[str]:
    """The names the apiserver may use for a Service-backed webhook, most specific first."""
    return [
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
        f"{service}.{namespace}",
        service,
    ]


IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def split_hosts(hosts: Sequence[str]) -> tuple[list[str], list[IPAddress]]:
    """Split host names into DNS names and IP addresses, rejecting anything else."""
    dns: list[str] = []
    ips: list[IPAddress] = []
    for host in hosts:
        try:
            ips.append(ipaddress.ip_address(host))
            continue
        except ValueError:
            pass
        name = host.lower().rstrip(".")
        if not _DNS_NAME.match(name):
            raise CertError(
                f"host {host!r} is neither an IP address nor a DNS name "
                "(lower-case letters, digits, '-' and '.')"
            )
        dns.append(name)
    if not dns and not ips:
        raise CertError("hosts is empty: a serving certificate needs at least one SAN")
    return dns, ips


def new_key() -> ec.EllipticCurvePrivateKey:
    """A fresh ECDSA P-256 private key."""
    return ec.generate_private_key(ec.SECP256R1())


def create_ca(*, now: dt.datetime, lifetime: dt.timedelta = CA_LIFETIME) -> Authority:
    """A self-signed CA that may sign serving certificates only (pathLen 0)."""
    key = new_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"numagate-ca-{now:%Y%m%d%H%M%S}")])
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + lifetime)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .add_extension(ski, critical=False)
        .sign(key, hashes.SHA256())
    )
    return Authority(cert=cert, key=key)


def issue_serving_cert(
    ca: Authority, hosts: Sequence[str], *, now: dt.datetime, days: int
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A serverAuth leaf certificate for ``hosts`` (DNS and IP SANs), signed by ``ca``."""
    dns, ips = split_hosts(hosts)
    key = new_key()
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
    sans += [x509.IPAddress(ip) for ip in ips]
    common_name = dns[0] if dns else str(ips[0])
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()),
            critical=False,
        )
        .sign(ca.key, hashes.SHA256())
    )
    return cert, key


def _key_usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def load_authority(out: Path, *, now: dt.datetime, min_remaining: dt.timedelta) -> Authority:
    """Read ``ca.crt``/``ca.key`` from ``out`` and check they are a usable CA pair."""
    cert_path, key_path = out / CA_CERT, out / CA_KEY
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    except (OSError, ValueError) as exc:
        raise CertError(f"{cert_path}: not a readable PEM certificate ({exc})") from None
    try:
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise CertError(f"{key_path}: not a readable unencrypted PEM private key ({exc})") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise CertError(f"{key_path}: CA key type {type(key).__name__} not supported; use ECDSA")
    if not public_keys_match(cert, key):
        raise CertError(
            f"{cert_path} does not match {key_path}: the key is not the CA certificate's key; "
            f"remove both to create a new CA (then re-inject the caBundle)"
        )
    if not _is_ca(cert):
        raise CertError(f"{cert_path}: not a CA certificate (basicConstraints CA=false)")
    remaining = cert.not_valid_after_utc - now
    if remaining < min_remaining:
        raise CertError(
            f"{cert_path}: CA expires {cert.not_valid_after_utc:%Y-%m-%d %H:%M UTC} "
            f"({max(remaining.days, 0)} days left, need {min_remaining.days}); "
            f"remove {CA_CERT} and {CA_KEY} to create a new CA, then re-inject the caBundle"
        )
    return Authority(cert=cert, key=key)


def public_keys_match(cert: x509.Certificate, key: object) -> bool:
    """True when ``key`` is the private key of ``cert``."""
    public = getattr(key, "public_key", None)
    if public is None:
        return False
    fmt = serialization.PublicFormat.SubjectPublicKeyInfo
    enc = serialization.Encoding.DER
    return bool(cert.public_key().public_bytes(enc, fmt) == public().public_bytes(enc, fmt))


def _is_ca(cert: x509.Certificate) -> bool:
    try:
        return bool(cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
    except x509.ExtensionNotFound:
        return False


def write_file(path: Path, data: bytes, *, mode: int) -> None:
    """Write ``data`` atomically (temp file + rename), so a reader never sees half a file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _obtain_authority(out: Path, *, now: dt.datetime, days: int) -> Authority:
    """Reuse the CA in ``out`` when both files exist, else create and write a new one."""
    has_cert, has_key = (out / CA_CERT).exists(), (out / CA_KEY).exists()
    if has_cert and has_key:
        # The leaf must not outlive its CA: an apiserver rejects the chain at CA expiry.
        need = max(CA_MIN_REMAINING, dt.timedelta(days=days))
        return load_authority(out, now=now, min_remaining=need)
    if has_cert != has_key:
        present, missing = (CA_CERT, CA_KEY) if has_cert else (CA_KEY, CA_CERT)
        raise CertError(
            f"{out}: {present} exists but {missing} does not; restore {missing} or remove "
            f"{present} to create a new CA"
        )
    ca = create_ca(now=now)
    write_file(out / CA_KEY, key_pem(ca.key), mode=0o600)
    write_file(out / CA_CERT, cert_pem(ca.cert), mode=0o644)
    return ca


def write_serving_certs(out: Path, hosts: Sequence[str], *, days: int = 365) -> CertPaths:
    """Issue a new serving certificate for ``hosts`` into ``out``, reusing its CA if valid."""
    return _write_serving(Path(out), hosts, now=utcnow(), days=days)


def _write_serving(out: Path, hosts: Sequence[str], *, now: dt.datetime, days: int) -> CertPaths:
    _check_days(days)
    split_hosts(hosts)  # validate before touching the directory
    _prepare_dir(out)
    ca = _obtain_authority(out, now=now, days=days)
    cert, key = issue_serving_cert(ca, hosts, now=now, days=days)
    # Key first: a watcher that sees the new tls.crt then finds its key already present.
    write_file(out / TLS_KEY, key_pem(key), mode=0o600)
    write_file(out / TLS_CERT, cert_pem(cert) + cert_pem(ca.cert), mode=0o644)
    return CertPaths(ca=out / CA_CERT, cert=out / TLS_CERT, key=out / TLS_KEY)


def _prepare_dir(out: Path) -> None:
    try:
        out.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise CertError(f"cannot create certificate directory {out}: {exc.strerror}") from None
    if not out.is_dir():
        raise CertError(f"{out} exists and is not a directory")
    if not os.access(out, os.W_OK):
        raise CertError(f"certificate directory {out} is not writable")


def _check_days(days: int) -> None:
    if not 1 <= days <= MAX_DAYS:
        raise CertError(f"days={days}: the serving certificate lifetime must be 1..{MAX_DAYS} days")


def ensure_serving_certs(
    cert_dir: Path, *, hosts: Sequence[str] = ("localhost", "127.0.0.1")
) -> CertPaths:
    """Make sure ``cert_dir`` holds a serving certificate; create a CA and one if not.

    Existing ``tls.crt``/``tls.key`` are left alone (they may come from a mounted Secret
    or cert-manager); this is what ``numagate serve`` runs at startup.
    """
    cert_dir = Path(cert_dir)
    paths = CertPaths(ca=cert_dir / CA_CERT, cert=cert_dir / TLS_CERT, key=cert_dir / TLS_KEY)
    if paths.cert.exists() and paths.key.exists():
        return paths
    return _write_serving(cert_dir, hosts, now=utcnow(), days=365)


def generate(
    out: Path, *, service: str, namespace: str, days: int = 365, ips: Sequence[str] = ()
) -> CertPaths:
    """Write ``ca.crt``, ``ca.key``, ``tls.crt``, ``tls.key`` for a webhook Service.

    An existing valid CA in ``out`` is reused and only the serving certificate renewed.
    """
    for field, value in (("service", service), ("namespace", namespace)):
        if not _DNS_LABEL.match(value):
            raise CertError(
                f"{field} {value!r} is not a valid name: lower-case letters, digits and '-', "
                "starting and ending with a letter or digit, at most 63 characters"
            )
    for ip in ips:
        try:
            ipaddress.ip_address(ip)
        except ValueError:
            raise CertError(f"ip {ip!r} is not an IPv4 or IPv6 address") from None
    hosts = [*service_dns_names(service, namespace), *ips]
    return _write_serving(Path(out), hosts, now=utcnow(), days=days)


def expiry_warning(
    not_after: dt.datetime, now: dt.datetime, *, threshold: dt.timedelta = EXPIRY_WARNING
) -> str | None:
    """A warning line when the certificate expires within ``threshold`` (or has expired)."""
    left = not_after - now
    stamp = f"{not_after:%Y-%m-%d %H:%M UTC}"
    if left <= dt.timedelta(0):
        return f"serving certificate expired at {stamp}; the apiserver rejects every call"
    if left < threshold:
        return (
            f"serving certificate expires in {left.days} days ({stamp}); renew it "
            "(numagate certs generate, or check cert-manager)"
        )
    return None
