"""`numagate review`: the same bytes the endpoint sends, for the same review."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from aiohttp.test_utils import TestClient

from tests.builders.objects import SMALL
from tests.paths import ROOT
from tests.webhook.harness import runtime
from webhook.app import make_app
from webhook.cli.main import main

REVIEWS = ROOT / "tests" / "fixtures" / "reviews"


@pytest.mark.parametrize("review", sorted(p.name for p in REVIEWS.glob("*.json")))
@pytest.mark.parametrize("webhook", ["mutate", "validate"])
async def test_review_output_equals_the_endpoint(
    aiohttp_client: object, capsysbinary: pytest.CaptureFixture[bytes], review: str, webhook: str
) -> None:
    raw = (REVIEWS / review).read_bytes()
    client: TestClient = await aiohttp_client(make_app(runtime(inventory=SMALL)))  # type: ignore[operator]
    resp = await client.post(f"/{webhook}", data=raw, headers={"Content-Type": "application/json"})
    served = await resp.read()
    # the CLI runs its own event loop: run it in a thread-free subprocess-free way via main()
    code = await _run_cli(
        ["review", "--inventory", str(SMALL), "--webhook", webhook, str(REVIEWS / review)]
    )
    out = capsysbinary.readouterr().out
    assert code == 0
    assert out == served + b"\n"


async def _run_cli(argv: list[str]) -> int:
    import asyncio

    return await asyncio.to_thread(main, argv)


@pytest.mark.slow
def test_review_reads_stdin_and_reports_bad_input(tmp_path: Path) -> None:
    sample = (REVIEWS / "koordinator-pod-impossible.json").read_bytes()
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "webhook",
            "review",
            "--inventory",
            str(SMALL),
            "--webhook",
            "validate",
            "-",
        ],
        input=sample,
        capture_output=True,
        cwd=ROOT,
        timeout=60,
    )
    assert out.returncode == 0
    assert orjson.loads(out.stdout)["response"]["allowed"] is False
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "webhook",
            "review",
            "--inventory",
            str(SMALL),
            "--webhook",
            "mutate",
            "-",
        ],
        input=b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}',
        capture_output=True,
        cwd=ROOT,
        timeout=60,
    )
    assert bad.returncode == 2 and b"request.uid" in bad.stderr and bad.stdout == b""
    (tmp_path / "cfg.yaml").write_text("affinity: {mode: sideways}\n")
    cfg = subprocess.run(
        [
            sys.executable,
            "-m",
            "webhook",
            "review",
            "--inventory",
            str(SMALL),
            "--config",
            str(tmp_path / "cfg.yaml"),
            "--webhook",
            "mutate",
            str(REVIEWS / "koordinator-pod-create.json"),
        ],
        capture_output=True,
        cwd=ROOT,
        timeout=60,
    )
    assert cfg.returncode == 2 and b"affinity.mode" in cfg.stderr and b"Traceback" not in cfg.stderr
    missing = subprocess.run(
        [
            sys.executable,
            "-m",
            "webhook",
            "review",
            "--inventory",
            str(tmp_path / "nope.yaml"),
            "--webhook",
            "mutate",
            str(REVIEWS / "koordinator-pod-create.json"),
        ],
        capture_output=True,
        cwd=ROOT,
        timeout=60,
    )
    assert missing.returncode == 2 and b"nope.yaml" in missing.stderr
