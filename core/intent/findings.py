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
==================== ==========================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field

from core.intent import dialects as d
from core.model import Finding, Severity


@dataclass(slots=True)
class Ctx:
    prefix: str
    findings: list[Finding] = field(default_factory=list)

    def path(self, rel: str) -> str:
        return f"{self.prefix}.{rel}" if self.prefix else rel

    def ann(self, key: str) -> str:
        return self.path(f"metadata.annotations[{key}]")

    def add(self, path: str, severity: Severity, code: str, message: str) -> None:
        self.findings.append(Finding(path, severity, code, message))


def change_code(m: d.ValueMatch) -> str:
    return "typo-fixed" if m.how == "typo" else "respelled"
