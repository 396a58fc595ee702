"""Vocabularies, spellings and suggestions per owner, the lenient JSON repair, and the
JSON Schemas agreeing with the Python vocabularies."""

from __future__ import annotations

import json

import jsonschema
import pytest

import schemas
from core.intent import dialects as d
from core.intent.lenient_json import dump_compact, parse_lenient

# ---- value matching: (matcher, raw, expected value, how) ----------------------------------

MATCHES = [
    # Koordinator policies (research §1.1, §5)
    (d.match_koord_policy, "SingleNUMANode", "SingleNUMANode", "exact"),
    (d.match_koord_policy, "single-numa-node", "SingleNUMANode", "respelled"),
    (d.match_koord_policy, "singleNumaNode", "SingleNUMANode", "respelled"),
    (d.match_koord_policy, " Restricted ", "Restricted", "trimmed"),
    (d.match_koord_policy, "best-effort", "BestEffort", "respelled"),
    (d.match_koord_policy, "", "", "exact"),
    (d.match_koord_policy, "none", "", "respelled"),
    (d.match_koord_policy, "None", "", "respelled"),
    # Volcano compares case-sensitively (research §2.3)
    (d.match_volcano_policy, "single-numa-node", "single-numa-node", "exact"),
    (d.match_volcano_policy, "SingleNUMANode", "single-numa-node", "respelled"),
    (d.match_volcano_policy, "Best-Effort", "best-effort", "respelled"),
    (d.match_volcano_policy, "None", "none", "respelled"),
    (d.match_volcano_policy, "restricted\n", "restricted", "trimmed"),
    # Exclusive: only "Required" is enforced; the proposal's typo
    (d.match_koord_exclusive, "Required", "Required", "exact"),
    (d.match_koord_exclusive, "required", "Required", "respelled"),
    (d.match_koord_exclusive, "Reuqired", "Required", "typo"),
    (d.match_koord_exclusive, " Required ", "Required", "trimmed"),
    (d.match_koord_exclusive, "preferred", "Preferred", "respelled"),
    # CPU bind
    (d.match_koord_bind, "FullPCPUs", "FullPCPUs", "exact"),
    (d.match_koord_bind, "fullpcpus", "FullPCPUs", "respelled"),
    (d.match_koord_cpu_exclusive, "numa-node-level", "NUMANodeLevel", "respelled"),
    # HAMi (#2767, #2854)
    (d.match_hami_node_policy, "Binpack", "binpack", "respelled"),
    (d.match_hami_node_policy, " binpack ", "binpack", "trimmed"),
    (d.match_hami_node_policy, "spread", "spread", "exact"),
    (d.match_numa_bind, "true", "true", "exact"),
    (d.match_numa_bind, " True", "True", "trimmed"),
]


@pytest.mark.parametrize(("matcher", "raw", "value", "how"), MATCHES)
def test_value_matching(matcher, raw, value, how):
    m = matcher(raw)
    assert (m.value, m.how) == (value, how)
    assert m.changed == (value != raw)


UNKNOWN = [
    (d.match_koord_policy, "SingleNUMA", "SingleNUMANode"),
    (d.match_koord_policy, "Restrictd", "Restricted"),
    (d.match_koord_policy, "SingleNUMANodePodLevel", "SingleNUMANode"),
    (d.match_volcano_policy, "single-numa", "single-numa-node"),
    (d.match_volcano_policy, "", None),
    (d.match_koord_exclusive, "Exclusive", None),
    (d.match_koord_bind, "FullPCPU", "FullPCPUs"),
    (d.match_hami_node_policy, "binpak", "binpack"),
    (d.match_hami_node_policy, "random", None),
    (d.match_numa_bind, "yes", None),
]


@pytest.mark.parametrize(("matcher", "raw", "suggestion"), UNKNOWN)
def test_unknown_values_get_a_suggestion_when_close(matcher, raw, suggestion):
    m = matcher(raw)
    assert m.value is None and m.how == "unknown"
    assert m.suggestion == suggestion


def test_separator_only_value_is_not_none():
    # "---" folds to "", which must not be taken for Koordinator's "" (none).
    assert d.match_koord_policy("---").value is None


@pytest.mark.parametrize(
    ("raw", "value", "tokens"),
    [
        ("binpack", "binpack", ("binpack",)),
        ("binpack,numa", "binpack,numa", ("binpack", "numa")),
        ("Binpack, NUMA", "binpack,numa", ("binpack", "numa")),
        (" numa , spread ", "numa,spread", ("numa", "spread")),
        ("topology-aware", "topology-aware", ("topology-aware",)),
        ("Topology_Aware,mutex", "topology-aware,mutex", ("topology-aware", "mutex")),
    ],
)
def test_hami_gpu_chain(raw, value, tokens):
    c = d.match_hami_gpu_policy(raw)
    assert (c.value, c.tokens, c.unknown) == (value, tokens, ())


@pytest.mark.parametrize(
    ("raw", "bad", "suggestion"),
    [
        ("binpack,numaa", "numaa", "numa"),
        ("binpack;numa", "binpack;numa", "binpack"),
        ("spread,", "", None),
    ],
)
def test_hami_gpu_chain_unknown_token(raw, bad, suggestion):
    c = d.match_hami_gpu_policy(raw)
    assert c.value is None
    assert c.unknown[0].raw.strip() == bad
    assert c.unknown[0].suggestion == suggestion


def test_describe_unknown_lists_allowed_and_suggests():
    text = d.describe_unknown(d.match_koord_policy("SingleNUMA"), d.KOORD_POLICIES)
    assert "'SingleNUMA'" in text
    assert '"" (none), BestEffort, Restricted, SingleNUMANode' in text
    assert text.endswith("did you mean SingleNUMANode?")


def test_policy_translation_round_trips():
    for policy in d.VOLCANO_POLICIES:
        assert d.kubelet_from_koord(d.koord_from_kubelet(policy)) == policy


# ---- lenient JSON ------------------------------------------------------------------------

# The Koordinator v1.5 release blog's example (research §0.2): a comment and trailing commas.
BLOG = """{
  "numaTopologyPolicy": "SingleNUMANode",
  "singleNUMANodeExclusive": "Required", # Required or Preferred
}"""


@pytest.mark.parametrize(
    ("text", "value", "repairs"),
    [
        ('{"a":"b"}', {"a": "b"}, ()),
        (
            BLOG,
            {"numaTopologyPolicy": "SingleNUMANode", "singleNUMANodeExclusive": "Required"},
            ("removed 1 comment", "removed 1 trailing comma"),
        ),
        (
            '{"numaTopologyPolicy": "SingleNUMANode",}',
            {"numaTopologyPolicy": "SingleNUMANode"},
            ("removed 1 trailing comma",),
        ),
        ('{"a": [1, 2,], }', {"a": [1, 2]}, ("removed 2 trailing commas",)),
        ('{"a": "x # not a comment, }"}', {"a": "x # not a comment, }"}, ()),
        ('{"a": "q\\"#",} // c', {"a": 'q"#'}, ("removed 1 comment", "removed 1 trailing comma")),
    ],
)
def test_lenient_json_repairs(text, value, repairs):
    r = parse_lenient(text)
    assert r.ok and r.value == value and r.repairs == repairs


@pytest.mark.parametrize(
    "text", ["{numaTopologyPolicy: SingleNUMANode}", "{'a': 1}", "", "{", "[" * 100000]
)
def test_lenient_json_unrepairable(text):
    r = parse_lenient(text)
    assert not r.ok and r.value is None and r.error


def test_dump_compact_is_stable():
    doc = {"b": 1, "a": {"d": 2, "c": 3}}
    text = dump_compact(doc)
    assert text == '{"a":{"c":3,"d":2},"b":1}'
    assert dump_compact(json.loads(text)) == text


# ---- schemas agree with the vocabularies ---------------------------------------------------


def _valid(schema: dict, value: object) -> bool:
    try:
        jsonschema.validate(value, schema, cls=jsonschema.Draft202012Validator)
    except jsonschema.ValidationError:
        return False
    return True


def test_schemas_are_valid_draft_2020_12():
    for name in ("numa-topology-spec", "resource-spec", "hami-annotations"):
        jsonschema.Draft202012Validator.check_schema(schemas.load(name))


def test_numa_topology_spec_schema_matches_vocabulary():
    s = schemas.load("numa-topology-spec")
    assert s["properties"]["numaTopologyPolicy"]["enum"] == list(d.KOORD_POLICIES)
    assert sorted(s["properties"]["singleNUMANodeExclusive"]["enum"]) == sorted(d.KOORD_EXCLUSIVE)
    for p in d.KOORD_POLICIES:
        for e in d.KOORD_EXCLUSIVE:
            assert _valid(s, {"numaTopologyPolicy": p, "singleNUMANodeExclusive": e})
    assert _valid(s, {"numaTopologyPolicy": "Restricted", "somethingNew": 1})  # unknown kept
    for bad in ("single-numa-node", "None", "SingleNUMANodePodLevel", " SingleNUMANode"):
        assert not _valid(s, {"numaTopologyPolicy": bad})
        assert d.match_koord_policy(bad).how != "exact"
    for bad in ("required", "Reuqired", ""):
        assert not _valid(s, {"singleNUMANodeExclusive": bad})
    assert not _valid(s, ["SingleNUMANode"])


def test_resource_spec_schema_matches_vocabulary():
    s = schemas.load("resource-spec")
    for f in (d.F_REQUIRED_BIND, d.F_PREFERRED_BIND):
        assert s["properties"][f]["enum"] == list(d.KOORD_BIND_POLICIES)
        for v in d.KOORD_BIND_POLICIES:
            assert _valid(s, {f: v})
        assert not _valid(s, {f: "FullPCPUsOnly"})  # node-only value, koordinator #1890
    assert s["properties"][d.F_CPU_EXCLUSIVE]["enum"] == list(d.KOORD_CPU_EXCLUSIVE_POLICIES)
    # the proposal's placement is rejected: the fields belong in numa-topology-spec
    assert not _valid(s, {"numaTopologyPolicy": "SingleNUMANode"})
    assert not _valid(s, {"singleNUMANodeExclusive": "Required"})


def test_hami_schema_matches_vocabulary():
    s = schemas.load("hami-annotations")
    assert s["properties"][d.HAMI_NODE_POLICY]["enum"] == list(d.HAMI_NODE_POLICIES)
    for v in d.HAMI_NODE_POLICIES:
        assert _valid(s, {d.HAMI_NODE_POLICY: v})
    chains = [*d.HAMI_GPU_POLICIES, "binpack,numa", "numa,spread", "mutex,topology-aware"]
    for v in chains:
        assert _valid(s, {d.HAMI_GPU_POLICY: v})
        assert d.match_hami_gpu_policy(v).value == v
    for bad in ("Binpack", " binpack ", "binpack, numa", "binpack,", "pack", ""):
        assert not _valid(s, {d.HAMI_GPU_POLICY: bad})
        assert d.match_hami_gpu_policy(bad).value != bad
    for bad in ("Binpack", " spread", "random"):
        assert not _valid(s, {d.HAMI_NODE_POLICY: bad})
    assert sorted(s["properties"][d.HAMI_NUMA_BIND]["enum"]) == sorted(d.PARSE_BOOL_VALUES)
    assert not _valid(s, {d.HAMI_NUMA_BIND: "yes"})
    pct = {"$schema": s["$schema"], **s["$defs"]["percentage"]}
    for ok in (0, 100, "0", "55", "100"):
        assert _valid(pct, ok)
    for bad in (101, -1, "101", "1000", "50%", "05"):
        assert not _valid(pct, bad)
