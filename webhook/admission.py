"""AdmissionReview ``admission.k8s.io/v1``: parsing the request, building the response.

The request is validated once at the boundary with pydantic (kubernetes/api
``admission/v1/types.go`` names the fields); after that the code uses attributes. Every
response goes through :func:`finalize`, which echoes ``apiVersion``, ``kind`` and ``uid``
(the apiserver rejects a response whose uid or GVK differ: ``VerifyAdmissionResponse``),
emits ``patch``/``patchType`` only when there is a patch, and keeps warnings short.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from webhook.errors import BadRequest

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
# types.go: "Limit warnings to 120 characters if possible"; we stay strictly below.
MAX_WARNING_CHARS = 119
# The apiserver keeps at most 4096 runes of warnings in total (filters/warning.go); 119 x 30
# stays under it, so nothing we send is silently truncated by the apiserver.
MAX_WARNINGS = 30
Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)


class GroupVersionKind(_Wire):
    group: str = ""
    version: str
    kind: str


class GroupVersionResource(_Wire):
    group: str = ""
    version: str
    resource: str


class UserInfo(_Wire):
    username: str = ""
    uid: str = ""
    groups: list[str] = Field(default_factory=list)


class AdmissionRequest(_Wire):
    """``request`` of an AdmissionReview; ``object`` is null on DELETE, ``oldObject`` on CREATE."""

    uid: str = Field(min_length=1)
    kind: GroupVersionKind
    resource: GroupVersionResource
    sub_resource: str = Field("", alias="subResource")
    name: str = ""
    namespace: str = ""
    operation: Operation
    user_info: UserInfo = Field(default_factory=UserInfo, alias="userInfo")
    object: dict[str, Any] | None = None
    old_object: dict[str, Any] | None = Field(None, alias="oldObject")
    dry_run: bool = Field(False, alias="dryRun")
    options: dict[str, Any] | None = None

    @field_validator("dry_run", mode="before")
    @classmethod
    def _null_is_false(cls, value: Any) -> Any:
        return False if value is None else value


class AdmissionReview(_Wire):
    api_version: Literal["admission.k8s.io/v1"] = Field(alias="apiVersion")
    kind: Literal["AdmissionReview"]
    request: AdmissionRequest


def _describe(exc: ValidationError) -> str:
    """First errors of a pydantic ValidationError, as ``field: problem (got value)``."""
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(p) for p in err["loc"]) or "(body)"
        got = "" if err["type"] == "missing" else f" (got {str(err.get('input'))[:60]!r})"
        parts.append(f"{loc}: {err['msg']}{got}")
    return "; ".join(parts)


def parse_review(raw: bytes) -> AdmissionRequest:
    """Parse a request body into the AdmissionRequest, or raise BadRequest naming the field."""
    if not raw.strip():
        raise BadRequest("empty body: expected an AdmissionReview admission.k8s.io/v1")
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BadRequest(
            f"body is a JSON {type(data).__name__}, expected an AdmissionReview object"
        )
    try:
        return AdmissionReview.model_validate(data).request
    except ValidationError as exc:
        raise BadRequest(f"not an AdmissionReview {API_VERSION}: {_describe(exc)}") from None


@dataclass(frozen=True, slots=True)
class Outcome:
    """The webhook's answer before it is put on the wire (see the constructors below)."""

    allowed: bool
    code: int = 200
    message: str = ""
    reason: str = ""
    warnings: tuple[str, ...] = ()
    patch: tuple[Mapping[str, Any], ...] = ()
    audit: Mapping[str, str] = field(default_factory=dict)


def allowed(*, warnings: Iterable[str] = (), audit: Mapping[str, str] | None = None) -> Outcome:
    """Allow without changes."""
    return Outcome(True, warnings=tuple(warnings), audit=dict(audit or {}))


def patched(
    ops: Sequence[Mapping[str, Any]],
    *,
    warnings: Iterable[str] = (),
    audit: Mapping[str, str] | None = None,
) -> Outcome:
    """Allow with a JSONPatch (an empty ``ops`` is a plain allow)."""
    return Outcome(True, warnings=tuple(warnings), patch=tuple(ops), audit=dict(audit or {}))


def denied(
    message: str,
    *,
    code: int = 403,
    reason: str = "Forbidden",
    warnings: Iterable[str] = (),
    audit: Mapping[str, str] | None = None,
) -> Outcome:
    """Deny. 403 Forbidden for a policy violation, 400 BadRequest for a malformed object.

    The apiserver turns codes below 400 into 400 (``ToStatusErr``), so only >= 400 is useful.
    """
    if code < 400:
        raise ValueError(f"deny code {code} must be >= 400")
    return Outcome(
        False,
        code=code,
        message=message,
        reason=reason,
        warnings=tuple(warnings),
        audit=dict(audit or {}),
    )


def shorten(text: str, limit: int = MAX_WARNING_CHARS) -> str:
    """One line of at most ``limit`` characters, cut at a word boundary with '...'."""
    line = " ".join(text.split())
    if len(line) <= limit:
        return line
    cut = line[: limit - 3]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + "..."


def clean_warnings(warnings: Iterable[str]) -> list[str]:
    """Shortened, de-duplicated (order kept, as the apiserver drops duplicates), capped."""
    out: list[str] = []
    seen: set[str] = set()
    for w in warnings:
        short = shorten(w)
        if short and short not in seen:
            seen.add(short)
            out.append(short)
    return out[:MAX_WARNINGS]


def encode_patch(ops: Sequence[Mapping[str, Any]]) -> str:
    """The wire form of a JSONPatch: base64 of the JSON array."""
    return base64.b64encode(orjson.dumps(list(ops))).decode("ascii")


def finalize(outcome: Outcome, uid: str, *, mutating: bool) -> dict[str, Any]:
    """The response AdmissionReview for ``outcome``: the only place one is built.

    A validating webhook must never send a patch (the apiserver treats it as an invalid
    response), so a patch on the validating side is a bug and raises.
    """
    if outcome.patch and not mutating:
        raise ValueError("a validating webhook response cannot carry a patch")
    response: dict[str, Any] = {"uid": uid, "allowed": outcome.allowed}
    if not outcome.allowed:
        response["status"] = {
            "status": "Failure",
            "code": outcome.code,
            "reason": outcome.reason,
            "message": outcome.message,
        }
    if outcome.patch and outcome.allowed:
        response["patchType"] = "JSONPatch"
        response["patch"] = encode_patch(outcome.patch)
    warnings = clean_warnings(outcome.warnings)
    if warnings:
        response["warnings"] = warnings
    if outcome.audit:
        response["auditAnnotations"] = dict(outcome.audit)
    return {"apiVersion": API_VERSION, "kind": KIND, "response": response}
