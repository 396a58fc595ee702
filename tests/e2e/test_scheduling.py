"""Issue 26, items 3 and 5: the real kube-scheduler binds pods with numagate's injected
affinity only to compatible kwok nodes; a `fits` pod is bound, a `no-room-now` pod stays
Pending and `kubectl numagate pending` / `explain` (the real plugin lookup) explain it."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest
import yaml

from tests.e2e.cluster import TEST_NS, Install, clean_pods, create, get, koord, pod
from tests.e2e.controlplane import wait_until

# Nodes each Koordinator policy is compatible with (README, "What it checks"): the same
# policy, or a node with none (none-a's NRT says `none`).
COMPATIBLE = {
    "SingleNUMANode": {"single-a", "single-busy", "none-a"},
    "Restricted": {"restricted-a", "restricted-b", "none-a"},
}


@pytest.fixture(autouse=True)
def _clean(serving: Install) -> Iterator[None]:
    yield
    clean_pods(serving.plane)


def _node_of(install: Install, name: str) -> str:
    return get(install.plane, "pod", name).get("spec", {}).get("nodeName", "")


@pytest.mark.parametrize("policy", sorted(COMPATIBLE))
def test_the_scheduler_binds_only_to_compatible_nodes(serving: Install, policy: str) -> None:
    names = [f"{policy.lower()}-{i}" for i in range(6)]
    for name in names:
        out = create(serving.plane, pod(name, cpu="1", memory="512Mi", annotations=koord(policy)))
        assert out.returncode == 0, out.stderr
    wait_until(lambda: all(_node_of(serving, n) for n in names), 60, "every pod bound")
    nodes = {n: _node_of(serving, n) for n in names}
    assert set(nodes.values()) <= COMPATIBLE[policy], nodes


def test_fits_is_bound_and_no_room_now_stays_pending_and_is_explained(serving: Install) -> None:
    plane = serving.plane
    assert create(plane, pod("fits", cpu="4", annotations=koord("SingleNUMANode"))).returncode == 0
    waiting = pod("waits", cpu="4", annotations=koord("SingleNUMANode"),
                  node_selector={"kubernetes.io/hostname": "single-busy"})  # fmt: skip
    out = create(plane, waiting)
    assert "no node has room now" in out.stderr, out.stderr
    wait_until(
        lambda: _node_of(serving, "fits") in COMPATIBLE["SingleNUMANode"], 30, "`fits` bound"
    )

    def unschedulable() -> bool:
        conds = get(plane, "pod", "waits").get("status", {}).get("conditions", [])
        return any(
            c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conds
        )

    wait_until(unschedulable, 30, "the scheduler to give up on `waits`")
    assert not _node_of(serving, "waits")

    # kubectl finds `kubectl-numagate` on PATH (the plugin lookup), as a user's would.
    pending = plane.kubectl("numagate", "pending", "-A", "-o", "json", check=False)
    assert pending.returncode == 0, pending.stderr
    listed = json.loads(pending.stdout)["pods"]
    mine = [e for e in listed if (e["namespace"], e["name"]) == (TEST_NS, "waits")]
    assert len(mine) == 1, pending.stdout
    assert mine[0]["outcome"] == "no-room-now", mine[0]
    assert mine[0]["closest"]["node"] == "single-busy", mine[0]
    table = plane.kubectl("numagate", "pending", "-A", check=False)
    assert "waits" in table.stdout and "fits" not in table.stdout.split(), table.stdout

    explain = plane.kubectl("numagate", "explain", "pod/waits", "-n", TEST_NS, check=False)
    assert "single-busy" in explain.stdout and "no-room-now" in explain.stdout, (
        explain.stdout + explain.stderr
    )


def test_lint_reads_the_cluster_through_the_plugin(serving: Install) -> None:
    plane = serving.plane
    path = serving.workdir / "lint-me.yaml"
    docs = [
        pod("lint-ok", annotations=koord("SingleNUMANode")),
        pod("lint-never", cpu="12", annotations=koord("SingleNUMANode")),
    ]
    path.write_text(yaml.safe_dump_all(docs))
    out = plane.kubectl(
        "numagate", "lint", "--kubeconfig", str(plane.kubeconfig), str(path), check=False
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert "lint-never" in out.stdout and "impossible" in out.stdout, out.stdout
    assert "lint-ok" not in out.stdout.replace("lint-ok:", "")  # only the impossible one reported
    offline = subprocess.run([str(plane.binary("kubectl")), "numagate", "lint", str(path)],
                             capture_output=True, text=True, env=plane.env())  # fmt: skip
    assert offline.returncode == 0, (
        offline.stdout + offline.stderr
    )  # without a cluster: no feasibility
