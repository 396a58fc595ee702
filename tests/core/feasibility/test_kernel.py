"""The packed kernel's own contract (input checks, exceptions, flags) against both
implementations."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from core.errors import InvalidInput
from core.snapshot.snapshot import Demand, Snapshot
from tests.builders.model import GI, container, cpu_node, ids, node, pod, run, zone


def test_kernel_rejects_bad_shape_and_policy(impl: ModuleType) -> None:
    snap = Snapshot.build([cpu_node([4], [4])])
    demand = Demand.build(pod(container(cpu=1)), snap)
    k = snap.kernel(impl)
    with pytest.raises(InvalidInput, match="shape 1 is out of range"):
        k.check(demand, 1, 0, 0)
    with pytest.raises(InvalidInput, match="policy code 7"):
        k.check(demand, 0, 7, 0)


def test_kernel_version_is_shared(impl: ModuleType) -> None:
    from core.feasibility import _kernel_py

    assert impl.KERNEL_VERSION == _kernel_py.KERNEL_VERSION == 2
    assert set(impl.__all__) == set(_kernel_py.__all__)


def test_compiled_kernel_is_the_selected_one() -> None:
    import os

    import core.feasibility.kernel as f

    if os.environ.get("NUMAGATE_NO_EXTENSIONS"):
        assert f.IMPLEMENTATION == "python"
    else:
        assert f.IMPLEMENTATION == "cython"
        assert f.Kernel.__module__ == "core.feasibility._kernel_c"


def test_guaranteed_fit_reports_mask_and_preferred(impl: ModuleType) -> None:
    res = run(impl, cpu_node([6, 6], [4, 6], policy="restricted"), pod(container(cpu=5)))
    assert res[0] == 1 and ids(res[1]) == {1} and res[2] == 1


def test_policy_none_admits_without_hint_but_still_allocates(impl: ModuleType) -> None:
    ok = run(impl, cpu_node([6, 6], [4, 6], policy="none"), pod(container(cpu=10)))
    assert ok[:3] == (1, 0, 0)
    short = run(impl, cpu_node([6, 6], [4, 6], policy="none"), pod(container(cpu=11)))
    assert short[0] == 0 and short[3] == 5  # R_CPU_SHORT
    assert short[6:] == (11, 10)


def test_empty_flag_uses_allocatable(impl: ModuleType) -> None:
    n = cpu_node([6, 6], [0, 0], policy="restricted")
    assert run(impl, n, pod(container(cpu=4)))[0] == 0
    assert run(impl, n, pod(container(cpu=4)), flags=impl.F_EMPTY)[0] == 1


def test_too_many_numa_nodes_for_policy(impl: ModuleType) -> None:
    n = cpu_node([2] * 9, [2] * 9, policy="best-effort")
    res = run(impl, n, pod(container(cpu=1)))
    assert res[0] == 0 and res[3] == 1 and res[6:] == (9, 8)
    # exactly 8 is allowed; policy none never checks the count
    assert run(impl, cpu_node([2] * 8, [2] * 8), pod(container(cpu=1)))[0] == 1
    assert run(impl, cpu_node([2] * 9, [2] * 9, policy="none"), pod(container(cpu=1)))[0] == 1
    # max-allowable-numa-nodes raised: 9 is allowed
    big = cpu_node([2] * 9, [2] * 9, max_numa_nodes=9)
    assert run(impl, big, pod(container(cpu=1)))[0] == 1


def test_node_allocatable_bound(impl: ModuleType) -> None:
    n = node(
        "n",
        [zone(0, {"cpu": 4000})],
        allocatable={"cpu": 4000, "memory": GI},
    )
    res = run(impl, n, pod(container(cpu=1, memory=2 * GI)))
    assert res[0] == 0 and res[3] == 2 and res[6:] == (2 * GI, GI)


def test_koord_requests_aligns_a_pod_that_binds_no_cpus(impl: ModuleType) -> None:
    # F_KOORD_REQUESTS (issue 30): koord-scheduler's FilterByNUMANode from the pod's requests,
    # CPU in millicores rounded up to the zones' whole CPUs, memory without the memory manager.
    from core.feasibility.codes import R_NOT_PREFERRED, R_SINGLE_NO_HINT

    n = node("n", [zone(i, {"cpu": 4000, "memory": 16 * GI}) for i in (0, 1)], policy="none")
    koord = impl.F_KOORD_HINTS | impl.F_KOORD_REQUESTS

    def burstable(cpu: int, memory: int = GI) -> Any:
        c = container(requests={"cpu": cpu, "memory": memory}, limits={}, exclusive=False)
        return pod(c, qos="Burstable")

    r = run(impl, n, burstable(3500), "single-numa-node", koord)
    assert r.admitted and ids(r.mask) == {0}
    r = run(impl, n, burstable(4001), "single-numa-node", koord)
    assert not r.admitted and (r.reason, r.resource) == (R_SINGLE_NO_HINT, 0)
    assert run(impl, n, burstable(4001), "single-numa-node", impl.F_KOORD_HINTS).admitted
    r = run(impl, n, burstable(6000), "restricted", koord)
    assert r.admitted and ids(r.mask) == {0, 1}
    r = run(impl, n, burstable(1000, 20 * GI), "single-numa-node", koord)
    assert not r.admitted and r.reason == R_SINGLE_NO_HINT
    r = run(impl, n, burstable(1000, 40 * GI), "restricted", koord)
    assert not r.admitted and r.reason == R_NOT_PREFERRED
    # best-effort and none: no NUMA filter
    assert run(impl, n, burstable(6000), "best-effort", koord).admitted
    # a pod the kubelet's static CPU manager pins: the kubelet's providers decide, as before
    pinned = pod(container(cpu=6, memory=GI))
    assert run(impl, n, pinned, "restricted", koord) == run(
        impl, n, pinned, "restricted", impl.F_KOORD_HINTS
    )
