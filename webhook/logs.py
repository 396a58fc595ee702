"""JSON logs, one object per line, keyed by the admission request ``uid``.

At the default level a log line carries the uid, kind, namespace, name, operation and
the outcome: never a full pod spec, and never anything from a Secret or a certificate key.
Object payloads are logged only at debug level, and only their metadata.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

import orjson

LOGGER_NAME = "numagate"
_RESERVED = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message"}


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON object; ``extra=`` fields become top-level keys."""

    def __init__(self) -> None:
        super().__init__()
        self._second = -1
        self._prefix = ""

    def _timestamp(self, created: float, msecs: float) -> str:
        # strftime once per second, not once per line (busy workers log thousands).
        second = int(created)
        if second != self._second:
            self._prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = second
        return f"{self._prefix}.{int(msecs):03d}Z"

    def line(
        self,
        created: float,
        msecs: float,
        level: str,
        logger: str,
        msg: str,
        fields: dict[str, Any],
        error: str | None = None,
    ) -> str:
        """The JSON line: the fixed keys, then ``fields`` (``extra=``) but the reserved and
        private ones, then the traceback. Shared by ``format`` and ``log_fields``."""
        out: dict[str, Any] = {
            "ts": self._timestamp(created, msecs),
            "level": level.lower(),
            "logger": logger,
            "msg": msg,
        }
        for key, value in fields.items():
            if key not in _RESERVED and not key.startswith("_"):
                out[key] = value
        if error is not None:
            out["error"] = error
        return orjson.dumps(out, default=str).decode()

    def format(self, record: logging.LogRecord) -> str:
        error = None
        if record.exc_info and record.exc_info[0] is not None:
            # The traceback goes to the log (never to a response body).
            error = self.formatException(record.exc_info)
        return self.line(
            record.created,
            record.msecs,
            record.levelname,
            record.name,
            record.getMessage(),
            record.__dict__,
            error,
        )


def _direct_handler(logger: logging.Logger, level: int) -> logging.StreamHandler[Any] | None:
    """The handler a record of ``logger`` at ``level`` would reach, when that is only
    setup_logging's JSON handler (no filter or other handler anywhere on the way)."""
    parent = logger.parent
    if logger.handlers or logger.filters or not logger.propagate or parent is None:
        return None
    if parent.name != LOGGER_NAME or parent.propagate or parent.filters:
        return None
    handlers = parent.handlers
    if len(handlers) != 1:
        return None
    handler = handlers[0]
    if type(handler) is not logging.StreamHandler or type(handler.formatter) is not JsonFormatter:
        return None
    if handler.filters or level < handler.level:
        return None
    return handler


def log_fields(logger: logging.Logger, level: int, msg: str, fields: dict[str, Any]) -> None:
    """``logger.log(level, msg, extra=fields)`` for a caller that checked
    ``logger.isEnabledFor(level)``: the same JSON line, written straight to
    setup_logging's handler when nothing else could see the record (no LogRecord, no
    handler walk: about half of a denial's log line, issue 27), else through logging."""
    handler = _direct_handler(logger, level)
    if handler is None:
        logger.log(level, msg, extra=fields)
        return
    formatter = handler.formatter
    assert isinstance(formatter, JsonFormatter)
    for key in fields:
        if key in _RESERVED:
            raise KeyError(f"Attempt to overwrite {key!r} in LogRecord")  # as makeRecord
    created = time.time()
    msecs = (created - int(created)) * 1000
    name = logging.getLevelName(level)
    line = formatter.line(created, msecs, name, logger.name, msg, fields) + handler.terminator
    handler.acquire()
    try:
        handler.stream.write(line)
        handler.flush()
    except Exception:  # as StreamHandler.emit: logging never breaks the caller
        handler.handleError(logging.makeLogRecord({"msg": msg, "levelno": level}))
    finally:
        handler.release()


def setup_logging(level: str = "info", *, stream: Any = None) -> logging.Logger:
    """Configure the ``numagate`` logger to write JSON lines to stderr (idempotent)."""
    # The JSON lines carry none of the caller, thread or process fields, so the logging
    # module need not collect them for every record (the logging HOWTO's "Optimization"
    # table): a large share of what a line costs.
    logging._srcfile = None  # type: ignore[attr-defined]
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    logger = logging.getLogger(LOGGER_NAME)
    logger.setLevel(level.upper())
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    logger.addHandler(handler)
    logger.propagate = False
    return logger


def get_logger(name: str = "") -> logging.Logger:
    return logging.getLogger(f"{LOGGER_NAME}.{name}" if name else LOGGER_NAME)
