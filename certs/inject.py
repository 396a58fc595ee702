"""Put the CA bundle where the kube-apiserver reads it, with the official kubernetes client.

``caBundle`` in each webhook's ``clientConfig`` is what the apiserver trusts for that
webhook; a stale bundle after a CA rotation is a reported outage (kubevirt#15210,
cert-manager#5861). ``inject_ca_bundle`` patches every webhook of the two named
configurations with a JSON patch guarded by ``test`` operations on the webhook names, so
a configuration edited concurrently is never patched at the wrong index.

The self-signed overlay's Job also keeps the certificates in Secrets: ``NAME`` (type
``kubernetes.io/tls``: ``tls.crt``, ``tls.key``, ``ca.crt``), mounted by the webhook pods,
and ``NAME-ca`` (``ca.crt``, ``ca.key``), read only by the Job, so the webhook pods never
hold the CA key and a re-run reuses the CA (the injected bundle stays valid).
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from kubernetes import client
from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError

from certs.authority import CA_CERT, CA_KEY, TLS_CERT, TLS_KEY, write_file

KINDS = {
    "mutating": "MutatingWebhookConfiguration",
    "validating": "ValidatingWebhookConfiguration",
}


class InjectError(Exception):
    """The CA bundle could not be read, or the cluster could not be updated."""


@dataclass(frozen=True)
class Injected:
    """What happened to one webhook configuration."""

    kind: str
    name: str
    webhooks: int
    changed: bool


def read_ca_bundle(path: Path) -> bytes:
    """The PEM bytes of ``path``, checked to hold at least one CA certificate."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InjectError(f"--ca-file {path}: cannot read ({exc.strerror})") from None
    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError:
        raise InjectError(
            f"--ca-file {path}: not a PEM certificate bundle (expected -----BEGIN CERTIFICATE-----)"
        ) from None
    for cert in certs:
        try:
            if cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca:
                return data
        except x509.ExtensionNotFound:
            continue
    raise InjectError(f"--ca-file {path}: holds no CA certificate (basicConstraints CA=true)")


def _b64(data: bytes | str | None) -> str | None:
    if data is None:
        return None
    return data.decode() if isinstance(data, bytes) else data


def bundle_patch(webhooks: list[Any], ca_b64: str) -> list[dict[str, Any]]:
    """JSON patch ops setting caBundle on every webhook, guarded by the webhook's name."""
    ops: list[dict[str, Any]] = []
    for i, hook in enumerate(webhooks):
        if _b64(hook.client_config.ca_bundle) == ca_b64:
            continue
        ops.append({"op": "test", "path": f"/webhooks/{i}/name", "value": hook.name})
        # "add" replaces an existing member (RFC 6902 4.1), so it works either way.
        ops.append({"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": ca_b64})
    return ops


def inject_ca_bundle(
    api: client.ApiClient, *, ca_pem: bytes, mutating: str, validating: str
) -> list[Injected]:
    """Patch ``caBundle`` into every webhook of both configurations (idempotent)."""
    admission = client.AdmissionregistrationV1Api(api)
    ca_b64 = base64.b64encode(ca_pem).decode()
    targets = (
        ("mutating", mutating, admission.read_mutating_webhook_configuration,
         admission.patch_mutating_webhook_configuration),
        ("validating", validating, admission.read_validating_webhook_configuration,
         admission.patch_validating_webhook_configuration),
    )  # fmt: skip
    results = []
    for which, name, read, patch in targets:
        kind = KINDS[which]
        with _api_errors(kind, name):
            current = read(name)
            ops = bundle_patch(list(current.webhooks or []), ca_b64)
            if ops:
                patch(name, ops, _content_type="application/json-patch+json")
        results.append(Injected(kind, name, len(current.webhooks or []), bool(ops)))
    return results


@contextlib.contextmanager
def _api_errors(kind: str, name: str) -> Iterator[None]:
    """Turn client exceptions into one clear line naming the object and the cause."""
    try:
        yield
    except ApiException as exc:
        raise InjectError(_describe_api_error(kind, name, exc)) from None
    except (HTTPError, OSError) as exc:
        raise InjectError(f"{kind} {name}: cannot reach the API server ({exc})") from None


def _describe_api_error(kind: str, name: str, exc: ApiException) -> str:
    if exc.status == 404:
        return (
            f"{kind} {name!r} not found: apply the manifests first "
            f"(kubectl apply -k manifests/overlays/...) or check the name"
        )
    if exc.status in (401, 403):
        return (
            f"{kind} {name!r}: access denied (HTTP {exc.status}); the identity needs get and "
            f"patch on {kind.lower()}s with resourceNames [{name}]"
        )
    if exc.status in (409, 422):
        return f"{kind} {name!r} changed while patching (HTTP {exc.status}); run inject again"
    return f"{kind} {name!r}: API server answered HTTP {exc.status} {exc.reason}"


# --- certificate Secrets (self-signed overlay) ------------------------------------------


def parse_secret_ref(ref: str) -> tuple[str, str]:
    """``NAMESPACE/NAME`` -> (namespace, name)."""
    namespace, sep, name = ref.partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise InjectError(
            f"--secret {ref!r}: expected NAMESPACE/NAME, e.g. numagate-system/numagate-tls"
        )
    return namespace, name


def _secret_files(secret: client.V1Secret) -> dict[str, bytes]:
    return {k: base64.b64decode(v) for k, v in (secret.data or {}).items()}


def load_secrets(api: client.ApiClient, ref: str, out: Path) -> list[str]:
    """Copy the CA (and serving pair) from the Secrets into ``out``; returns the files written.

    Missing Secrets are fine (first run); the CA pair is what makes a re-run keep the
    caBundle valid.
    """
    namespace, name = parse_secret_ref(ref)
    core = client.CoreV1Api(api)
    written: list[str] = []
    out.mkdir(mode=0o700, parents=True, exist_ok=True)
    for secret_name, keys in ((f"{name}-ca", (CA_CERT, CA_KEY)), (name, (TLS_CERT, TLS_KEY))):
        files = _read_secret(core, namespace, secret_name)
        if files is None or not all(k in files for k in keys):
            continue
        for key in keys:
            write_file(out / key, files[key], mode=0o600 if key.endswith(".key") else 0o644)
            written.append(key)
    return written


def _read_secret(core: client.CoreV1Api, namespace: str, name: str) -> dict[str, bytes] | None:
    try:
        return _secret_files(core.read_namespaced_secret(name, namespace))
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise InjectError(_describe_api_error("Secret", f"{namespace}/{name}", exc)) from None
    except (HTTPError, OSError) as exc:
        raise InjectError(
            f"Secret {namespace}/{name}: cannot reach the API server ({exc})"
        ) from None


def store_secrets(api: client.ApiClient, ref: str, out: Path) -> None:
    """Create or replace the serving Secret and the CA Secret from the files in ``out``."""
    namespace, name = parse_secret_ref(ref)
    files = {k: (out / k).read_bytes() for k in (CA_CERT, CA_KEY, TLS_CERT, TLS_KEY)}
    core = client.CoreV1Api(api)
    _apply_secret(core, namespace, f"{name}-ca", "Opaque",
                  {CA_CERT: files[CA_CERT], CA_KEY: files[CA_KEY]})  # fmt: skip
    _apply_secret(core, namespace, name, "kubernetes.io/tls",
                  {TLS_CERT: files[TLS_CERT], TLS_KEY: files[TLS_KEY], CA_CERT: files[CA_CERT]})  # fmt: skip


def _apply_secret(
    core: client.CoreV1Api, namespace: str, name: str, type_: str, files: Mapping[str, bytes]
) -> None:
    body = client.V1Secret(
        metadata=client.V1ObjectMeta(
            name=name, namespace=namespace, labels={"app.kubernetes.io/name": "numagate"}
        ),
        type=type_,
        data={k: base64.b64encode(v).decode() for k, v in files.items()},
    )
    with _api_errors("Secret", f"{namespace}/{name}"):
        try:
            core.replace_namespaced_secret(name, namespace, body)
        except ApiException as exc:
            if exc.status != 404:
                raise
            core.create_namespaced_secret(namespace, body)
