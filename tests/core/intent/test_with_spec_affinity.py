"""``with_spec_affinity`` (validate judging a pod without mutate's own affinity) gives what
reading the whole template again gives, for any affinity: it reads only the required
terms again, so any other part of the intent that came to depend on the affinity would
make these fail."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from core.intent.limits import Limits
from core.intent.read import read_intent, with_spec_affinity
from core.intent.workloads import pod_templates
from tests.core.intent.reading import NUMA, VOL, ctr, pod

requirement = st.fixed_dictionaries(
    {
        "key": st.sampled_from(["zone", "numa.example.com/policy", "kubernetes.io/hostname"]),
        "operator": st.sampled_from(["In", "NotIn", "Exists", "Gt", "Bogus"]),
    },
    optional={"values": st.lists(st.sampled_from(["a", "b", "1", ""]), max_size=3)},
)
term = st.fixed_dictionaries(
    {},
    optional={
        "matchExpressions": st.lists(requirement, max_size=3),
        "matchFields": st.lists(requirement, max_size=1),
    },
)
affinity = st.one_of(
    st.none(),
    st.just({}),
    st.just({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": "x"}}),
    st.lists(term, max_size=4).map(
        lambda terms: {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
            }
        }
    ),
)
annotations = st.sampled_from(
    [
        {},
        {VOL: "single-numa-node"},
        {NUMA: '{"numaTopologyPolicy":"Restricted"}'},
        {NUMA: '{"numaTopologyPolicy":"SingleNUMANode"', VOL: "bogus"},
    ]
)


def _with_affinity(spec: dict[str, Any], value: Any) -> dict[str, Any]:
    out = {k: v for k, v in spec.items() if k != "affinity"}
    if value is not None:
        out["affinity"] = value
    return out


@settings(max_examples=200, deadline=None)
@given(
    ann=annotations,
    first=affinity,
    second=affinity,
    small=st.booleans(),
    cpu=st.sampled_from(["2", "500m"]),
)
def test_reading_the_affinity_again_equals_reading_the_whole_template(
    ann: dict[str, str], first: Any, second: Any, small: bool, cpu: str
) -> None:
    obj = pod(ann, [ctr(cpu=cpu)], nodeSelector={"zone": "a"})
    template = pod_templates(obj)[0]
    if small:  # the limits: over them, the terms are not read (both ways)
        template = dataclasses.replace(template, limits=Limits(terms=1, requirements=2))
    template = dataclasses.replace(template, spec=_with_affinity(template.spec, first))
    intent = read_intent(template).intent
    spec = _with_affinity(template.spec, second)
    expected = read_intent(dataclasses.replace(template, spec=spec)).intent
    assert with_spec_affinity(intent, template, spec) == expected
