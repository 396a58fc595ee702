"""AdmissionReview ``admission.k8s.io/v1`` requests: parsing, and the exceptions of a
request that cannot be used (each carries the HTTP status webhook.review.errors answers).

The request is validated once at the boundary with pydantic (kubernetes/api
``admission/v1/types.go`` names the fields); after that the code uses attributes. The
response side is webhook.review.response.
"""

from __future__ import annotations

import re
from typing import Any, Literal, NamedTuple

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
WebhookName = Literal["mutate", "validate"]  # the endpoints: /mutate, /validate


class RequestError(Exception):
    """The webhook request itself is unusable; ``status`` is the HTTP status to answer."""

    status = 400
    reason = "BadRequest"


class BadRequest(RequestError):
    """Not JSON, not an AdmissionReview v1, or a required field missing."""


class PayloadTooLarge(RequestError):
    """The body exceeds the size cap."""

    status = 413
    reason = "RequestEntityTooLarge"


class TooLargeToCheck(Exception):
    """A body holding more JSON values than numagate decodes within its CPU budget. Not a
    RequestError: Kubernetes accepts such objects, so the review is answered HTTP 200,
    allowed with a warning that numagate did not check it (webhook.review.pipeline), never
    a 4xx that the webhook's failurePolicy would turn into a denial. ``uid`` and
    ``operation`` come from the envelope (:func:`envelope_fields`), not a full decode."""

    def __init__(self, uid: str, operation: str, commas: int, limit: int) -> None:
        super().__init__(f"body holds {commas:,} commas (JSON values), over numagate's limit")
        self.uid = uid
        self.operation = operation
        self.commas = commas
        self.limit = limit


class UnsupportedMediaType(RequestError):
    """The Content-Type is not application/json."""

    status = 415
    reason = "UnsupportedMediaType"


# Decoding costs CPU per JSON value, and a 3 MiB body of tiny values holds hundreds of
# thousands (docs/benchmarks.md, worst cases), so a body is decoded only if it holds at most this many
# commas (one per value after the first of each object or array; commas inside strings
# count too). A pod review holds a few hundred; an UPDATE of a large workload with its
# managedFields and last-applied annotation a few thousand (issue 17).
MAX_JSON_COMMAS = 40_000
# Past that, request.uid and request.operation are looked for in the first tokens of the
# body: the apiserver writes the AdmissionRequest's fields in the Go struct's order (uid
# first, operation before userInfo and object), so they come within a few dozen tokens.
ENVELOPE_TOKENS = 4096
ENVELOPE_BYTES = 64 * 1024


# ---- what the pipeline reads ----------------------------------------------------------
# NamedTuples: immutable, and cheaper to build than a frozen dataclass, whose every field
# goes through object.__setattr__ (20 fields a review). parse_review always passes a fresh ``groups`` list.


class GroupVersionKind(NamedTuple):
    version: str
    kind: str
    group: str = ""


class GroupVersionResource(NamedTuple):
    version: str
    resource: str
    group: str = ""


class UserInfo(NamedTuple):
    username: str = ""
    uid: str = ""
    groups: list[str] = []  # noqa: RUF012  # never mutated; a NamedTuple default is shared


class AdmissionRequest(NamedTuple):
    """``request`` of an AdmissionReview; ``object`` is null on DELETE, ``oldObject`` on CREATE."""

    uid: str
    kind: GroupVersionKind
    resource: GroupVersionResource
    operation: Operation
    sub_resource: str = ""
    name: str = ""
    namespace: str = ""
    user_info: UserInfo = UserInfo()
    object: dict[str, Any] | None = None
    old_object: dict[str, Any] | None = None
    dry_run: bool = False
    options: dict[str, Any] | None = None


# ---- the schema: pydantic models, for everything the fast check does not accept ---------


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)


def _schema() -> type[BaseModel]:
    """The pydantic models of the envelope. Defined in a function so that they carry the
    wire names (pydantic puts the class name in its messages: "instance of
    AdmissionRequest") without shadowing the plain classes above."""

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
        """``request`` of an AdmissionReview (kubernetes/api ``admission/v1/types.go``)."""

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

    return AdmissionReview


AdmissionReviewModel = _schema()


def _plain(model: Any) -> AdmissionRequest:
    """The AdmissionRequest of a validated pydantic ``request`` model."""
    k, r, u = model.kind, model.resource, model.user_info
    return AdmissionRequest(
        uid=model.uid,
        kind=GroupVersionKind(k.version, k.kind, k.group),
        resource=GroupVersionResource(r.version, r.resource, r.group),
        operation=model.operation,
        sub_resource=model.sub_resource,
        name=model.name,
        namespace=model.namespace,
        user_info=UserInfo(u.username, u.uid, list(u.groups)),
        object=model.object,
        old_object=model.old_object,
        dry_run=model.dry_run,
        options=model.options,
    )


def _describe(exc: ValidationError) -> str:
    """First errors of a pydantic ValidationError, as ``field: problem (got value)``."""
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(p) for p in err["loc"]) or "(body)"
        got = "" if err["type"] == "missing" else f" (got {str(err.get('input'))[:60]!r})"
        parts.append(f"{loc}: {err['msg']}{got}")
    return "; ".join(parts)


# ---- the fast check -------------------------------------------------------------------

_OPERATIONS = frozenset(("CREATE", "UPDATE", "DELETE", "CONNECT"))
# populate_by_name: pydantic also reads these spellings; such bodies take the model path.
_FIELD_NAMES = frozenset(("sub_resource", "user_info", "old_object", "dry_run"))
_MISSING: Any = object()


def _opt_str(value: Any) -> bool:
    return value is _MISSING or type(value) is str


def _opt_object(value: Any) -> bool:
    return value is _MISSING or value is None or type(value) is dict


def _fast_gvk(value: Any, name: str) -> tuple[str, str, str] | None:
    """(group, version, <name>) when ``value`` is exactly what the schema wants, else None."""
    if type(value) is not dict:
        return None
    group = value.get("group", "")
    version = value.get("version")
    last = value.get(name)
    if type(group) is str and type(version) is str and type(last) is str:
        return group, version, last
    return None


def _fast_user_info(value: Any) -> UserInfo | None:
    if value is _MISSING:
        return UserInfo("", "", [])
    if type(value) is not dict:
        return None
    username = value.get("username", "")
    uid = value.get("uid", "")
    groups = value.get("groups", _MISSING)
    if type(username) is not str or type(uid) is not str:
        return None
    if groups is _MISSING:
        return UserInfo(username, uid, [])
    if type(groups) is not list or not all(type(g) is str for g in groups):
        return None
    return UserInfo(username, uid, list(groups))


def _fast_request(data: dict[str, Any]) -> AdmissionRequest | None:
    """The request when every field we model has exactly the JSON type the schema asks for
    (what the apiserver sends), built without pydantic; None sends the body through
    ``AdmissionReviewModel``, for its coercions (``"dryRun": "true"``) and its error
    messages. Whatever this accepts, the model accepts with the same values."""
    if data.get("apiVersion") != API_VERSION or data.get("kind") != KIND:
        return None
    req = data.get("request")
    if type(req) is not dict or "api_version" in data or not _FIELD_NAMES.isdisjoint(req):
        return None
    uid = req.get("uid")
    operation = req.get("operation")
    if type(uid) is not str or not uid or type(operation) is not str:
        return None
    if operation not in _OPERATIONS:
        return None
    kind = _fast_gvk(req.get("kind"), "kind")
    resource = _fast_gvk(req.get("resource"), "resource")
    user_info = _fast_user_info(req.get("userInfo", _MISSING))
    if kind is None or resource is None or user_info is None:
        return None
    sub_resource = req.get("subResource", _MISSING)
    name = req.get("name", _MISSING)
    namespace = req.get("namespace", _MISSING)
    obj = req.get("object", _MISSING)
    old = req.get("oldObject", _MISSING)
    options = req.get("options", _MISSING)
    dry_run = req.get("dryRun", False)
    if not (_opt_str(sub_resource) and _opt_str(name) and _opt_str(namespace)):
        return None
    if not (_opt_object(obj) and _opt_object(old) and _opt_object(options)):
        return None
    if dry_run is not None and type(dry_run) is not bool:
        return None
    return AdmissionRequest(
        uid=uid,
        kind=GroupVersionKind(kind[1], kind[2], kind[0]),
        resource=GroupVersionResource(resource[1], resource[2], resource[0]),
        operation=operation,  # type: ignore[arg-type]  # checked against _OPERATIONS
        sub_resource="" if sub_resource is _MISSING else sub_resource,
        name="" if name is _MISSING else name,
        namespace="" if namespace is _MISSING else namespace,
        user_info=user_info,
        object=None if obj is _MISSING else obj,
        old_object=None if old is _MISSING else old,
        dry_run=bool(dry_run),
        options=None if options is _MISSING else options,
    )


# Optional whitespace, then a JSON string, a structural character, or a run of anything
# else (numbers, literals). Matched one token at a time from where the last one ended, and
# the scan stops at the first position that is none of them (an unterminated string):
# linear in the bytes read, whatever the body.
_TOKEN = re.compile(rb'\s*(?:"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+)')


def envelope_fields(
    raw: bytes, tokens: int = ENVELOPE_TOKENS, window: int = ENVELOPE_BYTES
) -> tuple[str | None, str]:
    """(request.uid, request.operation) of a body without decoding it: its first
    ``window`` bytes are read token by token, tracking only the depth and the current key,
    until both are found, the request's ``object`` starts after the uid, or ``tokens``
    tokens were read (uid None when not found; operation "unknown" when not found)."""
    # Per open container: [is an object, its current key, a key comes next].
    stack: list[list[Any]] = []
    uid: str | None = None
    operation = "unknown"
    pos, end = 0, min(len(raw), window)
    for _ in range(tokens):
        match = _TOKEN.match(raw, pos, end)
        if match is None:
            break
        pos = match.end()
        tok = match.group().lstrip()
        first = tok[:1]
        if first == b'"':
            top = stack[-1] if stack else None
            if top is not None and top[0] and top[2]:
                top[1], top[2] = _string(tok), False
                if len(stack) == 2 and top[1] in ("object", "oldObject") and uid is not None:
                    break
            elif len(stack) == 2 and stack[0][1] == "request" and stack[1][0]:
                if stack[1][1] == "uid":
                    uid = _string(tok)
                elif stack[1][1] == "operation":
                    value = _string(tok)
                    operation = value if value in _OPERATIONS else "unknown"  # a metric label
                if uid and operation != "unknown":
                    break
        elif first == b"{":
            stack.append([True, None, True])
        elif first == b"[":
            stack.append([False, None, False])
        elif first in (b"}", b"]"):
            if not stack:
                break
            stack.pop()
        elif first == b"," and stack and stack[-1][0]:
            stack[-1][2] = True
    return (uid or None), operation


def _string(token: bytes) -> str | None:
    try:
        value = orjson.loads(token)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, str) else None


def parse_review(raw: bytes, max_commas: int = MAX_JSON_COMMAS) -> AdmissionRequest:
    """Parse a request body into the AdmissionRequest, or raise BadRequest naming the field.

    A well-formed review is checked by hand (:func:`_fast_request`); anything else
    goes through the pydantic schema, which gives the same result or the error message.
    A body of more than ``max_commas`` commas is not decoded: TooLargeToCheck (answered
    allowed, unchecked) when its uid is found, else PayloadTooLarge.
    """
    if not raw or raw.isspace():  # strip() would copy the whole body
        raise BadRequest("empty body: expected an AdmissionReview admission.k8s.io/v1")
    # A body of at most max_commas bytes cannot hold more commas: counting them was
    # ~40,000 CPU instructions of an 8 KB pod review (issue 27, docs/benchmarks.md).
    commas = raw.count(b",") if len(raw) > max_commas else 0  # ~1 ms for 3 MiB
    if commas > max_commas:
        uid, operation = envelope_fields(raw)
        if uid is not None:
            raise TooLargeToCheck(uid, operation, commas, max_commas)
        raise PayloadTooLarge(
            f"body holds {commas:,} commas (JSON values), over numagate's limit of "
            f"{max_commas:,}, and no request.uid in its first {ENVELOPE_TOKENS:,} tokens: "
            "not decoded"
        )
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BadRequest(
            f"body is a JSON {type(data).__name__}, expected an AdmissionReview object"
        )
    request = _fast_request(data)
    if request is not None:
        return request
    try:
        review = AdmissionReviewModel.model_validate(data)
        return _plain(review.request)  # type: ignore[attr-defined]
    except ValidationError as exc:
        raise BadRequest(f"not an AdmissionReview {API_VERSION}: {_describe(exc)}") from None
