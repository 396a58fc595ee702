"""The HAMi annotations (node and GPU policies, NUMA bind) and percentage resources."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from core.errors import InvalidInput
from core.intent import dialects as d
from core.intent.annotations import short_value
from core.intent.findings import Ctx, change_code
from core.intent.limits import clip, clip_repr
from core.intent.rules import (
    HAMI_GPU,
    HAMI_NODE,
    HAMI_NUMA_BIND,
    HAMI_PERCENT_MAX,
    hami_range_message,
    rule,
)
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
