"""The machine's other load, measured before a race starts and before each of its runs.

A race compares wall times, so it only means something on cores nobody else uses.
Two figures, both from ``/proc`` (no psutil):

* **busy cores**: ``/proc/stat``'s first line sampled twice, ``interval`` seconds apart;
  ``busy = 1 - (Δidle + Δiowait) / Δtotal`` of all the machine's jiffies, times its
  cores (so 1.0 = one core's worth of work);
* the **1-minute load average** (``/proc/loadavg``'s first field): runnable processes,
  a slower, smoother figure that also counts processes waiting for a core.

Before the race the refusal rule is: busy cores above ``max_busy``, or the race needing
more cores than this process may use, stops it with a one-line error
unless ``--allow-load`` is given; either way the figures go into the report.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

from synapto.bench.common import cpu_count


def _jiffies(stat: Path) -> tuple[int, int]:
    """(idle + iowait, total) jiffies of all CPUs, from ``/proc/stat``'s ``cpu`` line."""
    fields = stat.read_text().splitlines()[0].split()
    values = [int(x) for x in fields[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    # guest time is already counted in user time (fields 9 and 10): leave it out of the total
    return idle, sum(values[:8])


def busy_cores(interval: float = 1.0, stat: Path = Path("/proc/stat")) -> float:
    """Cores' worth of work done by everything on the machine over ``interval`` seconds
    (NaN where ``/proc/stat`` cannot be read)."""
    try:
        idle0, total0 = _jiffies(stat)
        time.sleep(interval)
        idle1, total1 = _jiffies(stat)
    except (OSError, ValueError, IndexError):
        return math.nan
    total = total1 - total0
    if total <= 0:
        return math.nan
    return (1.0 - (idle1 - idle0) / total) * cpu_count_all()


def cpu_count_all() -> int:
    """All the machine's cores (``/proc/stat`` counts them all, whatever this process may use)."""
    return os.cpu_count() or 1


def load_average(path: Path = Path("/proc/loadavg")) -> float:
    try:
        return float(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return math.nan


def measure(interval: float = 1.0) -> dict:
    """The figures of the moment: busy cores over ``interval``, load average, cores."""
    return {
        "busy_cores": busy_cores(interval),
        "loadavg_1min": load_average(),
        "cores": cpu_count_all(),
        "usable_cores": cpu_count(),
        "interval_s": interval,
    }


def verdict(seen: dict, need: int, max_busy: float) -> str | None:
    """Why ``seen`` would bias a race needing ``need`` cores (None: it would not)."""
    busy = seen["busy_cores"]
    if not math.isfinite(busy):
        return None
    if busy > max_busy:
        return (
            f"the machine is busy: {busy:.2f} cores' worth of other work over {seen['interval_s']:g} s "
            f"(/proc/stat; load average {seen['loadavg_1min']:.2f}), above --max-busy {max_busy:g}"
        )
    if need > seen["usable_cores"]:
        return f"the race needs {need} cores and this process may use {seen['usable_cores']}"
    return None
