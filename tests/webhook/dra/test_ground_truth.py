"""Every DRA ground-truth case (tests/fixtures/dra/cases.yaml, which tests/e2e/test_dra.py
runs through the real kube-scheduler) answered by the validating webhook's real pipeline
(webhook.review.pipeline.answer, the apiserver's checks on the response): ``impossible``
is denied by the DRA check, ``fits`` is allowed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.builders.objects import build_review
from tests.core.dra.ground_truth import CASES_FILE, Case, load_cases
from tests.webhook.harness import call, runtime
from webhook.dra.state import DraFileSource, DraState

CASES = load_cases()
DENIED = "DRA claims: no node can ever allocate them"


async def admission_verdict(case: Case, directory: Path) -> tuple[str, str]:
    """(fits | impossible | denied for another reason, the message) from /validate."""
    path = directory / f"{case.name}.json"
    path.write_text(json.dumps({"kind": "List", "items": [*case.nodes, *case.objects]}))
    rt = runtime(inventory=path)
    rt.dra = DraState()
    DraFileSource(str(path), rt.dra).load()
    response = await call(rt, "validate", build_review(case.pod))
    message = str((response.get("status") or {}).get("message", ""))
    if response["allowed"]:
        return "fits", message
    return ("impossible" if DENIED in message else "denied otherwise"), message


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_validate_answers_as_the_ground_truth(case: Case, tmp_path: Path) -> None:
    verdict, message = await admission_verdict(case, tmp_path)
    assert verdict == case.expect, f"{case.name} ({CASES_FILE.name}): {message}"
