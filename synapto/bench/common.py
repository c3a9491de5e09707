"""Arithmetic, formatting and running commands, shared by the benchmarks.

* :func:`mean_std` -- mean and population standard deviation (``np.std``);
* :func:`speedups` -- speed-up and parallel efficiency per worker count, paired by
  seed against the smallest worker count;
* :func:`fit_amdahl`, :func:`amdahl` -- the serial fraction of Amdahl's law fitted
  to measured speed-ups, and the speed-up it predicts;
* :func:`shares` -- parts of a total as fractions that sum to 1;
* :func:`md_table` -- a Markdown table; :func:`pyplot` -- matplotlib's, where it is installed;
* :func:`cpu_count`, :func:`load_average` -- the cores this process may use, and the
  machine's 1-minute load average, printed beside every timing;
* :func:`run_logged` -- the one way a benchmark runs a command: its output time-stamped
  into a log, its wall time, a failure as one :class:`~synapto.common.errors.UsageError`;
  :func:`children_cpu` -- the CPU seconds of the commands run so far.
"""

from __future__ import annotations

import math
import os
import resource
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from synapto.common.errors import UsageError


def mean_std(values: Iterable[float]) -> tuple[float, float]:
    """Mean and population standard deviation (0 for a single value); NaN for none."""
    a = np.asarray(list(values), dtype=float)
    if a.size == 0:
        return math.nan, math.nan
    return float(a.mean()), float(a.std())


def fmt_mean_std(values: Iterable[float], digits: int = 1) -> str:
    m, s = mean_std(values)
    return f"{m:.{digits}f} ± {s:.{digits}f}"


def speedups(times: Mapping[int, Mapping[Any, float]]) -> dict[int, dict[str, float]]:
    """Speed-up and efficiency per worker count from ``times[workers][seed]``.

    The baseline is the smallest worker count ``b``.  For every other count ``n``
    the speed-up is the mean over the seeds both have of ``time[b][seed] /
    time[n][seed]`` (each seed does identical work at every worker count), times
    ``b`` so that it reads as "against one worker" when ``b`` is 1 (a serial run,
    0 workers, counts as one worker).  Efficiency is speed-up / ``n``.
    """
    if not times:
        return {}
    base = min(times)
    b = max(base, 1)
    out = {}
    for n, by_seed in times.items():
        common = [s for s in by_seed if s in times[base]]
        ratios = [times[base][s] / by_seed[s] for s in common if by_seed[s] > 0]
        sp = float(np.mean(ratios)) * b if ratios else math.nan
        out[n] = {"speedup": sp, "efficiency": sp / max(n, 1), "baseline": base}
    return out


def amdahl(serial_fraction: float, n: float) -> float:
    """Amdahl's speed-up on ``n`` workers: ``1 / (f + (1 - f) / n)``."""
    f = serial_fraction
    return 1.0 / (f + (1.0 - f) / n)


def fit_amdahl(points: Mapping[int, float]) -> float:
    """Serial fraction ``f`` in [0, 1] minimising the squared error of
    ``1/S = f + (1 - f)/n`` over measured ``{n: speed-up S}`` (points with n <= 1
    carry no information).  Linear least squares in ``x = 1 - 1/n``,
    ``y = 1/S - 1/n``: ``f = sum(xy) / sum(xx)``, clipped to [0, 1].  NaN without a
    point at n > 1.
    """
    xs, ys = [], []
    for n, s in points.items():
        if n > 1 and s > 0 and math.isfinite(s):
            xs.append(1.0 - 1.0 / n)
            ys.append(1.0 / s - 1.0 / n)
    if not xs:
        return math.nan
    x, y = np.array(xs), np.array(ys)
    return float(np.clip((x @ y) / (x @ x), 0.0, 1.0))


def shares(parts: Mapping[str, float]) -> dict[str, float]:
    """Each part divided by the sum of all parts (so the shares sum to 1)."""
    total = float(sum(parts.values()))
    if total == 0:
        return dict.fromkeys(parts, math.nan)
    return {k: float(v) / total for k, v in parts.items()}


def md_table(headers: Sequence[str], rows: Iterable[Sequence[object]], align: str | None = None) -> str:
    """A Markdown table; ``align`` has one of ``l``/``r`` per column (default: first left, rest right)."""
    headers = list(headers)
    align = align or "l" + "r" * (len(headers) - 1)
    sep = ["---:" if a == "r" else ":---" for a in align]
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(sep) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(str(c) for c in row) + " |")
    return "\n".join(lines)


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend; None without matplotlib (the benchmark draws no plot)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def cpu_count() -> int:
    """Cores this process may run on (its affinity mask, else all of them)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


def load_average() -> float:
    """The 1-minute load average (NaN where the system has none)."""
    try:
        return float(os.getloadavg()[0])
    except (OSError, AttributeError):  # pragma: no cover
        return math.nan


#: variables that make a process an MPI rank: a child launched from under mpiexec drops them
MPI_VARS: tuple[str, ...] = ("PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "SYNAPTO_LAUNCHED")
MPI_VARS += ("MPI_LOCALNRANKS", "MPI_LOCALRANKID", "HYDRA_CONTROL_FD")


def child_env() -> dict:
    """The environment of a child process: this one's, without MPI's variables."""
    env = {k: v for k, v in os.environ.items() if k not in MPI_VARS}
    env["PYTHONUNBUFFERED"] = "1"
    return env


@dataclass
class Logged:
    wall: float  #: the process's wall time (s)
    lines: list  #: (seconds since start, line) of its output
    timed_out: bool = False  #: stopped at run_logged's timeout


def children_cpu() -> float:
    """User + system CPU seconds of this process's finished children (and theirs, waited for)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _stop(proc: subprocess.Popen, fired, grace: float = 120.0) -> None:
    """SIGTERM, then SIGKILL where the process is still there ``grace`` seconds later."""
    fired.set()
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()


def run_logged(cmd: Sequence[str], log: Path, append: bool = False, timeout: float | None = None) -> Logged:
    """Run ``cmd`` (in :func:`child_env`), time-stamping every output line on arrival; the log
    (after what it holds, with ``append``) keeps the command and the stamped lines.  A failed
    run raises a :class:`~synapto.common.errors.UsageError` naming the command and the log, with the
    output's tail; an interrupted one is terminated.  After ``timeout`` seconds the command
    is sent SIGTERM (it may stop as it likes: ``evolve`` saves its checkpoint) and its exit
    status is not checked: :attr:`Logged.timed_out` says so."""
    cmd = list(cmd)
    t0 = time.perf_counter()
    lines = []
    timer, fired = None, threading.Event()
    with open(log, "a" if append else "w", buffering=1) as logf:  # line-buffered: the log can be followed
        logf.write("$ " + shlex.join(cmd) + "\n")
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=child_env(), bufsize=1
        )
        if timeout is not None:
            timer = threading.Timer(timeout, _stop, (proc, fired))
            timer.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                t = time.perf_counter() - t0
                lines.append((t, line.rstrip("\n")))
                logf.write(f"[{t:9.3f}] {line}")
            rc = proc.wait()
        except BaseException:  # interrupted: mpiexec passes SIGTERM on; evolve stops cleanly
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
            raise
        finally:
            if timer is not None:
                timer.cancel()
    wall = time.perf_counter() - t0
    timed_out = fired.is_set()
    if rc != 0 and not timed_out:
        tail = "\n".join(line for _, line in lines[-15:])
        raise UsageError(f"benchmark run failed (exit {rc}), see {log}: {shlex.join(cmd)}\n{tail}")
    return Logged(wall, lines, timed_out)


def evolve_command(*args: str, seed: int, test_episodes: int, out: Path, workers: int) -> list[str]:
    """``synapto evolve ARGS``, a benchmark's run: its seed, test, run file (overwritten) and workers."""
    tail = ["--seed", str(seed), "--test-episodes", str(test_episodes), "--out", str(out), "--force"]
    return [sys.executable, "-m", "synapto", "evolve", *args, *tail, "--workers", str(workers)]


# ----------------------------------------------------------------------------- options
#: what ``bench learn``'s and ``bench sparsity``'s options of the same name say (``opt(None, **SEEDS)``)
SEEDS = {"help": "Seeds.", "show_default": "1 2 3 4 5", "multi": True}
TEST_EPISODES = {"help": "Test episodes per champion."}
WORKERS = {"help": "Workers per run (mpiexec -n N+1)."}
