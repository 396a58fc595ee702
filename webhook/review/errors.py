"""The one place that maps errors to HTTP answers.

Two channels, as in kopf's ``_serve`` (research/model-codebases.md section 4):

- A bad *webhook request* (not JSON, wrong content type, no ``request.uid``, over the
  size cap, wrong apiVersion) gets a real HTTP 400/413/415 with a plain-text message.
  There is no uid to echo, and a non-2xx reply is classified by the apiserver as
  ``ErrCallingWebhook``, so the webhook's ``failurePolicy`` decides (research
  webhook-anchors.md 1.3). We do not follow controller-runtime's HTTP-200-deny here: that
  turns a transport problem into a denial even under ``failurePolicy: Ignore``.
  The app's early rejections (content type, size) and the pipeline's (the body) both go
  through :func:`reject`.
- A bad *object* is answered with HTTP 200 and ``allowed: false`` plus ``status``
  (built by the handlers, not here).

Unexpected exceptions: the mutating endpoint fails open (allowed, a warning, no patch),
because a broken mutation must not block pod creation; the validating endpoint answers
HTTP 500 so that ``failurePolicy`` applies. Never a traceback in a body.
"""

from __future__ import annotations

import logging

from webhook.metrics import WebhookMetrics
from webhook.review.response import TEXT, HttpAnswer, allowed, finalize, review_answer
from webhook.review.wire import PayloadTooLarge, RequestError, UnsupportedMediaType


def unsupported_media_type(content_type: str) -> UnsupportedMediaType:
    return UnsupportedMediaType(
        f"Content-Type {content_type!r} is not supported: use application/json"
    )


def too_large(size: int | None, cap: int) -> PayloadTooLarge:
    got = f"{size} bytes" if size is not None else "the body"
    return PayloadTooLarge(
        f"{got} exceeds the {cap}-byte cap (two 3 MiB objects plus the review envelope)"
    )


def reject(
    exc: RequestError,
    *,
    webhook: str,
    log: logging.Logger,
    metrics: WebhookMetrics | None = None,
    operation: str = "unknown",
) -> HttpAnswer:
    """The answer to an unusable request, logged to ``log``; counted in ``metrics`` when
    given (the pipeline counts all its answers in one place)."""
    log.warning("bad admission request", extra={"webhook": webhook, "error": str(exc)})
    if metrics is not None:
        metrics.requests.inc(webhook=webhook, operation=operation, allowed="", code=str(exc.status))
    return answer_for_error(exc, fail_open=False, uid=None)


def answer_for_error(exc: BaseException, *, fail_open: bool, uid: str | None) -> HttpAnswer:
    """Map an exception to the HTTP answer (see the module docstring for the convention);
    ``fail_open``: the webhook admits unchanged on an internal error (the mutating one)."""
    if isinstance(exc, RequestError):
        return HttpAnswer(exc.status, TEXT, f"{exc}\n".encode(), None, exc.status)
    if fail_open and uid:
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
