"""atheris fuzz target for the annotation parsers (core.intent.read, core.intent.dialects,
core.intent.lenient_json). See fuzz/README.md for a long run.

Each input becomes a set of policy annotations (the six keys numagate reads, plus an
unknown one), a scheduler name and a container, and is checked for:

- no exception other than ``CoreError`` (the documented refusal) from ``read_intent``,
  ``parse_lenient`` or the dialect matchers;
- normalization keeps every key and writes only strings;
- normalization is idempotent: reading the normalized annotations changes nothing.

    .venv/bin/python fuzz/annotations_fuzz.py -runs=2000          # the short run in make test
    .venv/bin/python fuzz/annotations_fuzz.py -max_total_time=600 fuzz/corpus
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _instrumenting() -> contextlib.AbstractContextManager[Any]:
    """Coverage instrumentation of the parsers when run as the fuzzer (only ``core``:
    instrumenting everything loaded costs 20 s of start-up); plain imports otherwise."""
    if __name__ != "__main__":
        return contextlib.nullcontext()
    import atheris

    return atheris.instrument_imports(include=["core"])


with _instrumenting():
    from core.errors import CoreError
    from core.intent import dialects as d
    from core.intent.lenient_json import parse_lenient
    from core.intent.read import read_intent
    from core.intent.workloads import PodTemplate

KEYS = (
    d.KOORD_NUMA_SPEC,
    d.KOORD_RESOURCE_SPEC,
    d.VOLCANO_NUMA_POLICY,
    d.HAMI_NODE_POLICY,
    d.HAMI_GPU_POLICY,
    d.HAMI_NUMA_BIND,
    "example.com/unknown",
)
SCHEDULERS = ("", "koord-scheduler", "volcano", "hami-scheduler", "default-scheduler")
MATCHERS = (
    d.match_koord_policy,
    d.match_volcano_policy,
    d.match_koord_exclusive,
    d.match_koord_bind,
    d.match_koord_cpu_exclusive,
    d.match_hami_node_policy,
    d.match_numa_bind,
    d.match_hami_gpu_policy,
)
# Fragments that steer the fuzzer towards the interesting shapes quickly.
SEEDS = (
    '{"numaTopologyPolicy":"SingleNUMANode"}',
    '{"numaTopologyPolicy":"singlenumanode","singleNUMANodeExclusive":"Reuqired",}',
    '{"preferredCPUBindPolicy":"FullPCPUs" # comment\n}',
    "single-numa-node",
    "binpack,topology-aware",
)


def template(
    annotations: dict[str, Any], scheduler: str, cpu: str, extra: str | None
) -> PodTemplate:
    resources = {"requests": {"cpu": cpu, "memory": "1Gi"}, "limits": {"cpu": cpu, "memory": "1Gi"}}
    spec = {"schedulerName": scheduler, "containers": [{"name": "c", "resources": resources}]}
    return PodTemplate(
        kind="Pod",
        name="fuzz",
        namespace="default",
        path="",
        metadata={"annotations": annotations},
        spec=spec,
        extra_annotations={d.VOLCANO_NUMA_POLICY: extra} if extra is not None else {},
        strict_cpu=extra is not None,
    )


def check_annotations(
    annotations: dict[str, Any],
    scheduler: str = "",
    cpu: str = "2",
    extra: str | None = None,
) -> None:
    """The invariants for one input; raises AssertionError (a finding) when one breaks."""
    for value in annotations.values():
        if isinstance(value, str):
            parse_lenient(value)
            for match in MATCHERS:
                match(value)
    try:
        first = read_intent(template(annotations, scheduler, cpu, extra))
    except CoreError:
        return
    assert set(annotations) <= set(first.annotations), "a key was dropped"
    assert all(isinstance(v, str) for v in first.annotations.values()), "non-string value"
    second = read_intent(template(first.annotations, scheduler, cpu, extra))
    assert second.annotations == first.annotations, (first.annotations, second.annotations)
    assert not second.changed, "normalizing the normalized annotations changed them"


def one_input(data: bytes) -> None:
    import atheris

    fdp = atheris.FuzzedDataProvider(data)
    annotations: dict[str, Any] = {}
    for _ in range(fdp.ConsumeIntInRange(0, 4)):
        key = KEYS[fdp.ConsumeIntInRange(0, len(KEYS) - 1)]
        if fdp.ConsumeIntInRange(0, 3) == 0:
            value = SEEDS[fdp.ConsumeIntInRange(0, len(SEEDS) - 1)]
            value += fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, 8))
        else:
            value = fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, 96))
        annotations[key] = value
    scheduler = SCHEDULERS[fdp.ConsumeIntInRange(0, len(SCHEDULERS) - 1)]
    cpu = ("1", "2", "500m", "1500m", "x")[fdp.ConsumeIntInRange(0, 4)]
    extra = fdp.ConsumeUnicodeNoSurrogates(12) if fdp.ConsumeBool() else None
    check_annotations(annotations, scheduler, cpu, extra)


def main() -> None:
    import atheris

    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
