"""core.intent.rules: each rule's RE2 pattern accepts exactly the values the webhook's own
matcher reads (core.intent.dialects), so the generated policy refuses what the webhook
refuses and nothing else. Checked with google-re2 (the engine celpy uses; Kubernetes' Go
regexp has the same RE2 syntax) on generated spellings, including Unicode whitespace and
case folding."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import re2
from hypothesis import given, settings
from hypothesis import strategies as st

from core.intent import dialects as d
from core.intent.rules import RULES, Rule, char_class, rule

MATCHERS: dict[str, Callable[[str], bool]] = {
    "volcano-policy": lambda v: d.match_volcano_policy(v).value is not None,
    "hami-node-policy": lambda v: d.match_hami_node_policy(v).value is not None,
    "hami-gpu-policy": lambda v: d.match_hami_gpu_policy(v).value is not None,
    "hami-numa-bind": lambda v: d.match_numa_bind(v).value is not None,
    "volcano-task-policy": lambda v: d.match_volcano_policy(v).how == "exact",
}
WORDS = [
    *d.POLICIES,
    "SingleNUMANode",
    "BestEffort",
    *d.HAMI_GPU_POLICIES,
    *d.PARSE_BOOL_VALUES,
    "Reuqired",
]
NOISE = list(" \t\n\v\x1c\x85\u00a0\u2003\u3000_-.,xK\u212a\u0130")


@st.composite
def spellings(draw: st.DrawFn) -> str:
    """A known word with its letters' case changed, separators and noise inserted, maybe a
    second word after a comma."""
    out = []
    for _ in range(draw(st.integers(1, 2))):
        word = draw(st.sampled_from(WORDS))
        chars = []
        for c in word:
            if draw(st.booleans()):
                chars.append(draw(st.sampled_from(NOISE)))
            chars.append(c.swapcase() if draw(st.integers(0, 3)) == 0 else c)
            if draw(st.integers(0, 7)) == 0:
                chars.pop()  # a letter dropped
        out.append("".join(chars))
    return ",".join(out)


def test_every_rule_has_a_matcher() -> None:
    assert set(MATCHERS) == {r.name for r in RULES}


@pytest.mark.parametrize("r", RULES, ids=[r.name for r in RULES])
@settings(max_examples=200, deadline=None)
@given(value=st.one_of(spellings(), st.text(max_size=30)))
def test_pattern_accepts_what_the_matcher_reads(r: Rule, value: str) -> None:
    assert (re2.search(r.pattern, value) is not None) == MATCHERS[r.name](value), repr(value)


@pytest.mark.parametrize(
    ("name", "value", "accepted"),
    [
        ("volcano-policy", "single\u00a0NUMA\u2003node", True),  # str.isspace, str.lower
        ("volcano-policy", "SingleNUMANode", True),
        ("volcano-policy", "single numa", False),
        ("hami-node-policy", "binpac\u212a", True),  # the Kelvin sign lowers to k
        ("hami-gpu-policy", "binpack,,numa", False),
        ("hami-numa-bind", "\u3000true\u3000", True),
        ("hami-numa-bind", "yes", False),
        ("volcano-task-policy", "single-numa-node ", False),
    ],
)
def test_examples(name: str, value: str, accepted: bool) -> None:
    assert (re2.search(rule(name).pattern, value) is not None) is accepted
    assert MATCHERS[name](value) is accepted


def test_char_class_writes_runs_as_ranges() -> None:
    assert char_class("abcx\u00a0\u3000") == "[a-cx\\xa0\\x{3000}]"


def test_the_readme_lists_every_rule_in_both_homes() -> None:
    """README "Which rule lives where": a row per rule of the table, webhook and policy."""
    from tests.paths import ROOT

    text = (ROOT / "README.md").read_text()
    section = text.split("### Which rule lives where", 1)[1].split("\n## ", 1)[0]
    for r in RULES:
        shown = "`tasks[].topologyPolicy`" if r.where == "task" else f"`{r.key}`"
        rows = [line for line in section.splitlines() if shown in line]
        assert rows, f"{r.name}: no row in the README"
        assert any(line.endswith(f"`{r.code}` | yes | yes |") for line in rows), rows
