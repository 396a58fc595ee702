"""Limits.shared: a Volcano Job's tasks share the object's per-element limits."""

from __future__ import annotations

from core.intent.limits import DEFAULT, Limits


def test_one_template_keeps_the_limits() -> None:
    assert DEFAULT.shared(1) is DEFAULT
    assert DEFAULT.shared(0) is DEFAULT


def test_the_counts_read_per_element_are_split() -> None:
    shared = Limits(containers=128, resources=1024, terms=64, requirements=256, values=4096,
                    selector_labels=256).shared(13)  # fmt: skip
    assert (shared.containers, shared.resources, shared.terms) == (9, 78, 4)
    assert (shared.requirements, shared.values, shared.selector_labels) == (19, 315, 19)
    # what one template reads as a whole, and the number of templates, stay the object's
    assert shared.annotations_bytes == DEFAULT.annotations_bytes
    assert shared.value_chars == DEFAULT.value_chars and shared.templates == DEFAULT.templates


def test_a_share_is_never_zero() -> None:
    assert DEFAULT.shared(10_000).containers == 1
