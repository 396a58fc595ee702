"""Property-based fuzzing of the admission path (hypothesis) and a short atheris run.

Properties, over generated reviews and annotations:

- no exception escapes ``read_intent`` (a ``CoreError`` is the documented refusal) or the
  pipeline (``webhook.review.pipeline.answer``, the function both the server and
  ``numagate review`` call): the answer is a 4xx for a bad request or a well-formed
  AdmissionReview with the uid echoed, never a 500;
- mutation is idempotent: apply the patch with ``jsonpatch``, review again, no patch
  (reinvocationPolicy IfNeeded, research webhook-anchors.md 1.4);
- normalization never drops an annotation key.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from core.errors import CoreError
from core.intent import dialects as d
from core.intent.lenient_json import parse_lenient
from core.intent.read import read_intent
from core.intent.workloads import pod_templates
from tests.paths import ROOT
from tests.reliability.corpus import good_pod, review_of
from webhook.config import load_config
from webhook.inventory.state import InventoryState, load_demo
from webhook.review.pipeline import Runtime, answer

# Moderate by default (the suite must stay fast); NUMAGATE_FUZZ_EXAMPLES raises it.
EXAMPLES = int(os.environ.get("NUMAGATE_FUZZ_EXAMPLES", "60"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# ---- strategies

POLICY_WORDS = [
    *d.KOORD_POLICIES,
    *d.VOLCANO_POLICIES,
    "singlenumanode",
    " SingleNUMANode ",
    "Single-NUMA-Node",
    "Restrictd",
    "none",
    "",
]
EXCLUSIVE_WORDS = ["Required", "required", "Reuqired", "Preferred", "Always", ""]
HAMI_WORDS = ["binpack", "Binpack", "spread", "numa", "topology-aware,binpack", "mutex", "pack"]
KEYS = [
    d.KOORD_NUMA_SPEC,
    d.KOORD_RESOURCE_SPEC,
    d.VOLCANO_NUMA_POLICY,
    d.HAMI_NODE_POLICY,
    d.HAMI_GPU_POLICY,
    d.HAMI_NUMA_BIND,
]
SCHEDULERS = ["koord-scheduler", "volcano", "hami-scheduler", "default-scheduler", "", "other"]

text = st.text(max_size=16)
json_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 10**6), text, st.sampled_from(POLICY_WORDS)
)
koord_doc = st.dictionaries(
    st.sampled_from(
        [d.F_NUMA_POLICY, d.F_NUMA_EXCLUSIVE, d.F_REQUIRED_BIND, d.F_PREFERRED_BIND, "cpus", "x"]
    ),
    st.one_of(json_scalar, st.sampled_from(EXCLUSIVE_WORDS), st.lists(json_scalar, max_size=2)),
    max_size=4,
)


@st.composite
def json_text(draw: st.DrawFn) -> str:
    """A JSON document as users write them: valid, with a trailing comma or a comment,
    truncated, or of the wrong type."""
    doc = json.dumps(draw(st.one_of(koord_doc, json_scalar, st.lists(json_scalar, max_size=2))))
    how = draw(st.sampled_from(["as-is", "trailing-comma", "comment", "truncated", "noise"]))
    if how == "trailing-comma" and doc.endswith("}") and len(doc) > 2:
        return doc[:-1] + ",}"
    if how == "comment":
        return doc + " # note"
    if how == "truncated":
        return doc[: draw(st.integers(0, max(0, len(doc) - 1)))]
    if how == "noise":
        return doc + draw(text)
    return doc


annotation_value = st.one_of(
    json_text(),
    st.sampled_from(POLICY_WORDS + HAMI_WORDS + EXCLUSIVE_WORDS),
    text,
)
annotations = st.dictionaries(
    st.one_of(
        st.sampled_from(KEYS), st.from_regex(r"[a-z]{1,8}\.io/[a-z\-]{1,10}", fullmatch=True)
    ),
    annotation_value,
    max_size=5,
)
quantity = st.one_of(
    st.sampled_from(["1", "2", "4", "500m", "1500m", "64", "1Gi", "2Gi", "0", "-1", "abc", "1e3"]),
    st.integers(-2, 200),
    text,
)
resources = st.fixed_dictionaries(
    {},
    optional={
        "requests": st.dictionaries(
            st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "hugepages-2Mi"]),
            quantity,
            max_size=3,
        ),
        "limits": st.dictionaries(
            st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), quantity, max_size=3
        ),
    },
)
container = st.fixed_dictionaries(
    {"name": st.from_regex(r"[a-z]{1,6}", fullmatch=True), "image": st.just("busybox")},
    optional={"resources": resources},
)


@st.composite
def pods(draw: st.DrawFn, *, with_junk: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "default", "annotations": draw(annotations)}
    spec: dict[str, Any] = {"containers": draw(st.lists(container, min_size=1, max_size=3))}
    scheduler = draw(st.sampled_from(SCHEDULERS))
    if scheduler:
        spec["schedulerName"] = scheduler
    if draw(st.booleans()):
        spec["initContainers"] = draw(st.lists(container, max_size=2))
    if draw(st.booleans()):
        spec["nodeSelector"] = {"kubernetes.io/hostname": draw(st.sampled_from(["koord-1", "x"]))}
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    if with_junk and draw(st.integers(0, 4)) == 0:
        # Junk at a random place: a wrong-typed value where an object is expected.
        junk = draw(st.one_of(st.none(), st.integers(), text, st.lists(st.integers(), max_size=2)))
        target = draw(
            st.sampled_from(
                [
                    "meta.annotations",
                    "meta.labels",
                    "spec.containers",
                    "spec.affinity",
                    "spec.overhead",
                    "container.resources",
                ]
            )
        )
        if target.startswith("meta."):
            meta[target[5:]] = junk
        elif target.startswith("spec."):
            spec[target[5:]] = junk
        else:
            spec["containers"][0]["resources"] = junk
    return pod


# ---- the pipeline, in-process (the same function the endpoint calls)


def _runtime() -> Runtime:
    state = InventoryState()
    load_demo(state)
    config = load_config(None)
    return Runtime(config=lambda: config, inventory=state)


RUNTIME = _runtime()


def _answer(doc: Any, webhook: str) -> tuple[int, Any]:
    raw = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    result = asyncio.run(answer(raw, webhook=webhook, runtime=RUNTIME))  # type: ignore[arg-type]
    if result.status != 200:
        return result.status, result.body.decode()
    return 200, json.loads(result.body)


def _well_formed(body: Any, uid: str, webhook: str) -> dict[str, Any]:
    assert (body["apiVersion"], body["kind"]) == ("admission.k8s.io/v1", "AdmissionReview")
    response = body["response"]
    assert response["uid"] == uid
    assert isinstance(response["allowed"], bool)
    if not response["allowed"]:
        assert response["status"]["message"] and response["status"]["code"] >= 400
    if webhook == "validate":
        assert "patch" not in response
    assert ("patch" in response) == ("patchType" in response)
    assert all(0 < len(w) < 120 for w in response.get("warnings", []))
    return dict(response)


def _patch(response: dict[str, Any]) -> list[dict[str, Any]]:
    return json.loads(base64.b64decode(response["patch"])) if "patch" in response else []


# ---- properties


@FUZZ
@given(pod=pods())
def test_read_intent_never_raises_and_keeps_every_key(pod: dict[str, Any]) -> None:
    for template in pod_templates(pod):
        try:
            result = read_intent(template)
        except CoreError:
            continue  # the documented refusal, answered 400 by the pipeline
        raw = template.metadata.get("annotations")
        if isinstance(raw, dict):
            assert set(raw) <= set(result.annotations), "normalization dropped a key"
        for finding in result.findings:
            assert finding.message and finding.severity in ("error", "warning", "info")


@FUZZ
@given(
    pod=pods(),
    webhook=st.sampled_from(["mutate", "validate"]),
    uid=st.text(min_size=1, max_size=40),
)
def test_pipeline_always_answers_a_well_formed_review(
    pod: dict[str, Any], webhook: str, uid: str
) -> None:
    status, body = _answer(review_of(pod, uid=uid), webhook)
    assert status == 200, body
    response = _well_formed(body, uid, webhook)
    if webhook == "mutate" and "patch" in response:
        jsonpatch.JsonPatch(_patch(response)).apply(pod)  # the apiserver must be able to apply it


@FUZZ
@given(pod=pods(with_junk=False))
def test_mutation_is_idempotent_and_never_drops_a_key(pod: dict[str, Any]) -> None:
    status, body = _answer(review_of(pod, uid="first"), "mutate")
    assert status == 200, body
    ops = _patch(_well_formed(body, "first", "mutate"))
    if not ops:
        return
    mutated = jsonpatch.JsonPatch(ops).apply(pod)
    assert set(pod["metadata"]["annotations"]) <= set(mutated["metadata"]["annotations"])
    status, again = _answer(review_of(mutated, uid="second"), "mutate")
    assert status == 200
    assert "patch" not in _well_formed(again, "second", "mutate"), _patch(again["response"])


@FUZZ
@given(data=st.data())
def test_pipeline_survives_random_envelopes(data: st.DataObject) -> None:
    """Random values at random places of the review: a 400 naming something, or a review."""
    review = review_of(good_pod(), uid="env")
    request = review["request"]
    key = data.draw(st.sampled_from([*request, "apiVersion", "kind"]))
    value = data.draw(
        st.one_of(
            st.none(),
            st.integers(),
            st.text(max_size=8),
            st.lists(st.integers(), max_size=2),
            st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
        )
    )
    if key in ("apiVersion", "kind"):
        review[key] = value
    else:
        request[key] = value
    for webhook in ("mutate", "validate"):
        status, body = _answer(review, webhook)
        assert status in (200, 400), body
        if status == 400:
            assert isinstance(body, str) and body.strip() and "Traceback" not in body
        else:
            _well_formed(body, str(request.get("uid")), webhook)


@FUZZ
@given(raw=st.binary(max_size=300))
def test_pipeline_survives_random_bytes(raw: bytes) -> None:
    for webhook in ("mutate", "validate"):
        status, body = _answer(raw, webhook)
        assert status in (200, 400), body


@FUZZ
@given(text_=st.text(max_size=200))
@example(text_='{"a": NaN}')  # deterministic: Python's json accepts it, Go's does not
def test_lenient_json_never_raises_and_accepts_only_what_go_accepts(text_: str) -> None:
    """Whatever parse_lenient accepts must be JSON that Go's json.Unmarshal (koord-scheduler)
    accepts once the announced repairs are applied: no NaN or Infinity literals."""
    result = parse_lenient(text_)
    assert result.ok == (result.error is None)
    if result.ok:
        json.dumps(result.value, allow_nan=False)  # raises ValueError on NaN/Infinity


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_lenient_json_rejects_non_standard_literals(literal: str) -> None:
    text_ = '{"numaTopologyPolicy": "SingleNUMANode", "x": ' + literal + "}"
    assert not parse_lenient(text_).ok, f"{literal} is not JSON (RFC 8259); Go rejects it"


# ---- atheris: a short run of fuzz/annotations_fuzz.py


@pytest.mark.slow
def test_atheris_short_run(tmp_path: Path) -> None:
    """The atheris target runs 2,000 inputs without finding a crash (a crash exits
    non-zero and prints the input). The long run is in fuzz/README.md."""
    target = ROOT / "fuzz" / "annotations_fuzz.py"
    proc = subprocess.run(
        [
            sys.executable,
            str(target),
            "-runs=2000",
            "-seed=1",
            "-max_len=512",
            f"-artifact_prefix={tmp_path}/",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Done 2000 runs" in proc.stderr, proc.stderr[-2000:]
    assert not list(tmp_path.iterdir()), "atheris wrote a crash artifact"


@pytest.mark.parametrize(
    "sample", ["{", '{"numaTopologyPolicy": "SingleNUMANode",}', "\x00", "[" * 3000]
)
def test_atheris_target_entry_point_accepts_samples(sample: str) -> None:
    """The target's one-input function, called directly on tricky inputs."""
    sys.path.insert(0, str(ROOT / "fuzz"))
    try:
        import annotations_fuzz
    finally:
        sys.path.remove(str(ROOT / "fuzz"))
    annotations_fuzz.check_annotations({d.KOORD_NUMA_SPEC: sample, d.VOLCANO_NUMA_POLICY: sample})
