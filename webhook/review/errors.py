"""The one place that maps errors to HTTP answers.

Two channels, as in kopf's ``_serve`` (research/model-codebases.md section 4):

- A bad *webhook request* (not JSON, wrong content type, no ``request.uid``, over the
  size cap, wrong apiVersion) gets a real HTTP 400/413/415 with a plain-text message.
  There is no uid to echo, and a non-2xx reply is classified by the apiserver as
  ``ErrCallingWebhook``, so the webhook's ``failurePolicy`` decides (research
  webhook-anchors.md 1.3). We do not follow controller-runtime's HTTP-200-deny here: that
  turns a transport problem into a denial even under ``failurePolicy: Ignore``.
- A bad *object* is answered with HTTP 200 and ``allowed: false`` plus ``status``
  (built by the pipeline, not here).

Unexpected exceptions: the mutating endpoint fails open (allowed, a warning, no patch),
because a broken mutation must not block pod creation; the validating endpoint answers
HTTP 500 so that ``failurePolicy`` applies. Never a traceback in a body.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import orjson

WebhookName = Literal["mutate", "validate"]
TEXT = "text/plain; charset=utf-8"
JSON = "application/json"


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


class UnsupportedMediaType(RequestError):
    """The Content-Type is not application/json."""

    status = 415
    reason = "UnsupportedMediaType"


@dataclass(frozen=True, slots=True)
class HttpAnswer:
    """What to write back: status, content type and body (shared by server and CLI)."""

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


def answer_for_error(exc: BaseException, *, webhook: WebhookName, uid: str | None) -> HttpAnswer:
    """Map an exception to the HTTP answer (see the module docstring for the convention)."""
    if isinstance(exc, RequestError):
        return HttpAnswer(exc.status, TEXT, f"{exc}\n".encode(), None, exc.status)
    # Imported here: admission raises the RequestError classes defined above.
    from webhook.review.wire import allowed, finalize

    if webhook == "mutate" and uid:
        outcome = allowed(
            warnings=(
                f"numagate: internal error, pod admitted unchanged (see webhook log, uid {uid})",
            )
        )
        return review_answer(finalize(outcome, uid, mutating=True), allowed_=True, code=200)
    ref = f" (uid {uid})" if uid else ""
    return HttpAnswer(
        500, TEXT, f"numagate: internal error{ref}; see the webhook log\n".encode(), None, 500
    )
