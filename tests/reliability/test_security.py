"""Security: TLS 1.2 minimum and strong ciphers only, optional client-certificate
authentication of the apiserver (``numagate serve --client-ca``) both ways, no secret or
full pod spec in the logs at the default level, least-privilege RBAC, non-root container.
"""

from __future__ import annotations

import datetime
import json
import re
import socket
import ssl
import subprocess
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from certs.authority import CertPaths
from tests.launch import ServeProcess, serving, start_serve
from tests.paths import ROOT
from tests.reliability.corpus import (
    Client,
    check_review,
    good_pod,
    good_review,
    impossible_pod,
    review_of,
)

SECRET = "s3cr3t-Passw0rd-7f1c9e"  # looks like a credential; must never be logged
IMAGE = "registry.example/private/app@sha256:0123456789abcdef"
# ECDHE key exchange (forward secrecy) with an AEAD cipher: what is acceptable for TLS 1.2
# (Mozilla "intermediate", and the Go crypto/tls defaults the apiserver speaks).
STRONG_TLS12 = re.compile(r"^ECDHE-(ECDSA|RSA)-(AES(128|256)-GCM-SHA(256|384)|CHACHA20-POLY1305)$")


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, CertPaths]]:
    with serving(tmp_path_factory.mktemp("tls")) as (srv, paths):
        yield srv.port, paths


def handshake(port: int, ctx: ssl.SSLContext) -> tuple[str, str] | None:
    """(protocol, cipher) when the server completes a handshake with ``ctx``, else None."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        try:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                version, cipher = tls.version(), tls.cipher()
                assert version is not None and cipher is not None
                return version, cipher[0]
        except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
            return None


def old_client(*, minimum: ssl.TLSVersion, maximum: ssl.TLSVersion, ciphers: str) -> ssl.SSLContext:
    """A client that really offers old protocols and weak ciphers (security level 0)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # TLSv1/TLSv1_1 enum members
        ctx.minimum_version = minimum
        ctx.maximum_version = maximum
    ctx.set_ciphers(ciphers)
    return ctx


class PermissiveServer:
    """A TLS server that accepts anything OpenSSL can do: the control showing that the
    old clients above really offer what the real server refuses."""

    def __init__(self, paths: CertPaths) -> None:
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            self.ctx.minimum_version = ssl.TLSVersion.TLSv1
        self.ctx.set_ciphers("ALL:@SECLEVEL=0")
        self.ctx.load_cert_chain(str(paths.cert), str(paths.key))
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            try:
                with self.ctx.wrap_socket(conn, server_side=True) as tls:
                    tls.recv(1)
            except (OSError, ssl.SSLError):
                pass

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(scope="module")
def permissive(tls_server: tuple[int, CertPaths]) -> Iterator[PermissiveServer]:
    server = PermissiveServer(tls_server[1])
    try:
        yield server
    finally:
        server.close()


# ----------------------------------------------------------------------------- TLS


@pytest.mark.parametrize(
    "version", [ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1], ids=["TLSv1.0", "TLSv1.1"]
)
def test_old_protocols_are_refused(
    tls_server: tuple[int, CertPaths], permissive: PermissiveServer, version: ssl.TLSVersion
) -> None:
    ctx = old_client(minimum=version, maximum=version, ciphers="ALL:@SECLEVEL=0")
    offered = handshake(permissive.port, ctx)
    assert offered is not None and offered[0] in ("TLSv1", "TLSv1.1"), offered  # control
    assert handshake(tls_server[0], ctx) is None


def _tls12_ciphers() -> list[str]:
    ctx = old_client(
        minimum=ssl.TLSVersion.TLSv1_2, maximum=ssl.TLSVersion.TLSv1_2, ciphers="ALL:@SECLEVEL=0"
    )
    return sorted({c["name"] for c in ctx.get_ciphers() if c["protocol"] != "TLSv1.3"})


@pytest.mark.slow
def test_only_strong_tls12_ciphers_are_accepted(
    tls_server: tuple[int, CertPaths], permissive: PermissiveServer
) -> None:
    """Offer each TLS 1.2 cipher suite this OpenSSL knows, one at a time: only ECDHE with
    AES-GCM or ChaCha20-Poly1305 may be accepted. (RC4 and 3DES are not even offered by
    OpenSSL 3 without the legacy provider; NULL, anonymous, MD5, CBC/SHA-1, static-RSA,
    CAMELLIA, ARIA and CCM suites are.)"""
    accepted, control = [], []
    for name in _tls12_ciphers():
        ctx = old_client(
            minimum=ssl.TLSVersion.TLSv1_2,
            maximum=ssl.TLSVersion.TLSv1_2,
            ciphers=f"{name}:@SECLEVEL=0",
        )
        if handshake(tls_server[0], ctx) is not None:
            accepted.append(name)
        if handshake(permissive.port, ctx) is not None:
            control.append(name)
    weak_offered = [n for n in control if not STRONG_TLS12.match(n)]
    assert weak_offered, "control: the permissive server should accept some weak suite"
    assert accepted, "no TLS 1.2 suite accepted at all"
    assert all(STRONG_TLS12.match(n) for n in accepted), accepted


@pytest.mark.parametrize(
    "ciphers",
    [
        "NULL:eNULL:@SECLEVEL=0",
        "aNULL:@SECLEVEL=0",
        "MD5:@SECLEVEL=0",
        "AES128-SHA:AES256-SHA:@SECLEVEL=0",
    ],
)
def test_weak_cipher_only_clients_are_refused(
    tls_server: tuple[int, CertPaths], ciphers: str
) -> None:
    ctx = old_client(
        minimum=ssl.TLSVersion.TLSv1_2, maximum=ssl.TLSVersion.TLSv1_2, ciphers=ciphers
    )
    assert handshake(tls_server[0], ctx) is None


def test_default_client_negotiates_tls13_or_strong_tls12(tls_server: tuple[int, CertPaths]) -> None:
    port, paths = tls_server
    ctx = ssl.create_default_context(cafile=str(paths.ca))
    result = handshake(port, ctx)
    assert result is not None
    assert result[0] == "TLSv1.3" or STRONG_TLS12.match(result[1]), result
    tls12 = ssl.create_default_context(cafile=str(paths.ca))
    tls12.maximum_version = ssl.TLSVersion.TLSv1_2
    result12 = handshake(port, tls12)
    assert result12 is not None and STRONG_TLS12.match(result12[1]), result12


def test_http2_is_not_offered(tls_server: tuple[int, CertPaths]) -> None:
    """The apiserver speaks HTTP/1.1; h2 would only add attack surface (Rapid Reset)."""
    port, paths = tls_server
    ctx = ssl.create_default_context(cafile=str(paths.ca))
    ctx.set_alpn_protocols(["h2", "http/1.1"])
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        assert tls.selected_alpn_protocol() in (None, "http/1.1")


# ----------------------------------------------------------------------------- client certs


@dataclass(frozen=True)
class ClientPki:
    ca: Path
    cert: Path
    key: Path


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_client_pki(directory: Path, cn: str = "kube-apiserver") -> ClientPki:
    """A CA and a client certificate (extendedKeyUsage clientAuth) signed by it."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name(f"{cn}-ca"))
        .issuer_name(_name(f"{cn}-ca"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pki = ClientPki(directory / "client-ca.crt", directory / "client.crt", directory / "client.key")
    pki.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    pki.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pki.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return pki


@pytest.fixture(scope="module")
def mtls(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ServeProcess, ClientPki, ClientPki]]:
    directory = tmp_path_factory.mktemp("mtls")
    trusted = make_client_pki(directory / "trusted")
    stranger = make_client_pki(directory / "stranger", cn="intruder")
    served = start_serve(directory, "--client-ca", str(trusted.ca))
    try:
        yield served, trusted, stranger
    finally:
        served.stop()


def _client(served: ServeProcess, pki: ClientPki | None) -> Client:
    ctx = ssl.create_default_context(cafile=str(served.ca))
    if pki is not None:
        ctx.load_cert_chain(str(pki.cert), str(pki.key))
    return Client(served.port, None, context=ctx, timeout=5)


def _refused(client: Client) -> bool:
    """The TLS layer turns the caller away (with TLS 1.3 the alert may only arrive on the
    first read); a timeout is not a refusal."""
    try:
        client.review("validate", good_review("intruder"))
    except TimeoutError:
        return False
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
        return True
    return False


@pytest.mark.slow
def test_client_ca_admits_the_apiserver_certificate(
    mtls: tuple[ServeProcess, ClientPki, ClientPki],
) -> None:
    served, trusted, _ = mtls
    reply = _client(served, trusted).review("validate", good_review("mtls-ok"))
    assert check_review(reply, uid="mtls-ok", webhook="validate")["allowed"] is True


@pytest.mark.slow
def test_client_ca_refuses_no_certificate_and_a_foreign_one(
    mtls: tuple[ServeProcess, ClientPki, ClientPki],
) -> None:
    served, trusted, stranger = mtls
    assert _refused(_client(served, None))
    assert _refused(_client(served, stranger))
    # ...and the legitimate caller is still served afterwards.
    reply = _client(served, trusted).review("mutate", good_review("mtls-after"))
    assert check_review(reply, uid="mtls-after", webhook="mutate")["allowed"] is True


def test_without_client_ca_any_tls_client_is_served(tls_server: tuple[int, CertPaths]) -> None:
    """The other way: client authentication is optional (the default sample server and
    controller-runtime without ClientCAName do not ask for one)."""
    port, paths = tls_server
    reply = Client(port, paths.ca).review("validate", good_review("no-mtls"))
    assert check_review(reply, uid="no-mtls", webhook="validate")["allowed"] is True


# ----------------------------------------------------------------------------- logs


def _secret_pod(base: dict[str, Any]) -> dict[str, Any]:
    pod = json.loads(json.dumps(base))
    container = pod["spec"]["containers"][0]
    container["image"] = IMAGE
    container["env"] = [
        {"name": "DB_PASSWORD", "value": SECRET},
        {"name": "API_TOKEN", "valueFrom": {"secretKeyRef": {"name": "api", "key": "token"}}},
    ]
    container["args"] = ["--password", SECRET]
    return pod


@pytest.mark.slow
def test_no_secret_or_pod_spec_in_default_logs(tmp_path: Path) -> None:
    served = start_serve(tmp_path)
    try:
        client = Client(served.port, served.ca)
        good, bad = _secret_pod(good_pod()), _secret_pod(impossible_pod())
        broken = _secret_pod(good_pod())
        broken["metadata"]["annotations"]["scheduling.koordinator.sh/numa-topology-spec"] = "{"
        for i, pod in enumerate((good, bad, broken)):
            for webhook in ("mutate", "validate"):
                uid = f"log-{webhook}-{i}"
                check_review(
                    client.review(webhook, review_of(pod, uid=uid)), uid=uid, webhook=webhook
                )
        # A body that is not an AdmissionReview but carries the secret.
        client.post("/validate", json.dumps({"kind": "AdmissionReview", "secret": SECRET}).encode())
        client.post(
            "/validate", b'{"apiVersion": "admission.k8s.io/v1", "password": "' + SECRET.encode()
        )
    finally:
        served.stop()
    text = "".join(served.log)
    assert "log-validate-1" in text, "the admission log lines are missing altogether"
    assert SECRET not in text
    assert IMAGE not in text and "secretKeyRef" not in text and '"containers"' not in text
    for line in served.log:
        if line.startswith("{"):
            record = json.loads(line)
            assert record["level"] in ("info", "warning", "error"), record


# ----------------------------------------------------------------------------- manifests


def _render(path: Path) -> list[dict[str, Any]]:
    out = subprocess.run(
        ["kubectl", "kustomize", str(path)], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


READ_VERBS = {"get", "list", "watch"}


def test_webhook_rbac_is_read_only() -> None:
    docs = _render(ROOT / "manifests" / "base")
    roles = [d for d in docs if d["kind"] in ("ClusterRole", "Role")]
    assert any(d["kind"] == "ClusterRole" for d in roles)
    for role in roles:
        for rule in role["rules"]:
            assert set(rule["verbs"]) <= READ_VERBS, (role["metadata"]["name"], rule)
            assert "*" not in rule.get("resources", []) and "*" not in rule.get("apiGroups", [])
            assert "secrets" not in rule.get("resources", []), rule
    # The webhook's own identity gets nothing but these roles.
    bindings = [d for d in docs if d["kind"] in ("ClusterRoleBinding", "RoleBinding")]
    names = {d["metadata"]["name"] for d in roles}
    for binding in bindings:
        assert binding["roleRef"]["name"] in names
        assert binding["roleRef"]["name"] != "cluster-admin"


def test_certificate_job_rbac_is_scoped_by_name() -> None:
    """The one identity that writes (the self-signed overlay's certificate Job) may patch
    only numagate's own webhook configurations, and it is not the webhook's account."""
    docs = _render(ROOT / "manifests" / "overlays" / "self-signed")
    for role in (d for d in docs if d["kind"] in ("ClusterRole", "Role")):
        for rule in role["rules"]:
            writes = set(rule["verbs"]) - READ_VERBS
            if not writes:
                continue
            assert role["metadata"]["name"] != "numagate", rule
            if "create" not in writes:  # RBAC cannot restrict create by name
                assert rule.get("resourceNames"), rule


def test_container_runs_as_non_root() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    users = re.findall(r"^USER\s+(\S+)", dockerfile, re.M)
    assert users, "Dockerfile has no USER"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0, users[-1]  # numeric: runAsNonRoot can verify it
    deployment = next(d for d in _render(ROOT / "manifests" / "base") if d["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"].get("runAsUser", int(uid)) != 0
    for container in pod["containers"]:
        sc = container["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False
        assert sc.get("privileged", False) is False
        assert sc["readOnlyRootFilesystem"] is True
        assert "ALL" in sc["capabilities"]["drop"]
        assert not sc["capabilities"].get("add")
