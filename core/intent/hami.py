"""The HAMi annotations (node and GPU policies, NUMA bind) and percentage resources."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from core.errors import InvalidInput
from core.intent import dialects as d
from core.intent import versions as v
from core.intent.annotations import short_value
from core.intent.findings import Ctx, change_code
from core.intent.limits import clip, clip_repr
from core.intent.release_rules import (
    chain_words,
    hami_release_message,
    late_token_words,
    scoring_weights_message,
)
from core.intent.rules import (
    HAMI_GPU,
    HAMI_NODE,
    HAMI_NUMA_BIND,
    HAMI_PERCENT_MAX,
    hami_range_message,
    rule,
)
from core.intent.versions import SchedulerVersions
from core.model import (
    is_map,
)
from core.quantity import to_core_units


def hami_values(annotations: dict[str, str], ctx: Ctx) -> tuple[str | None, tuple[str, ...]]:
    """(node policy, GPU policy chain) in HAMi's spelling; respellings are written back."""
    node_policy = (
        _node_policy(annotations, ctx) if _readable(d.HAMI_NODE_POLICY, annotations, ctx) else None
    )
    gpu_policy = (
        _gpu_policy(annotations, ctx) if _readable(d.HAMI_GPU_POLICY, annotations, ctx) else ()
    )
    if _readable(d.HAMI_NUMA_BIND, annotations, ctx):
        _numa_bind(annotations, ctx)
    return node_policy, gpu_policy


def _readable(key: str, annotations: dict[str, str], ctx: Ctx) -> bool:
    return key in annotations and short_value(key, annotations[key], ctx.ann(key), ctx)


def _node_policy(annotations: dict[str, str], ctx: Ctx) -> str | None:
    raw = annotations[d.HAMI_NODE_POLICY]
    m = d.match_hami_node_policy(raw)
    if m.value is None:
        ctx.add(
            ctx.ann(d.HAMI_NODE_POLICY),
            "error",
            "unknown-value",
            rule(HAMI_NODE).unknown(clip_repr(m.raw), d.suggestion_tail(m)),
        )
        return None
    if m.changed:
        annotations[d.HAMI_NODE_POLICY] = m.value
        ctx.add(
            ctx.ann(d.HAMI_NODE_POLICY),
            "warning",
            change_code(m),
            f"HAMi node policy {d.describe_change(m, 'HAMi')} (#2767, #2854)",
        )
    return m.value


def _gpu_policy(annotations: dict[str, str], ctx: Ctx) -> tuple[str, ...]:
    raw = annotations[d.HAMI_GPU_POLICY]
    c = d.match_hami_gpu_policy(raw)
    if c.value is None:
        bad = c.unknown[0]
        text = rule(HAMI_GPU).unknown(
            clip_repr(raw), d.suggestion_tail(bad), f"token {clip_repr(bad.raw)}"
        )
        ctx.add(ctx.ann(d.HAMI_GPU_POLICY), "error", "unknown-value", text)
        return ()
    if c.changed:
        annotations[d.HAMI_GPU_POLICY] = c.value
        ctx.add(
            ctx.ann(d.HAMI_GPU_POLICY),
            "warning",
            "respelled",
            f"HAMi GPU policy {clip_repr(raw)} is not HAMi's spelling (HAMi compares exactly, "
            f"#2767, #2854); rewritten as {clip_repr(c.value)}",
        )
    return c.tokens


def _numa_bind(annotations: dict[str, str], ctx: Ctx) -> None:
    raw = annotations[d.HAMI_NUMA_BIND]
    m = d.match_numa_bind(raw)
    path = ctx.ann(d.HAMI_NUMA_BIND)
    if m.value is None:
        ctx.add(
            path,
            "error",
            "unknown-value",
            rule(HAMI_NUMA_BIND).unknown(clip_repr(m.raw), d.suggestion_tail(m)),
        )
    elif m.changed:
        annotations[d.HAMI_NUMA_BIND] = m.value
        ctx.add(path, "warning", "respelled", f"{d.HAMI_NUMA_BIND} {d.describe_change(m, 'HAMi')}")


def hami_ranges(lists: Iterable[tuple[str, list[Any]]], ctx: Ctx) -> None:
    """HAMi percentage resources must be 0-100 (its webhook rejects others, research §3.2).
    ``lists``: (name, items) of the container lists."""
    for list_name, items in lists:
        for i, c in enumerate(items):
            res = c.get("resources") if is_map(c) else None
            if not is_map(res):
                continue
            for section in ("limits", "requests"):
                values = res.get(section)
                if not is_map(values):
                    continue
                for name in d.HAMI_PERCENT_RESOURCES:
                    if name not in values:
                        continue
                    try:
                        v = to_core_units(name, values[name])
                    except InvalidInput:
                        continue  # reported as invalid-quantity already
                    if v > HAMI_PERCENT_MAX:
                        path = ctx.path(f"spec.{list_name}[{i}].resources.{section}[{name}]")
                        ctx.add(
                            path,
                            "error",
                            "out-of-range",
                            hami_range_message(name, clip(repr(values[name]))),
                        )


def hami_release_checks(
    annotations: dict[str, str], gpu_policy: tuple[str, ...], versions: SchedulerVersions, ctx: Ctx
) -> tuple[tuple[str, ...], tuple[int, int, int] | None]:
    """What the configured HAMi release reads: GPU policy tokens and chains it knows (else
    ``unsupported-value``), and ``hami.io/device-scoring-weights`` (v2.10.0+). Returns the
    GPU policy chain (empty when the release cannot read it) and the pod's weights."""
    if gpu_policy:
        gpu_policy = _gpu_policy_release(annotations[d.HAMI_GPU_POLICY], gpu_policy, versions, ctx)
    key = d.HAMI_SCORING_WEIGHTS
    if key in annotations and _readable(key, annotations, ctx):
        return gpu_policy, _scoring_weights(annotations[key], versions, ctx)
    return gpu_policy, None


def _gpu_policy_release(
    raw: str, tokens: tuple[str, ...], versions: SchedulerVersions, ctx: Ctx
) -> tuple[str, ...]:
    """HAMi before v2.10.0 compares the whole value with one policy name (gpu_policy.go
    Less, nvidia/device.go Fit): an unknown token or any chain silently means spread."""
    known = versions.hami_gpu_policies()
    late = [t for t in tokens if t not in known]
    chain = len(tokens) > 1 and versions.hami < v.HAMI_CHAIN_SINCE
    if not late and not chain:
        return tokens
    what = (
        late_token_words(clip_repr(late[0]), v.HAMI_GPU_POLICY_SINCE[late[0]])
        if late
        else chain_words()
    )
    message = hami_release_message(clip_repr(raw), what, versions)
    ctx.add(ctx.ann(d.HAMI_GPU_POLICY), "error", "unsupported-value", message)
    return ()


def parse_scoring_weights(value: str) -> tuple[int, int, int] | str:
    """(slot, core, memory) as HAMi's ParseDeviceScoringWeights reads them, or why it
    refuses the value (pkg/util/device_scoring_weights.go, v2.10.0)."""
    parts = value.split(",")
    if len(parts) != 3:
        return "expected slot, core and memory weights"
    weights: dict[str, int] = {}
    for part in parts:
        key, eq, text = part.strip().partition("=")
        if not eq:
            return "expected key=value entries"
        key = key.strip()
        if key in weights:
            return f"duplicate {clip_repr(key)} weight"
        number = go_parse_int(text.strip())
        if number is None:
            return f"{clip_repr(key)} weight must be an integer"
        if number < 0:
            return f"{clip_repr(key)} weight must not be negative"
        if key not in ("slot", "core", "memory"):
            return f"unknown weight {clip_repr(key)}"
        weights[key] = number
    if not any(weights.values()):
        return "at least one weight must be positive"
    return weights["slot"], weights["core"], weights["memory"]


def go_parse_int(text: str) -> int | None:
    """Go's strconv.ParseInt(text, 10, 64): an optional sign, ASCII digits, int64 range."""
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body or not body.isascii() or not body.isdigit():
        return None
    number = int(text)
    return number if -(2**63) <= number < 2**63 else None


def _scoring_weights(
    raw: str, versions: SchedulerVersions, ctx: Ctx
) -> tuple[int, int, int] | None:
    """The pod's weights as HAMi reads them; None (reported) when it does not."""
    path = ctx.ann(d.HAMI_SCORING_WEIGHTS)
    if versions.hami < v.HAMI_SCORING_WEIGHTS_SINCE:
        ctx.add(
            path,
            "warning",
            "no-effect",
            f"{d.HAMI_SCORING_WEIGHTS} is read from HAMi "
            f"{v.show(v.HAMI_SCORING_WEIGHTS_SINCE)}; the configured HAMi "
            f"{v.show(versions.hami)} (schedulerVersions.hami) ignores it",
        )
        return None
    parsed = parse_scoring_weights(raw)
    if not isinstance(parsed, str):
        return parsed
    ctx.add(path, "error", "invalid-value", scoring_weights_message(clip_repr(raw), parsed))
    return None
