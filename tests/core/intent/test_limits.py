"""core.intent.limits: what one review reads at most, and how an excess is reported
(issue 17). The whole-review shapes are in tests/reliability/test_worst_case.py."""

from __future__ import annotations

import json

import pytest

from core.errors import InvalidInput
from core.intent import limits
from core.intent.lenient_json import parse_lenient
from core.quantity import to_core_units
from tests.core.intent.reading import NUMA, VOL, ann, ctr, pod, run


def test_suggestions_are_computed_for_a_bounded_number_of_fields() -> None:
    doc = {f"numaTopologyPolic{i}": 1 for i in range(200)}
    r = run(pod({NUMA: json.dumps(doc)}))
    assert [f.code for f in r.findings].count("unknown-field") == limits.SUGGESTIONS


def test_findings_are_capped_and_the_rest_counted_with_their_severity() -> None:
    bad = {"requests": {"cpu": "x", "memory": "y"}, "limits": {"cpu": "x", "memory": "y"}}
    r = run(pod(containers=[{"name": f"c{i}", "resources": bad} for i in range(40)]))
    assert len(r.findings) == limits.FINDINGS + 1
    last = r.findings[-1]
    assert (last.severity, last.code) == ("error", "too-large")
    assert last.message.startswith(f"{160 - limits.FINDINGS:,} more findings not shown")


def test_json_values_over_the_limit_are_left_as_written() -> None:
    text = json.dumps({f"k{i}": i for i in range(limits.JSON_VALUES + 1)})
    r = run(pod({NUMA: text}))
    assert r.annotations[NUMA] == text and not r.changed
    (f,) = r.findings
    assert (f.path, f.code) == (ann(NUMA), "too-large")
    assert f"{limits.JSON_VALUES + 1:,} JSON values" in f.message
    assert "limit of 1,024" in f.message


def test_json_at_the_limits_is_read() -> None:
    nested: object = 1
    for _ in range(limits.JSON_DEPTH - 1):
        nested = {"a": nested}
    text = json.dumps({"numaTopologyPolicy": "SingleNUMANode", "x": nested})
    assert "too-large" not in [f.code for f in run(pod({NUMA: text})).findings]
    deeper = json.dumps({"numaTopologyPolicy": "SingleNUMANode", "x": {"a": nested}})
    (f,) = [f for f in run(pod({NUMA: deeper})).findings if f.code == "too-large"]
    assert "limit of 16" in f.message


def test_an_over_limit_volcano_key_is_not_overwritten_by_mirroring() -> None:
    long = "single-numa-node" * 100
    spec = '{"numaTopologyPolicy":"SingleNUMANode"}'
    r = run(pod({NUMA: spec, VOL: long}, schedulerName="volcano"))
    assert r.annotations[VOL] == long
    assert "mirrored" not in [f.code for f in r.findings]
    (f,) = [f for f in r.findings if f.code == "too-large"]
    assert f.path == ann(VOL) and "1,600 characters" in f.message and "1,024" in f.message


def test_annotations_over_the_api_server_total_are_not_read() -> None:
    big = {NUMA: '{"numaTopologyPolicy":"single-numa-node"}', "x": "y" * limits.ANNOTATIONS_BYTES}
    r = run(pod(big))
    assert not r.changed and r.intent.policy is None
    (f,) = r.findings
    assert f.path == "metadata.annotations" and "262,144" in f.message


def test_a_long_unknown_value_is_shown_cut() -> None:
    r = run(pod({NUMA: json.dumps({"numaTopologyPolicy": "x" * 100_000})}))
    (f,) = r.findings
    assert f.code == "unknown-policy" and "(100,000 characters)" in f.message
    assert len(f.message) < 400


def test_repair_only_up_to_its_size() -> None:
    line = '# blog\n"numaTopologyPolicy":"SingleNUMANode",\n'
    small = "{" + line * (limits.REPAIR_CHARS // len(line) - 1) + "}"
    assert parse_lenient(small).ok
    big = "{" + line * (limits.REPAIR_CHARS // len(line) + 1) + "}"
    result = parse_lenient(big)
    assert not result.ok and "over 16,384" in (result.error or "")


@pytest.mark.parametrize(
    ("value", "units"),
    [("0e999999999", 0), ("1e-999999999", 1), ("2e3", 2_000_000), ("1e-500", 1)],
)
def test_quantities_with_extreme_exponents_take_no_time(value: str, units: int) -> None:
    assert to_core_units("cpu", value) == units


@pytest.mark.parametrize("value", ["1e999999999", "1" * 5000, "1." + "0" * 200])
def test_quantities_too_large_or_long_are_refused(value: str) -> None:
    with pytest.raises(InvalidInput):
        to_core_units("cpu", value)


def test_containers_at_and_over_the_limit() -> None:
    at = run(pod(containers=[ctr(f"c{i}") for i in range(limits.CONTAINERS)]))
    assert "too-large" not in [f.code for f in at.findings]
    over = run(pod(containers=[ctr(f"c{i}") for i in range(limits.CONTAINERS + 1)]))
    (f,) = over.findings
    assert f.path == "spec.containers" and "129 containers" in f.message and "128" in f.message
