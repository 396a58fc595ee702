"""A paged list read one page ahead (kubernetes.io "API concepts", "Retrieving large
results sets in chunks"): a thread fetches and decodes page k+1 while the reflector
parses page k. The request waits on the apiserver with the GIL released, so the
apiserver's work on the next page (on the other core) overlaps this process's parse
instead of alternating with it (docs/inventory.md, "Where the ready time goes").
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

Fetch = Callable[[str | None], Any]  # continue token (None: the first page) -> decoded page

_PAGE, _ERROR, _END = "page", "error", "end"


def continue_token(body: Any) -> str | None:
    """The token of the next page; None on the last (or on a body that is not a List:
    the consumer's parse says what is wrong with it)."""
    meta = body.get("metadata") if isinstance(body, dict) else None
    token = meta.get("continue") if isinstance(meta, dict) else None
    return token if isinstance(token, str) and token else None


def pages_ahead(fetch: Fetch, name: str) -> Iterator[Any]:
    """Every page of a list, in order, each fetched (``fetch(token)``) in a thread while
    the caller works on the one before: page k+1 is asked for once the caller has taken
    page k, so at most one page waits. An exception of ``fetch`` is raised here, in its
    place in the sequence (a 410 stays a 410). A caller that stops early (or closes the
    generator) lets the thread end after its current request."""
    slot: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
    taken = threading.Semaphore(0)  # released once per page the caller takes
    abandoned = threading.Event()

    def produce() -> None:
        token: str | None = None
        while True:
            try:
                body = fetch(token)
            except BaseException as exc:  # the caller raises it
                slot.put((_ERROR, exc))
                return
            token = continue_token(body)
            slot.put((_PAGE, body))
            del body  # the caller's now
            if token is None:
                slot.put((_END, None))
                return
            taken.acquire()
            if abandoned.is_set():
                return

    threading.Thread(target=produce, name=f"numagate-list-{name}", daemon=True).start()
    try:
        while True:
            kind, value = slot.get()
            if kind == _ERROR:
                raise value
            if kind == _END:
                return
            taken.release()  # the next page is fetched while the caller works on this one
            yield value
            del value
    finally:
        abandoned.set()
        taken.release()  # a thread waiting for the caller wakes and ends


def list_size(body: Any) -> int | None:
    """How many objects a list holds, from its first page: the page's items and the
    ``metadata.remainingItemCount`` of the rest; None when the apiserver does not say (a
    continue token without a count, as with some selectors)."""
    if not isinstance(body, dict) or not isinstance(body.get("items"), list):
        return None
    meta = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
    remaining = meta.get("remainingItemCount")
    if isinstance(remaining, int) and not isinstance(remaining, bool):
        return len(body["items"]) + remaining
    return None if continue_token(body) else len(body["items"])
