"""The figures of benchmarks/churn.py against issue 14's targets, and its Markdown."""

from __future__ import annotations

import statistics
from typing import Any

import server as bench

# (figure, key in figures(), target text, test); None measured = "not run".
TARGETS: tuple[tuple[str, str, str, Any], ...] = (
    ("reviews/s under the highest rate / no churn", "rps_ratio", ">= 0.9", lambda v: v >= 0.9),
    ("p99 under the highest rate / no churn", "p99_ratio", "<= 1.5", lambda v: v <= 1.5),
    ("large: reviews/s at nodes/60 events/s / no churn", "large_rps_ratio", ">= 0.8",
     lambda v: v >= 0.8),
    ("large: p99 at nodes/60 events/s / no churn", "large_p99_ratio", "<= 2", lambda v: v <= 2),
    ("NRT change visible in decisions, p99, no churn (s)", "visible_idle_p99_s", "<= 0.5",
     lambda v: v <= 0.5),
    ("NRT change visible in decisions, p99, under churn (s)", "visible_churn_p99_s", "<= 1",
     lambda v: v <= 1),
    ("ready from the API (s)", "ready_api_s", "<= 3", lambda v: v <= 3),
    ("ready from a JSON file (s)", "ready_file_s", "<= 2", lambda v: v <= 2),
    ("large: ready from a JSON file (s)", "large_ready_file_s", "<= 20", lambda v: v <= 20),
    ("RSS per worker, peak (MiB)", "rss_mib", "<= 150", lambda v: v <= 150),
    ("large: RSS per worker, peak (MiB)", "large_rss_mib", "<= 1024", lambda v: v <= 1024),
    ("recovery after the outage: change visible (s)", "recovery_s", "<= 5", lambda v: v <= 5),
    ("/healthz p99 under the highest rate / no churn", "healthz_p99_ratio", "", None),
    ("p99 on the wire (--wire) under the highest rate / no churn", "wire_p99_ratio", "", None),
)  # fmt: skip


def _wire_p99(point: dict[str, Any]) -> float | None:
    return point["reviews"].get("wire", {}).get("p99_ms")


def pair_ratios(
    base: dict[str, Any], last: dict[str, Any]
) -> tuple[float, float, float, float | None]:
    """reviews/s, p99, /healthz p99 and (--wire) the p99 on the wire at ``last`` as
    ratios to ``base`` (no churn)."""
    rps = last["reviews"]["reviews_per_s"] / max(base["reviews"]["reviews_per_s"], 1e-9)
    p99 = last["reviews"]["p99_ms"] / max(base["reviews"]["p99_ms"], 1e-9)
    health = last["healthz"]["p99_ms"] / max(base["healthz"]["p99_ms"], 1e-9)
    on_wire, wire_base = _wire_p99(last), _wire_p99(base)
    wire = round(on_wire / max(wire_base, 1e-9), 2) if on_wire and wire_base else None
    return round(rps, 3), round(p99, 2), round(health, 2), wire


def _ratios(run: dict[str, Any]) -> tuple[float, float, float, float | None]:
    """The headline ratios: the median of each over the run's pairs (no churn, then the
    highest rate, measured back to back), else of the one sweep."""
    pairs = run.get("pairs") or [pair_ratios(run["points"][0], run["points"][-1])]
    rps, p99, health, wire = zip(*pairs, strict=True)
    wired = [w for w in wire if w is not None]
    return (statistics.median(rps), statistics.median(p99), statistics.median(health),
            statistics.median(wired) if wired else None)  # fmt: skip


def _p99(samples: list[float | None], timeout: float) -> float | str:
    """p99 of the flips; "> T" when one was not visible within the probe's timeout."""
    if None in samples or not samples:
        return f"> {timeout:g}"
    return bench.percentile(samples, 99)


def figures(result: dict[str, Any]) -> dict[str, float | str | None]:
    api, large = result["api"], result.get("large")
    nodes = str(result["args"]["nodes"])
    rps, p99, health, wire = _ratios(api)
    out: dict[str, float | str | None] = {
        "rps_ratio": rps,
        "p99_ratio": p99,
        "healthz_p99_ratio": health,
        "wire_p99_ratio": wire,
        "visible_idle_p99_s": _p99(api["visible_idle_s"], api["probe_timeout_s"]),
        "visible_churn_p99_s": _p99(api["visible_churn_s"], api["probe_timeout_s"]),
        "ready_api_s": api["ready_s"],
        "ready_file_s": result["file"][nodes]["ready_s"],
        "rss_mib": max(api["rss_mib_peak"], result["file"][nodes]["rss_mib"]),
        "recovery_s": api["recovery"]["change_visible_s"] or "> 300",
        "large_rps_ratio": None,
        "large_p99_ratio": None,
        "large_ready_file_s": None,
        "large_rss_mib": None,
    }
    if large is not None:
        big = str(result["args"]["large_nodes"])
        out["large_rps_ratio"], out["large_p99_ratio"], *_ = _ratios(large)
        out["large_ready_file_s"] = result["file"][big]["ready_s"]
        out["large_rss_mib"] = max(large["rss_mib_peak"], result["file"][big]["rss_mib"])
    return out


def _rate_table(run: dict[str, Any]) -> list[str]:
    base = run["points"][0]
    helpers = ""
    if run.get("helpers_rss_mib_peak"):
        helpers = (
            f"; the inventory process {run['helpers_rss_mib_ready']} MiB, peak "
            f"{run['helpers_rss_mib_peak']} MiB"
        )
    lines = [
        f"{run['nodes']} nodes, watched in {run.get('watched') or '?'}; ready from the API "
        f"in {run['ready_s']} s (RSS {run['rss_mib_ready']} MiB; peak {run['rss_mib_peak']} "
        f"MiB{helpers}):",
        "",
        "| NRT events/s (observed) | reviews/s | ratio | p99 ms | p99 ratio | /healthz p99 ms "
        "| worker CPU ms/review | non-2xx + socket errors "
        "| on the wire: p99 ms (ratio), max, p99 as wrk counts it |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for p in run["points"]:
        r, h = p["reviews"], p["healthz"]
        ratio = r["reviews_per_s"] / max(base["reviews"]["reviews_per_s"], 1e-9)
        p99r = r["p99_ms"] / max(base["reviews"]["p99_ms"], 1e-9)
        on_wire, wire_base = _wire_p99(p), _wire_p99(base)
        wire = ""
        if on_wire and wire_base:
            w = p["reviews"]["wire"]
            wire = f"{on_wire:.1f} ({on_wire / wire_base:.1f}x), {w['max_ms']:.0f}"
            wire += f", {w['p99_as_wrk_ms']:.1f}" if "p99_as_wrk_ms" in w else ""
        lines.append(
            f"| {p['rate']:g} ({p['observed_rate']:g}) | {r['reviews_per_s']:.0f} | {ratio:.2f} "
            f"| {r['p99_ms']:.1f} | {p99r:.1f}x | {h['p99_ms']:.1f} "
            f"| {r['server_cpu_ms_per_review']} | {r['non_2xx'] + r['socket_errors']} | {wire} |"
        )
    if len(run.get("pairs") or ()) > 1:
        shown = "; ".join(f"{r:.2f}, {p:.1f}x" for r, p, *_ in run["pairs"])
        lines += [
            "",
            f"No churn then {run['points'][-1]['rate']:g} events/s, back to back, "
            f"{len(run['pairs'])} times (reviews/s ratio, p99 ratio): {shown}; the figures "
            "below are their medians.",
        ]
    lines += [
        "",
        f"NRT change visible in decisions (s), no churn: {_samples(run['visible_idle_s'])}; "
        f"at {run['points'][-1]['rate']:g} events/s: {_samples(run['visible_churn_s'])}.",
    ]
    return lines


def _samples(values: list[float | None]) -> str:
    if None in values:
        return f"not visible within the probe's timeout (after {len(values) - 1} flips)"
    ordered = sorted(v for v in values if v is not None)
    return (
        f"p50 {bench.percentile(ordered, 50):.2f}, p99 {bench.percentile(ordered, 99):.2f}, "
        f"max {ordered[-1]:.2f} ({len(ordered)} flips)"
    )


def markdown(result: dict[str, Any]) -> str:
    m, a = result["machine"], result["args"]
    lines = [
        "# Inventory under churn (benchmarks/churn.py)",
        "",
        f"Machine: {m['nproc']} CPUs ({m['cpu']}), load average at start "
        f"{m['loadavg_at_start']:.2f}. One worker; wrk {a['threads']} threads, "
        f"{a['connections']} connections, {a['duration']} s per rate, /validate with every "
        "pod different; /healthz paced at 50/s beside it."
        + (
            " The worker alone on CPU 0, the test API server and wrk on the others (--pin)."
            if a.get("pin")
            else ""
        )
        + (
            f" serve --inventory-process={a['inventory_process']}."
            if "inventory_process" in a  # results of the code before issue 31
            else ""
        ),
        "",
        *_rate_table(result["api"]),
    ]
    if "large" in result:
        lines += ["", *_rate_table(result["large"])]
    rec = result["api"]["recovery"]
    lines += [
        "",
        f"Recovery after a {rec['outage_s']:g} s outage (connections refused): watches "
        f"resumed {rec['watches_resumed_s']} s, the change written during the outage "
        f"visible {rec['change_visible_s']} s after the API came back.",
        "Ready from a JSON List file: "
        + ", ".join(
            f"{n} nodes {f['ready_s']} s ({f['bytes'] / 1e6:.1f} MB, RSS {f['rss_mib']} MiB)"
            for n, f in result["file"].items()
        )
        + f"; one node (the startup floor: Python, imports, TLS) {result['startup_floor_s']} s.",
        "",
        "| figure | measured | target | met |",
        "|---|---:|---:|---|",
    ]
    for label, key, target, test in TARGETS:
        value = result["figures"].get(key)
        if value is None:
            lines.append(f"| {label} | not run | {target} | |")
        elif isinstance(value, str):
            lines.append(f"| {label} | {value} | {target} | NO |")
        else:
            met = "" if test is None else ("yes" if test(value) else "NO")
            lines.append(f"| {label} | {value:g} | {target} | {met} |")
    return "\n".join(lines) + "\n"
