"""Collecting the findings of one pod template, and the table of their codes.

Finding codes (severity in brackets; ``error`` is what the webhook denies):

==================== ==========================================================
unknown-policy       [error] a NUMA policy value not in the owner's vocabulary
unknown-value        [error] any other enumerated value (exclusive, bind, HAMi)
unknown-field        [warning] an unknown JSON field close to a known one (kept)
conflicting-policies [error] two keys state different policies
invalid-json         [error] an annotation that must be JSON and is not
invalid-value        [error] a value of the wrong type or shape
invalid-quantity     [error] a resource quantity that does not parse
repaired-json        [warning] trailing commas / comments removed
respelled            [warning] case, separators or whitespace rewritten
typo-fixed           [warning] a known typo (``Reuqired``) rewritten
misplaced-field      [warning] NUMA fields moved out of ``resource-spec``
node-only-value      [warning] ``FullPCPUsOnly`` on a pod, rewritten ``FullPCPUs``
not-guaranteed       [warning] a NUMA policy on a pod that gets no exclusive CPUs
fractional-cpu       [warning; error for Volcano Job tasks] non-integer CPU
no-effect            [warning/info] a key the pod's scheduler does not read
mirrored             [warning] policy copied into the key the scheduler reads
out-of-range         [error] HAMi percentage resource outside 0-100
too-large            [error] over a limit of core.intent.limits (named, with the size
                     found); not read further, left as written
unsupported-value    [error] a value the configured scheduler release does not know
                     (core.intent.versions: ``schedulerVersions``)
forged-allocation    [error] an annotation only the scheduler writes (HAMi's allocation)
not-aligned          [warning] a Volcano policy on a pod with extended resources: Volcano
                     aligns its CPUs only
==================== ==========================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from core.intent import dialects as d
from core.intent import limits
from core.model import Finding, Severity

_RANK: Final[dict[str, int]] = {"info": 0, "warning": 1, "error": 2}


@dataclass(slots=True)
class Ctx:
    """The findings of one pod template: each reported once (a repeated round of the
    Koordinator reader finds the same again), at most ``limits.findings`` of them."""

    prefix: str
    found: dict[Finding, None] = field(default_factory=dict)
    dropped: int = 0
    dropped_severity: Severity = "info"
    unread: set[str] = field(default_factory=set)  # annotations over a limit: left as written
    limits: limits.Limits = limits.DEFAULT
    suggestions: int = -1  # left to compute: limits.suggestions

    def __post_init__(self) -> None:
        if self.suggestions < 0:
            self.suggestions = self.limits.suggestions

    def path(self, rel: str) -> str:
        return f"{self.prefix}.{rel}" if self.prefix else rel

    def ann(self, key: str) -> str:
        return self.path(f"metadata.annotations[{key}]")

    def add(self, path: str, severity: Severity, code: str, message: str) -> None:
        finding = Finding(path, severity, code, message)
        if finding in self.found:
            return
        if len(self.found) < self.limits.findings:
            self.found[finding] = None
            return
        self.dropped += 1
        if _RANK[severity] > _RANK[self.dropped_severity]:
            self.dropped_severity = severity

    def too_large(self, path: str, message: str, key: str | None = None) -> None:
        """Report what is over a limit; ``key``: the annotation, then left as written."""
        if key is not None:
            self.unread.add(key)
        self.add(path, "error", "too-large", message)

    def suggest(self, raw: str, allowed: tuple[str, ...]) -> str | None:
        """``dialects.suggest`` (difflib) for at most ``limits.suggestions`` fields."""
        if self.suggestions <= 0:
            return None
        self.suggestions -= 1
        return d.suggest(raw, allowed)

    def findings(self) -> tuple[Finding, ...]:
        out = tuple(self.found)
        if not self.dropped:
            return out
        more = Finding(
            self.prefix,
            self.dropped_severity,
            "too-large",
            f"{self.dropped:,} more findings not shown (numagate's limit: {self.limits.findings} "
            "per pod template)",
        )
        return (*out, more)


def change_code(m: d.ValueMatch) -> str:
    return "typo-fixed" if m.how == "typo" else "respelled"
