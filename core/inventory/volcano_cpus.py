"""The CPUs Volcano reserves for the kubelet: ``takeByTopology(whole machine,
ceil(resReserved.cpu))`` of volcano-sh/volcano pkg/scheduler/plugins/numaaware/provider/
cpumanager (cpu_mng.go ``GetTopologyHints``, cpu_assignment.go), taken from the free set
before any hint is made.

Volcano runs the kubelet's old CPU accumulator over the Numatopology's ``cpuDetail``, whose
core ids the resource exporter copies from sysfs: unique only within a socket. The
accumulator's ``CPUsInCores`` selects by core id alone, so "core 0" is core 0 of every socket:
reserving 2 CPUs on a 2-socket SMT machine takes 4 CPUs, 2 on each socket (Volcano's own
``getPhysicalCoresNum`` says the ids repeat). numagate follows that. Orderings use Go's
``sort.Slice`` comparators as written; Go sorts up to 12 items by insertion sort, which
:func:`_go_sort` reproduces exactly (sockets); the single-CPU step sorts core ids by
(free CPUs in the core, id), what its comparator gives on a machine whose sockets are alike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol, TypeVar

T = TypeVar("T")


class _Cpu(Protocol):
    @property
    def socket(self) -> int: ...
    @property
    def core(self) -> int: ...


def _go_sort(items: list[T], less: Callable[[T, T], bool]) -> list[T]:
    """Go's insertionSortLessFunc (what sort.Slice runs for 12 items or fewer)."""
    out = list(items)
    for i in range(1, len(out)):
        j = i
        while j > 0 and less(out[j], out[j - 1]):
            out[j], out[j - 1] = out[j - 1], out[j]
            j -= 1
    return out


class _Accumulator:
    def __init__(self, cpus: Mapping[int, _Cpu], count: int) -> None:
        self.cpus = cpus
        self.free = set(cpus)
        self.taken: set[int] = set()
        self.needed = count

    def take(self, group: set[int]) -> None:
        self.taken |= group
        self.free -= group
        self.needed -= len(group)

    def in_core(self, core: int) -> set[int]:
        return {c for c in self.free if self.cpus[c].core == core}

    def free_cores(self) -> list[int]:
        # cpu_assignment.go freeCores: core ids of each socket intersected with the free CPU
        # *ids* (as upstream writes it), sockets by that count, then id.
        by_socket: dict[int, set[int]] = {}
        for c in self.free:
            by_socket.setdefault(self.cpus[c].socket, set()).add(self.cpus[c].core)
        cores = {s: ids & self.free for s, ids in by_socket.items()}
        order = _go_sort(list(by_socket), lambda i, j: len(cores[i]) < len(cores[j]) or i < j)
        return [core for s in order for core in sorted(cores[s])]


def reserved_cpus(cpus: Mapping[int, _Cpu], count: int) -> frozenset[int]:
    """The CPUs Volcano reserves; empty when ``count`` exceeds the machine (Volcano drops
    takeByTopology's error and reserves nothing)."""
    if count <= 0 or count > len(cpus):
        return frozenset()
    acc = _Accumulator(cpus, count)
    sockets = {info.socket for info in cpus.values()}
    per_socket = len(cpus) // len(sockets)
    per_core = len(cpus) // len({(info.socket, info.core) for info in cpus.values()})
    if acc.needed >= per_socket:
        for socket in sorted({cpus[c].socket for c in acc.free}):
            acc.take({c for c in acc.free if cpus[c].socket == socket})
            if acc.needed < 1:
                return frozenset(acc.taken)
            if acc.needed < per_socket:
                break
    if acc.needed >= per_core:
        for core in acc.free_cores():
            acc.take(acc.in_core(core))
            if acc.needed < 1:
                return frozenset(acc.taken)
            if acc.needed < per_core:
                break
    cores = sorted({cpus[c].core for c in acc.free}, key=lambda k: (len(acc.in_core(k)), k))
    for core in cores:
        for cpu in sorted(acc.in_core(core)):
            if acc.needed >= 1:
                acc.take({cpu})
            if acc.needed < 1:
                return frozenset(acc.taken)
    return frozenset()
