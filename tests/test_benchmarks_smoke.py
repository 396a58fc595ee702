"""Smoke test of the server benchmark's inputs and plumbing (never runs wrk): the generated
Pods and Nodes pass the official schemas, the inventory builds, the reviews go through the
real pipeline with the expected outcome, the wrk script and its result line agree with the
parser, and the bare ceiling server answers a valid AdmissionReview over real TLS."""

from __future__ import annotations

import base64
import json
import os
import random
import ssl
import sys
import time
from pathlib import Path
from typing import Any

import jsonpatch
import kubernetes_validate
import orjson
import pytest
from aiohttp import ClientSession, TCPConnector, web

from tests.paths import ROOT

BENCH = ROOT / "benchmarks"
sys.path.insert(0, str(BENCH))

import bare_server  # noqa: E402
import gen  # noqa: E402
import server as bench  # noqa: E402
import soak  # noqa: E402

from certs.authority import ensure_serving_certs  # noqa: E402
from certs.watcher import build_server_context  # noqa: E402
from core.feasibility.verdicts import evaluate  # noqa: E402
from core.intent.read import read_intent  # noqa: E402
from core.intent.workloads import pod_templates  # noqa: E402
from core.inventory.build import build_inventory  # noqa: E402
from webhook.config import parse_config  # noqa: E402
from webhook.inventory.loader import load_objects  # noqa: E402
from webhook.inventory.state import InventoryState  # noqa: E402
from webhook.review.pipeline import Runtime, answer  # noqa: E402

K8S = kubernetes_validate.latest_version()
SMALL = 40


def _small_runtime() -> Runtime:
    cfg = parse_config({}, env={})
    state = InventoryState()
    state.load_objects(gen.inventory_objects(SMALL), source="test")
    return Runtime(config=lambda: cfg, inventory=state)


@pytest.fixture(scope="module")
def small_runtime() -> Runtime:
    return _small_runtime()


def test_generated_pods_pass_the_official_schema_and_are_4_to_10_kb() -> None:
    pods = gen.realistic_pods(8)
    for pod in [*pods, gen.impossible_pod()]:
        kubernetes_validate.validate(pod, K8S, strict=True)
    sizes = [len(b) for b in gen.review_bodies(pods, prefix="t")]
    assert all(4096 <= s <= 10 * 1024 for s in sizes), sizes
    schedulers = {p["spec"].get("schedulerName") for p in pods}
    assert {"koord-scheduler", "volcano", "hami-scheduler", None} <= schedulers
    annotations = set().union(*(p["metadata"]["annotations"] for p in pods))
    assert {
        "scheduling.koordinator.sh/numa-topology-spec",
        "volcano.sh/numa-topology-policy",
        "hami.io/gpu-scheduler-policy",
    } <= annotations


def test_generated_reviews_are_admission_reviews_with_distinct_uids() -> None:
    bodies = [json.loads(b) for b in gen.review_bodies(gen.realistic_pods(4), prefix="u")]
    assert {b["apiVersion"] for b in bodies} == {"admission.k8s.io/v1"}
    assert len({b["request"]["uid"] for b in bodies}) == 4
    assert all(b["request"]["operation"] == "CREATE" for b in bodies)
    assert all(b["request"]["object"]["kind"] == "Pod" for b in bodies)


def test_generation_is_deterministic() -> None:
    first = list(gen.inventory_objects(30, seed=3))
    assert first == list(gen.inventory_objects(30, seed=3))
    assert gen.review_bodies(gen.realistic_pods(3), prefix="d") == gen.review_bodies(
        gen.realistic_pods(3), prefix="d"
    )


def test_inventory_has_mixed_shapes_and_builds_without_errors(tmp_path: Path) -> None:
    path = gen.write_inventory(tmp_path / "inv.yaml", 60)
    objects = [o.obj for o in load_objects(str(path))]
    for node in (o for o in objects if o["kind"] == "Node"):
        kubernetes_validate.validate(node, K8S, strict=True)
    kinds = {o["kind"] for o in objects}
    assert {"Node", "NodeResourceTopology", "Numatopology"} <= kinds
    result = build_inventory(objects)
    assert result.errors == ()
    assert len(result.nodes) == 60
    assert {len(n.zones) for n in result.nodes} >= {2, 4}
    assert all(n.zones for n in result.nodes)  # every node has NUMA data


async def test_realistic_mutations_apply_cleanly(small_runtime: Runtime) -> None:
    patched_count = 0
    for body in gen.review_bodies(gen.realistic_pods(4), prefix="m"):
        result = await answer(body, webhook="mutate", runtime=small_runtime)
        assert result.status == 200
        review = orjson.loads(body)
        response = orjson.loads(result.body)["response"]
        assert response["uid"] == review["request"]["uid"]
        assert response["allowed"] is True
        if "patch" in response:
            ops = json.loads(base64.b64decode(response["patch"]))
            patched = jsonpatch.apply_patch(review["request"]["object"], ops)
            kubernetes_validate.validate(patched, K8S, strict=True)
            patched_count += 1
    assert patched_count >= 2  # Koordinator and Volcano pods get node affinity


async def test_impossible_pod_is_denied_after_a_full_scan(small_runtime: Runtime) -> None:
    body = gen.review_bodies([gen.impossible_pod()], prefix="i")[0]
    result = await answer(body, webhook="validate", runtime=small_runtime)
    response = orjson.loads(result.body)["response"]
    assert response["allowed"] is False, response
    # The kernel has to look at every node: none fits now, none would fit when empty.
    pod = gen.impossible_pod()
    intent = read_intent(pod_templates(pod)[0]).intent
    view = small_runtime.inventory.view
    assert view is not None
    evaluation = evaluate(intent, view.snapshot, full=False)
    assert sum(evaluation.counts.values()) == SMALL
    assert evaluation.counts["never-fits"] == SMALL


def test_vary_gives_each_review_its_own_uid_and_unique_a_different_pod() -> None:
    body = gen.review_bodies(gen.realistic_pods(1), prefix="v")[0]
    doc = orjson.loads(body)
    replicas = [orjson.loads(gen.vary(body, n)) for n in range(3)]
    uniques = [orjson.loads(gen.vary(body, n, unique=True)) for n in range(3)]
    for n, (replica, unique) in enumerate(zip(replicas, uniques, strict=True)):
        assert (
            replica["request"]["uid"]
            == unique["request"]["uid"]
            == f"00000000-0000-4000-8000-{n:012x}"
        )
        assert unique["request"]["object"]["metadata"]["labels"]["tier"] == f"t0-{n}"
        replica["request"]["uid"] = doc["request"]["uid"]
        assert replica == doc  # nothing else changed
        unique["request"]["uid"] = doc["request"]["uid"]
        unique["request"]["object"]["metadata"]["labels"]["tier"] = "backend"
        assert unique == doc


@pytest.mark.parametrize("webhook", ["mutate", "validate"])
@pytest.mark.parametrize("which", ["pod", "replica"])
def test_apiserver_templates_vary_uid_name_and_token_volume(webhook: str, which: str) -> None:
    """The recorded apiserver bodies, per request: a new uid, name (when the pod has one)
    and service-account volume name; every other byte as recorded."""
    recorded = orjson.loads((gen.APISERVER_BODIES / f"{webhook}-{which}.json").read_bytes())
    template = gen.apiserver_templates(webhook, which)[0]
    docs = [orjson.loads(gen.vary_template(template, n)) for n in (10, 11)]
    for n, doc in zip((10, 11), docs, strict=True):
        req, want = doc["request"], recorded["request"]
        assert req["uid"] == f"{n:x}"
        volume = req["object"]["spec"]["volumes"][0]["name"]
        assert volume == f"kube-api-access-{n:x}"
        mounts = req["object"]["spec"]["containers"][0]["volumeMounts"]
        assert [m["name"] for m in mounts] == [volume]
        if want.get("name"):
            assert req["name"] == req["object"]["metadata"]["name"] == f"{want['name']}-{n:x}"
            req["name"] = req["object"]["metadata"]["name"] = want["name"]
        else:
            assert "name" not in req["object"]["metadata"]  # generateName only
        req["uid"] = want["uid"]
        req["object"]["spec"]["volumes"][0]["name"] = want["object"]["spec"]["volumes"][0]["name"]
        mounts[0]["name"] = want["object"]["spec"]["volumes"][0]["name"]
        assert doc == recorded


@pytest.mark.parametrize("webhook", ["mutate", "validate"])
async def test_apiserver_unique_stream_is_every_pod_different(webhook: str) -> None:
    """The every-pod-different apiserver stream: valid Pods as recorded but for their
    spec's resources, containers, QoS and labels, one label new per request; a real
    decision for each (no cache hit), and the QoS classes and container counts vary."""
    templates = gen.apiserver_templates(webhook, "unique")
    assert len(templates) == 12
    rt = _small_runtime()
    qos, containers = set(), set()
    for n in range(48):
        body = gen.vary_template(templates[n % len(templates)], n)
        review = orjson.loads(body)
        pod = review["request"]["object"]
        assert pod["metadata"]["labels"][gen.UNIQUE_LABEL] == f"{n:x}"
        assert review["request"]["uid"] == f"{n:x}"
        if n < len(templates):
            kubernetes_validate.validate(pod, K8S, strict=True)
            [template] = pod_templates(pod)
            qos.add(read_intent(template).intent.qos)
            containers.add(len(pod["spec"]["containers"]))
        result = await answer(body, webhook=webhook, runtime=rt)
        assert result.status == 200
        assert orjson.loads(result.body)["response"]["uid"] == f"{n:x}"
    assert qos == {"Guaranteed", "Burstable", "BestEffort"}
    assert containers == {1, 2}
    assert rt.metrics.decision_cache.value(result="hit") == 0
    assert rt.decisions.raw_hits == 0


async def test_judged_stream_validates_mutated_pods_without_their_affinity(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """server_count.py's ``judged`` stream: each validate body's pod is what mutate made of
    it over a Koordinator-labelled inventory (its JSONPatch applied, numagate's affinity
    in), and validate judges every one without that affinity; over gen.py's mixed
    inventory none would be (the label affinity is not exact there)."""
    import webhook.review.handlers as handlers

    calls: list[int] = []
    real = handlers.with_spec_affinity

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(handlers, "with_spec_affinity", counted)
    cfg = parse_config({}, env={})
    for labelled, judged in ((True, 12), (False, 0)):
        state = InventoryState()
        state.load_objects(gen.inventory_objects(SMALL, labelled=labelled), source="test")
        rt = Runtime(config=lambda: cfg, inventory=state)
        calls.clear()
        for n, template in enumerate(gen.apiserver_templates("validate", "unique")):
            mutated = await answer(gen.as_mutate_review(template), webhook="mutate", runtime=rt)
            body = gen.judged_template(template, mutated.body)
            pod = orjson.loads(body)["request"]["object"]
            assert pod["spec"]["affinity"]["nodeAffinity"]  # numagate's, not the recording's
            assert (
                "affinity"
                not in orjson.loads(gen.as_mutate_review(template))["request"]["object"]["spec"]
            )
            result = await answer(gen.vary_template(body, n), webhook="validate", runtime=rt)
            assert orjson.loads(result.body)["response"]["uid"] == f"{n:x}"
        assert len(calls) == judged


async def test_replicas_are_cache_hits_and_unique_pods_never_are() -> None:
    """What the benchmark's two kinds of scenario measure (benchmarks/server.py checks
    the same on the running server after its wrk runs)."""
    rt = _small_runtime()  # its own: the counters below start at zero
    bodies = gen.review_bodies(gen.realistic_pods(4), prefix="c")
    for n in range(40):
        result = await answer(gen.vary(bodies[n % 4], n, unique=True), webhook="mutate", runtime=rt)
        assert result.status == 200
    assert rt.metrics.decision_cache.value(result="hit") == 0
    for n in range(40, 80):
        await answer(gen.vary(bodies[n % 4], n), webhook="mutate", runtime=rt)
    assert rt.metrics.decision_cache.value(result="hit") == 36
    assert rt.decisions.raw_hits == 32  # 4 bodies: the first decided, the second verified


def test_verdicts_cover_both_kinds_of_scenario() -> None:
    run = {"reviews_per_s": 6000.0, "p99_ms": 10.0, "non_2xx": 0, "socket_errors": 0}
    names = [name for name, *_ in bench.SCENARIOS]
    result = {
        "numagate": {n: dict(run) for n in names},
        "bare": {n: dict(run, reviews_per_s=10000.0) for n in names},
        "ratio": {n: 0.6 for n in names},
        "handler": {n: {"p99_ms": 0.2} for n in names},
        "rss_mib_per_worker": {"1": 100.0},
        "cpu_efficiency": {n: 0.95 for n in names},
        "p99_ratio": {n: 1.2 for n in names},
    }
    result["numagate"]["mutate-unique"]["reviews_per_s"] = 4000.0
    result["cpu_efficiency"]["mutate-unique"] = 0.6
    result["p99_ratio"]["mutate-unique"] = 1.6
    got = bench.verdicts(result)
    assert got["mutate >= 5000/s (replicas)"] and not got["mutate >= 5000/s (every pod different)"]
    assert got["mutate >= 50% of bare (replicas)"] and not got["mutate >= 70% of bare (replicas)"]
    assert got["validate-impossible >= 1000/s"] and got["no errors"]
    # issue 27's guard: CPU efficiency and p99 against the bare server of the same run
    assert got["CPU efficiency >= 0.9 (mutate replicas)"]
    assert not got["CPU efficiency >= 0.7 (mutate-unique)"]
    assert not got["p99 <= 1.5x bare (mutate-unique)"]
    assert got["validate-impossible >= 0.3 of bare reviews/s"]


def test_server_ab_efficiency_is_bare_cpu_over_ours_per_round() -> None:
    import server_ab

    def run(cpu: float, rps: float, p99: float, p50: float = 2.0) -> dict[str, float]:
        return {"server_cpu_ms_per_review": cpu, "reviews_per_s": rps, "p99_ms": p99,
                "p50_ms": p50}  # fmt: skip

    runs = {
        "mutate": {
            "new": [run(0.2, 5000, 6.0, 4.0), run(0.4, 3000, 9.0, 3.0)],
            "bare": [run(0.1, 10000, 4.0), run(0.3, 6000, 6.0)],
            "bare-valid": [run(0.15, 8000, 5.0), run(0.4, 5000, 7.0)],
        }
    }
    got = server_ab.summarize(runs)["mutate"]
    assert got["new"]["rounds"]["efficiency"] == [0.5, 0.75]
    assert got["new"]["cpu_efficiency"] == 0.625  # median of the rounds' ratios
    assert got["new"]["rps_ratio"] == 0.5 and got["new"]["p99_ratio"] == 1.5
    # p99 ratio = p50 ratio x tail shape: round 1 2.0 x 0.75, round 2 1.5 x 1.0
    assert got["new"]["rounds"]["tail_shape"] == [0.75, 1.0]
    assert got["new"]["p50_ratio"] == 1.75 and got["new"]["tail_shape"] == 0.88
    assert got["bare"]["cpu_efficiency"] == 1.0
    # against the minimal valid webhook of the same rounds too
    assert got["new"]["rounds"]["efficiency_valid"] == [0.75, 1.0]
    assert got["new"]["cpu_efficiency_valid"] == 0.875
    assert "| mutate | new | 0.300 | 0.62 | 0.88 |" in server_ab.table({"mutate": got})
    # without the valid baseline (an older result) the column stays empty
    del runs["mutate"]["bare-valid"]
    got = server_ab.summarize(runs)["mutate"]
    assert got["new"]["cpu_efficiency_valid"] is None
    assert "| mutate | new | 0.300 | 0.62 |  |" in server_ab.table({"mutate": got})


def test_wrk_script_posts_json_and_reports_percentiles() -> None:
    lua = (BENCH / "wrk" / "review.lua").read_text()
    result = (BENCH / "wrk" / "result.lua").read_text()  # done(), shared with healthz.lua
    assert '["Content-Type"] = "application/json"' in lua
    assert '"POST"' in lua
    assert 'done = dofile(here .. "result.lua")' in lua
    assert "return function(summary, latency, requests)" in result
    for pct in ("percentile(50)", "percentile(90)", "percentile(99)"):
        assert pct in result
    assert 'WRK_RESULT {"requests":%d' in result
    # the same substitutions as gen.vary (tested above), selected by the same variable
    assert 'local UID_LABEL = \'"uid":"\'' in lua and 'local TIER_LABEL = \'"tier":"\'' in lua
    assert '"%08x-0000-4000-8000-%012x"' in lua
    assert 'os.getenv("NUMAGATE_WRK_UNIQUE") == "1"' in lua


def test_parse_wrk_reads_the_result_line() -> None:
    out = (
        "Running 15s test @ https://127.0.0.1:1\n"
        'WRK_RESULT {"requests":15000,"duration_us":3000000,"bytes":6000000,'
        '"connect_errors":0,"read_errors":1,"write_errors":0,"status_errors":2,'
        '"timeouts":3,"p50_us":1500,"p90_us":4000,"p99_us":9000,"p999_us":12000,'
        '"max_us":20000,"mean_us":2000.5}\n'
    )
    got = bench.parse_wrk(out)
    assert got["reviews_per_s"] == 5000.0
    assert (got["p50_ms"], got["p90_ms"], got["p99_ms"]) == (1.5, 4.0, 9.0)
    assert got["non_2xx"] == 2
    assert got["socket_errors"] == 4
    with pytest.raises(bench.BenchError, match="no WRK_RESULT"):
        bench.parse_wrk("Running 15s test\n")


def test_soak_memory_growth_and_verdict() -> None:
    samples = [
        {"t": 0.0, "rss_mib": {"1": 100.0, "2": 100.0}},
        {"t": 50.0, "rss_mib": {"1": 102.0, "2": 100.0}},
        {"t": 600.0, "rss_mib": {"1": 105.0, "2": 125.0}},
    ]
    growth = soak.memory_growth(samples, [1, 2], 60.0)
    assert growth["1"] == {"baseline_mib": 101.0, "end_mib": 105.0, "growth": 0.0396}
    assert growth["2"]["growth"] == 0.25
    args = soak.parse_args(["--max-growth", "0.1"])
    ok = {"requests": 10, "non_2xx": 0, "socket_errors": 0}
    result = {"wrk": {"mutate": ok}, "memory": growth, "alive_at_end": True}
    problems = soak.verdict(result, args)
    assert len(problems) == 1
    assert "worker 2: RSS grew 25.0%" in problems[0]


@pytest.mark.parametrize("valid", [False, True])
async def test_bare_server_answers_a_valid_review_over_tls(tmp_path: Path, valid: bool) -> None:
    paths = ensure_serving_certs(tmp_path)
    runner = web.AppRunner(bare_server.make_app(valid=valid))
    await runner.setup()
    site = web.TCPSite(
        runner, "127.0.0.1", 0, ssl_context=build_server_context(paths.cert, paths.key)
    )
    await site.start()
    try:
        client_ctx = ssl.create_default_context(cafile=str(paths.ca))
        body = gen.review_bodies(gen.realistic_pods(1), prefix="b")[0]
        async with (
            ClientSession(connector=TCPConnector(ssl=client_ctx)) as session,
            session.post(
                f"https://127.0.0.1:{site.port}/mutate",
                data=body,
                headers={"Content-Type": "application/json"},
            ) as resp,
        ):
            assert resp.status == 200
            review = await resp.json()
    finally:
        await runner.cleanup()
    assert review["apiVersion"] == "admission.k8s.io/v1"
    assert review["kind"] == "AdmissionReview"
    assert review["response"]["allowed"] is True
    # the valid baseline echoes the request's uid, as an apiserver requires; the other
    # answers a fixed one without parsing
    uid = orjson.loads(body)["request"]["uid"]
    assert (review["response"]["uid"] == uid) is valid


def test_rss_and_cpu_read_this_process() -> None:
    kib = bench.rss_kib(os.getpid())
    assert kib is not None and kib > 1000
    gone = 2**22 + random.randint(1, 1000)  # above the kernel's pid_max limit
    assert bench.rss_kib(gone) is None
    before = bench.cpu_seconds(os.getpid())
    deadline = time.process_time() + 0.05
    while time.process_time() < deadline:
        pass
    assert bench.cpu_seconds(os.getpid()) > before
    assert bench.cpu_seconds(gone) == 0.0


def test_server_scan_reports_both_kernels_on_the_impossible_pod(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import server_scan

    assert server_scan.main(["--nodes", "60", "--rounds", "1", "--calls", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verdicts"]["never-fits"] == 60  # no node can run it: the whole scan
    assert set(out["ms_per_call_median"]) == {"compiled", "reference", "review"}
    assert all(v > 0 for v in out["ms_per_call_median"].values())


def test_tail_probe_counts_a_runs_own_callbacks_and_collector_passes() -> None:
    """benchmarks/tail_probe.py: what a wrk run added, summed over the workers, per review
    or per 1,000 reviews; the collector's longest pass is the longest ever seen."""
    import tail_probe

    def dump(callbacks: int, seconds: float, slow: int, gc0: list[float]) -> dict[str, Any]:
        return {"callbacks": callbacks, "callback_s": seconds,
                "slow": dict(zip(map(str, tail_probe.SLOW_MS), (slow, slow // 2, 0), strict=True)),
                "gc": {"0": gc0}}  # fmt: skip

    before = {1: dump(100, 0.01, 0, [1, 0.001, 0.001, 0.002]), 2: dump(0, 0.0, 0, [0, 0, 0, 0])}
    after = {1: dump(2100, 0.21, 4, [3, 0.002, 0.002, 0.004]),
             2: dump(2000, 0.2, 6, [2, 0.001, 0.001, 0.003])}  # fmt: skip
    row = tail_probe._difference(before, after, reviews=1000)
    assert row["callbacks_per_review"] == 4.0 and row["callback_mean_us"] == 100.0
    assert row["callbacks_over_1ms_per_1k_reviews"] == 10.0
    assert row["callbacks_over_2ms_per_1k_reviews"] == 5.0
    assert row["gc0_passes_per_1k_reviews"] == 4.0 and row["gc0_cpu_ms_mean"] == 0.5
    assert row["gc0_cpu_us_per_review"] == 2.0 and row["gc0_longest_wall_ms_ever"] == 4.0
    assert row["gc1_passes_per_1k_reviews"] == 0.0 and row["gc1_cpu_ms_mean"] == 0.0
