"""The paged list read one page ahead (webhook/inventory/pages.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from webhook.inventory.objects import Gone
from webhook.inventory.pages import continue_token, pages_ahead


def _pages(count: int) -> dict[str | None, dict[str, Any]]:
    """A list of ``count`` pages: token -> body (page k continues with token "k+1")."""
    out: dict[str | None, dict[str, Any]] = {}
    for k in range(count):
        token = None if k == 0 else str(k)
        nxt = str(k + 1) if k + 1 < count else ""
        out[token] = {"metadata": {"continue": nxt}, "items": [k]}
    return out


def _recorded(
    bodies: dict[str | None, dict[str, Any]], asked: list[str | None]
) -> Callable[[str | None], dict[str, Any]]:
    """A fetch of ``bodies`` that notes each token asked for in ``asked``."""

    def fetch(token: str | None) -> dict[str, Any]:
        asked.append(token)
        return bodies[token]

    return fetch


def _threads() -> int:
    return sum(t.name.startswith("numagate-list-") for t in threading.enumerate())


def _wait_threads(count: int) -> None:
    deadline = time.monotonic() + 5
    while _threads() > count and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _threads() == count


def test_every_page_in_order_and_the_thread_ends() -> None:
    before = _threads()
    asked: list[str | None] = []
    got = [body["items"][0] for body in pages_ahead(_recorded(_pages(5), asked), "things")]
    assert got == [0, 1, 2, 3, 4]
    assert asked == [None, "1", "2", "3", "4"]
    _wait_threads(before)


def test_the_next_page_is_fetched_while_the_caller_works_on_this_one() -> None:
    bodies = _pages(3)
    fetched = {token: threading.Event() for token in bodies}

    def fetch(token: str | None) -> dict[str, Any]:
        fetched[token].set()
        return bodies[token]

    pages = pages_ahead(fetch, "things")
    first = next(pages)
    assert first["items"] == [0]
    # Still on page 0 here: page 1 arrives without our asking, page 2 only once 1 is taken.
    assert fetched["1"].wait(5)
    time.sleep(0.1)
    assert not fetched["2"].is_set()
    assert next(pages)["items"] == [1]
    assert fetched["2"].wait(5)
    assert [b["items"][0] for b in pages] == [2]


def test_an_error_is_raised_in_its_place() -> None:
    bodies = _pages(4)

    def fetch(token: str | None) -> dict[str, Any]:
        if token == "2":
            raise Gone("410 Gone: the continue token expired")
        return bodies[token]

    pages = pages_ahead(fetch, "things")
    assert next(pages)["items"] == [0]
    assert next(pages)["items"] == [1]
    with pytest.raises(Gone, match="continue token expired"):
        next(pages)


def test_a_caller_that_stops_early_ends_the_thread() -> None:
    before = _threads()
    asked: list[str | None] = []
    pages = pages_ahead(_recorded(_pages(50), asked), "things")
    next(pages)
    pages.close()  # e.g. the listener raised on page 0
    _wait_threads(before)
    assert len(asked) <= 2  # page 0 and the one fetched ahead: no more


@pytest.mark.parametrize(
    ("body", "token"),
    [
        ({"metadata": {"continue": "abc"}}, "abc"),
        ({"metadata": {"continue": ""}}, None),
        ({"metadata": {}}, None),
        ({"metadata": None}, None),
        (["not", "a", "list"], None),
    ],
)
def test_continue_token(body: Any, token: str | None) -> None:
    assert continue_token(body) == token
