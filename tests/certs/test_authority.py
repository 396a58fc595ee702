"""The CA and serving certificates: SANs, chain, key usage, reuse of the CA, errors."""

from __future__ import annotations

import datetime as dt
import ipaddress
import ssl
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from certs.authority import (
    CertError,
    cert_pem,
    create_ca,
    ensure_serving_certs,
    expiry_warning,
    generate,
    key_pem,
    new_key,
    utcnow,
    write_file,
)
from certs.watcher import build_server_context
from tests.certs.tls import client_context, handshake, load_leaf, served_serial

SERVICE_NAMES = [
    "numagate.numagate-system.svc",
    "numagate.numagate-system.svc.cluster.local",
    "numagate.numagate-system",
    "numagate",
]


@pytest.fixture
def generated(tmp_path: Path):
    return generate(
        tmp_path / "out",
        service="numagate",
        namespace="numagate-system",
        ips=["10.96.0.15", "fd00::15"],
    )


def test_generate_writes_the_four_files_with_private_keys_0600(generated) -> None:
    out = generated.cert.parent
    assert sorted(p.name for p in out.iterdir()) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    for name in ("ca.key", "tls.key"):
        assert stat.S_IMODE((out / name).stat().st_mode) == 0o600
    assert generated.ca == out / "ca.crt"
    assert generated.key == out / "tls.key"


def test_serving_cert_has_every_service_name_and_ip_as_san(generated) -> None:
    leaf = load_leaf(generated.cert)
    san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == SERVICE_NAMES
    assert san.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address("10.96.0.15"),
        ipaddress.ip_address("fd00::15"),
    ]
    # Not CN-only (Go 1.15+ ignores the CN): the CN is also a SAN.
    cn = leaf.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
    assert cn in SERVICE_NAMES


def test_serving_cert_is_sha256_server_auth_and_not_a_ca(generated) -> None:
    leaf = load_leaf(generated.cert)
    assert isinstance(leaf.signature_hash_algorithm, hashes.SHA256)
    eku = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    lifetime = leaf.not_valid_after_utc - utcnow()
    assert dt.timedelta(days=364) < lifetime <= dt.timedelta(days=365)


def test_ca_is_a_sha256_cert_signing_ca_for_ten_years(generated) -> None:
    ca = x509.load_pem_x509_certificate(generated.ca.read_bytes())
    assert isinstance(ca.signature_hash_algorithm, hashes.SHA256)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    usage = ca.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.key_cert_sign is True
    assert ca.not_valid_after_utc - utcnow() > dt.timedelta(days=3649)
    leaf = load_leaf(generated.cert)
    leaf.verify_directly_issued_by(ca)  # raises if the signature does not verify


@pytest.mark.parametrize("name", [*SERVICE_NAMES, "10.96.0.15"])
def test_chain_and_san_verify_with_the_ssl_module(generated, name: str) -> None:
    server = build_server_context(generated.cert, generated.key)
    tls = handshake(server, client_context(generated.ca), name)
    assert served_serial(tls) == load_leaf(generated.cert).serial_number


def test_a_name_outside_the_sans_fails_hostname_verification(generated) -> None:
    server = build_server_context(generated.cert, generated.key)
    with pytest.raises(ssl.SSLCertVerificationError, match="mismatch"):
        handshake(server, client_context(generated.ca), "other.numagate-system.svc")


def test_a_client_trusting_another_ca_rejects_the_chain(generated, tmp_path: Path) -> None:
    other = create_ca(now=utcnow())
    other_ca = tmp_path / "other-ca.crt"
    other_ca.write_bytes(cert_pem(other.cert))
    server = build_server_context(generated.cert, generated.key)
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(server, client_context(other_ca), SERVICE_NAMES[0])


def test_generate_again_reuses_the_ca_and_renews_only_the_serving_cert(generated) -> None:
    out = generated.cert.parent
    ca_before = (out / "ca.crt").read_bytes(), (out / "ca.key").read_bytes()
    serial_before = load_leaf(generated.cert).serial_number
    again = generate(out, service="numagate", namespace="numagate-system", days=30)
    assert ((out / "ca.crt").read_bytes(), (out / "ca.key").read_bytes()) == ca_before
    assert load_leaf(again.cert).serial_number != serial_before
    # The caBundle already injected still verifies the renewed certificate.
    server = build_server_context(again.cert, again.key)
    handshake(server, client_context(generated.ca), SERVICE_NAMES[0])


def test_a_ca_that_does_not_match_its_key_is_reported(generated) -> None:
    out = generated.cert.parent
    write_file(out / "ca.key", key_pem(new_key()), mode=0o600)
    with pytest.raises(CertError, match=r"ca\.crt does not match .*ca\.key"):
        generate(out, service="numagate", namespace="numagate-system")


def test_a_ca_that_expires_soon_is_reported(tmp_path: Path) -> None:
    ca = create_ca(now=utcnow(), lifetime=dt.timedelta(days=10))
    write_file(tmp_path / "ca.crt", cert_pem(ca.cert), mode=0o644)
    write_file(tmp_path / "ca.key", key_pem(ca.key), mode=0o600)
    with pytest.raises(CertError, match=r"CA expires .* \(9 days left, need 30\)"):
        generate(tmp_path, service="numagate", namespace="numagate-system", days=7)
    assert not (tmp_path / "tls.crt").exists()


def test_a_ca_that_would_expire_before_the_serving_cert_is_reported(tmp_path: Path) -> None:
    ca = create_ca(now=utcnow(), lifetime=dt.timedelta(days=100))
    write_file(tmp_path / "ca.crt", cert_pem(ca.cert), mode=0o644)
    write_file(tmp_path / "ca.key", key_pem(ca.key), mode=0o600)
    with pytest.raises(CertError, match="need 365"):
        generate(tmp_path, service="numagate", namespace="numagate-system")
    generate(tmp_path, service="numagate", namespace="numagate-system", days=90)
    assert (tmp_path / "ca.crt").read_bytes() == cert_pem(ca.cert)


def test_a_ca_certificate_without_its_key_is_reported(tmp_path: Path) -> None:
    ca = create_ca(now=utcnow())
    write_file(tmp_path / "ca.crt", cert_pem(ca.cert), mode=0o644)
    with pytest.raises(CertError, match=r"ca\.crt exists but ca\.key does not"):
        generate(tmp_path, service="numagate", namespace="numagate-system")


def test_a_garbage_ca_file_is_reported(tmp_path: Path) -> None:
    (tmp_path / "ca.crt").write_text("not a certificate")
    (tmp_path / "ca.key").write_text("not a key")
    with pytest.raises(CertError, match=r"ca\.crt: not a readable PEM certificate"):
        generate(tmp_path, service="numagate", namespace="numagate-system")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"service": "Numagate"}, "service 'Numagate' is not a valid name"),
        ({"namespace": "a.b"}, "namespace 'a.b' is not a valid name"),
        ({"namespace": ""}, "namespace '' is not a valid name"),
        ({"ips": ["10.0.0.300"]}, "ip '10.0.0.300' is not an IPv4 or IPv6 address"),
        ({"days": 0}, r"days=0: .* must be 1\.\.3650 days"),
        ({"days": 5000}, "days=5000"),
    ],
)
def test_bad_arguments_name_the_field_and_value(tmp_path: Path, kwargs, message: str) -> None:
    args = {"service": "numagate", "namespace": "numagate-system", **kwargs}
    with pytest.raises(CertError, match=message):
        generate(tmp_path / "out", **args)
    assert not (tmp_path / "out").exists()


def test_ensure_creates_ca_and_serving_cert_for_the_hosts(tmp_path: Path) -> None:
    cert_dir = tmp_path / "certs"
    paths = ensure_serving_certs(cert_dir, hosts=("localhost", "127.0.0.1", "::1"))
    assert stat.S_IMODE(paths.key.stat().st_mode) == 0o600
    assert stat.S_IMODE((cert_dir / "ca.key").stat().st_mode) == 0o600
    san = load_leaf(paths.cert).extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert san.value.get_values_for_type(x509.DNSName) == ["localhost"]
    assert [str(ip) for ip in san.value.get_values_for_type(x509.IPAddress)] == [
        "127.0.0.1",
        "::1",
    ]
    server = build_server_context(paths.cert, paths.key)
    for host in ("localhost", "127.0.0.1", "::1"):
        handshake(server, client_context(paths.ca), host)


def test_ensure_leaves_existing_certificates_alone(generated) -> None:
    out = generated.cert.parent
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    paths = ensure_serving_certs(out)
    assert paths == generated
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_ensure_with_only_a_certificate_regenerates_the_pair(tmp_path: Path) -> None:
    (tmp_path / "tls.crt").write_text("stale")
    paths = ensure_serving_certs(tmp_path)
    load_leaf(paths.cert)  # a real certificate replaced the stale file
    assert paths.key.exists()


def test_ensure_rejects_a_host_that_is_not_a_name(tmp_path: Path) -> None:
    with pytest.raises(CertError, match="host 'bad host' is neither an IP address nor a DNS name"):
        ensure_serving_certs(tmp_path, hosts=("bad host",))


def test_ensure_on_a_file_reports_the_path(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(CertError, match="cannot create certificate directory"):
        ensure_serving_certs(target / "sub")


NOW = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("left", "expected"),
    [
        (dt.timedelta(days=90), None),
        (dt.timedelta(days=30, seconds=1), None),
        (dt.timedelta(days=29, hours=23), "expires in 29 days (2030-01-30 23:00 UTC)"),
        (dt.timedelta(hours=1), "expires in 0 days"),
        (dt.timedelta(0), "expired at 2030-01-01 00:00 UTC"),
        (-dt.timedelta(days=3), "expired at 2029-12-29"),
    ],
)
def test_expiry_warning_well_before_expiry(left: dt.timedelta, expected: str | None) -> None:
    message = expiry_warning(NOW + left, NOW)
    if expected is None:
        assert message is None
    else:
        assert message is not None
        assert expected in message
