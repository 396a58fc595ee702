"""Per-node verdicts for a pod over a snapshot (docs/contracts.md: Verdicts): fits, no-room-now, never-fits,
policy-mismatch, not-selected, unknown-topology.

Node selection (core.feasibility.selection) is computed per label with big-int bitsets,
then counted per topology class by the kernel (``class_selection``; with every node
selected, once per snapshot); compatibility and the simulation (core.feasibility.compat)
once per distinct node policy set (``compat.node_key``, grouped once per snapshot); the
kernel runs once per topology class for the "node empty" run (``Kernel.scan``: the classes
that never fit in one call, when only the first fit is wanted) and once per shape of the
classes whose verdict depends on usage. A failure's reason is worded only where a verdict
shows it (the near miss, full verdicts).
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import NamedTuple

from core.feasibility import compat
from core.feasibility import kernel as _selected_impl
from core.feasibility.bitsets import expand
from core.feasibility.classes import UNPLANNED, VERDICT, classes_of
from core.feasibility.codes import (
    F_CPU_ONLY,
    F_EMPTY,
    F_EXCLUSIVE,
    F_KOORD_HINTS,
    F_KOORD_REQUESTS,
    F_POD_SCOPE,
    R_TOO_LARGE,
    KernelResult,
    ScanResult,
)
from core.feasibility.reasons import render_reason
from core.feasibility.selection import selection
from core.frozen import fast_init
from core.model import POLICY_NONE, VERDICTS, NodeTopology, NodeVerdict, PodIntent
from core.snapshot.snapshot import POLICY_CODES, Demand, Snapshot

_NEAR_MISS_ORDER = ("no-room-now", "never-fits", "policy-mismatch")
_NEVER = _NEAR_MISS_ORDER.index("never-fits")


@fast_init
@dataclass(frozen=True, slots=True)
class Evaluation:
    """Verdicts in snapshot order (partial when ``partial``), counts by verdict, the best
    near-miss for a denial message, and how many selected, compatible nodes lack NUMA data."""

    verdicts: tuple[NodeVerdict, ...]
    counts: Mapping[str, int]
    total: int
    partial: bool = False
    near_miss: NodeVerdict | None = None
    unknown_compatible: int = 0
    rule: str = ""
    # Topology classes whose verdicts read the nodes' usage (a cached answer is valid
    # while their Snapshot.usage_gen is unchanged; everything else is in the structure).
    usage_classes: frozenset[int] = frozenset()


class _ShapeVerdict(NamedTuple):
    """One verdict shared by a class or a shape (a NamedTuple: object creation, mostly
    frozen dataclasses' ``object.__setattr__`` per field, was 22-35% of the scan's cost)."""

    verdict: str
    numa: tuple[int, ...] = ()
    preferred: bool = False
    reason: str = ""
    compatible: bool = True
    # A kernel failure, worded only when shown (render_reason for every class was ~17% of
    # an impossible pod's scan): the result, the policy, the node's index (its record is
    # read then: a churned node's usage is decoded on read, columns.Nodes), whether empty.
    failure: tuple[KernelResult, str, int, bool] | None = None


# What compatibility and the simulation decide for a node's policy set: a verdict for the
# whole class, or the kernel run (policy, policy code, flags).
_Plan = _ShapeVerdict | tuple[str, int, int]


class _Evaluator:
    """Verdicts per topology class (compatibility, the "node empty" run) and per shape
    (the run with current usage)."""

    def __init__(self, intent: PodIntent, snap: Snapshot, module: ModuleType) -> None:
        self.intent = intent
        self.snap = snap
        self.module = module
        self.kernel = snap.kernel(module)
        self.classes = classes_of(snap, module, self.kernel)
        self.demand = Demand.build(intent, snap)
        self.runs: dict[int, tuple[str, int, int]] = {}  # topology -> (policy, code, flags)
        self.usage: set[int] = set()  # classes whose verdict depends on usage
        # Per node policy group: the 44 classes of the benchmark's 10,000 nodes have 11;
        # compat's calls per class were ~15% of an impossible pod's scan. ``codes`` and
        # ``flags``: the plans as Kernel.scan reads them. Shared by the snapshot's
        # evaluations of intents with the same compat.plan_key.
        self.plans, self.codes, self.flags = self.classes.plans_for(intent)

    def plan(self, t: int) -> _Plan:
        """Compatibility and the simulation for class t's node policy group."""
        g = self.classes.group_of[t]
        plan = self.plans[g]
        if plan is None:
            plan = self.plans[g] = self._plan(self.classes.group_nodes[g])
        # Written each time, flags before the code: another thread's evaluation may
        # share these (the same values) and scan as soon as the code is set.
        if isinstance(plan, _ShapeVerdict):
            self.codes[g] = VERDICT
        else:
            self.flags[g] = plan[2]
            self.codes[g] = plan[1]
        return plan

    def topology(self, t: int, i: int, empty: KernelResult | None = None) -> _ShapeVerdict | None:
        """The verdict shared by every node of topology class t, or None when it depends
        on each node's usage. ``i``: a node of the class; ``empty``: its "node empty" run
        if Kernel.scan made it."""
        snap = self.snap
        plan = self.plan(t)
        if isinstance(plan, _ShapeVerdict):
            return plan
        policy, code, flags = plan
        self.usage.add(t)  # from here on, topo_monotone or the shapes' usage decide
        if empty is None:
            # The node's own shape: a class may list dead shapes first (no nodes,
            # core/snapshot/delta.py), and scanning past them cost O(dead) per review.
            empty = self.kernel.check(self.demand, snap.shape_of[i], code, flags | F_EMPTY)
        if empty.reason == R_TOO_LARGE:
            return _ShapeVerdict(
                "unknown-topology", reason=f"{empty.need} NUMA nodes: left to kubelet"
            )
        if not empty.admitted and snap.topo_monotone[t]:
            return _ShapeVerdict("never-fits", failure=(empty, policy, i, True))
        self.runs[t] = (policy, code, flags) if empty.admitted else (policy, code, -1 - flags)
        return None

    def _plan(self, node: NodeTopology) -> _Plan:
        """Compatibility and the simulation for nodes with ``node``'s policy set."""
        ok, why = compat.compatible(self.intent, node)
        if not node.zones:
            return _ShapeVerdict("unknown-topology", reason="no NUMA data", compatible=ok)
        if not ok:
            return _ShapeVerdict("policy-mismatch", reason=why, compatible=False)
        sim = compat.simulation(self.intent, node)
        if sim.skip:
            return _ShapeVerdict("fits", reason=sim.skip)
        # Resources that no node advertises at all are not checked here: the kubelet drops
        # extended resources missing from the node (removeMissingExtendedResources,
        # pkg/kubelet/lifecycle/predicate.go) and scheduler extenders manage them (HAMi's
        # nvidia.com/gpumem and gpucores). A false denial is worse than a missed one.
        code = POLICY_CODES[sim.policy]
        flags = (
            (F_POD_SCOPE if sim.scope == "pod" else 0)
            | (F_EXCLUSIVE if sim.exclusive else 0)
            | (F_CPU_ONLY if sim.cpu_only else 0)
            | (F_KOORD_HINTS if sim.koord_hints else 0)
            | (F_KOORD_REQUESTS if sim.koord_requests else 0)
        )
        return sim.policy, code, flags

    def shape(self, s: int) -> _ShapeVerdict:
        """The verdict for the nodes of shape s (their topology class admits when empty)."""
        snap = self.snap
        rep = snap.shape_rep[s]
        node = snap.nodes.base[rep]  # zone ids only: usage never changes them
        policy, code, flags = self.runs[snap.topo_of[s]]
        empty_fails = flags < 0
        flags = -1 - flags if empty_fails else flags
        now = self.kernel.check(self.demand, s, code, flags)
        if now.admitted:
            return _ShapeVerdict("fits", self._ids(node, now.mask), bool(now.preferred))
        if empty_fails:  # usage above allocatable in the inventory: judge it as reported
            empty = self.kernel.check(self.demand, s, code, flags | F_EMPTY)
            return _ShapeVerdict("never-fits", failure=(empty, policy, rep, True))
        return _ShapeVerdict("no-room-now", failure=(now, policy, rep, False))

    def reason(self, v: _ShapeVerdict) -> str:
        """``v``'s reason, worded now if it is a kernel failure."""
        if v.failure is None:
            return v.reason
        result, policy, i, empty = v.failure
        node = self.snap.nodes[i]
        return render_reason(
            result,
            policy=policy,
            intent=self.intent,
            demand=self.demand,
            node=node,
            names=self.snap.packed.res_names,
            empty=empty,
        )

    @staticmethod
    def _ids(node: NodeTopology, mask: int) -> tuple[int, ...]:
        ids = sorted(z.id for z in node.zones)
        return tuple(ids[i] for i in range(len(ids)) if (mask >> i) & 1)


def _rule(intent: PodIntent) -> str:
    if intent.policy and intent.policy != POLICY_NONE:
        return f"{intent.scheduler} policy {intent.policy}"
    return "the nodes' kubelet topology manager policies"


def evaluate(
    intent: PodIntent, snapshot: Snapshot, *, full: bool = True, impl: ModuleType | None = None
) -> Evaluation:
    """Verdicts for every node (``full``), or stop at the first node that fits.
    ``impl`` picks a kernel module (tests compare both); default: core.feasibility.kernel."""
    ev = _Evaluator(intent, snapshot, impl or _selected_impl)
    by_name, by_selector, by_affinity = selection(intent, snapshot)
    selected = by_name & by_selector & by_affinity
    if selected == snapshot.all_bits:
        inside, outside, firsts = ev.classes.inside, ev.classes.outside, ev.classes.firsts
    else:
        inside, outside, firsts = ev.module.class_selection(
            selected, snapshot.topo_bits, snapshot.shape_of, snapshot.topo_of
        )
    tally = _Tally(ev, full)
    t, n_topo = 0, len(inside)
    while t < n_topo:
        empty = None
        if not full:  # the classes that never fit in one kernel call, up to the next other
            t, empty = tally.scan(t, inside, outside, firsts)
            if t == n_topo:
                break
            if ev.codes[ev.classes.group_of[t]] == UNPLANNED:
                ev.plan(t)
                continue  # and scan again from t with its group's plan
        cur, t = t, t + 1
        tally.counts["not-selected"] += outside[cur]
        n = inside[cur]
        if not n:
            continue
        shared = ev.topology(cur, firsts[cur], empty)
        if shared is not None:
            if tally.add(shared, n, firsts[cur], snapshot.topo_shapes[cur]):
                return tally.early()
            continue
        for s in snapshot.topo_shapes[cur]:
            sel = expand(snapshot.shape_bits[s]) & selected
            if sel and tally.add(ev.shape(s), sel.bit_count(), (sel & -sel).bit_length() - 1, (s,)):
                return tally.early()
    verdicts: tuple[NodeVerdict, ...] = ()
    if full:
        verdicts = _all_verdicts(ev, tally.results, by_name, by_selector, selected)
    return tally.done(verdicts)


class _Tally:
    """Counts, the near-miss and per-shape results while evaluating."""

    def __init__(self, ev: _Evaluator, full: bool) -> None:
        self.ev = ev
        self.usage = ev.usage
        self.intent = ev.intent
        self.snap = ev.snap
        self.full = full
        self.counts = dict.fromkeys(VERDICTS, 0)
        self.results: dict[int, _ShapeVerdict] = {}
        self.near: tuple[int, int, _ShapeVerdict] | None = None
        self.unknown_ok = 0
        self.first_fit: NodeVerdict | None = None

    def scan(
        self, t: int, inside: array[int], outside: array[int], firsts: array[int]
    ) -> tuple[int, KernelResult | None]:
        """Kernel.scan from class t, its never-fits classes recorded as ``add`` would;
        the class it stopped at and its "node empty" run if made."""
        ev = self.ev
        c = ev.classes
        r: ScanResult = ev.kernel.scan(
            ev.demand, t, inside, outside, firsts, self.snap.shape_of,
            c.group_of, ev.codes, ev.flags, c.monotone,
        )  # fmt: skip
        self.counts["not-selected"] += r.not_selected
        self.counts["never-fits"] += r.never_fits
        self.usage.update(r.usage)
        if r.near >= 0 and (self.near is None or (_NEVER, firsts[r.near]) < self.near[:2]):
            first = firsts[r.near]
            policy = ev.plan(r.near)[0]  # type: ignore[index]
            failure = (r.near_result, policy, first, True)
            self.near = (_NEVER, first, _ShapeVerdict("never-fits", failure=failure))
        return r.stop, r.stop_result

    def add(self, v: _ShapeVerdict, n: int, first: int, shapes: Sequence[int]) -> bool:
        """Record v for ``n`` selected nodes, the first of them ``first``; True when the
        caller may stop."""
        self.counts[v.verdict] += n
        if self.full:
            for s in shapes:
                self.results[s] = v
        if v.verdict == "unknown-topology" and v.compatible:
            self.unknown_ok += n
        if v.verdict in _NEAR_MISS_ORDER:
            rank = _NEAR_MISS_ORDER.index(v.verdict)
            if self.near is None or (rank, first) < self.near[:2]:
                self.near = (rank, first, v)
        if v.verdict == "fits" and not self.full:
            self.first_fit = _node_verdict(self.snap.nodes[first].name, v, self.ev.reason(v))
            return True
        return False

    def early(self) -> Evaluation:
        assert self.first_fit is not None
        return Evaluation(
            (self.first_fit,),
            self.counts,
            len(self.snap.nodes),
            True,
            None,
            0,
            _rule(self.intent),
            frozenset(self.usage),
        )

    def done(self, verdicts: tuple[NodeVerdict, ...]) -> Evaluation:
        near = None
        if self.near is not None:
            v = self.near[2]
            near = _node_verdict(self.snap.nodes[self.near[1]].name, v, self.ev.reason(v))
        return Evaluation(
            verdicts,
            self.counts,
            len(self.snap.nodes),
            not self.full,
            near,
            self.unknown_ok,
            _rule(self.intent),
            frozenset(self.usage),
        )


def _node_verdict(name: str, v: _ShapeVerdict, reason: str) -> NodeVerdict:
    return NodeVerdict(name, v.verdict, v.numa, v.preferred, None, reason)  # type: ignore[arg-type]


def _all_verdicts(
    ev: _Evaluator, results: Mapping[int, _ShapeVerdict], by_name: int, by_selector: int, sel: int
) -> tuple[NodeVerdict, ...]:
    snap = ev.snap
    reasons: dict[int, str] = {}  # shape -> its reason, worded once
    out = []
    for i, node in enumerate(snap.nodes.base):  # names only
        if (sel >> i) & 1:
            s = snap.shape_of[i]
            v = results[s]
            if s not in reasons:
                reasons[s] = ev.reason(v)
            out.append(_node_verdict(node.name, v, reasons[s]))
            continue
        if not (by_name >> i) & 1:
            why = "excluded by spec.nodeName"
        elif not (by_selector >> i) & 1:
            why = "excluded by spec.nodeSelector"
        else:
            why = "excluded by required node affinity"
        out.append(NodeVerdict(node.name, "not-selected", reason=why))
    return tuple(out)
