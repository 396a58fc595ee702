"""Where ``numagate serve`` watches a cluster (webhook/inventory/mode.py): the node count
from a list of one (``remainingItemCount``) over TLS with the kubernetes client, the
choice it leads to, and the real ``serve`` process taking the inventory process from
``--inventory-process-above`` nodes on, and the worker below it."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

from tests.launch import start_serve
from tests.webhook.fake_apiserver import NODES, running_apiserver
from tests.webhook.fake_apiserver_objects import node, nrt
from webhook.inventory.kube import api_client_from_kubeconfig
from webhook.inventory.mode import choose, count_nodes


def _count(tmp_path: Path, nodes: int, *, forbidden: bool = False) -> int:
    with running_apiserver(tmp_path) as fake:
        for k in range(nodes):
            fake.apply(node(f"n{k}"))
        fake.set_forbidden(NODES, forbidden)
        client = api_client_from_kubeconfig(fake.write_kubeconfig(tmp_path / "kubeconfig"))
        try:
            return count_nodes(client)
        finally:
            client.close()


@pytest.mark.parametrize("nodes", [0, 1, 3])
def test_the_node_count_comes_from_a_list_of_one(tmp_path: Path, nodes: int) -> None:
    assert _count(tmp_path, nodes) == nodes


def test_a_node_count_the_api_refuses_is_unknown_and_says_why(tmp_path: Path) -> None:
    with pytest.raises(LookupError, match="403"):
        _count(tmp_path, 2, forbidden=True)


def test_an_unreachable_api_gives_no_count(tmp_path: Path) -> None:
    with running_apiserver(tmp_path) as fake:
        client = api_client_from_kubeconfig(fake.write_kubeconfig(tmp_path / "kubeconfig"))
    try:  # stopped: connections refused
        with pytest.raises(LookupError, match="API unreachable"):
            count_nodes(client, timeout=(1.0, 1.0))
    finally:
        client.close()


def test_an_api_that_never_answers_is_asked_once(tmp_path: Path) -> None:
    """Startup waits one timeout for the count, not urllib3's four attempts."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        host, port = listener.getsockname()
        accepted: list[socket.socket] = []
        threading.Thread(
            target=lambda: accepted.extend(listener.accept()[0] for _ in range(4)), daemon=True
        ).start()
        with running_apiserver(tmp_path) as fake:
            kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
        text = kubeconfig.read_text().replace(f"127.0.0.1:{fake.port}", f"{host}:{port}")
        kubeconfig.write_text(text)
        client = api_client_from_kubeconfig(kubeconfig)
        try:
            with pytest.raises(LookupError, match="API unreachable: ReadTimeoutError"):
                count_nodes(client, timeout=(0.5, 0.5))
            time.sleep(0.3)  # a retry would have connected again by now
            assert len(accepted) == 1
        finally:
            client.close()
            for conn in accepted:
                conn.close()


def _raise() -> int:
    raise LookupError("API unreachable: refused")


def test_auto_takes_the_process_from_the_threshold_on() -> None:
    assert choose("auto", 3, lambda: 3).process
    assert not choose("auto", 3, lambda: 2).process
    unknown = choose("auto", 3, _raise)
    assert not unknown.process and unknown.nodes is None
    assert "API unreachable: refused" in unknown.reason
    assert "--inventory-process=always" in unknown.reason
    assert choose("always", 3, _raise).process  # not counted
    assert not choose("never", 3, lambda: 10**6).process


def _spawned(pid: int) -> list[int]:
    """Child processes started by multiprocessing's spawn (the inventory process; not its
    resource tracker)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
                found.append(int(child))
    return found


@pytest.mark.slow
@pytest.mark.parametrize("above", [3, 4])
def test_serve_watches_through_a_process_from_the_threshold_on(tmp_path: Path, above: int) -> None:
    with running_apiserver(tmp_path) as fake:
        for k in range(3):
            fake.apply(node(f"n{k}"))
            fake.apply(nrt(f"n{k}"))
        kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
        served = start_serve(
            tmp_path, "--kubeconfig", str(kubeconfig), "--inventory-process-above", str(above)
        )
        try:
            line = next(x for x in served.lines if "listening on" in x)
            if above == 3:
                assert "watched in an inventory process per worker: 3 nodes, at least" in line
                assert len(_spawned(served.proc.pid)) == 1
            else:
                assert "watched in the worker: 3 nodes, fewer than" in line
                assert _spawned(served.proc.pid) == []
        finally:
            served.stop()
    assert os.path.exists(tmp_path / "certs" / "ca.crt")
