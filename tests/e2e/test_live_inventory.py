"""Issue 26, item 4: ``numagate serve --kubeconfig`` as the shipped ServiceAccount (a
TokenRequest token) against the real apiserver: exactly the shipped ClusterRole, NRT
changes reaching decisions, etcd compaction and an apiserver restart under its watches,
and the bookmarks its reflector counts on."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import pytest

from tests.e2e.cluster import NUMA_CPUS, TEST_NS, Install, clean_pods, create, koord, nrt, pod
from tests.e2e.controlplane import wait_until

DENIED = "numagate: no node can ever run this pod"


@pytest.fixture(autouse=True)
def _clean(serving: Install) -> Iterator[None]:
    yield
    clean_pods(serving.plane)


def test_the_service_account_has_exactly_the_shipped_rights(serving: Install) -> None:
    plane, sa = serving.plane, serving.sa_kubeconfig
    for resource in (
        "nodes",
        "pods",
        "noderesourcetopologies",
        "numatopologies",
        "resourceslices",
        "deviceclasses",
        "resourceclaims",
        "resourceclaimtemplates",
    ):
        out = plane.kubectl("get", resource, "-A", "-o", "name", kubeconfig=sa, check=False)
        assert out.returncode == 0, (resource, out.stderr)
    cm = plane.kubectl(
        "get", "configmap", "numagate-config", "-n", "numagate-system", kubeconfig=sa, check=False
    )
    assert cm.returncode == 0, cm.stderr
    refused = [
        ("get", "secrets", "-A"),
        ("get", "configmap", "kube-root-ca.crt", "-n", "numagate-system"),
        ("delete", "noderesourcetopology", "none-a", "--dry-run=server"),
        ("delete", "resourceslice", "none", "--dry-run=server"),
        ("label", "node", "none-a", "e2e=x", "--dry-run=server"),
        ("create", "deployment", "x", "--image=x", "-n", TEST_NS, "--dry-run=server"),
    ]
    for args in refused:
        out = plane.kubectl(*args, kubeconfig=sa, check=False)
        assert out.returncode != 0 and "forbidden" in out.stderr.lower(), (args, out.stderr)
        assert "system:serviceaccount:numagate-system:numagate" in out.stderr
    # serve listed and watched every type with that token: its inventory is complete.
    assert not [line for line in serving.serve.log if "403 Forbidden" in line]


def _decision(install: Install, name: str, cpu: str) -> str:
    out = create(
        install.plane, pod(name, cpu=cpu, annotations=koord("SingleNUMANode")), "--dry-run=server"
    )
    if out.returncode == 0:
        return "allowed"
    return "denied" if DENIED in out.stderr else f"error: {out.stderr.strip()}"


def _set_numa_cpus(install: Install, node: str, cpus: int) -> None:
    doc = nrt(node, "single-numa-node", cpus)
    for zone in doc["zones"]:
        zone["resources"][0].update(capacity=str(cpus), allocatable=str(cpus))
    install.plane.kubectl("apply", "-f", "-", input=json.dumps(doc))


def test_nrt_changes_reach_decisions(serving: Install) -> None:
    assert _decision(serving, "wide", "12") == "denied"
    try:
        _set_numa_cpus(serving, "single-a", 16)
        wait_until(
            lambda: _decision(serving, "wide", "12") == "allowed",
            15,
            "the bigger NUMA node to count",
        )
    finally:
        _set_numa_cpus(serving, "single-a", NUMA_CPUS)
    wait_until(
        lambda: _decision(serving, "wide", "12") == "denied", 15, "the NRT restored to count"
    )


def test_bookmarks_arrive_at_numagates_reflector(serving: Install) -> None:
    """numagate's Reflector, watching NRTs since the install as the ServiceAccount, takes
    the resourceVersion of the BOOKMARKs the real apiserver sends (about once a minute)."""
    reflector = serving.watches.reflector
    wait_until(lambda: reflector.bookmarks > 0, 90, "a BOOKMARK from the real apiserver")
    assert reflector.resource_version and reflector.listed


def test_compaction_and_an_apiserver_restart_relist_without_a_false_denial(
    serving: Install,
) -> None:
    plane = serving.plane
    seen = len(serving.serve.log)
    # Writes the watch has seen, then history compacted away, then the apiserver restarts:
    # its new watch cache starts after numagate's last resourceVersion (410, relist).
    for cpus in (NUMA_CPUS + 1, NUMA_CPUS):
        _set_numa_cpus(serving, "single-a", cpus)
    plane.compact_etcd()
    answers: list[str] = []
    stop = threading.Event()

    def keep_asking() -> None:
        while not stop.is_set():
            answers.append(_decision(serving, "feasible", "2"))
            time.sleep(0.2)

    asker = threading.Thread(target=keep_asking, daemon=True)
    asker.start()
    try:
        plane.start_apiserver()
        plane.compact_etcd()
        wait_until(lambda: answers[-3:] == ["allowed"] * 3, 60, "admission back after the restart")
        # The watch is live again: a change after the restart reaches decisions.
        _set_numa_cpus(serving, "single-a", 16)
        wait_until(
            lambda: _decision(serving, "wide", "12") == "allowed", 30, "a change after the restart"
        )
    finally:
        stop.set()
        asker.join()
        _set_numa_cpus(serving, "single-a", NUMA_CPUS)
    assert "denied" not in answers, answers
    log = "\n".join(serving.serve.log[seen:])
    assert "relisting" in log or "reconnecting" in log, log[-3000:]
    wait_until(
        lambda: _decision(serving, "wide", "12") == "denied", 30, "the NRT restored to count"
    )
