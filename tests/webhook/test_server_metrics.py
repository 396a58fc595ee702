"""`serve --workers 2` and /metrics: one scrape, whichever worker answers it, counts the
requests every worker answered (prometheus-client's multiprocess mode) up to
FLUSH_SECONDS before it (webhook.metrics_batch), and the private metrics directory is
gone after shutdown."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import orjson
import pytest
from prometheus_client.mmap_dict import MmapedDict

from certs.authority import CertPaths
from tests.builders.objects import build_review, koord_pod
from tests.launch import http, start_process, write_config
from tests.webhook.scrape import parse
from webhook.metrics_batch import FLUSH_SECONDS

WORKER = re.compile(r"numagate: worker (\d+) serving")
REQUESTS = "numagate_admission_requests_total"
OK = f'{REQUESTS}{{webhook="validate",operation="CREATE",allowed="true",code="200"}}'


def metrics_dir(pid: int) -> Path:
    """The directory the parent handed the worker: where its value files are mapped (a
    forked worker's /proc environ is the parent's at exec, without the variable)."""
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        path = Path(line.split(maxsplit=5)[-1])
        if path.name.endswith(f"_{pid}.db") and path.parent.name.startswith("numagate-metrics-"):
            return path.parent
    raise AssertionError(f"worker {pid} maps no multiprocess metrics file")


def answered_by(directory: Path, pid: int) -> float:
    """Requests counted in worker ``pid``'s own file (read directly, not through /metrics)."""
    total = 0.0
    for key, value, *_ in MmapedDict.read_all_values_from_file(
        str(directory / f"counter_{pid}.db")
    ):
        if json.loads(key)[0] == REQUESTS.removesuffix("_total"):
            total += value
    return total


@pytest.mark.slow
def test_one_scrape_counts_every_worker(certs: CertPaths, tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "config.json", shutdown={"delaySeconds": 0, "gracePeriodSeconds": 10}
    )
    server = start_process(
        ["--cert-dir", str(certs.cert.parent), "--config", str(config)], workers=2
    )
    try:
        pids = [int(m[1]) for line in server.lines if (m := WORKER.search(line))]
        assert len(pids) == 2
        directory = metrics_dir(pids[0])
        assert directory == metrics_dir(pids[1]) and directory.is_dir()
        body = orjson.dumps(build_review(koord_pod("2")))
        sent = 0
        # One connection per request: the kernel spreads them over both workers.
        while sent < 200 and (sent < 40 or not all(answered_by(directory, p) for p in pids)):
            status, _ = http(server.port, certs.ca, "POST", "/validate", body)
            assert status == 200
            sent += 1
        # Each worker writes its counts at most FLUSH_SECONDS after a review (a timer on
        # its event loop; allow for a busy machine), then a scrape anywhere sees them all.
        give_up = time.monotonic() + 20 * FLUSH_SECONDS
        while True:
            per_worker = [answered_by(directory, p) for p in pids]
            if sum(per_worker) == sent or time.monotonic() > give_up:
                break
            time.sleep(FLUSH_SECONDS / 4)
        assert all(per_worker) and sum(per_worker) == sent, per_worker
        for _ in range(8):  # scrapes land on both workers too: each sees the sum
            status, text = http(server.port, certs.ca, "GET", "/metrics")
            assert status == 200
            samples = parse(text.decode())
            assert samples[OK] == sent
            assert samples['numagate_admission_duration_seconds_count{webhook="validate"}'] == sent
            assert samples['numagate_admission_requests_in_flight{webhook="validate"}'] == 0
            assert samples["numagate_inventory_nodes{}"] > 0
            assert len([k for k in samples if k.startswith("numagate_build_info{")]) == 1
            assert samples["process_resident_memory_bytes{}"] > 0
    finally:
        assert server.sigterm() == 0
    assert not directory.exists()
