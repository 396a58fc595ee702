"""Ranking of the `fits` nodes by the pod's own scheduler (docs/contracts.md: explain -o json ``ranking``/``score``).

- Volcano numa-aware (research §2.3, seeds 001/002): ``weight * (100 - 100*n/max)`` with
  Volcano's integer ``NormalizeScore`` (``100*n // max``), for Guaranteed pods with a policy;
  n = NUMA nodes of the node's admitted hint, max = the largest n over the `fits` nodes.
- Koordinator (seed 000, research §1.3): ``NodeNUMAResource weight * ((100 - n*10) +
  10*(requested/allocated))`` with the CPU ratio of :func:`core.scoring.koordinator.cpu_utilisation`,
  plus NodeResourcesFitPlus (the node's requested amount from its bound pods, as
  kube-scheduler's NodeInfo counts them) and ScarceResourceAvoidance times their plugin
  weights when :class:`ScoringArgs` enables them.
- HAMi (HAMi's code at 4707fb0 where seed 003 simplifies, :mod:`core.scoring.hami_scores`,
  cards :mod:`core.scoring.hami`): the node score from what bound pods hold, in hundredths
  (750 = 7.5); binpack ranks the highest first, spread the lowest first; a GPU pod's node
  that HAMi would filter (unregistered, no card fits) goes last. GPU pods also get the
  cards HAMi would choose, with their scores, in the verdict's reason (:func:`choose_gpus_for`
  returns them as data).
- Default scheduler: a LeastNUMANodes-like order, ``score = max(0, 100 - 10*n) + 5 if the hint
  is preferred``: fewer NUMA nodes first, then preferred hints.

When a verdict has no NUMA placement (policy none: the kubelet does not align), the pod may use
every NUMA node of the node, so n is the node's zone count (at least 1). Ties go by node name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

from core.errors import InvalidInput
from core.model import NodeTopology, NodeVerdict, PodIntent
from core.scoring import hami
from core.scoring import koordinator as koord
from core.scoring.args import FIT_PLUS, SCARCE, ScoringArgs

# ============================================================================ ranking

Ranked = tuple[tuple[Any, ...], NodeVerdict]


def _numa_count(verdict: NodeVerdict, node: NodeTopology | None) -> int:
    if verdict.numa:
        return len(verdict.numa)
    return max(1, len(node.zones)) if node is not None else 1


def _with(verdict: NodeVerdict, score: int, note: str) -> NodeVerdict:
    reason = f"{verdict.reason}; {note}" if verdict.reason else note
    return replace(verdict, score=score, reason=reason)


def _rank_volcano(
    intent: PodIntent,
    fits: Sequence[NodeVerdict],
    nodes: Mapping[str, NodeTopology],
    args: ScoringArgs,
) -> list[Ranked]:
    if intent.policy in (None, "none") or intent.qos != "Guaranteed":
        note = "volcano numa-aware scores only Guaranteed pods with a topology policy: 0"
        return [((0, v.name), _with(v, 0, note)) for v in fits]
    counts = {v.name: _numa_count(v, nodes.get(v.name)) for v in fits}
    highest = max(counts.values(), default=0)
    ranked = []
    for v in fits:
        n = counts[v.name]
        # util.NormalizeScore(100, reverse=true): 100 - 100*n/max in int64, then times weight.
        score = args.volcano_weight * (100 - (100 * n // highest if highest else 0))
        note = f"volcano numa-aware: {args.volcano_weight} * (100 - 100*{n}/{highest}) = {score}"
        ranked.append(((-score, v.name), _with(v, score, note)))
    return ranked


def _koord_parts(
    intent: PodIntent, verdict: NodeVerdict, node: NodeTopology | None, args: ScoringArgs
) -> tuple[int, str]:
    n = _numa_count(verdict, node)
    if node is None:
        requested, allocated = 0, 0
    else:
        requested, allocated = koord.cpu_utilisation(node, intent.pod_requests.get("cpu", 0))
    numa = koord.numa_score(n, requested, allocated)
    total = args.numa_weight * numa
    parts = [f"NUMA (100-{n}*10)+10*cpu {requested}m/{allocated}m = {numa} x{args.numa_weight}"]
    if args.fit_plus is not None and node is not None:
        fit, text = koord.fitplus_parts(args.fit_plus, intent.containers, intent.pod_requests, node)
        total += args.fit_plus_weight * fit
        parts.append(f"{FIT_PLUS} {text} x{args.fit_plus_weight}")
    if args.scarce_resources is not None and node is not None:
        scarce, text = koord.scarce_parts(args.scarce_resources, intent.pod_requests, node)
        total += args.scarce_weight * scarce
        parts.append(f"{SCARCE} {text} x{args.scarce_weight}")
    return total, "koordinator: " + " + ".join(parts) + f" = {total}"


def _rank_koordinator(
    intent: PodIntent,
    fits: Sequence[NodeVerdict],
    nodes: Mapping[str, NodeTopology],
    args: ScoringArgs,
) -> list[Ranked]:
    ranked = []
    for v in fits:
        score, note = _koord_parts(intent, v, nodes.get(v.name), args)
        ranked.append(((-score, v.name), _with(v, score, note)))
    return ranked


def _gpu_requests(intent: PodIntent, *, init: bool = False) -> list[hami.GpuRequest]:
    """The GPU requests of the app containers, or of the init containers (HAMi counts every
    entry of spec.initContainers, sidecars too, as init: score.go numInitContainers)."""
    return hami.container_gpu_requests(
        [(c.requests, c.limits) for c in intent.containers if (c.kind != "app") == init]
    )


def _cards(node: NodeTopology) -> tuple[hami.Card, ...]:
    return hami.node_cards(node.annotations, node.gpu_usage)


def choose_gpus_for(
    intent: PodIntent, node: NodeTopology, args: ScoringArgs | None = None
) -> hami.Choice:
    """The cards HAMi would give ``intent`` on ``node`` (empty with a reason when HAMi
    registered no cards there or none fit). Raises InvalidInput for malformed HAMi annotations."""
    args = args or ScoringArgs()
    requests, init = _gpu_requests(intent), _gpu_requests(intent, init=True)
    if not requests and not init:
        return hami.Choice((), "the pod requests no GPU")
    cards = _cards(node)
    if not cards:
        return hami.Choice((), f"node unregistered: no {hami.REGISTER_ANNOTATION} annotation")
    raw_pairs = node.annotations.get(hami.PAIR_SCORE_ANNOTATION)
    pairs = hami.parse_pair_scores(raw_pairs) if raw_pairs else {}
    policy = hami.gpu_policy_of(intent.hami_gpu_policy, ",".join(args.hami_gpu_policy))
    policy = tuple(t for p in policy for t in p.split(","))
    # HAMi v2.10.0 takes the weights from the pod (score.go GetDeviceScoringWeightsByPod)
    own = intent.hami_weights
    weights = hami.ScoringWeights(*map(float, own)) if own else args.hami_weights
    return hami.choose_pod_gpus(cards, init, requests, policy, pairs, weights)


def _hami_node(
    intent: PodIntent, node: NodeTopology | None, args: ScoringArgs
) -> tuple[float, bool, str]:
    """(HAMi node score, HAMi would filter the node out, note)."""
    requests = _gpu_requests(intent) or _gpu_requests(intent, init=True)
    if node is None:
        return 0.0, False, "node not in the inventory"
    try:
        cards = _cards(node)
    except InvalidInput as exc:
        # A register HAMi cannot decode leaves the node without GPUs for HAMi.
        note = f"hami node score 0 (ignored: {exc})"
        return (
            0.0,
            bool(requests),
            note + (f"; HAMi would filter the node out: {exc}" if requests else ""),
        )
    if not cards:
        note = f"hami node score 0 (no {hami.REGISTER_ANNOTATION}: HAMi has no cards here)"
        if requests:
            return 0.0, True, f"{note}; HAMi would filter the node out: node unregistered"
        return 0.0, False, note
    score, note = hami.node_score(cards), hami.node_score_text(cards, requests)
    if not requests:
        return score, False, note
    try:
        choice = choose_gpus_for(intent, node, args)
    except InvalidInput as exc:  # a malformed hami.io/node-nvidia-score
        choice = hami.Choice((), str(exc))
    if not choice.cards:
        return score, True, f"{note}; HAMi would filter the node out: {choice.reason}"
    return score, False, f"{note}; cards {','.join(choice.cards)} ({'; '.join(choice.notes)})"


def _rank_hami(
    intent: PodIntent,
    fits: Sequence[NodeVerdict],
    nodes: Mapping[str, NodeTopology],
    args: ScoringArgs,
) -> list[Ranked]:
    policy = hami.node_policy_of(intent.hami_node_policy, args.hami_node_policy)
    sign = 1 if policy == "spread" else -1
    ranked = []
    for v in fits:
        score, filtered, note = _hami_node(intent, nodes.get(v.name), args)
        scaled = hami.to_hundredths(score)
        note = f"{note}; node policy {policy} ({'lower' if sign > 0 else 'higher'} first)"
        ranked.append(((filtered, sign * scaled, v.name), _with(v, scaled, note)))
    return ranked


def _rank_default(
    intent: PodIntent,
    fits: Sequence[NodeVerdict],
    nodes: Mapping[str, NodeTopology],
    args: ScoringArgs,
) -> list[Ranked]:
    ranked = []
    for v in fits:
        n = _numa_count(v, nodes.get(v.name))
        score = max(0, 100 - 10 * n) + (5 if v.preferred else 0)
        note = f"least NUMA nodes: {n} NUMA node(s){', preferred' if v.preferred else ''} = {score}"
        ranked.append(((-score, v.name), _with(v, score, note)))
    return ranked


_RANKERS: Final[dict[str, Callable[..., list[Ranked]]]] = {
    "volcano": _rank_volcano,
    "koordinator": _rank_koordinator,
    "hami": _rank_hami,
    "default": _rank_default,
}


def rank(
    intent: PodIntent,
    nodes: Sequence[NodeTopology],
    verdicts: Sequence[NodeVerdict],
    args: ScoringArgs | None = None,
) -> list[NodeVerdict]:
    """The `fits` verdicts with ``score`` set, best first, by ``intent.scheduler``'s scoring."""
    fits = [v for v in verdicts if v.verdict == "fits"]
    by_name = {n.name: n for n in nodes}
    ranker = _RANKERS.get(intent.scheduler, _rank_default)
    ranked = ranker(intent, fits, by_name, args or ScoringArgs())
    return [verdict for _, verdict in sorted(ranked, key=lambda item: item[0])]
