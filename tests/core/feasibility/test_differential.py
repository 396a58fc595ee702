"""The compiled kernel agrees with the reference verdict for verdict, mask and preferred,
on random clusters and pods (hypothesis). NUMAGATE_HYPOTHESIS_EXAMPLES raises the count
(default keeps `make test` fast)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.feasibility import _kernel_py as ref
from core.feasibility.verdicts import evaluate
from core.model import ContainerDemand, NodeTopology, NumaZone, PodIntent
from core.snapshot.snapshot import Demand, Snapshot
from tests.builders.model import GPU, intents
from tests.builders.model import topology_nodes as nodes
from tests.paths import ROOT

PURE = bool(os.environ.get("NUMAGATE_NO_EXTENSIONS"))
EXAMPLES = int(os.environ.get("NUMAGATE_HYPOTHESIS_EXAMPLES", "100"))

pytestmark = pytest.mark.skipif(PURE, reason="pure build: no compiled kernel to compare")


SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@SETTINGS
@given(
    cluster=st.lists(st.integers(), min_size=1, max_size=4).flatmap(
        lambda xs: st.tuples(*(nodes(f"n{i}") for i in range(len(xs))))
    ),
    intent=intents(),
)
def test_kernels_agree_on_every_call(cluster: tuple[NodeTopology, ...], intent: PodIntent) -> None:
    comp = importlib.import_module("core.feasibility._kernel_c")
    snap = Snapshot.build(cluster)
    demand = Demand.build(intent, snap)
    kp, kc = snap.kernel(ref), snap.kernel(comp)
    for shape in range(snap.packed.n_shapes):
        for policy in range(4):
            for flags in range(64):  # every combination of the F_* flags
                assert kp.check(demand, shape, policy, flags) == kc.check(
                    demand, shape, policy, flags
                ), (shape, policy, flags)


@SETTINGS
@given(
    cluster=st.lists(st.integers(), min_size=1, max_size=5).flatmap(
        lambda xs: st.tuples(*(nodes(f"n{i}") for i in range(len(xs))))
    ),
    intent=intents(),
)
def test_evaluations_agree(cluster: tuple[NodeTopology, ...], intent: PodIntent) -> None:
    comp = importlib.import_module("core.feasibility._kernel_c")
    snap = Snapshot.build(cluster)
    a = evaluate(intent, snap, impl=ref)
    b = evaluate(intent, snap, impl=comp)
    assert a == b
    assert len(a.verdicts) == len(cluster)


@SETTINGS
@given(
    lists=st.lists(
        st.one_of(
            st.none(),
            st.lists(st.tuples(st.integers(1, 15), st.booleans()), max_size=6),
        ),
        max_size=4,
    ),
    policy=st.integers(0, 3),
    closest=st.booleans(),
)
def test_merge_agrees(lists: list, policy: int, closest: bool) -> None:
    comp = importlib.import_module("core.feasibility._kernel_c")
    dist = [10 if i == j else 11 + (i * j) % 7 for i in range(4) for j in range(4)]
    a = ref.merge_hints(lists, policy=policy, n=4, prefer_closest=closest, distances=dist)
    b = comp.merge_hints(lists, policy=policy, n=4, prefer_closest=closest, distances=dist)
    assert a == b


def test_merge_brute_force_matches_the_kubelet_loop() -> None:
    """The kernel merges hint *sets*; the kubelet iterates permutations in order. Check the
    set-based merge against a literal transcription of HintMerger on random lists."""
    import itertools
    import random

    rnd = random.Random(7)
    for _ in range(400):
        n = rnd.randint(1, 4)
        full = (1 << n) - 1
        lists = []
        for _ in range(rnd.randint(1, 3)):
            k = rnd.randint(0, 4)
            lists.append([(rnd.randint(1, full), rnd.random() < 0.5) for _ in range(k)] or None)
        for policy in (1, 2):
            assert ref.merge_hints(lists, policy=policy, n=n) == _kubelet_merge(lists, n, itertools)


def _kubelet_merge(lists: list, n: int, itertools: object) -> tuple[int, bool]:
    full = (1 << n) - 1
    filtered = []
    for raw in lists:
        if raw is None:
            filtered.append([(None, True)])
        else:
            dedup = list(dict.fromkeys(raw))
            filtered.append(dedup)
    bnp = 0
    for hl in filtered:
        counts = [bin(mk).count("1") for mk, _ in hl if mk is not None]
        if counts:
            bnp = max(bnp, min(counts))

    def narrow(a: int, b: int) -> int:
        ca, cb = bin(a).count("1"), bin(b).count("1")
        if ca != cb:
            return a if ca < cb else b
        return a if a < b else b

    best = None
    for perm in itertools.product(*filtered):  # type: ignore[attr-defined]
        pref, masks = True, []
        for mk, p in perm:
            if mk is not None:
                masks.append(mk)
                if mk != masks[0]:
                    pref = False
            if not p:
                pref = False
        merged = full
        for mk in masks:
            merged &= mk
        if merged == 0:
            continue
        cand = (merged, pref)
        if best is None:
            best = cand
            continue
        if not best[1] and pref:
            best = cand
        elif best[1] and not pref:
            continue
        elif best[1] and pref:
            best = (narrow(best[0], merged), True) if best[0] != merged else best
        else:
            c, k = bin(best[0]).count("1"), bin(merged).count("1")
            if c > bnp or (c == bnp and k == bnp) or (c < bnp and k == c):
                best = (narrow(best[0], merged), False) if best[0] != merged else best
            elif c < bnp and k <= bnp and (k == bnp or k > c):
                best = cand
    return best if best is not None else (full, False)


@pytest.mark.slow
def test_explain_verdicts_identical_without_extensions(tmp_path: Path) -> None:
    from tests.webhook.cli.demo_files import write_demo_files

    inv, manifest = write_demo_files(tmp_path)
    outs = []
    for pure in (False, True):
        env = {k: v for k, v in os.environ.items() if k != "NUMAGATE_NO_EXTENSIONS"}
        if pure:
            env["NUMAGATE_NO_EXTENSIONS"] = "1"
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "webhook",
                "explain",
                "--inventory",
                str(inv),
                "-o",
                "json",
                str(manifest),
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert out.returncode == 0, out.stderr
        outs.append(out.stdout)
    assert outs[0] == outs[1]
    assert '"verdict"' in outs[0]


def test_huge_quantities_stay_in_range() -> None:
    """int64 in the compiled kernel: the packed range keeps every sum below 2^63."""
    comp = importlib.import_module("core.feasibility._kernel_c")
    big = 2**62
    zones = tuple(
        NumaZone(
            i,
            {"cpu": big, "memory": big, GPU: big},
            {"cpu": big, "memory": big, GPU: big},
            {"cpu": big, "memory": big, GPU: big},
        )
        for i in range(12)
    )
    n = NodeTopology("huge", {}, {}, {}, zones, tm_policy="none", memory_manager_policy="Static")
    req = {"cpu": big, "memory": big, GPU: big}
    c = ContainerDemand("c", "app", req, req, big // 1000)
    intent = PodIntent("default", "", None, None, None, "Guaranteed", (c, c), {})
    snap = Snapshot.build([n])
    demand = Demand.build(intent, snap)
    for flags in (0, 1, 2):
        assert snap.kernel(ref).check(demand, 0, 0, flags) == snap.kernel(comp).check(
            demand, 0, 0, flags
        )
