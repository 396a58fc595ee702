"""The per-review fast paths of issue 7: label keys indexed per view, compatible node
names memoized per view and per the intent fields core.feasibility.compat reads, the kernel on the
event loop once its cost is known (a thread, under the deadline, otherwise), the cheap
access log, and the inventory view pickled for the workers."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import io
import logging
import pickle
import threading
import time
from typing import Any

import orjson
import pytest

from core.feasibility.compat import compatible
from core.intent.read import read_intent
from core.intent.workloads import pod_templates
from core.model import POLICIES
from core.mutation.affinity import MEMO_LIMIT, compatible_names
from tests.builders.objects import build_review, koord_pod, manifest
from tests.webhook.harness import call, runtime
from webhook.config import parse_config
from webhook.inventory.state import EVALUATION_COST, InventoryState, InventoryView, load_demo
from webhook.logs import JsonFormatter, setup_logging
from webhook.review import feasibility as feasibility_module
from webhook.review.feasibility import _inline
from webhook.review.pipeline import answer

SCHEDULERS = ("koordinator", "volcano", "hami", "kubelet")
# Tests of how the kernel runs send the same review several times: the decision cache
# (webhook.review.decision_cache) would answer all but the first without running it.
NO_CACHE = {"decisionCache": {"entries": 0}}


def demo_view() -> InventoryView:
    return load_demo(InventoryState())


def base_intent() -> Any:
    return read_intent(pod_templates(koord_pod("2"))[0]).intent


def direct(intent: Any, view: InventoryView) -> tuple[str, ...]:
    return tuple(n.name for n in view.nodes if compatible(intent, n)[0])


# ----------------------------------------------------------------------------- R1, R2


def test_has_label_is_the_per_view_index() -> None:
    view = demo_view()
    keys = {k for n in view.nodes for k in n.labels}
    for key in [*keys, "numagate.io/topology-manager-policy", "absent.example.com/x"]:
        assert view.has_label(key) == any(key in n.labels for n in view.nodes), key
    assert "node.koordinator.sh/numa-topology-policy" in keys


def test_compatible_names_memo_agrees_with_compat_for_every_other_field() -> None:
    """The memo key is compat.compat_key (scheduler, policy, whether Volcano skips a
    non-Guaranteed pod); intents that differ in every other field compat could read must
    get the same answer as a direct computation."""
    view = demo_view()
    base = base_intent()
    variants = []
    for scheduler in SCHEDULERS:
        for policy in (None, *POLICIES):
            for extra in (
                {},
                {"scope": "pod", "exclusive": "required", "qos": "BestEffort"},
                {"scope": "container", "exclusive": "preferred", "qos": "Burstable"},
                {"containers": (), "pod_requests": {}, "node_name": "gpu-1"},
                {"node_selector": {"a": "b"}, "hami_node_policy": "binpack"},
            ):
                variants.append(
                    dataclasses.replace(base, scheduler=scheduler, policy=policy, **extra)
                )
    distinct = set()
    for intent in variants:  # the memo is filled by the first variant of each key
        got = compatible_names(intent, view)
        assert got == direct(intent, view), intent
        distinct.add(got)
    assert len(distinct) > 2  # the demo inventory does tell the policies apart
    # one key per (scheduler, policy), and a second one per policy for Volcano's
    # non-Guaranteed pods
    assert len(view.memo) == (len(SCHEDULERS) + 1) * (1 + len(POLICIES))


def test_memo_stays_bounded_and_correct_for_many_policy_strings() -> None:
    view = demo_view()
    base = dataclasses.replace(base_intent(), scheduler="volcano")
    for i in range(MEMO_LIMIT + 50):
        intent = dataclasses.replace(base, policy=f"policy-{i}")
        assert compatible_names(intent, view) == direct(intent, view) == ()
    assert len(view.memo) == MEMO_LIMIT


async def test_node_names_mode_uses_the_memo_and_still_pins_nodes() -> None:
    rt = runtime({"affinity": {"mode": "node-names"}}, inventory=None)
    view = load_demo(rt.inventory)
    pod = manifest("volcano-pod")
    first = await call(rt, "mutate", build_review(pod))
    assert any(k[0] == "compatible" for k in view.memo)
    second = await call(rt, "mutate", build_review(pod))
    assert first["patch"] == second["patch"]


# ----------------------------------------------------------------------------- R3


def test_inline_decision_table() -> None:
    cfg = parse_config({"timeouts": {"inlineNodes": 10}}, env={})
    zero = parse_config({"timeouts": {"inlineNodes": 0}}, env={})
    assert _inline(None, 1, 5.0, cfg, nodes=10)  # small inventory: always inline
    assert not _inline(None, 1, 5.0, cfg, nodes=11)  # cost unknown: calibrate in a thread
    assert _inline(0.001, 1, 5.0, cfg, nodes=10_000)  # 4 ms < 20 ms budget
    assert not _inline(0.001, 6, 5.0, cfg, nodes=10_000)  # six templates: 24 ms
    assert not _inline(0.001, 1, 0.003, cfg, nodes=10_000)  # 3 ms left before the deadline
    assert not _inline(0.0, 1, 5.0, zero, nodes=1)  # 0: every evaluation in a thread


def _record_threads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    real = feasibility_module.evaluate
    seen: list[int] = []

    def recording(*args: Any, **kwargs: Any) -> Any:
        seen.append(threading.get_ident())
        return real(*args, **kwargs)

    monkeypatch.setattr(feasibility_module, "evaluate", recording)
    return seen


async def test_kernel_runs_inline_once_calibrated(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _record_threads(monkeypatch)
    # the small inventory has 2 nodes; the same review again: no decision cache
    rt = runtime({"timeouts": {"inlineNodes": 1}, **NO_CACHE})
    loop_thread = threading.get_ident()
    review = build_review(koord_pod("12"))
    for _ in range(3):
        assert (await call(rt, "validate", review, timeout=5))["allowed"] is False
    assert seen[0] != loop_thread  # first evaluation of this view: in a thread, measured
    assert seen[1:] == [loop_thread, loop_thread]
    view = rt.inventory.view
    assert view is not None and 0 < view.memo[EVALUATION_COST] < 0.005
    # a new view of a similar size starts from the old view's cost: no thread hop
    rt.inventory.install(dataclasses.replace(view, memo={}))
    await call(rt, "validate", review, timeout=5)
    assert seen[3] == loop_thread


async def test_inline_nodes_zero_keeps_every_evaluation_in_a_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = _record_threads(monkeypatch)
    rt = runtime({"timeouts": {"inlineNodes": 0}, **NO_CACHE})
    for _ in range(3):
        await call(rt, "validate", build_review(koord_pod("12")), timeout=5)
    assert threading.get_ident() not in seen and len(seen) == 3


async def test_expensive_evaluation_goes_to_a_thread_and_the_deadline_holds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Once an evaluation was measured as slow, the next one is not run on the event loop:
    ?timeout= is honoured and the loop keeps serving."""
    real = feasibility_module.evaluate

    def slow(*args: Any, **kwargs: Any) -> Any:
        end = time.thread_time() + 0.05  # CPU-bound, as a slow kernel would be
        while time.thread_time() < end:
            pass
        return real(*args, **kwargs)

    monkeypatch.setattr(feasibility_module, "evaluate", slow)
    rt = runtime({"timeouts": {"inlineNodes": 1, "marginSeconds": 0}, **NO_CACHE})
    review = build_review(koord_pod("12"))
    assert (await call(rt, "validate", review, timeout=5))["allowed"] is False
    assert rt.inventory.view is not None
    assert rt.inventory.view.memo[EVALUATION_COST] >= 0.05  # too slow to run inline
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.002)

    task = asyncio.create_task(ticker())
    started = time.monotonic()
    response = await call(rt, "validate", review, timeout=0.02)
    task.cancel()
    assert time.monotonic() - started < 0.045
    assert response["allowed"] is True and any("deadline" in w for w in response["warnings"])
    assert ticks >= 2  # the event loop ran while the kernel did


# ----------------------------------------------------------------------------- R7


async def test_routine_admissions_log_at_debug_the_rest_at_info() -> None:
    stream = io.StringIO()
    setup_logging("info", stream=stream)
    try:
        rt = runtime(inventory=None)
        load_demo(rt.inventory)
        ok = build_review(koord_pod("2"))
        bad = build_review(koord_pod("12"))
        warned = build_review(koord_pod("200"))  # only the node without NUMA data is left
        assert (await call(rt, "validate", ok)).get("warnings") is None
        assert (await call(runtime(), "validate", bad))["allowed"] is False
        assert "patch" in await call(rt, "mutate", ok)  # patched, yet routine
        assert (await call(rt, "validate", warned))["warnings"]
        info = [orjson.loads(x) for x in stream.getvalue().splitlines()]
        setup_logging("debug", stream=stream)
        await call(rt, "validate", ok)
    finally:
        logging.getLogger("numagate").handlers.clear()
    uids = [x.get("uid") for x in info if x["msg"] == "admission"]
    assert uids == [bad["request"]["uid"], warned["request"]["uid"]]
    assert info[-1]["warnings"] == 1 and info[-1]["allowed"] is True
    debug = [orjson.loads(x) for x in stream.getvalue().splitlines()][len(info) :]
    entry = next(x for x in debug if x["msg"] == "admission")
    assert entry["uid"] == ok["request"]["uid"] and entry["level"] == "debug"
    assert entry["allowed"] is True and entry["webhook"] == "validate"


def test_timestamp_is_cached_per_second_but_always_right() -> None:
    fmt = JsonFormatter()
    out = []
    for second, msecs in ((1_700_000_000, 123.0), (1_700_000_000, 999.0), (1_700_000_001, 4.0)):
        record = logging.LogRecord("numagate.t", logging.INFO, "", 0, "m", (), None)
        record.created, record.msecs = second + msecs / 1000, msecs
        out.append(orjson.loads(fmt.format(record))["ts"])
    assert out == [
        "2023-11-14T22:13:20.123Z",
        "2023-11-14T22:13:20.999Z",
        "2023-11-14T22:13:21.004Z",
    ]


# ----------------------------------------------------------------------------- R6, gc


def test_view_pickles_without_its_memo_and_evaluates_after() -> None:
    rt = runtime()
    view = rt.inventory.view
    assert view is not None
    asyncio.run(call(rt, "validate", build_review(koord_pod("12"))))  # builds the kernel
    assert view.memo and view.snapshot._kernels
    copy = pickle.loads(pickle.dumps(view))
    assert copy.memo == {} and copy.snapshot._kernels == {}
    assert copy.nodes == view.nodes and copy.errors == view.errors
    assert copy.snapshot.label_bits == view.snapshot.label_bits
    state = InventoryState()
    state.install(copy)
    rt2 = dataclasses.replace(rt, inventory=state)
    response = asyncio.run(call(rt2, "validate", build_review(koord_pod("12"))))
    assert response["allowed"] is False


def test_views_are_acyclic_so_freezing_them_leaks_nothing() -> None:
    gc.collect()
    gc.disable()
    try:
        view = demo_view()
        view.memo["x"] = ("a",)
        gc.collect()
        del view
        assert gc.collect() == 0  # reference counting freed it all
    finally:
        gc.enable()


def test_installing_views_leaves_the_collector_alone() -> None:
    """No process-wide step from the inventory (issue 31): no freeze, no collection, the
    thresholds as they were, whole views and incremental updates alike."""
    gc.unfreeze()
    thresholds = gc.get_threshold()
    state = InventoryState()
    load_demo(state)
    state.install(demo_view(), quiet=True)
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == thresholds and gc.isenabled()


@pytest.mark.slow
def test_reviews_on_a_kept_alive_connection_make_no_reference_cycles(tmp_path) -> None:
    """The request path makes no reference cycles on a kept-alive connection: its garbage
    goes by reference counting, so the collector's young passes find nothing to free."""
    import http.client
    import ssl

    from tests.launch import serving
    from tests.paths import FIXTURES

    bodies = [p.read_bytes() for p in sorted((FIXTURES / "reviews").glob("*.json"))][:20]
    with serving(tmp_path) as (server, paths):
        ctx = ssl.create_default_context(cafile=str(paths.ca))
        conn = http.client.HTTPSConnection("localhost", server.port, context=ctx)

        def send(n: int) -> None:
            for i in range(n):
                for path in ("/validate", "/mutate"):
                    conn.request("POST", path, body=bodies[i % len(bodies)],
                                 headers={"Content-Type": "application/json"})  # fmt: skip
                    assert conn.getresponse().read()

        send(40)  # warm: caches, lazily built state
        gc.collect()
        gc.disable()
        try:
            send(200)
            assert gc.collect() == 0
        finally:
            gc.enable()
            conn.close()


async def test_answer_still_counts_allowed_reviews_in_metrics() -> None:
    rt = runtime()
    await answer(orjson.dumps(build_review(koord_pod("2"))), webhook="validate", runtime=rt)
    assert (
        rt.metrics.requests.value(
            webhook="validate", operation="CREATE", allowed="true", code="200"
        )
        == 1
    )
