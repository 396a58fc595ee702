"""The checks that need no cluster state, as one table (issue 29): each rule's finding code,
its message and its CEL expression. The webhook's findings take their messages from here
(core.intent.volcano, core.intent.hami), and ``numagate policies`` writes a
ValidatingAdmissionPolicy from the same rules, so the apiserver runs them itself when the
webhook is down or skipped (webhook/policies.py).

A rule accepts exactly the values the webhook reads: its RE2 pattern is generated from the
matcher's own vocabulary and folding (core.intent.dialects.match_value: surrounding
whitespace, case, and ``[\\s_.-]`` separators anywhere, with Python's ``str.isspace`` and
``str.lower`` as the webhook applies them), so a spelling the mutating webhook would
rewrite is accepted and only a value it cannot read is refused. Values longer than
``limits.VALUE_CHARS`` are refused by both (the webhook's ``too-large``).

``QUANTITY_RULES`` (HAMi percentages over 100, a Volcano Job task's integer CPUs) read
container quantities: their CEL (webhook/policy_quantities.py) needs Kubernetes' quantity
library. ``PRESENCE_RULES`` refuse an annotation key (HAMi's scheduler-owned allocation;
webhook/policy_presence.py); the rules that depend on the configured scheduler release are
core.intent.release_rules. Rules that stay in the webhook, and why, are in the README
("Which rule lives where").
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Final, Literal

from core.intent import dialects as d
from core.intent.limits import VALUE_CHARS

Where = Literal["annotation", "task"]
# How the webhook matches the value: match_value (folded), a comma chain of such values,
# Go's ParseBool, or the exact value.
Match = Literal["folded", "chain", "bool", "exact"]


@dataclass(frozen=True, slots=True)
class Rule:
    """One check. ``where``: a pod template's annotation ``key``, or a Volcano Job task's
    field ``key``; ``match``: how the webhook reads the value (``pattern`` is its RE2);
    ``what``, ``allowed`` and ``note`` make the message (``unknown`` below)."""

    name: str
    code: str
    where: Where
    key: str
    what: str
    allowed: tuple[str, ...]
    match: Match
    note: str = ""
    aliases: tuple[tuple[str, str], ...] = ()

    @property
    def chain(self) -> bool:
        """A chain of values (HAMi's GPU policy): the message names the chain."""
        return self.match == "chain"

    @property
    def pattern(self) -> str:
        """RE2 of the values the webhook accepts (built on first use: it scans Unicode)."""
        return _pattern(self.match, self.allowed, self.aliases)

    def unknown(self, shown: str, tail: str = "", token: str = "a token") -> str:
        """The finding's message for an unknown value; ``shown``: the value as quoted for
        the message, ``tail``: what the webhook adds and CEL cannot (a suggestion);
        ``token``: in a chain, the token the webhook names (CEL cannot)."""
        allowed = d.allowed_list(self.allowed)
        if self.chain:
            return (
                f"{self.what} {shown}: {token} is not an allowed value (allowed: {allowed})"
                f"{tail}; a chain is comma-separated, e.g. binpack,numa{self.note}"
            )
        return f"{self.what} {shown} is not an allowed value (allowed: {allowed}){tail}{self.note}"


# ---- RE2 patterns of what the webhook's matchers accept ------------------------------------


@cache
def _lower_sources() -> dict[str, tuple[str, ...]]:
    """Every character whose ``str.lower()`` is one lower-case ASCII letter, by letter
    (``K``, ``k`` and the Kelvin sign for ``k``)."""
    out: dict[str, list[str]] = {}
    for code in range(sys.maxunicode + 1):
        low = chr(code).lower()
        if len(low) == 1 and "a" <= low <= "z":
            out.setdefault(low, []).append(chr(code))
    return {k: tuple(v) for k, v in out.items()}


@cache
def spaces() -> tuple[str, ...]:
    """What ``str.strip()`` and the regular expression ``\\s`` of the webhook remove."""
    return tuple(chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace())


def _char(c: str) -> str:
    if c.isascii() and c.isalnum():
        return c
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\x{{{ord(c):x}}}"


def char_class(chars: Iterable[str]) -> str:
    """An RE2 character class of ``chars``, runs written as ranges."""
    codes = sorted({ord(c) for c in chars})
    parts: list[str] = []
    i = 0
    while i < len(codes):
        j = i
        while j + 1 < len(codes) and codes[j + 1] == codes[j] + 1:
            j += 1
        first, last = chr(codes[i]), chr(codes[j])
        parts.append(_char(first) if i == j else f"{_char(first)}-{_char(last)}")
        i = j + 1
    return f"[{''.join(parts)}]"


def _folded(word: str, sep: str) -> str:
    """RE2 of every spelling of the folded ``word``: each letter in any case ``str.lower``
    folds, separators allowed between letters."""
    letters = []
    for c in word:
        sources = _lower_sources().get(c)
        letters.append(char_class(sources) if sources else _char(c))
    return f"{sep}*".join(letters)


def folded_forms(allowed: Sequence[str], aliases: dict[str, str] | None = None) -> list[str]:
    """The folded spellings ``match_value(raw, allowed, aliases)`` recognises."""
    forms = {d.fold(a) for a in allowed}
    forms |= set(aliases or {})
    forms |= {typo for typo, value in d.KNOWN_TYPOS.items() if value in allowed}
    return sorted(f for f in forms if f)


def value_pattern(allowed: Sequence[str], aliases: dict[str, str] | None = None) -> str:
    """RE2 (unanchored body) of one value match_value recognises."""
    sep = char_class((*spaces(), "_", "-", "."))
    words = "|".join(_folded(w, sep) for w in folded_forms(allowed, aliases))
    return f"{sep}*(?:{words}){sep}*"


def anchored(body: str) -> str:
    return f"^(?:{body})$"


def chain_pattern(allowed: Sequence[str]) -> str:
    """RE2 of a comma chain whose every token match_value recognises."""
    token = value_pattern(allowed)
    return anchored(f"{token}(?:,{token})*")


def parse_bool_pattern() -> str:
    """RE2 of what match_numa_bind accepts: a Go ParseBool value, surrounding space."""
    space = char_class(spaces())
    return anchored(f"{space}*(?:{'|'.join(d.PARSE_BOOL_VALUES)}){space}*")


@cache
def _pattern(match: Match, allowed: tuple[str, ...], aliases: tuple[tuple[str, str], ...]) -> str:
    if match == "chain":
        return chain_pattern(allowed)
    if match == "bool":
        return parse_bool_pattern()
    if match == "exact":
        return anchored("|".join(allowed))
    return anchored(value_pattern(allowed, dict(aliases)))


# ---- the table ----------------------------------------------------------------------------

# match_volcano_policy's aliases: the Koordinator spellings of the same policies.
_VOLCANO_ALIASES: Final = tuple((d.fold(v), k) for k, v in d.KOORD_POLICY_BY_KUBELET.items() if v)

RULES: Final[tuple[Rule, ...]] = (
    Rule(
        "volcano-policy",
        "unknown-policy",
        "annotation",
        d.VOLCANO_NUMA_POLICY,
        "Volcano NUMA policy",
        d.VOLCANO_POLICIES,
        "folded",
        aliases=_VOLCANO_ALIASES,
    ),
    Rule(
        "hami-node-policy",
        "unknown-value",
        "annotation",
        d.HAMI_NODE_POLICY,
        "HAMi node policy",
        d.HAMI_NODE_POLICIES,
        "folded",
        " (HAMi silently treats it as binpack, #2767)",
    ),
    Rule(
        "hami-gpu-policy",
        "unknown-value",
        "annotation",
        d.HAMI_GPU_POLICY,
        "HAMi GPU policy",
        d.HAMI_GPU_POLICIES,
        "chain",
        " (HAMi silently treats unknown values as spread, #2767)",
    ),
    Rule(
        "hami-numa-bind",
        "unknown-value",
        "annotation",
        d.HAMI_NUMA_BIND,
        d.HAMI_NUMA_BIND,
        ("true", "false"),
        "bool",
        " (HAMi reads it with Go's strconv.ParseBool and silently treats anything else as false)",
    ),
    Rule(
        "volcano-task-policy",
        "unknown-policy",
        "task",
        "topologyPolicy",
        "topologyPolicy",
        d.VOLCANO_POLICIES,
        "exact",  # the Job CRD's enum
        " (the Volcano Job CRD enum rejects it)",
    ),
)
_BY_NAME: Final = {r.name: r for r in RULES}


def rule(name: str) -> Rule:
    return _BY_NAME[name]


# Rule names for the webhook's own modules (no pattern needed to word a message).
VOLCANO_POLICY: Final = "volcano-policy"
HAMI_NODE: Final = "hami-node-policy"
HAMI_GPU: Final = "hami-gpu-policy"
HAMI_NUMA_BIND: Final = "hami-numa-bind"
VOLCANO_TASK: Final = "volcano-task-policy"


# ---- rules on container resources: Kubernetes' CEL quantity library --------------------


@dataclass(frozen=True, slots=True)
class QuantityRule:
    """A check on the containers' resource quantities. Its CEL needs Kubernetes' quantity
    library (``isQuantity``, ``quantity``, ``isGreaterThan``): the apiserver has it, the
    CEL library of the unit tests (cel-python) has not, so the end-to-end suite's real
    apiserver is what holds these rules to the webhook (tests/e2e/test_policies.py).
    ``where``: every pod template, or a Volcano Job task's; ``resources``: the names read."""

    name: str
    code: str
    where: Literal["template", "task"]
    resources: tuple[str, ...]


HAMI_PERCENT_MAX: Final = 100
HAMI_RANGE: Final = "hami-percent-range"
VOLCANO_CPU: Final = "volcano-task-cpu"
# The task policies under which Volcano's Job webhook wants integer CPUs (validateTaskTopoPolicy).
VOLCANO_CPU_POLICIES: Final = tuple(p for p in d.VOLCANO_POLICIES if p != "none")

QUANTITY_RULES: Final[tuple[QuantityRule, ...]] = (
    # HAMi's webhook refuses a percentage resource over 100 (research §3.2)
    QuantityRule(HAMI_RANGE, "out-of-range", "template", d.HAMI_PERCENT_RESOURCES),
    # Volcano's Job webhook: with a task topologyPolicy, integer CPUs in every container
    QuantityRule(VOLCANO_CPU, "fractional-cpu", "task", ("cpu",)),
)


def hami_range_message(resource: str, shown: str) -> str:
    """``out-of-range``: ``shown`` is the value as Python's repr quotes it."""
    return f"{resource} is {shown}; HAMi allows 0-{HAMI_PERCENT_MAX} (a percentage of one GPU)"


def volcano_cpu_message(container: str, section: str, shown: str, policy: str) -> str:
    """``fractional-cpu`` of a Volcano Job task: ``container`` and ``policy`` quoted as
    Python's repr quotes them, ``shown`` the CPU in millicores or ``0 (unset)``."""
    return (
        f"container {container} CPU {section} is {shown}; with topologyPolicy {policy} "
        "Volcano requires every container and init container to request a positive integer "
        "number of CPUs (e.g. 1, 2)"
    )


# ---- warnings: a NUMA policy that gets no exclusive CPUs (kubelet's static CPU manager) ----


@dataclass(frozen=True, slots=True)
class WarningRule:
    """A warning of core.intent.containers.check_exclusive_cpus, on a pod template whose
    NUMA policy is a plain string CEL can read (Volcano's annotation, a Volcano Job task's
    ``topologyPolicy``). The policy holding them is bound with Warn (webhook.policy_warnings),
    apart from the denials; the Koordinator JSON annotation stays the webhook's."""

    name: str
    code: str


NOT_GUARANTEED: Final = "not-guaranteed"
WHOLE_CPUS: Final = "whole-cpus"
WARNING_RULES: Final[tuple[WarningRule, ...]] = (
    # the kubelet gives exclusive CPUs to Guaranteed pods only
    WarningRule(NOT_GUARANTEED, "not-guaranteed"),
    # ... and to their containers that request integer CPUs (guaranteedCPUs)
    WarningRule(WHOLE_CPUS, "fractional-cpu"),
)


def not_guaranteed_message(policy: str, qos: str) -> str:
    """``not-guaranteed``: ``policy`` quoted as Python's repr quotes it."""
    # under 120 characters: the apiserver may truncate longer admission warnings
    return f"NUMA policy {policy} has no effect on CPU placement: the pod is {qos}, not Guaranteed"


def whole_cpu_message(container: str, cpu: str, policy: str) -> str:
    """``fractional-cpu`` (the warning): ``container`` and ``policy`` quoted as Python's
    repr quotes them, ``cpu`` the request as core.quantity.format_quantity writes it."""
    return (
        f"container {container} requests {cpu} CPU; with NUMA policy {policy} only integer "
        "CPU requests get exclusive CPUs (kubelet guaranteedCPUs), so this container is not "
        "NUMA-aligned"
    )


# ---- a key's presence: annotations only a scheduler writes (core.intent.allocation) -------


@dataclass(frozen=True, slots=True)
class PresenceRule:
    """An annotation a pod template must not carry: one of ``keys`` or a key matching
    ``key_pattern`` (RE2, anchored; Python's ``re`` reads it the same way). Checked where
    the table's annotation rules are, but only on what creates pods: a Pod on CREATE (a
    scheduler writes these on the Pod's UPDATE) and workload templates."""

    name: str
    code: str
    keys: tuple[str, ...]
    key_pattern: str


FORGED_ALLOCATION: Final = "forged-allocation"
# HAMi v2.10.0 pkg/util/types.go (node, times, bind phase) and Kunlun's device list
HAMI_SCHEDULER_OWNED: Final = (
    "hami.io/vgpu-node",
    "hami.io/vgpu-time",
    "hami.io/bind-time",
    "hami.io/bind-phase",
    "hami.io/kunlun-allocated",
)
# each device backend's hami.io/<device>-devices-to-allocate and -devices-allocated
HAMI_DEVICES_KEY: Final = r"^hami\.io/[a-z0-9][a-z0-9.-]*-devices-(?:to-allocate|allocated)$"
PRESENCE_RULES: Final[tuple[PresenceRule, ...]] = (
    PresenceRule(FORGED_ALLOCATION, "forged-allocation", HAMI_SCHEDULER_OWNED, HAMI_DEVICES_KEY),
)


def forged_allocation_message(key: str) -> str:
    """``forged-allocation``: ``key`` as written (an annotation key, never quoted)."""
    return (
        f"{key} is written only by hami-scheduler when it places a pod; HAMi's device "
        "plugin takes a pod created with it as already allocated, outside HAMi's "
        "scheduling and quota (HAMi #3041). Remove it"
    )


__all__ = [
    "PRESENCE_RULES",
    "QUANTITY_RULES",
    "RULES",
    "VALUE_CHARS",
    "WARNING_RULES",
    "PresenceRule",
    "QuantityRule",
    "Rule",
    "WarningRule",
    "rule",
]
