"""An apiserver-like client for contract tests (research/webhook-anchors.md section 1).

It does what the kube-apiserver does with a webhook:

- builds AdmissionReview v1 requests from manifests (fresh uid per round trip, kind,
  resource, operation, userInfo, object/oldObject, dryRun, options);
- POSTs them over real TLS, verifying the CA bundle and the Service DNS name
  ``numagate.numagate-system.svc`` (TLS ServerName), with ``?timeout=Ns`` appended;
- verifies the response like ``VerifyAdmissionResponse``: HTTP 200, GVK
  ``admission.k8s.io/v1 AdmissionReview``, uid echoed, patch <=> patchType JSONPatch,
  no patch from a validating webhook, warnings short and unique;
- applies the JSONPatch with the ``jsonpatch`` library (a patch that fails to apply is an
  InternalError for the apiserver), validates a mutated Pod against the official schema
  with ``kubernetes_validate``, re-invokes the mutating webhook (reinvocationPolicy
  IfNeeded: the second call must not patch), then calls the validating webhook.
"""

from __future__ import annotations

import base64
import copy
import ssl
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import jsonpatch
import kubernetes_validate
import orjson

from certs.authority import CertPaths
from tests.builders.objects import SMALL, build_review, gvk
from tests.launch import SERVER_NAME, running_server
from webhook.config import Config, parse_config
from webhook.inventory.state import InventoryState, StaticFileSource
from webhook.review.pipeline import Runtime, answer
from webhook.server import ServeOptions

K8S_VERSION = "1.37.0"


class ContractViolation(AssertionError):
    """The webhook answered something the kube-apiserver would reject."""


class WebhookCallError(Exception):
    """A non-200 answer: the apiserver's failurePolicy would apply."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"HTTP {status}: {text}")
        self.status = status
        self.text = text


def verify_response(sent: Mapping[str, Any], body: Any, *, mutating: bool) -> dict[str, Any]:
    """VerifyAdmissionResponse (apiserver webhook/request/admissionreview.go), plus our
    own contract on warnings and deny statuses. Returns ``response``."""

    def fail(msg: str) -> None:
        raise ContractViolation(msg)

    if not isinstance(body, dict):
        fail(f"body is not an object: {body!r}")
    if (body.get("apiVersion"), body.get("kind")) != ("admission.k8s.io/v1", "AdmissionReview"):
        fail(f"wrong GVK: {body.get('apiVersion')} {body.get('kind')}")
    response = body.get("response")
    if not isinstance(response, dict):
        fail("response absent")
    if response.get("uid") != sent["request"]["uid"]:
        fail(f"uid {response.get('uid')!r} != {sent['request']['uid']!r}")
    if not isinstance(response.get("allowed"), bool):
        fail("allowed missing")
    has_patch, has_type = "patch" in response, "patchType" in response
    if mutating:
        if has_patch != has_type:
            fail("patch without patchType or patchType without patch")
        if has_type and response["patchType"] != "JSONPatch":
            fail(f"patchType {response['patchType']!r}")
    elif has_patch or has_type:
        fail("a validating webhook returned a patch")
    if not response["allowed"]:
        status = response.get("status") or {}
        if status.get("code") not in (400, 403) or not status.get("message"):
            fail(f"deny without a 400/403 code and a message: {status}")
    warnings = response.get("warnings") or []
    if len(set(warnings)) != len(warnings) or any(len(w) >= 120 for w in warnings):
        fail(f"warnings duplicated or too long: {warnings}")
    return response


def decode_patch(response: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    if "patch" not in response:
        return None
    ops = orjson.loads(base64.b64decode(response["patch"], validate=True))
    assert isinstance(ops, list) and ops, "an empty patch must be omitted"
    return ops


def runtime(config: dict[str, Any] | None = None, *, inventory: Path | None = SMALL) -> Runtime:
    """An in-process review runtime: the parsed config and a static file inventory."""
    cfg: Config = parse_config(config or {}, env={})
    state = InventoryState()
    if inventory is not None:
        StaticFileSource(inventory, state).load()
    return Runtime(config=lambda: cfg, inventory=state)


async def call(rt: Runtime, webhook: str, review: dict[str, Any], **kw: Any) -> dict[str, Any]:
    """Answer ``review`` in process and verify the response as the apiserver would."""
    result = await answer(orjson.dumps(review), webhook=webhook, runtime=rt, **kw)  # type: ignore[arg-type]
    assert result.status == 200, result.body
    return verify_response(review, orjson.loads(result.body), mutating=webhook == "mutate")


@dataclass
class Call:
    review: dict[str, Any]
    response: dict[str, Any]

    @property
    def allowed(self) -> bool:
        return bool(self.response["allowed"])

    @property
    def patch(self) -> list[dict[str, Any]] | None:
        return decode_patch(self.response)

    @property
    def warnings(self) -> list[str]:
        return list(self.response.get("warnings") or [])

    @property
    def message(self) -> str:
        return str((self.response.get("status") or {}).get("message", ""))


@dataclass
class Admission:
    """The outcome of one object going through the apiserver's admission chain."""

    object: dict[str, Any]
    mutate: Call
    validate: Call | None
    reinvoked: Call | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def allowed(self) -> bool:
        return self.mutate.allowed and (self.validate is None or self.validate.allowed)


def client_context(
    ca_file: Path, *, client_cert: tuple[Path, Path] | None = None
) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca_file))  # verifies chain and hostname
    if client_cert is not None:
        ctx.load_cert_chain(str(client_cert[0]), str(client_cert[1]))
    return ctx


class ApiServer:
    """Calls the webhook the way the kube-apiserver does."""

    def __init__(
        self,
        base_url: str,
        ca_file: Path,
        *,
        server_name: str = SERVER_NAME,
        timeout_seconds: int = 10,
        client_cert: tuple[Path, Path] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.server_name = server_name
        self.timeout_seconds = timeout_seconds
        self.ssl = client_context(ca_file, client_cert=client_cert)
        self.session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> ApiServer:
        self.session = aiohttp.ClientSession()
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.session is not None
        await self.session.close()

    async def post(
        self, path: str, body: bytes, *, headers: Mapping[str, str] | None = None
    ) -> tuple[int, bytes]:
        assert self.session is not None
        url = f"{self.base_url}{path}"
        async with self.session.post(
            url,
            data=body,
            headers=dict(headers or {"Content-Type": "application/json"}),
            ssl=self.ssl,
            server_hostname=self.server_name,
        ) as resp:
            return resp.status, await resp.read()

    async def get(self, path: str) -> tuple[int, bytes]:
        assert self.session is not None
        async with self.session.get(
            f"{self.base_url}{path}", ssl=self.ssl, server_hostname=self.server_name
        ) as resp:
            return resp.status, await resp.read()

    async def call(self, webhook: str, review: dict[str, Any]) -> Call:
        status, body = await self.post(
            f"/{webhook}?timeout={self.timeout_seconds}s", orjson.dumps(review)
        )
        if status != 200:
            raise WebhookCallError(status, body.decode(errors="replace"))
        response = verify_response(review, orjson.loads(body), mutating=webhook == "mutate")
        return Call(review, response)

    async def admit(
        self,
        obj: Mapping[str, Any],
        *,
        operation: str = "CREATE",
        old: Mapping[str, Any] | None = None,
        dry_run: bool = False,
    ) -> Admission:
        """Mutate, apply, schema-check, re-invoke, validate: the apiserver's chain."""
        mutated = await self.call(
            "mutate", build_review(obj, operation=operation, old=old, dry_run=dry_run)
        )
        current = copy.deepcopy(dict(obj))
        if not mutated.allowed:
            return Admission(current, mutated, None, warnings=mutated.warnings)
        ops = mutated.patch
        reinvoked = None
        if ops is not None:
            current = jsonpatch.JsonPatch(ops).apply(current)
            reinvoked = await self.call(
                "mutate", build_review(current, operation=operation, old=old, dry_run=dry_run)
            )
            if reinvoked.patch is not None:
                raise ContractViolation(f"not idempotent: second patch {reinvoked.patch}")
        if gvk(current)[2] == "Pod":
            kubernetes_validate.validate(current, K8S_VERSION, strict=True)
        validated = await self.call(
            "validate", build_review(current, operation=operation, old=old, dry_run=dry_run)
        )
        return Admission(
            current, mutated, validated, reinvoked, mutated.warnings + validated.warnings
        )


@asynccontextmanager
async def served(certs: CertPaths, *, inventory: Path, config: Path) -> AsyncIterator[ApiServer]:
    """The real server over TLS on a free port (``inventory``, ``config``), and a client."""
    opts = ServeOptions(
        host="127.0.0.1",
        port=0,
        cert=str(certs.cert),
        key=str(certs.key),
        inventory=str(inventory),
        config=str(config),
    )
    async with running_server(opts) as port, ApiServer(f"https://127.0.0.1:{port}", certs.ca) as c:
        yield c
