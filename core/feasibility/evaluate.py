"""Transitional alias of core.feasibility.verdicts (``evaluate``, ``Evaluation``) and
core.feasibility.decision (``decide``), for callers still being moved (issue 13); new code
imports those modules."""

from core.feasibility.decision import decide
from core.feasibility.verdicts import Evaluation, evaluate

__all__ = ["Evaluation", "decide", "evaluate"]
