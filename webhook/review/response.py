"""The response side of a review: the :class:`Outcome` a handler decides, its constructors,
and :func:`finalize`, the only place a response AdmissionReview is built. finalize echoes
``apiVersion``, ``kind`` and ``uid`` (the apiserver rejects a response whose uid or GVK
differ: ``VerifyAdmissionResponse``), emits ``patch``/``patchType`` only when there is a
patch, and keeps warnings short. :class:`HttpAnswer` is what is written back.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson

from core.frozen import fast_init
from webhook.review.wire import API_VERSION, KIND

TEXT = "text/plain; charset=utf-8"
JSON = "application/json"
# types.go: "Limit warnings to 120 characters if possible"; we stay strictly below.
MAX_WARNING_CHARS = 119
# The apiserver keeps at most 4096 runes of warnings in total (filters/warning.go); 119 x 30
# stays under it, so nothing we send is silently truncated by the apiserver.
MAX_WARNINGS = 30


@fast_init
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
    # Failed checks as (check, mode, message): counted and (dryrun) logged per review by
    # webhook.review.pipeline.answer, also when the answer comes from the decision cache.
    violations: tuple[tuple[str, str, str], ...] = ()
    # The answer depends on more than the review (inventory missing or stale, a check
    # skipped for the deadline): never reused for another review.
    volatile: bool = False
    # Topology classes of the inventory snapshot whose usage the answer read: a cached
    # answer is reused only while none of them changed (webhook/review/decision_cache.py).
    usage: frozenset[int] = frozenset()


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
        line = " ".join(w.split())  # shorten's first step, inline: most warnings fit
        short = line if len(line) <= MAX_WARNING_CHARS else shorten(line)
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


class HttpAnswer(NamedTuple):
    """What to write back: status, content type and body (shared by server and CLI). A
    named tuple: a verified replica's answer builds one with ``tuple.__new__``, without a
    Python ``__init__`` (a tenth of that review's instructions as a dataclass, issue 27)."""

    status: int
    content_type: str
    body: bytes
    allowed: bool | None = None  # None when no AdmissionReview was answered
    code: int = 0  # response.status.code, or the HTTP status for request errors

    @property
    def is_review(self) -> bool:
        return self.content_type == JSON


def review_answer(review: dict[str, object], *, allowed_: bool, code: int) -> HttpAnswer:
    """HTTP 200 with an AdmissionReview body."""
    return HttpAnswer(200, JSON, orjson.dumps(review), allowed_, code)
