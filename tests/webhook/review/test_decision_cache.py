"""The decision cache (webhook.review.decision_cache): reviews that differ only in the object's
identity get the answer of the first one with their own uid; anything else the decision
reads makes a different key; the cache never outlives the inventory view or the
configuration it was filled under; answers that depended on time are never stored."""

from __future__ import annotations

import copy
import dataclasses
import io
import logging
import re
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from core.snapshot.snapshot import Snapshot
from tests.builders.objects import build_review, koord_pod, manifest, replica
from tests.paths import FIXTURES
from tests.reliability.corpus import build_corpus
from tests.webhook.harness import call, runtime
from webhook.config import parse_config
from webhook.inventory.state import load_demo
from webhook.logs import JsonFormatter
from webhook.review import decision_cache
from webhook.review import pipeline as pipeline_module
from webhook.review.decision_cache import (
    IDENTITY_FIELDS,
    MISSES_TO_REST,
    RAW_MAX_BYTES,
    RAW_PER_SLOT,
    SAMPLE_WHILE_RESTING,
    DecisionCache,
    Entry,
    RawKey,
    raw_key,
    same_body,
    split_body,
)
from webhook.review.pipeline import Runtime, answer
from webhook.review.response import allowed
from webhook.review.wire import AdmissionRequest, GroupVersionKind, GroupVersionResource

NO_CACHE = {"decisionCache": {"entries": 0}}


def cache_results(rt: Runtime) -> dict[str, float]:
    """numagate_decision_cache_total by result, zeros left out."""
    counter = rt.metrics.decision_cache
    found = {r: counter.value(result=r) for r in ("hit", "miss", "resting", "uncacheable")}
    return {r: v for r, v in found.items() if v}


async def raw_answer(rt: Runtime, webhook: str, review: dict[str, Any], **kw: Any) -> Any:
    return await answer(orjson.dumps(review), webhook=webhook, runtime=rt, **kw)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- hits


@pytest.mark.parametrize(
    ("webhook", "pod"),
    [
        ("mutate", "koord-pod-misspelled"),  # normalized annotations + affinity: a patch
        ("mutate", "volcano-pod"),
        ("validate", "koord-pod-impossible"),  # denied
        ("validate", "pod-bad-annotation"),  # denied, annotation rule
        ("validate", "koord-pod"),  # allowed
    ],
)
async def test_replica_pods_share_one_decision(webhook: str, pod: str) -> None:
    cached, plain = runtime(), runtime(NO_CACHE)
    first = build_review(manifest(pod))
    for n in range(4):
        review = replica(first, n) if n else first
        got = await raw_answer(cached, webhook, review)
        want = await raw_answer(plain, webhook, review)
        assert (got.status, got.content_type, got.body) == (
            want.status,
            want.content_type,
            want.body,
        )
        assert orjson.loads(got.body)["response"]["uid"] == review["request"]["uid"]
    assert cache_results(cached) == {"miss": 1, "hit": 3}
    assert cache_results(plain) == {"uncacheable": 4}


async def test_every_identity_field_is_left_out_of_the_key() -> None:
    rt = runtime()
    review = build_review(koord_pod("2"))
    await call(rt, "mutate", review)
    for name, value in replica(review, 7)["request"]["object"]["metadata"].items():
        if name not in IDENTITY_FIELDS:
            continue
        other = copy.deepcopy(review)
        other["request"]["object"]["metadata"][name] = value
        other["request"]["uid"] = f"uid-{name}"
        await call(rt, "mutate", other)
    assert cache_results(rt) == {"miss": 1, "hit": len(IDENTITY_FIELDS)}


RECORDED = FIXTURES / "reviews" / "apiserver-raw"


@pytest.mark.parametrize("webhook", ["mutate", "validate"])
@pytest.mark.parametrize("which", ["replica", "pod"])
async def test_replicas_as_the_real_apiserver_sends_them_share_one_decision(
    webhook: str, which: str
) -> None:
    """Bodies recorded from a real kube-apiserver (benchmarks/record_bodies.py), each
    replica with its own uid, name, managedFields time and service-account volume name."""
    cached, plain = runtime(), runtime(NO_CACHE)
    body = (RECORDED / f"{webhook}-{which}.json").read_bytes()
    first = orjson.loads(body)
    volume = first["request"]["object"]["spec"]["volumes"][0]["name"]
    assert volume.startswith("kube-api-access-")
    for n in range(4):
        one = body.replace(volume.encode(), f"kube-api-access-q{n}x{n}b".encode())
        one = one.replace(
            first["request"]["uid"].encode(), f"0c0ffee0-0000-4000-8000-{n:012d}".encode()
        )
        one = re.sub(rb'"time":"[^"]*"', f'"time":"2026-11-27T01:{n:02d}:00Z"'.encode(), one)
        name = first["request"].get("name")
        if name:
            one = one.replace(f'"name":"{name}"'.encode(), f'"name":"{name}-{n}"'.encode())
        got = await answer(one, webhook=webhook, runtime=cached)  # type: ignore[arg-type]
        want = await answer(one, webhook=webhook, runtime=plain)  # type: ignore[arg-type]
        assert (got.status, got.body) == (want.status, want.body)
        assert orjson.loads(got.body)["response"]["uid"] == f"0c0ffee0-0000-4000-8000-{n:012d}"
    assert cache_results(cached) == {"miss": 1, "hit": 3}


async def test_a_volume_a_container_reads_is_still_left_out_only_as_a_list() -> None:
    """Volumes of another type than the API's stay in the key (validation sees them)."""
    cached = runtime()
    review = build_review(koord_pod("2"))
    await raw_answer(cached, "validate", review)
    other = copy.deepcopy(review)
    other["request"]["uid"] = "other-uid"
    other["request"]["object"]["spec"]["volumes"] = "not-a-list"
    await raw_answer(cached, "validate", other)
    assert cache_results(cached) == {"miss": 2}


def _changed(review: dict[str, Any], change: str) -> dict[str, Any]:
    out = copy.deepcopy(review)
    req, obj = out["request"], out["request"]["object"]
    if change == "label":
        obj["metadata"].setdefault("labels", {})["tier"] = "batch"
    elif change == "ignore-label":
        obj["metadata"].setdefault("labels", {})["numagate.io/ignore"] = "true"
    elif change == "annotation":
        obj["metadata"]["annotations"]["example.com/note"] = "x"
    elif change == "cpu":
        obj["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "3"
        obj["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "3"
    elif change == "namespace":
        req["namespace"] = obj["metadata"]["namespace"] = "kube-system"
    elif change == "dryRun":
        req["dryRun"] = True
    elif change == "subResource":
        req["subResource"] = "status"
    elif change == "kind":
        req["kind"]["version"] = "v2"
    elif change == "resource":
        req["resource"]["resource"] = "pods2"
    elif change == "generateName":
        obj["metadata"]["generateName"] = "other-"
    elif change == "name-not-a-string":  # identity fields with a wrong type stay in the key
        obj["metadata"]["name"] = 12
    else:
        raise AssertionError(change)
    return out


@pytest.mark.parametrize(
    "change",
    [
        "label",
        "ignore-label",
        "annotation",
        "cpu",
        "namespace",
        "dryRun",
        "subResource",
        "kind",
        "resource",
        "generateName",
        "name-not-a-string",
    ],
)
@pytest.mark.parametrize("webhook", ["mutate", "validate"])
async def test_anything_else_the_decision_reads_is_another_key(webhook: str, change: str) -> None:
    cached, plain = runtime(), runtime(NO_CACHE)
    review = build_review(koord_pod("2"))
    review["request"]["object"]["metadata"]["generateName"] = "web-"
    await raw_answer(cached, webhook, review)
    other = _changed(review, change)
    got = await raw_answer(cached, webhook, other)
    want = await raw_answer(plain, webhook, other)
    assert (got.status, got.body) == (want.status, want.body)
    assert cache_results(cached).get("hit", 0) == 0


async def test_mutate_and_validate_answers_are_kept_apart() -> None:
    rt = runtime()
    review = build_review(manifest("koord-pod-misspelled"))
    mutated = await call(rt, "mutate", review)
    validated = await call(rt, "validate", review)
    assert "patch" in mutated and "patch" not in validated
    assert cache_results(rt) == {"miss": 2}


async def test_updates_are_never_cached() -> None:
    rt = runtime()
    pod = manifest("koord-pod")
    old = copy.deepcopy(pod)
    review = build_review(pod, operation="UPDATE", old=old)
    for _ in range(2):
        await call(rt, "validate", review)
    assert cache_results(rt) == {"uncacheable": 2}


# ----------------------------------------------------------------------------- lifetime


def _new_structure(view: Any) -> Any:
    """The same nodes built again: a new inventory structure (Snapshot.structure)."""
    return dataclasses.replace(view, snapshot=Snapshot.build(view.nodes), memo={})


async def test_a_new_inventory_structure_empties_the_cache() -> None:
    rt = runtime()
    review = build_review(koord_pod("2"))
    await call(rt, "validate", review)
    await call(rt, "validate", replica(review, 1))
    view = rt.inventory.view
    assert view is not None and len(rt.decisions) == 1
    rt.inventory.install(dataclasses.replace(view, memo={}))  # same snapshot: kept
    await call(rt, "validate", replica(review, 2))
    rt.inventory.install(_new_structure(view))
    await call(rt, "validate", replica(review, 3))
    assert cache_results(rt) == {"miss": 2, "hit": 2}


async def test_a_reloaded_configuration_empties_the_cache() -> None:
    configs = [parse_config({}, env={})]
    rt = runtime()
    rt.config = lambda: configs[-1]
    review = build_review(manifest("koord-pod-impossible"))
    assert (await call(rt, "validate", review))["allowed"] is False
    # feasibility in warn mode now: the cached denial must not be served
    configs.append(parse_config({"modes": {"feasibility": "warn"}}, env={}))
    assert (await call(rt, "validate", replica(review, 1)))["allowed"] is True
    assert cache_results(rt) == {"miss": 2}


async def test_no_inventory_or_a_stale_one_bypasses_the_cache() -> None:
    empty = runtime(inventory=None)
    review = build_review(koord_pod("2"))
    for _ in range(2):
        await call(empty, "validate", review)
    assert cache_results(empty) == {"uncacheable": 2}

    stale = runtime({"inventory": {"staleAfterSeconds": 1}})
    stale.inventory.live = True
    stale.inventory.last_sync = lambda: -1e9  # never synchronized since: stale
    for _ in range(2):
        response = await call(stale, "validate", build_review(manifest("koord-pod-impossible")))
        assert response["allowed"] is True  # stale: never denies
    assert cache_results(stale) == {"uncacheable": 2}


async def test_an_answer_given_for_the_deadline_is_not_stored() -> None:
    rt = runtime({"timeouts": {"marginSeconds": 0.25}})
    review = build_review(manifest("koord-pod-impossible"))
    rushed = await call(rt, "validate", review, timeout=0.1)  # less than the margin
    assert rushed["allowed"] is True and "deadline" in rushed["warnings"][0]
    assert len(rt.decisions) == 0
    assert (await call(rt, "validate", replica(review, 1), timeout=5))["allowed"] is False
    assert cache_results(rt) == {"miss": 2}


async def test_entries_are_bounded_oldest_out_first() -> None:
    rt = runtime({"decisionCache": {"entries": 2}})
    reviews = [build_review(koord_pod(cpu)) for cpu in ("1", "2", "3")]
    for review in reviews:
        await call(rt, "validate", review)
    assert len(rt.decisions) == 2
    await call(rt, "validate", replica(reviews[2], 1))  # newest: kept
    await call(rt, "validate", replica(reviews[0], 1))  # oldest: evicted
    assert cache_results(rt) == {"miss": 4, "hit": 1}


# ----------------------------------------------------------------------------- side effects


@pytest.fixture
def log_lines() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("numagate")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)  # routine admissions are logged at debug
    yield stream
    logger.removeHandler(handler)
    logger.setLevel(old_level)


async def test_violations_are_counted_and_logged_for_every_review(log_lines: io.StringIO) -> None:
    rt = runtime({"modes": {"feasibility": "dryrun"}})
    first = build_review(manifest("koord-pod-impossible"))
    reviews = [first, replica(first, 1), replica(first, 2)]
    for review in reviews:
        assert (await call(rt, "validate", review))["allowed"] is True
    assert cache_results(rt) == {"miss": 1, "hit": 2}
    assert rt.metrics.violations.value(check="feasibility", mode="dryrun") == 3
    records = [orjson.loads(line) for line in log_lines.getvalue().splitlines()]
    dryrun = [r["uid"] for r in records if r["msg"] == "dryrun violation"]
    access = [(r["uid"], r["cached"]) for r in records if r["msg"] == "admission"]
    uids = [r["request"]["uid"] for r in reviews]
    assert dryrun == uids
    assert access == [(uids[0], False), (uids[1], True), (uids[2], True)]


# ----------------------------------------------------------------------------- against the corpus


def _corpus_reviews() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for case in build_corpus():
        try:
            doc = orjson.loads(case.body)
        except orjson.JSONDecodeError:
            continue
        req = doc.get("request") if isinstance(doc, dict) else None
        # the few bodies of 1-7 MB (size limits) would only make this test slow
        if isinstance(req, dict) and isinstance(req.get("object"), dict) and len(case.body) < 2**18:
            out.append((case.name, doc))
    return out


CORPUS_REVIEWS = _corpus_reviews()


def _with_identity(doc: dict[str, Any], n: int, identity: dict[str, Any]) -> dict[str, Any]:
    """``doc`` as the review of another replica (``identity``: its metadata), where the
    corpus' types allow it."""
    out = copy.deepcopy(doc)
    req = out["request"]
    if isinstance(req.get("uid"), str) and req["uid"]:
        req["uid"] = f"{req['uid']}-r{n}"
    if isinstance(req.get("name"), str):
        req["name"] = f"replica-{n}"
    meta = req["object"].get("metadata")
    if isinstance(meta, dict):
        for name, kind in IDENTITY_FIELDS.items():
            if isinstance(meta.get(name, kind()), kind):
                meta[name] = identity[name]
    kind = req.get("kind")
    if isinstance(kind, dict) and kind.get("kind") == "Pod" and not kind.get("group"):
        _with_token_volume(req["object"], f"r{n}x{n}z")
    return out


def _with_token_volume(pod: dict[str, Any], suffix: str) -> None:
    """What the apiserver's ServiceAccount admission plugin adds to each pod, named at
    random per pod: a projected token volume mounted in every container (where the pod's
    types allow it)."""
    spec = pod.get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("volumes", []), list):
        return
    name = f"kube-api-access-{suffix}"
    spec["volumes"] = [*spec.get("volumes", []), {"name": name, "projected": {"sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}]}}]  # fmt: skip
    for field in decision_cache.CONTAINER_LISTS:
        containers = spec.get(field)
        for c in containers if isinstance(containers, list) else []:
            if isinstance(c, dict) and isinstance(c.get("volumeMounts", []), list):
                mount = {"name": name, "readOnly": True,
                         "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}  # fmt: skip
                c["volumeMounts"] = [*c.get("volumeMounts", []), mount]


def _with_uid(doc: dict[str, Any], uid: str) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    if isinstance(out["request"].get("uid"), str) and out["request"]["uid"]:
        out["request"]["uid"] = uid  # an empty (invalid) uid stays empty
    return out


def _normalized(result: Any, uid: Any) -> tuple[int, str, bytes]:
    body = result.body
    if isinstance(uid, str) and uid:
        body = body.replace(orjson.dumps(uid), b'"UID"')
    return result.status, result.content_type, body


def test_the_corpus_is_a_real_sample() -> None:
    assert len(CORPUS_REVIEWS) > 300


@pytest.mark.parametrize("webhook", ["mutate", "validate"])
async def test_corpus_answers_are_the_same_with_and_without_the_cache(webhook: str) -> None:
    """Every corpus review, then two replicas of it, through a cached and an uncached
    runtime: byte-identical answers (uids aside). This is also the test that the decision
    reads none of the identity fields: the uncached answers of the replicas must equal the
    uncached answer of the original."""
    cached, plain = runtime(), runtime(NO_CACHE)
    pod = build_review(koord_pod("1"))
    identities = {n: replica(pod, n)["request"]["object"]["metadata"] for n in (1, 2)}
    mismatches = []
    for name_n, (name, doc) in enumerate(CORPUS_REVIEWS):
        original = None
        replicas = [
            doc,
            _with_identity(doc, 1, identities[1]),
            _with_identity(doc, 2, identities[2]),
        ]
        # then bodies that differ from the last only in the request uid: the raw layer
        replicas += [_with_uid(replicas[-1], f"0c0ffee0-{name_n:04d}-{k}") for k in range(3)]
        for n, review in enumerate(replicas):
            uid = review["request"].get("uid")
            got = _normalized(await raw_answer(cached, webhook, review), uid)
            want = _normalized(await raw_answer(plain, webhook, review), uid)
            original = want if original is None else original
            if got != want or want != original:
                mismatches.append((name, n, got, want, original))
    assert not mismatches, mismatches[:3]
    results = cache_results(cached)
    assert results.get("hit", 0) > 1000  # the cache was exercised, not bypassed
    assert cached.decisions.raw_hits > 200  # and its raw layer


# ----------------------------------------------------------------------------- pieces


def test_split_body_cuts_around_the_response_uid() -> None:
    body = orjson.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": 'a"b\\c', "allowed": True, "warnings": ['"uid":"a"']},
        }
    )
    parts = split_body(body, 'a"b\\c')
    assert parts is not None
    entry = Entry(None, *parts)  # type: ignore[arg-type]
    assert orjson.loads(entry.body("other"))["response"] == {
        "uid": "other",
        "allowed": True,
        "warnings": ['"uid":"a"'],
    }
    assert split_body(body, "absent") is None


def test_cache_generation_is_by_identity() -> None:
    cache = DecisionCache()
    view, config = object(), object()
    entry = Entry(None, b"", b"")  # type: ignore[arg-type]
    cache.put(b"k", entry, view, config, 10)
    assert cache.get(b"k", view, config) is entry
    assert cache.get(b"k", object(), config) is None and len(cache) == 0


# ----------------------------------------------------------------------------- raw layer


def _body(review: dict[str, Any], uid: str) -> bytes:
    return orjson.dumps(_with_uid(review, uid))


async def test_identical_bodies_but_the_uid_are_answered_without_parsing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parsed: list[bytes] = []
    real = pipeline_module.parse_review

    def counting(raw: bytes, *args: Any) -> Any:
        parsed.append(raw)
        return real(raw, *args)

    monkeypatch.setattr(pipeline_module, "parse_review", counting)
    cached, plain = runtime(), runtime(NO_CACHE)
    review = build_review(manifest("koord-pod-misspelled"))
    for n in range(6):
        body = _body(review, f"5e1f0000-0000-4000-8000-{n:012d}")
        for webhook in ("mutate", "validate"):
            got = await answer(body, webhook=webhook, runtime=cached)  # type: ignore[arg-type]
            want = await answer(body, webhook=webhook, runtime=plain)  # type: ignore[arg-type]
            assert (got.status, got.body) == (want.status, want.body)
    # per webhook: the first body decided, the second verified the raw entry, four not parsed
    assert len([b for b in parsed if b]) == 6 * 2 * 2 - 4 * 2
    assert cached.decisions.raw_hits == 8
    assert cache_results(cached) == {"miss": 2, "hit": 10}


def _decoy(uid: str, decoy: str | None, *, tail: str = "") -> bytes:
    """A review whose first ``"uid":`` may not be the request's (nothing the apiserver
    sends, but a client could): ``decoy`` comes first; ``tail`` ends the request."""
    review = build_review(koord_pod("2"))
    request = orjson.dumps(_with_uid(review, uid)["request"]).decode()
    if tail:
        request = request[:-1] + tail + "}"
    first = "" if decoy is None else f'"x":{{"uid":"{decoy}"}},'
    return (
        '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview",'
        f'{first}"request":{request}}}'
    ).encode()


@pytest.mark.parametrize(
    "bodies",
    [
        # the decoy varies, the request uid does not: the raw entry is never stored
        [_decoy("req-1", f"decoy-{n}") for n in range(4)],
        # the decoy equals the request uid in the first body only
        [_decoy("same", "same"), *(_decoy("same", f"other-{n}") for n in range(3))],
        # both vary together (the decoy is never the uid, so the entry is never verified)
        [_decoy(f"req-{n}", f"req-{n}") for n in range(4)],
        # a later duplicate key (the last one wins) spelled with an escape: the first
        # body's token is its uid, the next ones' are not
        [_decoy(u, None, tail=',"uid":"\\u0061bc"') for u in ("abc", "zzz", "yyy", "xxx")],
    ],
)
async def test_a_uid_token_that_is_not_the_request_uid_is_never_trusted(
    bodies: list[bytes],
) -> None:
    cached, plain = runtime(), runtime(NO_CACHE)
    for body in bodies:
        for webhook in ("mutate", "validate"):
            got = await answer(body, webhook=webhook, runtime=cached)  # type: ignore[arg-type]
            want = await answer(body, webhook=webhook, runtime=plain)  # type: ignore[arg-type]
            assert (got.status, got.body) == (want.status, want.body)
            uid = orjson.loads(body)["request"]["uid"]
            assert orjson.loads(got.body)["response"]["uid"] == uid
    assert cached.decisions.raw_hits == 0


def test_raw_key_needs_a_plain_token() -> None:
    assert raw_key(b'{"request":{"uid":"a-1"}}', "mutate") is not None
    for body in (
        b'{"request":{"uid":"a\\"b"}}',
        b'{"request":{"uid":""}}',
        b'{"uid":"a b"}',
        b"{}",
    ):
        assert raw_key(body, "mutate") is None, body
    one = raw_key(b'{"request":{"uid":"a-1"},"x":1}', "mutate")
    assert one is not None and one.uid == "a-1"
    assert same_raw(one, raw_key(b'{"request":{"uid":"b-22"},"x":1}', "mutate"))
    assert not same_raw(one, raw_key(b'{"request":{"uid":"a-1"},"x":2}', "mutate"))
    assert not same_raw(one, raw_key(b'{"request":{"uid":"a-1"},"x":1}', "validate"))
    # the cut's position is compared too
    assert not same_raw(raw_key(b'{"uid":"a","x":"1"}', "m"), raw_key(b'{"uid":"a1","x":""}', "m"))
    assert raw_key(b'{"uid":"a"}' + b" " * RAW_MAX_BYTES, "m") is None  # too large to keep


def same_raw(a: RawKey | None, b: RawKey | None) -> bool:
    """Whether the raw layer takes ``b``'s body for ``a``'s."""
    assert a is not None and b is not None
    return a.slot == b.slot and same_body(b, a.head(), a.tail())


def _learn(cache: DecisionCache, body: bytes, limit: int, config: object) -> None:
    key = raw_key(body, "mutate")
    assert key is not None
    request = AdmissionRequest(
        key.uid, GroupVersionKind("v1", "Pod"), GroupVersionResource("v1", "pods"), "CREATE"
    )
    cache.learn_raw(key, request, Entry(allowed(), b"", b""), None, config, limit)


def test_raw_layer_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    config = object()
    cache = DecisionCache()
    bodies = [b'{"uid":"u-%d","x":"%s"}' % (n, b"y" * n) for n in range(40)]
    for body in bodies:
        _learn(cache, body, 10, config)
    assert cache.raw_held == (10, sum(len(b) - 4 for b in bodies[-10:]))  # "u-3x" cut out
    same_slot = [b'{"uid":"u-1","x":"%d"}' % (n % 10) for n in range(6)]
    for body in same_slot:
        _learn(cache, body, 100, config)
    assert cache.raw_held[0] == 10 + RAW_PER_SLOT  # at most RAW_PER_SLOT per slot
    monkeypatch.setattr(decision_cache, "RAW_BUDGET_BYTES", 100)
    for n in range(5):
        _learn(cache, b'{"uid":"v-1","z":"%s"}' % (b"q" * n), 100, config)
    assert 0 < cache.raw_held[1] <= 100


def test_raw_learning_rests_while_no_body_comes_twice() -> None:
    """Bodies that never repeat but for the uid (the real apiserver's, each pod with its
    own token volume name): after MISSES_TO_REST unverified entries in a row, one body in
    SAMPLE_WHILE_RESTING is learned; a verification resumes learning every body."""
    config = object()
    cache = DecisionCache()
    count = MISSES_TO_REST + 10 * SAMPLE_WHILE_RESTING
    for n in range(count):
        _learn(cache, b'{"uid":"u-%d","v":"%s"}' % (n, b"y" * n), 10_000, config)
    assert cache.raw_held[0] == MISSES_TO_REST + 10
    last = count - 1  # learned: its count is a multiple of SAMPLE_WHILE_RESTING
    _learn(cache, b'{"uid":"x-%d","v":"%s"}' % (last, b"y" * last), 10_000, config)  # verified
    for n in range(5):
        _learn(cache, b'{"uid":"z-%d","w":"%s"}' % (n, b"q" * (n + 500)), 10_000, config)
    assert cache.raw_held[0] == MISSES_TO_REST + 10 + 5


async def test_a_new_view_empties_the_raw_layer_too() -> None:
    rt = runtime()
    review = build_review(koord_pod("2"))
    for n in range(3):
        await answer(_body(review, f"u-{n}"), webhook="validate", runtime=rt)
    assert rt.decisions.raw_hits == 1
    view = rt.inventory.view
    assert view is not None
    rt.inventory.install(_new_structure(view))
    for n in range(3, 5):
        await answer(_body(review, f"u-{n}"), webhook="validate", runtime=rt)
    assert rt.decisions.raw_hits == 1  # relearned: stored at u-3, verified at u-4


# ----------------------------------------------------------------------------- resting


async def test_the_cache_rests_when_nothing_hits_and_wakes_at_the_first_hit() -> None:
    cached, plain = runtime(), runtime(NO_CACHE)
    every_pod_different = [build_review(koord_pod(f"{n + 1}m")) for n in range(MISSES_TO_REST + 40)]
    for review in every_pod_different:
        got = await raw_answer(cached, "validate", review)
        want = await raw_answer(plain, "validate", review)
        assert (got.status, got.body) == (want.status, want.body)
    assert cached.decisions.resting
    results = cache_results(cached)
    assert results["miss"] == MISSES_TO_REST + 40 // SAMPLE_WHILE_RESTING
    assert results["resting"] == 40 - 40 // SAMPLE_WHILE_RESTING
    # a burst of replicas: decided until two samples met, then answered from the cache
    first = build_review(koord_pod("3"))
    served: list[bool] = []
    for n in range(100):
        before = cache_results(cached).get("hit", 0)
        got = await raw_answer(cached, "validate", replica(first, n))
        want = await raw_answer(plain, "validate", replica(first, n))
        assert (got.status, got.body) == (want.status, want.body)
        served.append(cache_results(cached).get("hit", 0) > before)
    assert not cached.decisions.resting
    woke = served.index(True)
    assert woke <= 2 * SAMPLE_WHILE_RESTING and all(served[woke:])


def test_resting_state_machine() -> None:
    cache = DecisionCache()
    for _ in range(MISSES_TO_REST - 1):
        assert cache.wants_key()
        cache.looked_up(False)
    assert not cache.resting
    cache.looked_up(False)
    assert cache.resting
    wanted = [cache.wants_key() for _ in range(SAMPLE_WHILE_RESTING * 3)]
    assert sum(wanted) == 3
    cache.looked_up(True)
    assert not cache.resting and all(cache.wants_key() for _ in range(100))


async def test_reused_warnings_are_logged_at_debug_denials_always_at_info(
    log_lines: io.StringIO,
) -> None:
    warns = runtime({"affinity": {"mode": "node-names", "maxNodeNames": 1}}, inventory=None)
    load_demo(warns.inventory)
    denies = runtime()
    warned = build_review(manifest("koord-pod"))
    denied = build_review(manifest("koord-pod-impossible"))
    for n in range(3):
        assert (await call(warns, "mutate", replica(warned, n)))["warnings"]
        assert (await call(denies, "validate", replica(denied, n)))["allowed"] is False
    records = [orjson.loads(line) for line in log_lines.getvalue().splitlines()]
    access = [(r["webhook"], r["level"], r["cached"]) for r in records if r["msg"] == "admission"]
    assert access == [
        ("mutate", "info", False),
        ("validate", "info", False),
        ("mutate", "debug", True),
        ("validate", "info", True),
        ("mutate", "debug", True),
        ("validate", "info", True),
    ]
