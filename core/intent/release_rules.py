"""The table's rules that depend on the configured scheduler release (issue 29):
``unsupported-value`` for a HAMi GPU policy the configured HAMi
(``schedulerVersions.hami``) does not read. Their message is worded here for the webhook
(core.intent.hami) and the policies (webhook.policy_releases), which accept, for that
release, the spellings whose tokens it knows: an RE2 pattern from the matcher's vocabulary
(core.intent.rules.value_pattern), one value or, from HAMi v2.10.0, a comma chain.
"""

from __future__ import annotations

from itertools import permutations
from typing import Final

from core.intent import dialects as d
from core.intent import versions as v
from core.intent.rules import anchored, chain_pattern, char_class, spaces, value_pattern

HAMI_GPU_RELEASE: Final = "hami-gpu-policy-release"


def late_token_words(token: str, since: v.Version) -> str:
    """``token`` quoted as Python's repr quotes it."""
    return f"token {token} needs HAMi {v.show(since)}"


def chain_words() -> str:
    return f"a comma chain needs HAMi {v.show(v.HAMI_CHAIN_SINCE)}"


def hami_release_message(shown: str, what: str, versions: v.SchedulerVersions) -> str:
    """``unsupported-value``: ``shown`` the value quoted as Python's repr quotes it,
    ``what`` late_token_words or chain_words."""
    allowed = d.allowed_list(versions.hami_gpu_policies())
    return (
        f"HAMi GPU policy {shown}: {what} or later; the configured HAMi "
        f"{v.show(versions.hami)} (schedulerVersions.hami) silently treats it as spread "
        f"(allowed there: one of {allowed})"
    )


def release_pattern(versions: v.SchedulerVersions) -> str:
    """RE2 of the GPU policy values the release reads (whose every token it knows)."""
    known = versions.hami_gpu_policies()
    if versions.hami >= v.HAMI_CHAIN_SINCE:
        return chain_pattern(known)
    return anchored(value_pattern(known))


def late_tokens(versions: v.SchedulerVersions) -> tuple[str, ...]:
    """The tokens of newer releases, in upstream order."""
    known = versions.hami_gpu_policies()
    return tuple(t for t in d.HAMI_GPU_POLICIES if t not in known)


def first_late_pattern(token: str, versions: v.SchedulerVersions) -> str:
    """RE2 of a chain whose first token the release does not know is ``token``: tokens it
    knows, then ``token``, then anything (the value is a valid chain already)."""
    known = value_pattern(versions.hami_gpu_policies())
    return anchored(f"(?:{known},)*{value_pattern((token,))}(?:,[\\s\\S]*)?")


# ---- hami.io/device-scoring-weights (HAMi v2.10.0+): an RE2 pattern of the exact grammar ---

WEIGHTS_FORM: Final = "slot=N,core=N,memory=N: each once, integers >= 0, at least one above 0"
WEIGHT_KEYS: Final = ("slot", "core", "memory")
# what the policy says in place of the webhook's reason (which names a key or entry)
WEIGHTS_CEL_REASON: Final = "not a weight list HAMi reads"


def scoring_weights_message(shown: str, reason: str) -> str:
    """``invalid-value``: ``shown`` the value quoted as Python's repr quotes it, ``reason``
    why HAMi's ParseDeviceScoringWeights refuses it."""
    return (
        f"{d.HAMI_SCORING_WEIGHTS} {shown}: {reason} (allowed: {WEIGHTS_FORM}); "
        "hami-scheduler's Filter fails for this pod on every attempt (calcScore), so it "
        "stays Pending"
    )


def _at_most(limit: str) -> str:
    """RE2 of the ASCII decimal numbers 0..``limit`` without leading zeros beyond one."""
    n = len(limit)
    parts = [f"[0-9]{{1,{n - 1}}}"]
    for i, c in enumerate(limit):
        if c != "0":
            low = "0" if i else "1"
            if c > low:
                rest = n - i - 1
                tail = f"[0-9]{{{rest}}}" if rest else ""
                top = chr(ord(c) - 1)
                parts.append(
                    f"{limit[:i]}[{low}-{top}]{tail}" if low != top else f"{limit[:i]}{low}{tail}"
                )
    parts.append(limit)
    return "(?:" + "|".join(parts) + ")"


def _weight(key: str, number: str) -> str:
    """One entry as HAMi reads it: str.strip()ped around the key and the number."""
    space = char_class(spaces())
    return f"{space}*{key}{space}*={space}*{number}{space}*"


def weights_patterns() -> tuple[str, str]:
    """RE2 of (the values ParseDeviceScoringWeights reads, those whose weights are all 0):
    three entries, each key once in any order; a weight is Go's ParseInt (an optional sign,
    ASCII digits, int64) and not negative (``-0`` is 0)."""
    zero = "(?:[+-]?0+)"
    number = f"(?:\\+?0*{_at_most(str(2**63 - 1))}|-0+)"
    orders = list(permutations(WEIGHT_KEYS))
    every = "|".join(",".join(_weight(k, number) for k in o) for o in orders)
    zeros = "|".join(",".join(_weight(k, zero) for k in o) for o in orders)
    return anchored(every), anchored(zeros)
