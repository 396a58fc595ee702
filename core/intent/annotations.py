"""Annotations as strings, and the JSON annotations being normalized: loading (lenient),
field names in their owner's spelling, enumerated string fields."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.intent import dialects as d
from core.intent.findings import Ctx, change_code
from core.intent.lenient_json import dump_compact, parse_lenient
from core.model import (
    is_map,
)


def string_annotations(meta: Mapping[str, Any], ctx: Ctx) -> dict[str, str]:
    """The annotations as strings; a non-string value is an error (the API server rejects
    it) and is carried on in its JSON text so no key is lost."""
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
    out: dict[str, str] = {}
    for key, value in raw.items():
        k = str(key)
        if isinstance(value, str):
            out[k] = value
            continue
        text = (
            json.dumps(value)
            if value is None or isinstance(value, bool | int | float)
            else str(value)
        )
        ctx.add(
            ctx.ann(k),
            "error",
            "invalid-value",
            f"annotation values must be strings; {k} is {value!r}; quote it: {text!r}",
        )
        out[k] = text
    return out


@dataclass(slots=True)
class JsonDoc:
    """A JSON annotation being normalized."""

    key: str
    doc: dict[str, Any] | None  # None: absent or unusable
    dirty: bool = False  # must be re-serialized

    def write(self, annotations: dict[str, str]) -> None:
        if self.doc is not None and self.dirty:
            annotations[self.key] = dump_compact(self.doc)


def load_json(key: str, annotations: dict[str, str], ctx: Ctx) -> JsonDoc:
    if key not in annotations:
        return JsonDoc(key, None)
    text = annotations[key]
    parsed = parse_lenient(text)
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
                f"field {name!r} in {doc.key} renamed {same_case[0]!r} (the field's spelling)",
            )
            continue
        close = d.suggest(name, known)
        if close is not None and close not in doc.doc:
            ctx.add(
                ctx.ann(doc.key),
                "warning",
                "unknown-field",
                f"field {name!r} in {doc.key} is not read by Koordinator (known fields: "
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
            f"{doc.key} field {name} must be a string, got {json.dumps(value)} "
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
