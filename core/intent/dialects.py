"""The annotation dialects of Koordinator, Volcano and HAMi: which keys each scheduler
reads, the values it accepts, spelled exactly as it compares them, and how a value written
in another spelling is brought back to the owner's spelling.

Facts (research/upstream-schedulers.md §0, §1.1, §2.1, §3.1, §5):

- Koordinator reads ``scheduling.koordinator.sh/numa-topology-spec``, JSON
  ``{"numaTopologyPolicy": "", "BestEffort", "Restricted" or "SingleNUMANode",
  "singleNUMANodeExclusive": "Preferred" or "Required"}``. Only the exact ``Required`` is
  enforced (``checkExclusivePolicy``); ``required`` or the proposal's typo ``Reuqired``
  silently disable exclusivity. ``scheduling.koordinator.sh/resource-spec`` carries the CPU
  bind fields only.
- Volcano reads ``volcano.sh/numa-topology-policy`` in the kubelet spelling and compares it
  with the node's policy case-sensitively (``SingleNUMANode`` never matches).
- HAMi reads ``hami.io/node-scheduler-policy`` (binpack, spread) and
  ``hami.io/gpu-scheduler-policy`` (binpack, spread, topology-aware, mutex, numa, or a comma
  chain); any other value silently behaves as the opposite policy (#2767, #2854).

Every value matcher here is pure and returns a :class:`ValueMatch` that says how the value
was recognised, so the caller can report exactly what it rewrote.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from core.frozen import fast_init
from core.intent.limits import clip_repr
from core.model import (
    POLICIES,
    POLICY_BEST_EFFORT,
    POLICY_NONE,
    POLICY_RESTRICTED,
    POLICY_SINGLE_NUMA_NODE,
)

# ---- keys -------------------------------------------------------------------------------

KOORD_NUMA_SPEC: Final = "scheduling.koordinator.sh/numa-topology-spec"
KOORD_RESOURCE_SPEC: Final = "scheduling.koordinator.sh/resource-spec"
VOLCANO_NUMA_POLICY: Final = "volcano.sh/numa-topology-policy"
HAMI_NODE_POLICY: Final = "hami.io/node-scheduler-policy"
HAMI_GPU_POLICY: Final = "hami.io/gpu-scheduler-policy"

KOORD_KEYS: Final = (KOORD_NUMA_SPEC, KOORD_RESOURCE_SPEC)
VOLCANO_KEYS: Final = (VOLCANO_NUMA_POLICY,)
HAMI_NUMA_BIND: Final = "nvidia.com/numa-bind"
# The pod's own device score weights (HAMi v2.10.0+, pkg/util/device_scoring_weights.go).
HAMI_SCORING_WEIGHTS: Final = "hami.io/device-scoring-weights"
HAMI_KEYS: Final = (HAMI_NODE_POLICY, HAMI_GPU_POLICY, HAMI_NUMA_BIND, HAMI_SCORING_WEIGHTS)

# Fields of the Koordinator JSON payloads (apis/extension/numa_aware.go, resource_spec.go).
F_NUMA_POLICY: Final = "numaTopologyPolicy"
F_NUMA_EXCLUSIVE: Final = "singleNUMANodeExclusive"
F_REQUIRED_BIND: Final = "requiredCPUBindPolicy"
F_PREFERRED_BIND: Final = "preferredCPUBindPolicy"
F_CPU_EXCLUSIVE: Final = "preferredCPUExclusivePolicy"
NUMA_SPEC_FIELDS: Final = (F_NUMA_POLICY, F_NUMA_EXCLUSIVE)
RESOURCE_SPEC_FIELDS: Final = (F_REQUIRED_BIND, F_PREFERRED_BIND, F_CPU_EXCLUSIVE)

# HAMi resources whose value is a percentage (chart values.yaml; webhook errors outside).
HAMI_GPU: Final = "nvidia.com/gpu"
HAMI_GPUMEM: Final = "nvidia.com/gpumem"
HAMI_GPUCORES: Final = "nvidia.com/gpucores"
HAMI_GPUMEM_PERCENTAGE: Final = "nvidia.com/gpumem-percentage"
HAMI_PERCENT_RESOURCES: Final = (HAMI_GPUCORES, HAMI_GPUMEM_PERCENTAGE)
# Resources only HAMi understands: a pod asking for them is scheduled by hami-scheduler
# (HAMi's webhook rewrites schedulerName when it is empty or default-scheduler).
HAMI_ONLY_RESOURCES: Final = (HAMI_GPUMEM, HAMI_GPUCORES, HAMI_GPUMEM_PERCENTAGE)

# ---- vocabularies (owner's spelling) -----------------------------------------------------

# Koordinator: "" is "no policy" (there is no None constant).
KOORD_POLICY_BY_KUBELET: Final[dict[str, str]] = {
    POLICY_NONE: "",
    POLICY_BEST_EFFORT: "BestEffort",
    POLICY_RESTRICTED: "Restricted",
    POLICY_SINGLE_NUMA_NODE: "SingleNUMANode",
}
KUBELET_BY_KOORD_POLICY: Final[dict[str, str]] = {v: k for k, v in KOORD_POLICY_BY_KUBELET.items()}
KOORD_POLICIES: Final = tuple(KOORD_POLICY_BY_KUBELET.values())
KOORD_EXCLUSIVE: Final = ("Required", "Preferred")
# Pod CPU bind policies (resource-spec); node label values differ (FullPCPUsOnly, None).
KOORD_BIND_POLICIES: Final = ("Default", "FullPCPUs", "SpreadByPCPUs", "ConstrainedBurst")
KOORD_CPU_EXCLUSIVE_POLICIES: Final = ("None", "PCPULevel", "NUMANodeLevel")
# Node-only values users put on pods (koordinator #1890), and the pod value they mean.
KOORD_NODE_ONLY_BIND: Final[dict[str, str]] = {"FullPCPUsOnly": "FullPCPUs"}

VOLCANO_POLICIES: Final = POLICIES  # kubelet spelling, compared case-sensitively

HAMI_NODE_POLICIES: Final = ("binpack", "spread")
HAMI_GPU_POLICIES: Final = ("binpack", "spread", "topology-aware", "mutex", "numa")

# nvidia.com/numa-bind is read with Go's strconv.ParseBool; anything else silently means
# false (HAMi assertNuma, device_test TestAssertNuma "notabool" -> false).
PARSE_BOOL_TRUE: Final = ("1", "t", "T", "TRUE", "true", "True")
PARSE_BOOL_FALSE: Final = ("0", "f", "F", "FALSE", "false", "False")
PARSE_BOOL_VALUES: Final = PARSE_BOOL_TRUE + PARSE_BOOL_FALSE

# Known typos that appear in upstream documents (the Koordinator proposal's "Reuqired").
KNOWN_TYPOS: Final[dict[str, str]] = {"reuqired": "Required", "requried": "Required"}

# ---- scheduler names ---------------------------------------------------------------------

SCHEDULER_BY_NAME: Final[dict[str, str]] = {
    "koord-scheduler": "koordinator",
    "volcano": "volcano",
    "hami-scheduler": "hami",
}
DEFAULT_SCHEDULER_NAMES: Final = ("", "default-scheduler")

How = Literal["exact", "trimmed", "respelled", "typo", "empty", "unknown"]


@fast_init
@dataclass(frozen=True, slots=True)
class ValueMatch:
    """How a raw value maps onto a vocabulary.

    ``value`` is the owner's spelling (None when unknown); ``how`` says what had to change:
    ``exact``, ``trimmed`` (whitespace only), ``respelled`` (case or separators), ``typo``
    (a known typo) or ``unknown``; ``suggestion`` is the closest allowed value, if any.
    """

    raw: str
    value: str | None
    how: How
    suggestion: str | None = None

    @property
    def known(self) -> bool:
        return self.value is not None

    @property
    def changed(self) -> bool:
        return self.value is not None and self.value != self.raw


_SEPARATORS = re.compile(r"[\s_\-.]+")


def fold(value: str) -> str:
    """Case- and separator-insensitive form: ``Single_NUMA-node`` -> ``singlenumanode``."""
    return _SEPARATORS.sub("", value).lower()


def suggest(raw: str, allowed: Sequence[str]) -> str | None:
    """The allowed value closest to ``raw`` (difflib on the folded forms), if one is close."""
    candidates = {fold(a): a for a in allowed if a}
    word = fold(raw)
    # difflib's first test (real_quick_ratio: 2*min(lengths)/sum) refuses a word whose
    # length is too far from every candidate's; tested here first, as it would be, before
    # get_close_matches indexes the word (linear in it: a 200,000-character value costed
    # /validate more than its 50 ms, benchmarks/worst_case.py koord-long-value)
    if all(2.0 * min(len(word), len(c)) / (len(word) + len(c)) < 0.6 for c in candidates):
        return None
    hits = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return candidates[hits[0]] if hits else None


def match_value(
    raw: str,
    allowed: Sequence[str],
    aliases: dict[str, str] | None = None,
    *,
    suggest_close: bool = True,
) -> ValueMatch:
    """Match ``raw`` against ``allowed`` (owner's spelling). ``aliases`` maps folded
    spellings of other dialects onto an allowed value (e.g. ``none`` -> ``""``); without
    ``suggest_close`` an unknown value gets no suggestion (difflib is the costly part)."""
    if raw in allowed:
        return ValueMatch(raw, raw, "exact")
    trimmed = raw.strip()
    if trimmed in allowed:
        return ValueMatch(raw, trimmed, "trimmed")
    folded = fold(trimmed)
    by_fold = {fold(a): a for a in allowed}
    if aliases:
        by_fold.update(aliases)
    if folded in by_fold and (folded or not trimmed):
        return ValueMatch(raw, by_fold[folded], "respelled")
    if folded in KNOWN_TYPOS and KNOWN_TYPOS[folded] in allowed:
        return ValueMatch(raw, KNOWN_TYPOS[folded], "typo")
    return ValueMatch(raw, None, "unknown", suggest(trimmed, allowed) if suggest_close else None)


# ---- per-key matchers -------------------------------------------------------------------

_KUBELET_ALIASES: Final = {fold(p): p for p in POLICIES}


# Built once: match_value only reads them (folding them on every call showed in profiles).
_KOORD_POLICY_ALIASES: Final = {fold(k): v for k, v in KOORD_POLICY_BY_KUBELET.items()}
_VOLCANO_POLICY_ALIASES: Final = {fold(v): k for k, v in KOORD_POLICY_BY_KUBELET.items() if v}


def match_koord_policy(raw: str) -> ValueMatch:
    """Koordinator ``numaTopologyPolicy``; kubelet or Volcano spellings are recognised."""
    return match_value(raw, KOORD_POLICIES, _KOORD_POLICY_ALIASES)


def match_volcano_policy(raw: str) -> ValueMatch:
    """Volcano ``volcano.sh/numa-topology-policy`` / Job ``topologyPolicy``."""
    return match_value(raw, VOLCANO_POLICIES, _VOLCANO_POLICY_ALIASES)


def match_koord_exclusive(raw: str) -> ValueMatch:
    """``singleNUMANodeExclusive``; koord-scheduler's Filter treats an empty value as
    ``Required`` (nodenumaresource plugin.go), so "" is written that way."""
    if raw.strip() == "":
        return ValueMatch(raw, "Required", "empty")
    return match_value(raw, KOORD_EXCLUSIVE)


def match_koord_bind(raw: str) -> ValueMatch:
    return match_value(raw, KOORD_BIND_POLICIES)


def match_koord_cpu_exclusive(raw: str) -> ValueMatch:
    return match_value(raw, KOORD_CPU_EXCLUSIVE_POLICIES)


def match_hami_node_policy(raw: str) -> ValueMatch:
    return match_value(raw, HAMI_NODE_POLICIES)


def match_numa_bind(raw: str) -> ValueMatch:
    """``nvidia.com/numa-bind``; ``Yes``/``on`` are not booleans to Go and mean false."""
    if raw in PARSE_BOOL_VALUES:
        return ValueMatch(raw, raw, "exact")
    if raw.strip() in PARSE_BOOL_VALUES:
        return ValueMatch(raw, raw.strip(), "trimmed")
    return ValueMatch(raw, None, "unknown", suggest(raw.strip(), ("true", "false")))


@dataclass(frozen=True, slots=True)
class ChainMatch:
    """A HAMi GPU policy chain: the normalized chain (None when a token is unknown), the
    tokens, and every token that is not in the vocabulary."""

    raw: str
    value: str | None
    tokens: tuple[str, ...]
    unknown: tuple[ValueMatch, ...]

    @property
    def changed(self) -> bool:
        return self.value is not None and self.value != self.raw


def match_hami_gpu_policy(raw: str) -> ChainMatch:
    """``hami.io/gpu-scheduler-policy``: one policy or a comma chain (``binpack,numa``);
    each token trimmed and lower-cased the way HAMi compares it."""
    tokens: list[str] = []
    unknown: list[ValueMatch] = []
    for part in raw.split(","):
        # a suggestion for the first unknown token only: the one a message shows
        m = match_value(part, HAMI_GPU_POLICIES, suggest_close=not unknown)
        if m.value is None:
            unknown.append(m)
        else:
            tokens.append(m.value)
    if unknown:
        return ChainMatch(raw, None, tuple(tokens), tuple(unknown))
    return ChainMatch(raw, ",".join(tokens), tuple(tokens), ())


def kubelet_from_koord(value: str) -> str:
    return KUBELET_BY_KOORD_POLICY[value]


def koord_from_kubelet(policy: str) -> str:
    return KOORD_POLICY_BY_KUBELET[policy]


def allowed_list(allowed: Sequence[str]) -> str:
    """Allowed values for a message: ``"" (none), BestEffort, ...``."""
    return ", ".join('"" (none)' if a == "" else a for a in allowed)


def describe_unknown(m: ValueMatch, allowed: Sequence[str]) -> str:
    """``'Sngle' is not allowed (allowed: ...); did you mean SingleNUMANode?``"""
    text = f"{clip_repr(m.raw)} is not an allowed value (allowed: {allowed_list(allowed)})"
    return text + suggestion_tail(m)


def suggestion_tail(m: ValueMatch) -> str:
    """``; did you mean X?`` when there is a suggestion (difflib: the webhook only)."""
    return "" if m.suggestion is None else f"; did you mean {m.suggestion}?"


def describe_change(m: ValueMatch, owner: str) -> str:
    """Why a recognised value was rewritten, for a finding message."""
    raw = clip_repr(m.raw)
    if m.how == "trimmed":
        return f"{raw} has surrounding whitespace; {owner} compares values exactly, rewritten as {m.value!r}"
    if m.how == "empty":
        return (
            f"{raw} means {m.value!r} to {owner} (its Filter's default); rewritten as {m.value!r}"
        )
    if m.how == "typo":
        return f"{raw} is a typo {owner} silently ignores; rewritten as {m.value!r}"
    return f"{raw} is not {owner}'s spelling ({owner} compares exactly); rewritten as {m.value!r}"
