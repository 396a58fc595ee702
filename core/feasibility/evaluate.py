"""Per-node verdicts for a pod over a snapshot, and the cluster decision (DESIGN 4.3).

Node selection and compatibility are computed per shape and per label with big-int
bitsets; the kernel runs once per shape (and once per topology for the "node empty" run).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType

from core.errors import InvalidInput
from core.feasibility import compat
from core.feasibility import kernel as _selected_impl
from core.feasibility.codes import (
    F_CPU_ONLY,
    F_EMPTY,
    F_EXCLUSIVE,
    F_POD_SCOPE,
    R_CPU_SHORT,
    R_DEVICE_SHORT,
    R_EXCLUSIVE,
    R_MEMORY_SHORT,
    R_NODE_SHORT,
    R_NOT_PREFERRED,
    R_SINGLE_NO_HINT,
    R_SMT,
    R_TOO_LARGE,
    R_TOO_MANY_NUMA,
    KernelResult,
)
from core.feasibility.snapshot import POLICY_CODES, Demand, Snapshot
from core.model import (
    POLICY_NONE,
    VERDICTS,
    Decision,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    NodeTopology,
    NodeVerdict,
    PodIntent,
)
from core.quantity import format_quantity

MAX_WARNING = 119
_NEAR_MISS_ORDER = ("no-room-now", "never-fits", "policy-mismatch")


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


# --- node selection (nodeName, nodeSelector, required node affinity) -----------------------


def _requirement_bits(req: NodeSelectorRequirement, snap: Snapshot, *, field: bool) -> int:
    op = req.operator
    if field:
        if req.key != "metadata.name" or op not in ("In", "NotIn"):
            raise InvalidInput(
                f"matchFields {req.key} {op}: only metadata.name with In or NotIn is allowed"
            )
        named = 0
        for v in req.values:
            i = snap.name_index.get(v)
            if i is not None:
                named |= 1 << i
        return named if op == "In" else snap.all_bits & ~named
    if op in ("In", "NotIn"):
        bits = 0
        for v in req.values:
            bits |= snap.label_bits.get((req.key, v), 0)
        # NotIn also matches nodes without the label (labels.Selector semantics)
        return bits if op == "In" else snap.all_bits & ~bits
    if op == "Exists":
        return snap.key_bits.get(req.key, 0)
    if op == "DoesNotExist":
        return snap.all_bits & ~snap.key_bits.get(req.key, 0)
    if op in ("Gt", "Lt"):
        return _compare_bits(req, snap)
    raise InvalidInput(
        f"node affinity operator {op!r} for {req.key}: allowed In, NotIn, Exists, "
        "DoesNotExist, Gt, Lt"
    )


def _compare_bits(req: NodeSelectorRequirement, snap: Snapshot) -> int:
    if len(req.values) != 1:
        raise InvalidInput(f"node affinity {req.key} {req.operator} needs exactly one value")
    try:
        bound = int(req.values[0])
    except ValueError:
        raise InvalidInput(
            f"node affinity {req.key} {req.operator} value {req.values[0]!r} is not an integer"
        ) from None
    bits = 0
    for value, b in snap.values_of.get(req.key, ()):
        try:
            number = int(value)
        except ValueError:
            continue  # a label that is not an integer never matches Gt/Lt
        if (number > bound) if req.operator == "Gt" else (number < bound):
            bits |= b
    return bits


def _term_bits(term: NodeSelectorTerm, snap: Snapshot) -> int:
    if not term.match_expressions and not term.match_fields:
        return 0  # an empty term selects no node
    bits = snap.all_bits
    for req in term.match_expressions:
        bits &= _requirement_bits(req, snap, field=False)
    for req in term.match_fields:
        bits &= _requirement_bits(req, snap, field=True)
    return bits


def selection(intent: PodIntent, snap: Snapshot) -> tuple[int, int, int]:
    """Bitsets of the nodes allowed by nodeName, by nodeSelector, by required affinity."""
    by_name = snap.all_bits
    if intent.node_name:
        i = snap.name_index.get(intent.node_name)
        by_name = 0 if i is None else 1 << i
    by_selector = snap.all_bits
    for k, v in intent.node_selector.items():
        by_selector &= snap.label_bits.get((k, v), 0)
    by_affinity = snap.all_bits
    if intent.required_terms:
        by_affinity = 0
        for term in intent.required_terms:  # terms are ORed, expressions ANDed
            by_affinity |= _term_bits(term, snap)
    return by_name, by_selector, by_affinity


# --- reasons -------------------------------------------------------------------------------


def _unit_name(intent: PodIntent, unit: int) -> str:
    if 0 <= unit < len(intent.containers):
        return f"container {intent.containers[unit].name}"
    return "the pod"


def _amount(resource: str, units: int) -> str:
    return format_quantity(resource, units)


def _per_numa(node: NodeTopology, resource: str, *, empty: bool) -> tuple[str, str]:
    zones = sorted(node.zones, key=lambda z: z.id)
    scale = 1000 if resource == "cpu" else 1
    caps = [z.capacity.get(resource, 0) // scale for z in zones]
    free = [(z.allocatable if empty else z.available).get(resource, 0) // scale for z in zones]
    if resource != "cpu" and resource not in ("pods",) and not resource.count("/"):
        cap_s = "/".join(format_quantity(resource, c) for c in caps)
        free_s = "/".join(format_quantity(resource, f) for f in free)
    else:
        cap_s = "/".join(map(str, caps))
        free_s = "/".join(map(str, free))
    return cap_s, free_s


def render_reason(
    result: KernelResult,
    *,
    policy: str,
    intent: PodIntent,
    demand: Demand,
    node: NodeTopology,
    names: tuple[str, ...],
    empty: bool,
) -> str:
    """A short human string for a kernel reason code."""
    code, unit, res, a, b = result.reason, result.unit, result.resource, result.need, result.limit
    rname = names[res] if 0 <= res < len(names) else ""
    who = _unit_name(intent, unit)
    if code == R_TOO_MANY_NUMA:
        return f"kubelet refuses {policy} on {a} NUMA nodes (max-allowable-numa-nodes {b})"
    if code == R_NODE_SHORT:
        return f"node allocatable {rname} {_amount(rname, b)} < requested {_amount(rname, a)}"
    if code == R_CPU_SHORT:
        return f"not enough exclusive CPUs: {who} needs {a}, free {b}"
    if code == R_SMT:
        return f"full-pcpus-only: {who} asks {a} CPUs, not a multiple of {b} threads per core"
    if code == R_DEVICE_SHORT:
        return f"not enough {rname}: {who} needs {a}, free {b}"
    if code == R_MEMORY_SHORT:
        return (
            f"memory manager cannot allocate {rname} {_amount(rname, a)} for {who} "
            f"(free in hint {_amount(rname, b)})"
        )
    if code == R_EXCLUSIVE:
        return "Koordinator exclusivity Required: every NUMA placement conflicts (single/shared)"
    if code in (R_NOT_PREFERRED, R_SINGLE_NO_HINT):
        if not rname:
            return f"{policy}: no preferred hint for {who}: resources prefer different NUMA nodes"
        need = demand.unit_cpu[unit] if rname == "cpu" else _unit_amount(demand, unit, res, names)
        need_s = str(need) if rname == "cpu" else _amount(rname, need)
        caps, free = _per_numa(node, rname, empty=empty)
        width = f"{a} NUMA node" + ("s" if a != 1 else "")
        state = "allocatable" if empty else "free"
        return (
            f"{policy}: no preferred hint: {rname} {need_s} needs {width} "
            f"(capacity {caps}), {state} {free}"
        )
    return f"reason code {code}"


def _unit_amount(demand: Demand, unit: int, res: int, names: tuple[str, ...]) -> int:
    return demand.unit_res[unit * len(names) + res]


# --- per-shape verdicts --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _ShapeVerdict:
    verdict: str
    numa: tuple[int, ...] = ()
    preferred: bool = False
    reason: str = ""
    compatible: bool = True


class _Evaluator:
    """Verdicts per topology class (compatibility, the "node empty" run) and per shape
    (the run with current usage)."""

    def __init__(self, intent: PodIntent, snap: Snapshot, module: ModuleType) -> None:
        self.intent = intent
        self.snap = snap
        self.kernel = snap.kernel(module)
        self.demand = Demand.build(intent, snap)
        self.runs: dict[int, tuple[str, int, int]] = {}  # topology -> (policy, code, flags)

    def topology(self, t: int) -> _ShapeVerdict | None:
        """The verdict shared by every node of topology class t, or None when it depends
        on each node's usage."""
        snap = self.snap
        s0 = snap.topo_shapes[t][0]
        node = snap.nodes[snap.shape_rep[s0]]
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
        )
        empty = self.kernel.check(self.demand, s0, code, flags | F_EMPTY)
        if empty.reason == R_TOO_LARGE:
            return _ShapeVerdict(
                "unknown-topology", reason=f"{empty.need} NUMA nodes: left to kubelet"
            )
        if not empty.admitted and snap.topo_monotone[t]:
            return _ShapeVerdict("never-fits", reason=self._reason(empty, sim.policy, node, True))
        self.runs[t] = (
            (sim.policy, code, flags) if empty.admitted else (sim.policy, code, -1 - flags)
        )
        return None

    def shape(self, s: int) -> _ShapeVerdict:
        """The verdict for the nodes of shape s (their topology class admits when empty)."""
        snap = self.snap
        node = snap.nodes[snap.shape_rep[s]]
        policy, code, flags = self.runs[snap.topo_of[s]]
        empty_fails = flags < 0
        flags = -1 - flags if empty_fails else flags
        now = self.kernel.check(self.demand, s, code, flags)
        if now.admitted:
            return _ShapeVerdict("fits", self._ids(node, now.mask), bool(now.preferred))
        if empty_fails:  # usage above allocatable in the inventory: judge it as reported
            empty = self.kernel.check(self.demand, s, code, flags | F_EMPTY)
            return _ShapeVerdict("never-fits", reason=self._reason(empty, policy, node, True))
        return _ShapeVerdict("no-room-now", reason=self._reason(now, policy, node, False))

    def _reason(self, result: KernelResult, policy: str, node: NodeTopology, empty: bool) -> str:
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
    tally = _Tally(intent, snapshot, selected, full)
    for t, tbits in enumerate(snapshot.topo_bits):
        sel_t = tbits & selected
        tally.counts["not-selected"] += tbits.bit_count() - sel_t.bit_count()
        if not sel_t:
            continue
        shared = ev.topology(t)
        if shared is not None:
            if tally.add(shared, sel_t, snapshot.topo_shapes[t]):
                return tally.early()
            continue
        for s in snapshot.topo_shapes[t]:
            sel = snapshot.shape_bits[s] & selected
            if sel and tally.add(ev.shape(s), sel, (s,)):
                return tally.early()
    verdicts: tuple[NodeVerdict, ...] = ()
    if full:
        verdicts = _all_verdicts(snapshot, tally.results, by_name, by_selector, selected)
    return tally.done(verdicts)


class _Tally:
    """Counts, the near-miss and per-shape results while evaluating."""

    def __init__(self, intent: PodIntent, snap: Snapshot, selected: int, full: bool) -> None:
        self.intent = intent
        self.snap = snap
        self.full = full
        self.counts = dict.fromkeys(VERDICTS, 0)
        self.results: dict[int, _ShapeVerdict] = {}
        self.near: tuple[int, int, _ShapeVerdict] | None = None
        self.unknown_ok = 0
        self.first_fit: NodeVerdict | None = None

    def add(self, v: _ShapeVerdict, sel: int, shapes: tuple[int, ...]) -> bool:
        """Record v for the selected nodes ``sel``; True when the caller may stop."""
        n = sel.bit_count()
        self.counts[v.verdict] += n
        if self.full:
            for s in shapes:
                self.results[s] = v
        first = (sel & -sel).bit_length() - 1
        if v.verdict == "unknown-topology" and v.compatible:
            self.unknown_ok += n
        if v.verdict in _NEAR_MISS_ORDER:
            rank = _NEAR_MISS_ORDER.index(v.verdict)
            if self.near is None or (rank, first) < self.near[:2]:
                self.near = (rank, first, v)
        if v.verdict == "fits" and not self.full:
            self.first_fit = _node_verdict(self.snap.nodes[first].name, v)
            return True
        return False

    def early(self) -> Evaluation:
        assert self.first_fit is not None
        return Evaluation(
            (self.first_fit,), self.counts, len(self.snap.nodes), True, None, 0, _rule(self.intent)
        )

    def done(self, verdicts: tuple[NodeVerdict, ...]) -> Evaluation:
        near = None
        if self.near is not None:
            near = _node_verdict(self.snap.nodes[self.near[1]].name, self.near[2])
        return Evaluation(
            verdicts,
            self.counts,
            len(self.snap.nodes),
            not self.full,
            near,
            self.unknown_ok,
            _rule(self.intent),
        )


def _node_verdict(name: str, v: _ShapeVerdict) -> NodeVerdict:
    return NodeVerdict(name, v.verdict, v.numa, v.preferred, None, v.reason)  # type: ignore[arg-type]


def _all_verdicts(
    snap: Snapshot, results: Mapping[int, _ShapeVerdict], by_name: int, by_selector: int, sel: int
) -> tuple[NodeVerdict, ...]:
    out = []
    for i, node in enumerate(snap.nodes):
        if (sel >> i) & 1:
            out.append(_node_verdict(node.name, results[snap.shape_of[i]]))
            continue
        if not (by_name >> i) & 1:
            why = "excluded by spec.nodeName"
        elif not (by_selector >> i) & 1:
            why = "excluded by spec.nodeSelector"
        else:
            why = "excluded by required node affinity"
        out.append(NodeVerdict(node.name, "not-selected", reason=why))
    return tuple(out)


# --- the decision --------------------------------------------------------------------------


def _short(text: str) -> str:
    return text if len(text) <= MAX_WARNING else text[: MAX_WARNING - 1] + "…"


def decide(evaluation: Evaluation, *, stale: bool = False) -> Decision:
    """Allow, warn or deny (DESIGN 4.3). Never denies on an empty or stale inventory."""
    c = evaluation.counts
    if evaluation.total == 0:
        return Decision(
            True, warnings=("numagate: inventory is empty; NUMA feasibility not checked",)
        )
    if stale:
        return Decision(
            True, warnings=("numagate: inventory is stale; NUMA feasibility not checked",)
        )
    if c.get("fits", 0):
        return Decision(True)
    if c.get("no-room-now", 0):
        n = c["no-room-now"]
        return Decision(
            True,
            warnings=(
                _short(
                    f"numagate: no node has room now; {n} node(s) could run this pod once resources free up"
                ),
            ),
        )
    if evaluation.unknown_compatible:
        n = evaluation.unknown_compatible
        return Decision(
            True,
            warnings=(
                _short(
                    f"numagate: no node with NUMA data can run this pod; {n} node(s) without NUMA data not checked"
                ),
            ),
        )
    if c.get("not-selected", 0) == evaluation.total:
        # Autoscaled pools may have no node yet: nothing to judge, so no denial.
        return Decision(
            True,
            warnings=("numagate: no node matches the pod's nodeName/nodeSelector/affinity",),
        )
    return Decision(False, message=_deny_message(evaluation))


def _deny_message(ev: Evaluation) -> str:
    c = ev.counts
    parts = [f"{c[v]} {v}" for v in ("never-fits", "policy-mismatch", "not-selected") if c.get(v)]
    msg = f"numagate: no node can ever run this pod under {ev.rule} ({', '.join(parts)})"
    if ev.near_miss is not None:
        msg += f"; closest: {ev.near_miss.name}: {ev.near_miss.reason}"
    return msg
