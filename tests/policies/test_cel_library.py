"""celpy, the CEL library the agreement test evaluates the policies with, gives every
expression of tests/policies/semantics.py the value Kubernetes gives it."""

from __future__ import annotations

from typing import Any

import celpy
import pytest

from tests.policies.cel_eval import evaluate
from tests.policies.semantics import ACTIVATION, SEMANTICS


@pytest.mark.parametrize(("expression", "expected"), SEMANTICS, ids=[e for e, _ in SEMANTICS])
def test_celpy_matches_kubernetes(expression: str, expected: Any) -> None:
    assert evaluate(expression, celpy.json_to_cel(ACTIVATION)) == expected
