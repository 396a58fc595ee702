"""What one review reads at most (issue 17): every walk over the object and every
annotation parse is bounded, so no review costs more than a few tens of milliseconds of CPU
whatever its shape within the kube-apiserver's 3 MiB request. Past a limit numagate reports
a ``too-large`` error naming the field, the size found and the limit, and reads no further;
/mutate leaves the field as written.

Annotations follow Kubernetes' own limit (apimachinery ``ValidateAnnotationsSize``: keys and
values together at most 256 KiB, checked by the apiserver only after mutating admission).
Kubernetes sets no limit on the counts below; they are far above any real pod (a pod with
more than a handful of containers, resources or affinity terms is rare) and keep the worst
review within budget (benchmarks/worst_case.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

# All annotations of one object, keys and values, in bytes (TotalAnnotationSizeLimitB).
ANNOTATIONS_BYTES: Final = 256 * 1024
# A plain-string policy annotation (Volcano, HAMi): the longest valid value is 40 characters.
VALUE_CHARS: Final = 1024
# A JSON annotation (Koordinator): members and elements at every level, and nesting depth.
JSON_VALUES: Final = 1024
JSON_DEPTH: Final = 16
# Trailing commas and comments are repaired in texts up to this size (hand-written ones).
REPAIR_CHARS: Final = 16 * 1024
# "Did you mean" suggestions (difflib) computed per pod template.
SUGGESTIONS: Final = 8
# spec.containers and spec.initContainers, each.
CONTAINERS: Final = 128
# Entries of resources.requests and resources.limits over all containers of a pod.
RESOURCES: Final = 1024
# Required node affinity: terms, requirements (matchExpressions and matchFields) over all
# terms, values over all requirements; and nodeSelector entries.
TERMS: Final = 64
REQUIREMENTS: Final = 256
VALUES: Final = 4096
SELECTOR_LABELS: Final = 256
# Pod templates of one object (a Volcano Job's tasks).
TEMPLATES: Final = 64
# Findings reported per pod template; the rest are counted in one last finding.
FINDINGS: Final = 50


@dataclass(frozen=True, slots=True)
class Limits:
    """The limits above as one value, so that the configuration can set them (the
    webhook's ``limits`` section); each defaults to the constant of the same name."""

    annotations_bytes: int = ANNOTATIONS_BYTES
    value_chars: int = VALUE_CHARS
    json_values: int = JSON_VALUES
    json_depth: int = JSON_DEPTH
    repair_chars: int = REPAIR_CHARS
    suggestions: int = SUGGESTIONS
    containers: int = CONTAINERS
    resources: int = RESOURCES
    terms: int = TERMS
    requirements: int = REQUIREMENTS
    values: int = VALUES
    selector_labels: int = SELECTOR_LABELS
    templates: int = TEMPLATES
    findings: int = FINDINGS

    def shared(self, templates: int) -> Limits:
        """The limits of one of ``templates`` pod templates of an object (a Volcano Job's
        tasks). The counts whose reading costs CPU per element (containers, requests and
        limits, affinity terms, requirements and values, nodeSelector labels) are the
        object's, split evenly, so that a Job of many tasks reads no more than one pod at
        the limits: per template they let a review cost the templates limit times a pod's
        worst (docs/reliability.md, "Bad input")."""
        if templates <= 1:
            return self
        return replace(
            self,
            containers=max(1, self.containers // templates),
            resources=max(1, self.resources // templates),
            terms=max(1, self.terms // templates),
            requirements=max(1, self.requirements // templates),
            values=max(1, self.values // templates),
            selector_labels=max(1, self.selector_labels // templates),
        )


DEFAULT: Final = Limits()


def clip(text: str, chars: int = 80) -> str:
    """``text`` for a message, cut after ``chars`` characters with its full length."""
    return text if len(text) <= chars else f"{text[:chars]}... ({len(text):,} characters)"


def clip_repr(text: str, chars: int = 80) -> str:
    """``repr(text)`` for a message, cut after ``chars`` characters with its full length."""
    if len(text) <= chars:
        return repr(text)
    return f"{text[:chars]!r}... ({len(text):,} characters)"


def over(what: str, found: str, limit: int, tail: str = "") -> str:
    """A ``too-large`` message: the field, what was found, the limit (within the 119
    characters a warning keeps for the usual fields)."""
    return f"{what}: {found}, over numagate's limit of {limit:,}{tail}"
