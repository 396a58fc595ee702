"""The scheduler releases numagate checks a pod against (configuration ``schedulerVersions``).

What a scheduler understands changes between its releases: a HAMi GPU policy ``numa`` means
something to HAMi v2.10.0 and silently nothing (spread) to v2.9.0. The webhook reads the
values the configured release knows and reports the others with the release that added
them (``unsupported-value``). Each entry below was read at the named upstream tag
(docs/upstream-fidelity.md, "The schedulers' current releases"); the defaults are the
newest releases verified, so a configuration without ``schedulerVersions`` checks what
today's releases accept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from core.errors import InvalidInput

Version = tuple[int, int, int]

_VERSION = re.compile(r"v?([0-9]{1,4})\.([0-9]{1,4})(?:\.([0-9]{1,4}))?")

# The newest release whose source these rules were read from. Only HAMi's rules depend on
# the release today; the Koordinator and Volcano rules hold for the tags in
# docs/upstream-fidelity.md, and a scheduler gets an entry here with its first such rule.
HAMI_LATEST: Final[Version] = (2, 10, 0)

# HAMi: the first release whose source knows each hami.io/gpu-scheduler-policy token
# (pkg/util/types.go GPUSchedulerPolicy* constants at each tag; binpack and spread are in
# every release numagate supports). A comma chain is read by util.PolicyContains from v2.10.0.
HAMI_GPU_POLICY_SINCE: Final[dict[str, Version]] = {
    "binpack": (0, 0, 0),
    "spread": (0, 0, 0),
    "topology-aware": (2, 7, 0),
    "mutex": (2, 10, 0),
    "numa": (2, 10, 0),
}
HAMI_CHAIN_SINCE: Final[Version] = (2, 10, 0)
# hami.io/device-scoring-weights: pkg/util/device_scoring_weights.go, first at v2.10.0.
HAMI_SCORING_WEIGHTS_SINCE: Final[Version] = (2, 10, 0)


def parse_version(text: str, field: str) -> Version:
    """``v2.10.0``, ``2.10`` -> (2, 10, 0); anything else raises naming ``field``."""
    m = _VERSION.fullmatch(text) if isinstance(text, str) else None
    if m is None:
        raise InvalidInput(
            f"{field}: {text!r} is not a release version (allowed: vMAJOR.MINOR[.PATCH], "
            "e.g. v2.10.0)"
        )
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def show(version: Version) -> str:
    return "v" + ".".join(str(p) for p in version)


@dataclass(frozen=True, slots=True)
class SchedulerVersions:
    """The release of each scheduler the cluster runs (HAMi's, today)."""

    hami: Version = HAMI_LATEST

    def hami_gpu_policies(self) -> tuple[str, ...]:
        """The GPU policy tokens the configured HAMi release knows, in upstream order."""
        return tuple(p for p, since in HAMI_GPU_POLICY_SINCE.items() if self.hami >= since)


LATEST: Final = SchedulerVersions()


@lru_cache(maxsize=8)  # read per review: a configuration's three strings parse once
def from_texts(hami: str) -> SchedulerVersions:
    """The configuration's ``schedulerVersions``; a bad one raises naming its field."""
    return SchedulerVersions(parse_version(hami, "schedulerVersions.hami"))
