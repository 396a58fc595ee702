"""Volcano ``Numatopology`` (``nodeinfo.volcano.sh/v1alpha1``) -> CPU-only NUMA zones and
the node's policies (research/upstream-schedulers.md §2.2-2.3).

- ``spec.numares.cpu.allocatable`` is a cpuset list ("2-15,18-31") of the node's FREE CPUs
  now: the resource exporter writes the CPU manager's default set (volcano-sh/resource-exporter
  pkg/numatopo/cpunumainfo.go ``GetResourceInfoMap``) and Volcano uses it as the free set
  (``GenerateNodeResNumaSets``), parsed with ``cpuset.Parse``. ``capacity`` is the node's
  CPU count.
- ``spec.cpuDetail`` maps "<cpu id>" -> {numa, socket, core} (omitempty: a missing field
  is 0). It puts each CPU on its NUMA node; CPUs sharing (socket, core) are SMT siblings.
- ``spec.resReserved.cpu``: Volcano's CPU hint provider reserves ceil(cpu) CPUs with
  takeByTopology on the whole machine (core/inventory/volcano_cpus.py: a core id there
  spans every socket). They are removed from allocatable and from the free set.
- Zone ``capacity`` counts every CPU of the NUMA node (kubelet's and Volcano's minimal-width
  rule), ``allocatable`` the CPUs of the NUMA node less the reserved ones (what does not
  shrink with usage: a busy node is never "never fits"), ``available`` the free CPUs there
  less the reserved ones. Bound pods' ``volcano.sh/topology-decision`` is not subtracted:
  Volcano never does, the free set already excludes pinned CPUs.
- ``spec.policies`` values are kept verbatim: Volcano compares the pod's policy with
  ``TopologyManagerPolicy`` case-sensitively (numaaware.go).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain
from math import ceil
from operator import itemgetter
from typing import Any, Final

from core.errors import InvalidInput
from core.inventory.cpuset import format_cpuset, parse_cpuset
from core.inventory.kubelet_settings import CPU_MANAGER_POLICIES
from core.inventory.nrt import MAX_NUMA_ID
from core.inventory.records import Reporter, Settings, Units, ZoneRecord
from core.inventory.volcano_cpus import reserved_cpus
from core.model import POLICIES, is_map

GROUP: Final = "nodeinfo.volcano.sh"
VERSION: Final = "v1alpha1"
POLICY_KEYS: Final = ("CPUManagerPolicy", "TopologyManagerPolicy")


@dataclass(frozen=True, slots=True)
class CpuInfo:
    numa: int
    socket: int
    core: int


@dataclass(slots=True)
class VolcanoData:
    name: str
    zones: dict[int, ZoneRecord] | None  # None: no usable NUMA data
    settings: Settings
    topology_policy: str | None  # verbatim
    cpu_manager_policy: str | None  # verbatim


def _nonneg_int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, str) and value.isdigit() and value.isascii():
        return int(value)
    return None


@lru_cache(maxsize=4096)
def _cpu_info(numa: int, socket: int, core: int) -> CpuInfo:
    # Immutable, and nodes of one machine type repeat the same few hundred: shared.
    return CpuInfo(numa, socket, core)


def _plain_cpu(info: object) -> CpuInfo | None:
    """The usual entry, {numa, socket, core} as JSON integers in range, without building
    messages (a Numatopology has one entry per CPU); None: let the checks below decide."""
    if type(info) is not dict:
        return None
    numa, socket, core = info.get("numa", 0), info.get("socket", 0), info.get("core", 0)
    if (
        type(numa) is int
        and type(socket) is int
        and type(core) is int
        and 0 <= numa <= MAX_NUMA_ID
        and socket >= 0
        and core >= 0
    ):
        return _cpu_info(numa, socket, core)
    return None


def _checked_cpu(key: str, info: object, report: Reporter) -> CpuInfo | None:
    """One entry with every check and message (None: reported)."""
    path = f"spec.cpuDetail[{key}]"
    if info is None:
        info = {}
    if not is_map(info):
        report.error(path, "must be {numa, socket, core}")
        return None
    fields = {k: _nonneg_int(info.get(k, 0)) for k in ("numa", "socket", "core")}
    bad = [k for k, v in fields.items() if v is None]
    if bad:
        report.error(f"{path}.{bad[0]}", f"{info.get(bad[0])!r} is not a non-negative integer")
        return None
    if fields["numa"] > MAX_NUMA_ID:  # type: ignore[operator]
        report.error(f"{path}.numa", f"NUMA id {fields['numa']} is larger than {MAX_NUMA_ID}")
        return None
    return _cpu_info(fields["numa"], fields["socket"], fields["core"])  # type: ignore[arg-type]


# A cpuDetail every entry of which is {numa, socket, core} as JSON integers, by content:
# the CPU ids and the entries' three values (see ``_plain_key``).
PlainKey = tuple[tuple[str, ...], tuple[tuple[int, int, int], ...]]
_ENTRY: Final = ("numa", "socket", "core")
_entry = itemgetter(*_ENTRY)


def _plain_key(detail: object) -> PlainKey | None:
    """An exact key for a cpuDetail in the usual form (str CPU ids, each entry exactly the
    three fields, every value an ``int``: a ``bool`` or a ``float`` would compare equal to
    one and is left to the checked reader), made in C loops: nodes of one machine type
    list the same cpuDetail, read once per content (``_cpu_table``). None: read it whole."""
    if type(detail) is not dict or not detail:
        return None
    entries = tuple(detail.values())
    if {*map(type, entries)} != {dict} or {*map(len, entries)} != {3}:
        return None
    try:
        values = tuple(map(_entry, entries))
    except KeyError:
        return None
    if {*map(type, chain.from_iterable(values))} != {int} or {*map(type, detail)} != {str}:
        return None
    return tuple(detail), values


@dataclass(frozen=True, slots=True)
class CpuTable:
    """What a cpuDetail says: its CPUs, its SMT width, each NUMA node's CPUs (in the order
    of their first CPU)."""

    cpus: dict[int, CpuInfo]
    threads: int
    numas: tuple[tuple[int, frozenset[int]], ...]

    @classmethod
    def of(cls, cpus: dict[int, CpuInfo]) -> CpuTable:
        numas: dict[int, list[int]] = {}
        for cpu, info in cpus.items():
            numas.setdefault(info.numa, []).append(cpu)
        groups = tuple((numa, frozenset(members)) for numa, members in numas.items())
        return cls(cpus, threads_per_core(cpus), groups)


# A cluster has a few machine types; a table of 128 CPUs and its key hold ~20 KB.
@lru_cache(maxsize=64)
def _cpu_table(key: PlainKey) -> CpuTable | None:
    """The table of a plain cpuDetail (shared: only read), or None when the checked reader
    has something to say about it."""
    errors: list[str] = []
    detail = {cpu: dict(zip(_ENTRY, entry, strict=True)) for cpu, entry in zip(*key, strict=True)}
    cpus = read_cpu_detail(detail, Reporter("", "", errors))
    return None if cpus is None or errors else CpuTable.of(cpus)


@lru_cache(maxsize=256)
def _reserved_in(key: PlainKey, count: int) -> frozenset[int]:
    table = _cpu_table(key)
    assert table is not None  # called only for a plain key's CPUs
    return reserved_cpus(table.cpus, count)


def read_cpu_detail(detail: object, report: Reporter) -> dict[int, CpuInfo] | None:
    if not is_map(detail) or not detail:
        report.error("spec.cpuDetail", "missing or empty: CPUs cannot be placed on NUMA nodes")
        return None
    out: dict[int, CpuInfo] = {}
    ok = True
    for key, info in detail.items():
        cpu = _nonneg_int(key)
        if cpu is None:
            report.error(f"spec.cpuDetail[{key}]", f"key {key!r} is not a CPU id")
            ok = False
            continue
        got = _plain_cpu(info) or _checked_cpu(key, info, report)
        if got is None:
            ok = False
            continue
        out[cpu] = got
    return out if ok else None


def threads_per_core(cpus: Mapping[int, CpuInfo]) -> int:
    """SMT width: the most CPUs sharing one (socket, core)."""
    cores: dict[tuple[int, int], int] = {}
    for info in cpus.values():
        key = (info.socket, info.core)
        cores[key] = cores.get(key, 0) + 1
    return max(cores.values(), default=1)


def _reserved_count(reserved: object, report: Reporter, units: Units) -> int:
    if reserved is None:
        return 0
    if not is_map(reserved):
        report.error("spec.resReserved", "must be a map of resource -> quantity")
        return 0
    count = 0
    for resource, value in reserved.items():
        try:
            amount = units.convert(str(resource), value)
        except InvalidInput as exc:
            report.error(f"spec.resReserved[{resource}]", str(exc))
            continue
        if resource == "cpu":
            count = ceil(amount / 1000)  # fractional CPUs cannot be reserved exclusively
    return count


def _read_policies(policies: object, report: Reporter) -> tuple[str | None, str | None]:
    if policies is None:
        return None, None
    if not is_map(policies):
        report.error("spec.policies", "must be a map")
        return None, None
    for key in policies:
        if key not in POLICY_KEYS:
            report.error(
                f"spec.policies[{key}]", f"unknown key (allowed: {', '.join(POLICY_KEYS)})"
            )
    tm = policies.get("TopologyManagerPolicy")
    cpu = policies.get("CPUManagerPolicy")
    if tm is not None and tm not in POLICIES:
        report.error(
            "spec.policies[TopologyManagerPolicy]",
            f"{tm!r} is not a kubelet policy (allowed: {', '.join(POLICIES)}); Volcano "
            "compares it verbatim, so only pods with exactly this string match",
        )
    if cpu is not None and cpu not in CPU_MANAGER_POLICIES:
        report.error(
            "spec.policies[CPUManagerPolicy]",
            f"{cpu!r} is not a CPU manager policy (allowed: {', '.join(CPU_MANAGER_POLICIES)})",
        )
    return (str(tm) if tm is not None else None, str(cpu) if cpu is not None else None)


def _cpu_zones(
    spec: Mapping[str, Any],
    table: CpuTable,
    report: Reporter,
    units: Units,
    key: PlainKey | None,
) -> dict[int, ZoneRecord] | None:
    cpus = table.cpus
    numares = spec.get("numares")
    entry = numares.get("cpu") if is_map(numares) else None
    if not is_map(entry):
        report.error("spec.numares.cpu", "missing: no allocatable CPU set")
        return None
    try:
        allocatable = parse_cpuset(entry.get("allocatable", ""))
    except InvalidInput as exc:
        report.error("spec.numares.cpu.allocatable", str(exc))
        return None
    unknown = allocatable - cpus.keys()
    if unknown:
        report.error(
            "spec.numares.cpu.allocatable",
            f"CPUs {format_cpuset(unknown)} are not in spec.cpuDetail",
        )
        return None
    capacity = entry.get("capacity")
    if capacity is not None and _nonneg_int(capacity) is None:
        report.error("spec.numares.cpu.capacity", f"{capacity!r} is not a non-negative integer")
        return None
    count = _reserved_count(spec.get("resReserved"), report, units)
    reserved = reserved_cpus(cpus, count) if key is None else _reserved_in(key, count)
    free = allocatable - reserved
    # Per NUMA node: every CPU, those not reserved, the free ones (set operations in C).
    return {
        numa: ZoneRecord(
            {"cpu": 1000 * len(members)},
            {"cpu": 1000 * len(members - reserved)},
            {"cpu": 1000 * len(members & free)},
        )
        for numa, members in table.numas
    }


def parse_numatopology(
    obj: Mapping[str, Any], name: str, report: Reporter, units: Units
) -> VolcanoData:
    spec = obj.get("spec")
    if not is_map(spec):
        report.error("spec", "missing or not an object")
        return VolcanoData(name, None, Settings(), None, None)
    tm, cpu_policy = _read_policies(spec.get("policies"), report)
    settings = Settings()
    settings.tm_policy = tm if tm in POLICIES else None
    settings.cpu_manager_policy = cpu_policy if cpu_policy in CPU_MANAGER_POLICIES else None
    numares = spec.get("numares")
    if is_map(numares):
        for resource in numares:
            if resource != "cpu":
                report.error(
                    f"spec.numares[{resource}]",
                    "only cpu is placed on NUMA nodes by Volcano's Numatopology (cpuDetail); "
                    "this entry is not used",
                )
    detail = spec.get("cpuDetail")
    key = _plain_key(detail)
    table = _cpu_table(key) if key is not None else None
    if table is None:
        key = None
        cpus = read_cpu_detail(detail, report)
        table = None if cpus is None else CpuTable.of(cpus)
    zones = None
    if table is not None:
        settings.threads_per_core = table.threads
        zones = _cpu_zones(spec, table, report, units, key)
    return VolcanoData(name, zones, settings, tm, cpu_policy)
