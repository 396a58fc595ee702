"""Annotations as strings, and the JSON annotations being normalized: loading (lenient),
field names in their owner's spelling, enumerated string fields."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.intent import dialects as d
from core.intent import limits
from core.intent.findings import Ctx, change_code
from core.intent.lenient_json import NESTED_TOO_DEEPLY, dump_compact, parse_lenient
from core.intent.limits import clip, clip_repr
from core.model import is_map


def _total_bytes(raw: Mapping[Any, Any], cap: int) -> int:
    """Keys and values in UTF-8 bytes, as the API server counts them; past the limit only
    a lower bound (C-level sums: a map may hold hundreds of thousands of entries)."""
    if len(raw) > cap:
        return len(raw)  # every key is at least one byte
    try:
        keys, values = "".join(raw), "".join(raw.values())
    except TypeError:  # a non-string key or value (reported by the caller)
        keys = "".join(str(k) for k in raw)
        values = "".join(v if isinstance(v, str) else "." * _sized(v) for v in raw.values())
    chars = len(keys) + len(values)
    if chars > cap or chars * 4 <= cap:
        return chars
    return len(keys.encode()) + len(values.encode())


def _all_strings(raw: dict[Any, Any]) -> bool:
    """Every key and value a str (C-level joins: no per-key Python)."""
    try:
        "".join(raw)
        "".join(raw.values())
    except TypeError:
        return False
    return True


def _largest(raw: Mapping[Any, Any]) -> str:
    """``N annotations``, naming the largest when there are few to look through."""
    n = len(raw)
    text = f"{n:,} annotation{'s' if n != 1 else ''}"
    if n > 64:
        return text
    key = max(raw, key=lambda k: len(raw[k]) if isinstance(raw[k], str) else 0)
    return f"{text}, the largest {clip(str(key))}"


def _sized(value: Any) -> int:
    return len(value) if isinstance(value, list | dict) else 1


def _text(value: Any) -> str:
    """The JSON text of a scalar, the Python text of anything else."""
    if value is None or isinstance(value, bool | int | float):
        return json.dumps(value)
    try:
        return str(value)
    except RecursionError:
        return "(nested too deeply to show)"


def string_annotations(meta: Mapping[str, Any], ctx: Ctx) -> dict[str, str] | None:
    """The annotations as strings; a non-string value is an error (the API server rejects
    it) and is carried on in its JSON text so no key is lost. None when they are over the
    API server's total size (reported; not read)."""
    raw = meta.get("annotations")
    if raw is None:
        return {}
    if not is_map(raw):
        ctx.add(
            ctx.path("metadata.annotations"),
            "error",
            "invalid-value",
            f"metadata.annotations must be a map of strings, got {type(raw).__name__}",
        )
        return {}
    cap = ctx.limits.annotations_bytes
    size = _total_bytes(raw, cap)
    if size > cap:
        found = f"{'over ' if size == len(raw) else ''}{size:,} bytes"
        whose = (
            f"the API server's limit of {cap:,} (256 KiB; it rejects the pod)"
            if cap == limits.ANNOTATIONS_BYTES
            else f"numagate's limit of {cap:,}"
        )
        ctx.too_large(
            ctx.path("metadata.annotations"),
            f"metadata.annotations: {found}, over {whose}; none read. {_largest(raw)}",
        )
        return None
    if type(raw) is dict and _all_strings(raw):
        return dict(raw)  # the usual map: nothing to report, no per-key work
    out: dict[str, str] = {}
    for key, value in raw.items():
        k = str(key)
        if isinstance(value, str):
            out[k] = value
            continue
        text = _text(value)
        shown = text if isinstance(value, list | dict) else repr(value)
        ctx.add(
            ctx.ann(k),
            "error",
            "invalid-value",
            f"annotation values must be strings; {clip(k)} is {clip(shown)}; quote it: "
            f"{clip_repr(text)}",
        )
        out[k] = text
    return out


@dataclass(slots=True)
class JsonDoc:
    """A JSON annotation being normalized."""

    key: str
    doc: dict[str, Any] | None  # None: absent or unusable
    dirty: bool = False  # must be re-serialized
    over_limit: bool = False  # unusable because over a limit of core.intent.limits

    def write(self, annotations: dict[str, str]) -> None:
        if self.doc is not None and self.dirty:
            annotations[self.key] = dump_compact(self.doc)


def _deep(key: str, found: str, depth: int) -> str:
    return limits.over(key, f"nested {found} levels", depth, "; left as written")


def _over_limits(key: str, doc: Any, caps: limits.Limits) -> str | None:
    """Why ``doc`` is over the JSON limits, or None. Stops at the first excess, so it
    visits at most ``caps.json_values`` values."""
    count = 0
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > caps.json_depth:
            return _deep(key, f"{depth}+", caps.json_depth)
        children: Any = node.values() if isinstance(node, dict) else node
        count += len(children)
        if count > caps.json_values:
            found = f"{count:,}{'+' if stack else ''} JSON values"
            return limits.over(key, found, caps.json_values, "; left as written")
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return None


def load_json(key: str, annotations: dict[str, str], ctx: Ctx) -> JsonDoc:
    if key not in annotations:
        return JsonDoc(key, None)
    text = annotations[key]
    parsed = parse_lenient(text, ctx.limits.repair_chars)
    if parsed.error == NESTED_TOO_DEEPLY:
        ctx.too_large(ctx.ann(key), _deep(key, "1,000+", ctx.limits.json_depth), key)
        return JsonDoc(key, None, over_limit=True)
    if not parsed.ok:
        ctx.add(
            ctx.ann(key),
            "error",
            "invalid-json",
            f"annotation {key} is not valid JSON ({parsed.error}); koord-scheduler rejects "
            f'the pod. Expected e.g. {{"{d.F_NUMA_POLICY}":"SingleNUMANode"}}'
            if key == d.KOORD_NUMA_SPEC
            else f"annotation {key} is not valid JSON ({parsed.error}); koord-scheduler "
            "rejects the pod",
        )
        return JsonDoc(key, None)
    if not isinstance(parsed.value, dict):
        ctx.add(
            ctx.ann(key),
            "error",
            "invalid-json",
            f"annotation {key} must be a JSON object, got {type(parsed.value).__name__} "
            f"{text.strip()[:40]!r}",
        )
        return JsonDoc(key, None)
    over = _over_limits(key, parsed.value, ctx.limits)
    if over is not None:
        ctx.too_large(ctx.ann(key), over, key)
        return JsonDoc(key, None, over_limit=True)
    doc = JsonDoc(key, parsed.value, dirty=bool(parsed.repairs))
    if parsed.repairs:
        ctx.add(
            ctx.ann(key),
            "warning",
            "repaired-json",
            f"annotation {key} is not strict JSON (Go's json.Unmarshal rejects it and "
            f"koord-scheduler fails the pod): {', '.join(parsed.repairs)}; rewritten as strict JSON",
        )
    return doc


def canonical_fields(doc: JsonDoc, known: tuple[str, ...], ctx: Ctx) -> None:
    """Rename fields that differ from a known one only in case (Go's decoder matches
    them case-insensitively, so this changes nothing upstream), and point out unknown
    fields that look like a known one. Unknown fields are always kept."""
    assert doc.doc is not None
    for name in list(doc.doc):
        if name in known:
            continue
        same_case = [k for k in known if k.lower() == name.lower()]
        if same_case and same_case[0] not in doc.doc:
            doc.doc[same_case[0]] = doc.doc.pop(name)
            doc.dirty = True
            ctx.add(
                ctx.ann(doc.key),
                "warning",
                "respelled",
                f"field {clip_repr(name)} in {doc.key} renamed {same_case[0]!r} (the field's "
                "spelling)",
            )
            continue
        close = ctx.suggest(name, known)
        if close is not None and close not in doc.doc:
            ctx.add(
                ctx.ann(doc.key),
                "warning",
                "unknown-field",
                f"field {clip_repr(name)} in {doc.key} is not read by Koordinator (known fields: "
                f"{', '.join(known)}); did you mean {close}? Kept as written",
            )


def normalize_field(
    doc: JsonDoc,
    name: str,
    matcher: Any,
    allowed: tuple[str, ...],
    ctx: Ctx,
    *,
    code: str = "unknown-value",
    note: str = "",
) -> str | None:
    """Normalize one string field of a Koordinator JSON document; return its value in the
    owner's spelling, or None when absent or unknown."""
    assert doc.doc is not None
    if name not in doc.doc:
        return None
    value = doc.doc[name]
    if not isinstance(value, str):
        ctx.add(
            ctx.ann(doc.key),
            "error",
            "invalid-value",
            f"{doc.key} field {name} must be a string, got {clip(json.dumps(value))} "
            f"(allowed: {d.allowed_list(allowed)})",
        )
        return None
    m: d.ValueMatch = matcher(value)
    if m.value is None:
        ctx.add(
            ctx.ann(doc.key),
            "error",
            code,
            f"{doc.key} field {name}: {d.describe_unknown(m, allowed)}{note}",
        )
        return None
    if m.changed:
        doc.doc[name] = m.value
        doc.dirty = True
        ctx.add(
            ctx.ann(doc.key),
            "warning",
            change_code(m),
            f"{doc.key} field {name}: {d.describe_change(m, 'Koordinator')}{note}",
        )
    return m.value


def short_value(key: str, value: str, path: str, ctx: Ctx) -> bool:
    """Whether a plain-string policy value is within ``limits.value_chars`` (reported
    when not: it is then neither read nor rewritten)."""
    cap = ctx.limits.value_chars
    if len(value) <= cap:
        return True
    found = f"{len(value):,} characters"
    ctx.too_large(path, limits.over(key, found, cap, "; left as written"), key)
    return False
