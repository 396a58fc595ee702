"""Hypothesis strategies of the intent tests: the text of a JSON annotation, strict or in
one of the ways users write it wrong."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

STYLES = ("plain", "trailing", "comment", "broken", "array")


@st.composite
def json_texts(
    draw: st.DrawFn, docs: st.SearchStrategy[dict[str, Any]], styles: tuple[str, ...] = STYLES
) -> str:
    """A JSON annotation's text: ``docs`` written strictly, or with a trailing comma, a
    comment, broken quotes, as an array, a NaN field or nested too deeply (``styles``)."""
    doc = draw(docs)
    out = json.dumps(doc, indent=draw(st.sampled_from([None, 1])))
    style = draw(st.sampled_from(styles))
    if style == "trailing" and doc:
        out = out[:-1].rstrip() + ",}"
    elif style == "comment":
        out = out.replace("{", "{ # a comment\n", 1)
    elif style == "broken":
        out = out.replace('"', "", 2)
    elif style == "array":
        out = json.dumps([doc])
    elif style == "nan":
        out = out[:-1] + (', "x": NaN}' if doc else '"x": NaN}')
    elif style == "deep":
        out = "[" * 1200 + "]" * 1200
    return out
