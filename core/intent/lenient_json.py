"""Parse the JSON users put in annotations, repairing the two mistakes copied from the
Koordinator v1.5 release blog: trailing commas and ``#`` comments inside the value
(research upstream-schedulers §0.2). Go's ``json.Unmarshal`` rejects both, so koord-scheduler
returns an error status and the pod stays Pending; we repair and say so, or report exactly
why the text is not JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from core.frozen import fast_init
from core.intent.limits import REPAIR_CHARS

NESTED_TOO_DEEPLY: Final = "nested too deeply"


@fast_init
@dataclass(frozen=True, slots=True)
class JsonResult:
    """``value`` is the parsed document (None when ``error`` is set); ``repairs`` lists what
    was removed to make the text parse, empty when it was valid JSON as written."""

    value: Any
    repairs: tuple[str, ...] = ()
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def _strip_comments(text: str) -> tuple[str, int]:
    """Remove ``#`` and ``//`` comments that are outside strings, up to the end of line."""
    out: list[str] = []
    removed = 0
    i, n = 0, len(text)
    in_string = False
    while i < n:
        ch = text[i]
        if in_string:
            out.append(ch)
            if ch == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if ch == '"':
                in_string = False
            i += 1
            continue
        if ch == '"':
            in_string = True
        elif ch == "#" or text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            removed += 1
            i = end
            continue
        out.append(ch)
        i += 1
    return "".join(out), removed


def _strip_trailing_commas(text: str) -> tuple[str, int]:
    """Remove commas (outside strings) whose next non-blank character closes a container."""
    out: list[str] = []
    removed = 0
    in_string = False
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if in_string:
            out.append(ch)
            if ch == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if ch == '"':
                in_string = False
            i += 1
            continue
        if ch == '"':
            in_string = True
        elif ch == ",":
            j = i + 1
            while j < n and text[j] in " \t\r\n":
                j += 1
            if j < n and text[j] in "}]":
                removed += 1
                i += 1
                continue
        out.append(ch)
        i += 1
    return "".join(out), removed


class _NonStandardLiteral(ValueError):
    """NaN / Infinity: Python's json accepts them, Go's encoding/json (the schedulers') does not."""


def _reject_constant(name: str) -> Any:
    raise _NonStandardLiteral(f"{name} is not valid JSON")


# One decoder for every parse: json.loads with a keyword builds a new one per call.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def _loads(text: str) -> Any:
    return _DECODER.decode(text)


# The strict parse alone (raises ValueError or RecursionError), for a reader's fast path
# that falls back to parse_lenient on any failure.
strict_loads = _loads


def _describe(exc: ValueError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at line {exc.lineno}, column {exc.colno}"
    return str(exc)


def parse_lenient(text: str, repair_chars: int = REPAIR_CHARS) -> JsonResult:
    """Parse ``text`` as JSON; if it fails, try again without comments and trailing commas.

    Never raises: an unrepairable text gives ``error`` with the parser's reason (the one for
    the text as written, which is what the user has to fix). Texts longer than
    ``repair_chars`` are not repaired (the repair is a character loop; hand-written
    annotations are short).
    """
    try:
        return JsonResult(_loads(text))
    except ValueError as exc:  # JSONDecodeError or a NaN/Infinity literal
        first_error = _describe(exc)
    except RecursionError:
        return JsonResult(None, (), NESTED_TOO_DEEPLY)
    if len(text) > repair_chars:
        return JsonResult(
            None,
            (),
            f"{first_error}; not repaired: {len(text):,} characters, over {repair_chars:,}",
        )
    cleaned, comments = _strip_comments(text)
    cleaned, commas = _strip_trailing_commas(cleaned)
    repairs: list[str] = []
    if comments:
        repairs.append(f"removed {comments} comment{'s' if comments > 1 else ''}")
    if commas:
        repairs.append(f"removed {commas} trailing comma{'s' if commas > 1 else ''}")
    if not repairs:
        return JsonResult(None, (), first_error)
    try:
        return JsonResult(_loads(cleaned), tuple(repairs))
    except ValueError:
        return JsonResult(None, (), first_error)
    except RecursionError:
        return JsonResult(None, (), NESTED_TOO_DEEPLY)


def dump_compact(value: Any) -> str:
    """Compact JSON with sorted keys: re-serializing a normalized value is a no-op."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
