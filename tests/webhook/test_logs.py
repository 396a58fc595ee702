"""webhook.logs.log_fields: the line it writes straight to setup_logging's handler is the
line logging would write, and anything else attached (a filter, another handler, caplog)
gets the record through logging as before."""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Iterator

import orjson
import pytest

from webhook.logs import get_logger, log_fields, setup_logging

FIELDS = {"uid": "u-1", "allowed": False, "code": 403, "denyMessage": "no node", "_hidden": 1}


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    out = io.StringIO()
    setup_logging("info", stream=out)
    try:
        yield out
    finally:
        logging.getLogger("numagate").handlers.clear()
        logging.getLogger("numagate").propagate = True


def _lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [orjson.loads(x) for x in stream.getvalue().splitlines()]


def test_the_direct_line_is_the_logging_line(stream: io.StringIO) -> None:
    log = get_logger("admission")
    log.log(logging.INFO, "admission", extra=dict(FIELDS))
    log_fields(log, logging.INFO, "admission", dict(FIELDS))
    via_logging, direct = stream.getvalue().splitlines()
    a, b = orjson.loads(via_logging), orjson.loads(direct)
    for line in (a, b):  # the same format (the times differ)
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", str(line.pop("ts")))
    assert list(a.items()) == list(b.items())  # the same keys in the same order
    assert b == {"level": "info", "logger": "numagate.admission", "msg": "admission",
                 "uid": "u-1", "allowed": False, "code": 403, "denyMessage": "no node"}  # fmt: skip


def test_a_reserved_field_raises_as_logging_does(stream: io.StringIO) -> None:
    with pytest.raises(KeyError, match="overwrite"):
        log_fields(get_logger("admission"), logging.INFO, "m", {"lineno": 3})
    assert stream.getvalue() == ""


def test_below_the_handlers_level_nothing_is_written(stream: io.StringIO) -> None:
    logging.getLogger("numagate").handlers[0].setLevel(logging.WARNING)
    log_fields(get_logger("admission"), logging.INFO, "admission", dict(FIELDS))
    assert stream.getvalue() == ""


def test_a_filter_or_another_handler_gets_the_record(stream: io.StringIO) -> None:
    log = get_logger("admission")
    seen: list[logging.LogRecord] = []

    class Keep(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            seen.append(record)
            return record.msg != "dropped"

    log.addFilter(Keep())
    try:
        log_fields(log, logging.INFO, "dropped", dict(FIELDS))
        log_fields(log, logging.INFO, "kept", dict(FIELDS))
    finally:
        log.filters.clear()
    assert [r.msg for r in seen] == ["dropped", "kept"] and seen[1].uid == "u-1"  # type: ignore[attr-defined]
    assert [x["msg"] for x in _lines(stream)] == ["kept"]
    extra = logging.StreamHandler(io.StringIO())
    logging.getLogger("numagate").addHandler(extra)
    try:
        log_fields(log, logging.INFO, "twice", dict(FIELDS))
    finally:
        logging.getLogger("numagate").removeHandler(extra)
    assert "twice" in extra.stream.getvalue() and _lines(stream)[-1]["msg"] == "twice"


def test_without_setup_logging_caplog_sees_it(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="numagate"):
        log_fields(get_logger("admission"), logging.INFO, "admission", dict(FIELDS))
    assert [r.uid for r in caplog.records] == ["u-1"]  # type: ignore[attr-defined]
