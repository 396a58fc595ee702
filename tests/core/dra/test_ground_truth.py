"""numagate's side of the DRA ground-truth table (tests/fixtures/dra/cases.yaml): core/dra
gives each case its expected verdict; tests/e2e/test_dra.py checks the same table against
the real kube-scheduler."""

from __future__ import annotations

import pytest

from tests.core.dra.ground_truth import Case, load_cases, numagate_verdict

CASES = load_cases()


def test_the_table_has_both_verdicts() -> None:
    assert {c.expect for c in CASES} == {"fits", "impossible"}
    assert len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_numagate_verdict(case: Case) -> None:
    assert numagate_verdict(case) == case.expect
