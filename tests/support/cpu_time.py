"""CPU time of a process and of the whole machine, from ``/proc`` (Linux), for benchmarks."""

from __future__ import annotations

import math
import os


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` so far, NaN if unreadable."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return math.nan
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far, from ``/proc/stat``."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return math.nan, math.nan
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    tick = os.sysconf("SC_CLK_TCK")
    return (sum(fields) - idle) / tick, sum(fields) / tick


def cores_busy(before: tuple[float, float], after: tuple[float, float], wall_s: float) -> float:
    """Cores the whole machine kept busy on average between two ``machine_busy`` calls."""
    return (after[0] - before[0]) / wall_s if wall_s > 0 else math.nan
