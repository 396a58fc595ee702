"""webhook.review.pipeline over the real core (intent, compat, evaluate, snapshot, inventory):
mutation, validation, enforcement modes, exclusions, dryRun, UPDATE, deadlines, staleness."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders.objects import build_review, koord_pod, manifest
from tests.paths import FIXTURES
from tests.webhook.harness import call, decode_patch, runtime
from webhook.config import Config
from webhook.inventory.state import InventoryState, load_demo
from webhook.review.pipeline import Runtime, answer, deadline_for

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


# ----------------------------------------------------------------------------- mutate


async def test_mutation_normalizes_and_injects_then_is_idempotent() -> None:
    rt = runtime(inventory=None)
    load_demo(rt.inventory)
    pod = manifest("koord-pod-misspelled")
    review = build_review(pod)
    response = await call(rt, "mutate", review)
    ops = decode_patch(response)
    assert ops is not None
    mutated = jsonpatch.JsonPatch(ops).apply(copy.deepcopy(pod))
    spec = orjson.loads(
        mutated["metadata"]["annotations"]["scheduling.koordinator.sh/numa-topology-spec"]
    )
    assert spec["numaTopologyPolicy"] == "SingleNUMANode"
    terms = mutated["spec"]["affinity"]["nodeAffinity"][REQUIRED]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][0]["key"] == "node.koordinator.sh/numa-topology-policy"
    assert any("singlenumanode" in w for w in response.get("warnings", []))
    again = await call(rt, "mutate", build_review(mutated))
    assert "patch" not in again


async def test_user_terms_kept_and_each_gets_the_expression() -> None:
    rt = runtime()
    pod = manifest("koord-pod-user-affinity")
    ops = decode_patch(await call(rt, "mutate", build_review(pod)))
    assert ops is not None and all(op["op"] == "add" for op in ops)
    out = jsonpatch.JsonPatch(ops).apply(copy.deepcopy(pod))
    terms = out["spec"]["affinity"]["nodeAffinity"][REQUIRED]["nodeSelectorTerms"]
    original = pod["spec"]["affinity"]["nodeAffinity"][REQUIRED]["nodeSelectorTerms"]
    assert len(terms) == 2
    for before, after in zip(original, terms, strict=True):
        assert after["matchExpressions"][:-1] == before["matchExpressions"]
        assert after["matchExpressions"][-1]["operator"] == "NotIn"


async def test_node_names_mode_pins_compatible_nodes() -> None:
    rt = runtime({"affinity": {"mode": "node-names"}})
    ops = decode_patch(await call(rt, "mutate", build_review(koord_pod("2"))))
    assert ops is not None
    out = jsonpatch.JsonPatch(ops).apply(koord_pod("2"))
    terms = out["spec"]["affinity"]["nodeAffinity"][REQUIRED]["nodeSelectorTerms"]
    # SingleNUMANode pod: busy-1 (SingleNUMANode) is compatible, restricted-1 is not
    assert terms == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["busy-1"]}]}
    ]
    assert "patch" not in await call(rt, "mutate", build_review(out))


async def test_node_names_cap_warns_and_skips() -> None:
    rt = runtime({"affinity": {"mode": "node-names", "maxNodeNames": 1}}, inventory=None)
    load_demo(rt.inventory)
    response = await call(rt, "mutate", build_review(manifest("koord-pod")))
    assert "patch" not in response
    assert any("maxNodeNames=1" in w for w in response["warnings"])


async def test_mutation_scoping() -> None:
    rt = runtime({"namespace": "gate"})
    pod = koord_pod("2")
    for namespace in ("kube-system", "kube-node-lease", "gate"):
        assert "patch" not in await call(rt, "mutate", build_review(pod, namespace=namespace))
    labelled = copy.deepcopy(pod)
    labelled["metadata"]["labels"] = {"numagate.io/ignore": "true"}
    assert "patch" not in await call(rt, "mutate", build_review(labelled))
    mirror = copy.deepcopy(pod)
    mirror["metadata"]["annotations"]["kubernetes.io/config.mirror"] = "x"
    assert "patch" not in await call(rt, "mutate", build_review(mirror))
    # UPDATE and non-Pod kinds are never mutated
    assert "patch" not in await call(rt, "mutate", build_review(pod, operation="UPDATE", old=pod))
    assert "patch" not in await call(rt, "mutate", build_review(manifest("deployment-impossible")))
    assert "patch" in await call(rt, "mutate", build_review(pod))


async def test_mutation_switches() -> None:
    pod = manifest("koord-pod-misspelled")
    only_ann = decode_patch(
        await call(runtime({"mutation": {"injectAffinity": False}}), "mutate", build_review(pod))
    )
    assert only_ann and all(op["path"].startswith("/metadata/annotations") for op in only_ann)
    only_aff = decode_patch(
        await call(
            runtime({"mutation": {"normalizeAnnotations": False}}), "mutate", build_review(pod)
        )
    )
    assert only_aff and all(op["path"].startswith("/spec/affinity") for op in only_aff)
    off = await call(
        runtime({"affinity": {"mode": "off"}, "mutation": {"normalizeAnnotations": False}}),
        "mutate",
        build_review(pod),
    )
    assert "patch" not in off


async def test_scarce_avoidance_composes_with_affinity() -> None:
    rt = runtime({"scarce": {"enabled": True, "required": True}})
    pod = koord_pod("2")
    ops = decode_patch(await call(rt, "mutate", build_review(pod)))
    assert ops is not None
    out = jsonpatch.JsonPatch(ops).apply(copy.deepcopy(pod))
    exprs = out["spec"]["affinity"]["nodeAffinity"][REQUIRED]["nodeSelectorTerms"][0][
        "matchExpressions"
    ]
    assert {e["key"] for e in exprs} == {
        "node.koordinator.sh/numa-topology-policy",
        "nvidia.com/gpu.present",
    }
    assert "patch" not in await call(rt, "mutate", build_review(out))
    preferred = decode_patch(
        await call(runtime({"scarce": {"enabled": True}}), "mutate", build_review(pod))
    )
    out2 = jsonpatch.JsonPatch(preferred or []).apply(copy.deepcopy(pod))
    assert (
        out2["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][
            0
        ]["weight"]
        == 100
    )


# ----------------------------------------------------------------------------- validate


async def test_impossible_pod_denied_naming_the_rule() -> None:
    response = await call(runtime(), "validate", build_review(koord_pod("12")))
    assert response["allowed"] is False
    assert response["status"]["code"] == 403 and "never" in response["status"]["message"]


async def test_bad_annotation_denied_with_field_path() -> None:
    response = await call(runtime(), "validate", build_review(manifest("cronjob-bad-annotation")))
    message = response["status"]["message"]
    assert message.startswith(
        "spec.jobTemplate.spec.template.metadata.annotations[volcano.sh/numa-topology-policy]"
    )
    assert "rule unknown-policy" in message and "sometimes-numa" in message


async def test_workload_template_prefix_in_message() -> None:
    response = await call(runtime(), "validate", build_review(manifest("deployment-impossible")))
    assert response["allowed"] is False and response["status"]["message"].startswith(
        "spec.template: "
    )


@pytest.mark.parametrize(
    ("modes", "cpu", "allowed", "warned"),
    [
        ({}, "12", False, False),
        ({"feasibility": "warn"}, "12", True, True),
        ({"feasibility": "dryrun"}, "12", True, False),
        ({}, "2", True, True),  # noRoomNow defaults to warn
        ({"noRoomNow": "enforce"}, "2", False, False),
        ({"noRoomNow": "dryrun"}, "2", True, False),
    ],
    ids=["feas-enforce", "feas-warn", "feas-dryrun", "room-warn", "room-enforce", "room-dryrun"],
)
async def test_enforcement_modes(
    modes: dict[str, str], cpu: str, allowed: bool, warned: bool
) -> None:
    rt = runtime({"modes": modes})
    response = await call(rt, "validate", build_review(koord_pod(cpu)))
    assert response["allowed"] is allowed
    assert bool(response.get("warnings")) is warned
    mode = next(iter(modes.values()), "enforce" if cpu == "12" else "warn")
    check = "feasibility" if cpu == "12" else "noRoomNow"
    assert rt.metrics.violations.value(check=check, mode=mode) == 1


async def test_annotation_mode_warn() -> None:
    response = await call(
        runtime({"modes": {"annotations": "warn"}}),
        "validate",
        build_review(manifest("pod-bad-annotation")),
    )
    assert response["allowed"] is True and "sometimes-numa" in response["warnings"][0]


async def test_validation_scoping_and_operations() -> None:
    rt = runtime()
    bad = koord_pod("12")
    assert (await call(rt, "validate", build_review(bad, namespace="kube-system")))["allowed"]
    labelled = copy.deepcopy(bad)
    labelled["metadata"]["labels"] = {"numagate.io/ignore": "true"}
    assert (await call(rt, "validate", build_review(labelled)))["allowed"]
    # a running pod's UPDATE (a scheduler writing a status annotation) is never blocked
    updated = copy.deepcopy(bad)
    updated["metadata"]["annotations"]["scheduling.koordinator.sh/resource-status"] = "{}"
    assert (await call(rt, "validate", build_review(updated, operation="UPDATE", old=bad)))[
        "allowed"
    ]
    # DELETE: object is null
    assert (await call(rt, "validate", build_review(None, operation="DELETE", old=bad)))["allowed"]
    # UPDATE with an unchanged template (a scale) is not re-checked; a changed one is
    deploy = manifest("deployment-impossible")
    scaled = copy.deepcopy(deploy)
    scaled["spec"]["replicas"] = 5
    assert (await call(rt, "validate", build_review(scaled, operation="UPDATE", old=deploy)))[
        "allowed"
    ]
    fine = copy.deepcopy(deploy)
    fine["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "1"},
        "limits": {"cpu": "1"},
    }
    changed = await call(rt, "validate", build_review(deploy, operation="UPDATE", old=fine))
    assert changed["allowed"] is False


async def test_dry_run_is_answered_like_the_real_request() -> None:
    rt = runtime()
    for webhook in ("mutate", "validate"):
        pod = koord_pod("12")
        real = await call(rt, webhook, build_review(pod))
        dry = await call(rt, webhook, build_review(pod, dry_run=True))
        real.pop("uid"), dry.pop("uid")
        assert dry == real


async def test_stale_or_missing_inventory_never_denies() -> None:
    rt = runtime(inventory=None)
    response = await call(rt, "validate", build_review(koord_pod("12")))
    assert response["allowed"] is True and "no inventory" in response["warnings"][0]
    stale = runtime({"inventory": {"staleAfterSeconds": 1}})
    stale.inventory.live = True
    stale.inventory.last_sync = lambda: stale.clock() - 10
    response = await call(stale, "validate", build_review(koord_pod("12")))
    assert response["allowed"] is True and response.get("warnings")


async def test_deadline_too_near_allows_with_warning() -> None:
    rt = runtime({"timeouts": {"marginSeconds": 0.5}})
    response = await call(rt, "validate", build_review(koord_pod("12")), timeout=0.1)
    assert response["allowed"] is True
    assert any("deadline" in w for w in response["warnings"])
    assert rt.metrics.timeouts.value() == 1
    # the threaded path (large inventories) with a comfortable deadline still decides
    threaded = runtime({"timeouts": {"inlineNodes": 0}})
    assert (await call(threaded, "validate", build_review(koord_pod("12")), timeout=5))[
        "allowed"
    ] is False


async def test_internal_error_mutate_fails_open_validate_500() -> None:
    def broken() -> Config:
        raise RuntimeError("config store exploded")

    rt = Runtime(config=broken, inventory=InventoryState())
    review = build_review(koord_pod("2"))
    m = await answer(orjson.dumps(review), webhook="mutate", runtime=rt)
    body = orjson.loads(m.body)
    assert (
        m.status == 200 and body["response"]["allowed"] is True and "patch" not in body["response"]
    )
    assert body["response"]["uid"] == review["request"]["uid"]
    assert b"exploded" not in m.body and b"Traceback" not in m.body
    v = await answer(orjson.dumps(review), webhook="validate", runtime=rt)
    assert v.status == 500 and b"exploded" not in v.body
    assert rt.metrics.errors.value(webhook="validate") == 1


async def test_json_log_line_keyed_by_uid_without_the_pod_spec() -> None:
    import io
    import logging

    from webhook.logs import setup_logging

    stream = io.StringIO()
    setup_logging("info", stream=stream)
    try:
        rt = runtime()
        pod = koord_pod("12")
        pod["spec"]["containers"][0]["env"] = [{"name": "PASSWORD", "value": "hunter2"}]
        review = build_review(pod)
        await call(rt, "validate", review)
        await answer(b"{", webhook="validate", runtime=rt)
    finally:
        logging.getLogger("numagate").handlers.clear()
    lines = [orjson.loads(line) for line in stream.getvalue().splitlines()]
    entry = next(x for x in lines if x.get("uid") == review["request"]["uid"])
    assert (
        entry["allowed"] is False and entry["objectName"] == "koord-single" and entry["code"] == 403
    )
    assert entry["webhook"] == "validate" and entry["level"] == "info"
    assert "hunter2" not in stream.getvalue() and "containers" not in stream.getvalue()
    assert any(x["msg"] == "bad admission request" for x in lines)


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)
_FIELDS = ("metadata", "spec", "annotations", "containers", "resources", "affinity", "nodeName")


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.sampled_from(_FIELDS), _json, st.sampled_from(["mutate", "validate"]))
async def test_garbage_objects_never_crash(field: str, value: Any, webhook: str) -> None:
    """Any value in any pod field gives a 200 review (allow or a 400/403 deny) or a 400:
    never a 500, never a traceback (the catch-all would hide a crash as allowed)."""
    rt = RT_FOR_FUZZ
    pod = koord_pod("2")
    if field in ("metadata", "spec"):
        pod[field] = value
    elif field == "annotations":
        pod["metadata"]["annotations"] = value
    elif field == "containers":
        pod["spec"]["containers"] = value
    elif field == "resources":
        pod["spec"]["containers"][0]["resources"] = value
    else:
        pod["spec"][field] = value
    result = await answer(orjson.dumps(build_review(pod)), webhook=webhook, runtime=rt)  # type: ignore[arg-type]
    assert result.status in (200, 400), result.body
    assert rt.metrics.errors.value(webhook=webhook) == 0, result.body
    if result.status == 200:
        response = orjson.loads(result.body)["response"]
        assert response["allowed"] or response["status"]["code"] in (400, 403)
        ops = decode_patch(response)
        if ops is not None:  # a patch that does not apply is an InternalError for the apiserver
            jsonpatch.JsonPatch(ops).apply(copy.deepcopy(pod))


@pytest.mark.parametrize("spec", [None, 3, "x", [1]], ids=["null", "int", "str", "list"])
async def test_malformed_spec_is_not_patched_and_is_denied(spec: Any) -> None:
    rt = runtime()
    pod = koord_pod("2")
    pod["spec"] = spec
    assert "patch" not in await call(rt, "mutate", build_review(pod))
    assert (await call(rt, "validate", build_review(pod)))["allowed"] is False


async def test_core_input_error_in_feasibility_is_a_400_deny() -> None:
    pod = koord_pod("2")
    pod["spec"]["affinity"] = {
        "nodeAffinity": {
            REQUIRED: {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "Nope", "values": ["a"]}]}
                ]
            }
        }
    }
    response = await call(runtime(), "validate", build_review(pod))
    assert response["allowed"] is False and response["status"]["code"] == 400
    assert "Nope" in response["status"]["message"]


RT_FOR_FUZZ = runtime()


@pytest.mark.parametrize("mode", ["label", "node-names"])
async def test_volcano_burstable_pod_is_warned_not_denied_nor_pinned(mode: str) -> None:
    # volcano numaaware.go predicateFn returns early for a pod that is not Guaranteed: on
    # a cluster of restricted nodes a Burstable single-numa-node pod is no mismatch
    rt = runtime(
        {"affinity": {"mode": mode}}, inventory=FIXTURES / "inventory" / "cce-volcano.yaml"
    )
    pod = manifest("volcano-pod")
    pod["metadata"]["annotations"]["volcano.sh/numa-topology-policy"] = "single-numa-node"
    pod["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "3"  # Burstable
    review = build_review(pod)
    mutated = await call(rt, "mutate", review)
    assert "patch" not in mutated  # no affinity the scheduler would not apply
    checked = await call(rt, "validate", review)
    assert checked["allowed"] is True
    warnings = checked.get("warnings", [])
    assert any("Burstable" in w for w in warnings) and all(len(w) < 120 for w in warnings)


def test_deadline_never_beyond_the_apiservers_maximum() -> None:
    """A ``?timeout=`` over 30 s (the apiserver never sends one; a direct caller might)
    is cut to 30 s: no review reads an inventory snapshot longer than that, which is
    what the incremental inventory relies on before rewriting freed slots."""
    config = Config()
    margin = config.timeouts.margin_seconds
    assert deadline_for(config, 100.0, 3600.0) == 100.0 + 30.0 - margin
    assert deadline_for(config, 100.0, 5.0) == 100.0 + 5.0 - margin
    assert deadline_for(config, 100.0, None) == 100.0 + config.timeouts.default_seconds - margin
