"""The Koordinator reader's fast path (core.intent.koordinator._read_plain) against the full
reader: on every input where it answers, the same Koord, annotations and findings (none);
everything else (errors, repairs, respelling, moved fields, limits) falls through to the
full reader, so read_koordinator equals read_koordinator_full on every input."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from core.intent import dialects as d
from core.intent.findings import Ctx
from core.intent.koordinator import Koord, _read_plain, read_koordinator, read_koordinator_full
from core.intent.limits import DEFAULT
from tests.core.intent.json_texts import STYLES, json_texts

VALUES = [
    *d.KOORD_POLICIES,
    *d.KOORD_EXCLUSIVE,
    *d.KOORD_BIND_POLICIES,
    *d.KOORD_CPU_EXCLUSIVE_POLICIES,
    "FullPCPUsOnly",
    " SingleNUMANode",
    "single-numa-node",
    "required",
    "Reuqired",
    "Restrictd",
    "fullpcpus",
]
FIELDS = [
    *d.NUMA_SPEC_FIELDS,
    *d.RESOURCE_SPEC_FIELDS,
    "NUMATopologyPolicy",
    "singlenumanodeexclusive",
    "numaPolicy",
    "other",
]
scalar = st.one_of(
    st.sampled_from(VALUES),
    st.text(max_size=6),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False),
)
value = st.one_of(
    scalar, st.lists(scalar, max_size=2), st.dictionaries(st.text(max_size=3), scalar, max_size=2)
)
doc = st.dictionaries(st.sampled_from(FIELDS), value, max_size=4)
# The shapes the fast path is for: known fields, exact values.
numa_plain = st.fixed_dictionaries(
    {},
    optional={
        d.F_NUMA_POLICY: st.sampled_from(d.KOORD_POLICIES),
        d.F_NUMA_EXCLUSIVE: st.sampled_from(d.KOORD_EXCLUSIVE),
    },
)
resource_plain = st.fixed_dictionaries(
    {},
    optional={
        d.F_REQUIRED_BIND: st.sampled_from(d.KOORD_BIND_POLICIES),
        d.F_PREFERRED_BIND: st.sampled_from(d.KOORD_BIND_POLICIES),
        d.F_CPU_EXCLUSIVE: st.sampled_from(d.KOORD_CPU_EXCLUSIVE_POLICIES),
    },
)


def text_of(docs: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[str]:
    return json_texts(docs, ("plain", "plain", *STYLES[1:], "nan", "deep"))


annotations = st.fixed_dictionaries(
    {},
    optional={
        d.KOORD_NUMA_SPEC: st.one_of(text_of(doc), text_of(numa_plain), st.just("")),
        d.KOORD_RESOURCE_SPEC: st.one_of(text_of(doc), text_of(resource_plain), st.just("{}")),
        "example.com/other": st.text(max_size=4),
    },
)
limits = st.sampled_from([DEFAULT, replace(DEFAULT, json_values=1), replace(DEFAULT, json_depth=0)])


def _read(reader: Any, ann: dict[str, str], lim: Any) -> tuple[Koord, dict[str, str], Any]:
    ctx = Ctx("", limits=lim)
    out = dict(ann)
    koord = reader(out, ctx)
    return koord, out, (ctx.findings(), ctx.unread, ctx.dropped)


def _same(a: Koord, b: Koord) -> None:
    assert (a.bind, a.policy, a.exclusive) == (b.bind, b.policy, b.exclusive)
    for x, y in ((a.numa, b.numa), (a.resource, b.resource)):
        assert (x.key, x.doc, x.dirty, x.over_limit) == (y.key, y.doc, y.dirty, y.over_limit)
        assert json.dumps(x.doc) == json.dumps(y.doc)  # also the types: 1 vs 1.0, key order


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ann=annotations, lim=limits)
@example(ann={d.KOORD_NUMA_SPEC: '{"numaTopologyPolicy": "SingleNUMANode"}'}, lim=DEFAULT)
@example(
    ann={
        d.KOORD_NUMA_SPEC: '{"numaTopologyPolicy": "Restricted"}',
        d.KOORD_RESOURCE_SPEC: '{"preferredCPUBindPolicy": "FullPCPUs"}',
    },
    lim=DEFAULT,
)
@example(ann={d.KOORD_RESOURCE_SPEC: '{"numaTopologyPolicy": "Restricted"}'}, lim=DEFAULT)
@example(ann={d.KOORD_NUMA_SPEC: '{"singleNUMANodeExclusive": ""}'}, lim=DEFAULT)
@example(ann={d.KOORD_RESOURCE_SPEC: '{"requiredCPUBindPolicy": "FullPCPUsOnly"}'}, lim=DEFAULT)
@example(ann={d.KOORD_NUMA_SPEC: '{"numaTopologyPolicy": 12345678901234567890123}'}, lim=DEFAULT)
def test_read_koordinator_is_the_full_reader(ann: dict[str, str], lim: Any) -> None:
    fast = _read(read_koordinator, ann, lim)
    full = _read(read_koordinator_full, ann, lim)
    _same(fast[0], full[0])
    assert fast[1] == full[1]  # the annotations written back
    assert fast[2] == full[2]  # findings, unread keys, dropped count
    plain = _read_plain(dict(ann), Ctx("", limits=lim))
    if plain is not None:  # where the fast path answers, the full reader had nothing to say
        _same(plain, full[0])
        assert full[1] == ann and full[2] == ((), set(), 0)


@given(
    numa=st.one_of(st.none(), numa_plain),
    resource=st.one_of(st.none(), resource_plain),
    indent=st.sampled_from([None, 2]),
)
def test_the_common_shapes_take_the_fast_path(
    numa: dict[str, str] | None, resource: dict[str, str] | None, indent: int | None
) -> None:
    ann = {}
    if numa is not None:
        ann[d.KOORD_NUMA_SPEC] = json.dumps(numa, indent=indent)
    if resource is not None:
        ann[d.KOORD_RESOURCE_SPEC] = json.dumps(resource, indent=indent)
    plain = _read_plain(dict(ann), Ctx(""))
    assert plain is not None
    _same(plain, _read(read_koordinator_full, ann, DEFAULT)[0])


def test_what_needs_work_falls_through() -> None:
    for text in (
        '{"numaTopologyPolicy": "single-numa-node"}',  # respelled
        '{"numaTopologyPolicy": "SingleNUMANode",}',  # repaired
        '{"NUMATopologyPolicy": "SingleNUMANode"}',  # field respelled
        '{"numaTopologyPolicy": "SingleNUMANode", "other": 1}',  # unknown field
        '{"singleNUMANodeExclusive": ""}',  # empty exclusive is rewritten
        "[]",
        "not json",
    ):
        assert _read_plain({d.KOORD_NUMA_SPEC: text}, Ctx("")) is None, text
    moved = {d.KOORD_RESOURCE_SPEC: '{"numaTopologyPolicy": "Restricted"}'}
    assert _read_plain(moved, Ctx("")) is None
    node_only = {d.KOORD_RESOURCE_SPEC: '{"preferredCPUBindPolicy": "FullPCPUsOnly"}'}
    assert _read_plain(node_only, Ctx("")) is None
