"""The table's rules that depend on the configured scheduler release (issue 29):
``unsupported-value`` for a HAMi GPU policy the configured HAMi
(``schedulerVersions.hami``) does not read. Their message is worded here for the webhook
(core.intent.hami) and the policies (webhook.policy_releases), which accept, for that
release, the spellings whose tokens it knows: an RE2 pattern from the matcher's vocabulary
(core.intent.rules.value_pattern), one value or, from HAMi v2.10.0, a comma chain.
"""

from __future__ import annotations

from typing import Final

from core.intent import dialects as d
from core.intent import versions as v
from core.intent.rules import anchored, chain_pattern, value_pattern

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
