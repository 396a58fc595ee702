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

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": self._timestamp(record.created, record.msecs),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _RESERVED and not key.startswith("_"):
                out[key] = value
        if record.exc_info and record.exc_info[0] is not None:
            # The traceback goes to the log (never to a response body).
            out["error"] = self.formatException(record.exc_info)
        return orjson.dumps(out, default=str).decode()


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
