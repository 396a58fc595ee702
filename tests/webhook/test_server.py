"""`numagate serve` as a real subprocess: first-run certificates and the ready-to-paste curl
line, `--workers 2` listening on one port with SO_REUSEPORT, and SIGTERM: readiness false
first, requests in flight finished, clean exit."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from certs.authority import CertPaths
from tests.builders.objects import SMALL, build_review, koord_pod
from tests.launch import (
    SERVER_NAME,
    http,
    read_response,
    start_process,
    tls_socket,
    wait_for,
    write_config,
)
from tests.paths import ROOT


def listening_sockets(pid: int, port: int) -> set[str]:
    """Inodes of the LISTEN sockets on ``port`` that process ``pid`` holds."""
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].split(":")[1], 16) == port and fields[3] == "0A":
            inodes.add(fields[9])
    held = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            held.add(target[8:-1])
    return inodes & held


def children(pid: int) -> list[int]:
    out = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        if re.search(rf"^PPid:\s+{pid}$", text, re.M):
            out.append(int(status.parent.name))
    return out


@pytest.mark.slow
def test_first_run_generates_certs_and_prints_a_working_curl_line(tmp_path: Path) -> None:
    cert_dir = tmp_path / "certs"
    server = start_process(
        [
            "--cert-dir",
            str(cert_dir),
            "--config",
            str(
                write_config(
                    tmp_path / "config.json", shutdown={"delaySeconds": 0, "gracePeriodSeconds": 10}
                )
            ),
        ]
    )
    try:
        text = "\n".join(server.lines)
        assert f"CA certificate: {cert_dir / 'ca.crt'}" in text
        curl = next(line for line in server.lines if "curl --cacert" in line)
        sample = re.search(r"--data @(\S+)", curl)
        assert sample and (ROOT / sample[1]).is_file()
        assert f"https://127.0.0.1:{server.port}/mutate" in curl
        # what the curl line does: the demo inventory mutates the sample pod
        status, body = http(
            server.port,
            cert_dir / "ca.crt",
            "POST",
            "/mutate",
            (ROOT / sample[1]).read_bytes(),
            name="127.0.0.1",
        )
        response = orjson.loads(body)["response"]
        assert status == 200 and response.get("patchType") == "JSONPatch", response
    finally:
        assert server.sigterm() == 0


@pytest.mark.slow
def test_two_workers_share_the_port_and_drain_on_sigterm(certs: CertPaths, tmp_path: Path) -> None:
    delay = 2.0  # long enough that every worker shows 503 before closing, even under load
    config = write_config(
        tmp_path / "config.json", shutdown={"delaySeconds": delay, "gracePeriodSeconds": 10}
    )
    server = start_process(
        ["--cert-dir", str(certs.cert.parent), "--inventory", str(SMALL), "--config", str(config)],
        workers=2,
    )
    try:
        workers = children(server.proc.pid)
        assert len(workers) >= 2
        listeners = [listening_sockets(pid, server.port) for pid in workers]
        held = [s for s in listeners if s]
        assert len(held) == 2 and held[0] != held[1]  # two listening sockets, one port
        for _ in range(6):
            status, _ = http(server.port, certs.ca, "GET", "/readyz")
            assert status == 200
        # a request in flight: headers and half the body sent, then SIGTERM
        body = orjson.dumps(build_review(koord_pod("12")))
        slow = tls_socket(server.port, certs.ca)
        head = f"POST /validate?timeout=10s HTTP/1.1\r\nHost: {SERVER_NAME}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        slow.sendall(head.encode() + body[: len(body) // 2])
        time.sleep(0.2)
        server.proc.send_signal(signal.SIGTERM)
        # during the delay: still listening, but not ready
        wait_for(lambda: _draining(server.port, certs.ca), delay, "readiness to turn false")
        # then the listeners close while our body is still in transit ...
        wait_for(lambda: _refused(server.port, certs.ca), delay + 10, "the listeners to close")
        # ... and the request is still answered
        slow.sendall(body[len(body) // 2 :])
        status, answer = read_response(slow)
        slow.close()
        assert status == 200
        assert orjson.loads(answer)["response"]["allowed"] is False
        assert server.proc.wait(timeout=30) == 0
        with pytest.raises(OSError):
            http(server.port, certs.ca, "GET", "/healthz")
    finally:
        server.sigterm()


@pytest.mark.slow
def test_bad_startup_inputs_are_usage_errors(tmp_path: Path) -> None:
    bad = tmp_path / "c.yaml"
    bad.write_text("modes: {feasibility: deny}\n")
    for args, fragment in (
        (["--config", str(bad)], "modes.feasibility"),
        (["--inventory", str(tmp_path / "missing.yaml")], "no such file"),
        (["--workers", "0"], "--workers"),
    ):
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "webhook",
                "serve",
                "--port",
                "0",
                "--cert-dir",
                str(tmp_path / "c"),
                *args,
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 2, out
        assert fragment in out.stderr and "Traceback" not in out.stderr


def _inventory_nodes(port: int, ca: Path) -> int:
    status, body = http(port, ca, "GET", "/metrics")
    assert status == 200
    m = re.search(rb"^numagate_inventory_nodes (\d+)", body, re.M)
    assert m, body[:300]
    return int(m[1])


def _all_workers_report(port: int, ca: Path, nodes: int, timeout: float) -> bool:
    """Every new connection (SO_REUSEPORT spreads them over the workers) sees ``nodes``
    (the merged view: the fewest nodes any live worker has)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(_inventory_nodes(port, ca) == nodes for _ in range(12)):
            return True
        time.sleep(0.2)
    return False


@pytest.mark.slow
def test_large_inventory_built_once_then_reloaded_in_every_worker(
    certs: CertPaths, tmp_path: Path
) -> None:
    """A static file above 1 MiB is parsed once in a helper process and handed to both
    workers; a change of the file is still picked up by every worker."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import gen
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    inventory = gen.write_inventory(tmp_path / "inventory.yaml", 500)
    assert inventory.stat().st_size > 1 << 20
    config = tmp_path / "config.yaml"
    config.write_text("inventory: {reloadIntervalSeconds: 0.2}\nshutdown: {delaySeconds: 0}\n")
    server = start_process(
        ["--cert-dir", str(certs.cert.parent), "--inventory", str(inventory), "--config",
         str(config)],
        workers=2,
        timeout=60,
    )  # fmt: skip
    try:
        assert _all_workers_report(server.port, certs.ca, 500, 10)
        status, body = http(
            server.port, certs.ca, "POST", "/validate", orjson.dumps(build_review(koord_pod("2")))
        )
        assert status == 200 and orjson.loads(body)["response"]["allowed"] is True
        # Larger: the merged gauge is the fewest nodes over the workers, so it reads 520
        # only once every worker has reloaded.
        gen.write_inventory(tmp_path / "larger.yaml", 520).replace(inventory)
        assert _all_workers_report(server.port, certs.ca, 520, 30)
    finally:
        assert server.sigterm() == 0


async def test_workers_adopt_the_prebuilt_inventory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The helper's build is what a worker installs: the worker does not parse the file
    again (here the file is broken by then, which a worker's own load would refuse)."""
    from webhook import server as server_module
    from webhook.config import ConfigHolder
    from webhook.inventory import file_build
    from webhook.inventory.state import InventoryState, pickled_file_build

    monkeypatch.setattr(file_build, "ISOLATE_ABOVE_BYTES", 0)
    path = tmp_path / "inv.yaml"
    path.write_text(SMALL.read_text())
    opts = server_module.ServeOptions(
        host="127.0.0.1", port=0, cert="", key="", inventory=str(path)
    )
    build = file_build.start_file_build(opts.inventory, pickled_file_build)
    assert build is not None
    payload = build.result()
    path.write_text("{{{ not yaml")
    state = InventoryState()
    sources = server_module.start_sources(opts, state, ConfigHolder(None), preloaded=payload)
    try:
        assert state.view is not None
        assert [n.name for n in state.view.nodes] == ["busy-1", "restricted-1"]
    finally:
        for task in sources.tasks:
            task.cancel()
    monkeypatch.setattr(file_build, "ISOLATE_ABOVE_BYTES", 1 << 20)
    assert file_build.start_file_build(opts.inventory, pickled_file_build) is None  # small


# Run by test_workers_serve_with_the_startup_heap_frozen in a fresh interpreter: the real
# `serve` command, its worker replaced by one that reports what the collector holds.
FROZEN_PROBE = """
import gc, os, sys
import webhook.server as server
from webhook.cli.main import main

def report(opts, preloaded=None):
    kept = object.__new__(type("Kept", (), {}))  # tracked, made in the worker
    young = {id(o) for o in gc.get_objects()}
    line = f"worker {gc.get_freeze_count()} {id(server) in young} {id(kept) in young}\\n"
    os.write(1, line.encode())  # one write: the workers share the pipe

async def single(opts, **kwargs):
    report(opts)

server._worker_main = report
server.serve_worker = single
sys.exit(main(["serve", "--host", "127.0.0.1", "--port", "0", "--cert-dir", sys.argv[1],
               "--workers", sys.argv[2]]))
"""


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_workers_serve_with_the_startup_heap_frozen(tmp_path: Path, workers: int) -> None:
    """The objects alive when serving starts (the imported modules) are frozen out of the
    collector's reach, in the single worker and in forked ones; what a worker makes later
    is still collected (webhook.server.settle_heap)."""
    out = subprocess.run(
        [sys.executable, "-c", FROZEN_PROBE, str(tmp_path / "certs"), str(workers)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = [ln.split() for ln in out.stdout.splitlines() if ln.startswith("worker ")]
    assert len(lines) == workers, out.stdout + out.stderr
    for _, frozen, module_tracked, new_tracked in lines:
        assert int(frozen) > 10_000  # the imports' objects, not a handful
        assert module_tracked == "False"  # a module made before serving: frozen
        assert new_tracked == "True"  # made after: the collector still sees it


def _draining(port: int, ca: Path) -> bool:
    status, text = http(port, ca, "GET", "/readyz")
    return status == 503 and b"shutting down" in text


def _refused(port: int, ca: Path) -> bool:
    """True once a new connection is refused; a probe cut by the close itself polls on."""
    try:
        http(port, ca, "GET", "/healthz")
    except ConnectionRefusedError:
        return True
    except OSError:
        return False
    return False
