"""What a run needs from the machine, checked before anything is allocated or written.

- :func:`available_memory`: what this process may still allocate -- the kernel's
  ``MemAvailable``, capped by a cgroup memory limit (Slurm's, a container's) and by
  ``RLIMIT_AS``;
- :func:`evolve_memory`, :func:`ppo_memory`: a *lower bound* of the memory a run needs
  (the arrays it cannot do without, counted once each);
- :func:`check_memory`: refuse, in one line (:class:`~synapto.common.errors.UsageError`, exit
  code 2), a run whose lower bound exceeds what is available.  Being a lower bound it
  never refuses a run that would fit; it stops the absurd ones (a population of 10^12, a
  hidden layer of 10^8 units, 10^14 steps per epoch) before they allocate, instead of an
  out-of-memory kill without a message hours later;
- :func:`check_run_file`: a run file's per-episode arrays and size on disk, before the run.

Output folders are checked in :mod:`synapto.common.folders` (below :mod:`synapto.store`, which
uses them; this module asks the store for a run file's size).
"""

from __future__ import annotations

import os
import resource
from pathlib import Path

from synapto.common.errors import UsageError, option_value
from synapto.store import EvolveRunWriter

#: genome-sized arrays the coordinator holds at once at the least: the population evaluated,
#: the next one, the rows handed to the run file, and the per-individual results
EVOLVE_COPIES = 4


def _read_int(path: str) -> int | None:
    try:
        text = Path(path).read_text().strip()
    except OSError:
        return None
    try:
        return int(text)
    except ValueError:
        return None  # "max": no limit


def _meminfo_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None


def _cgroup_available() -> int | None:
    """Room left under this process's cgroup memory limit (v2, else v1), or None."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, rel = parts
        rel = rel.lstrip("/")
        if controllers == "":  # cgroup v2
            base = Path("/sys/fs/cgroup") / rel
            limit, used = _read_int(str(base / "memory.max")), _read_int(str(base / "memory.current"))
        elif "memory" in controllers.split(","):
            base = Path("/sys/fs/cgroup/memory") / rel
            limit = _read_int(str(base / "memory.limit_in_bytes"))
            used = _read_int(str(base / "memory.usage_in_bytes"))
        else:
            continue
        if limit is not None and used is not None and limit < 1 << 60:
            return max(limit - used, 0)
    return None


def available_memory() -> int | None:
    """Bytes this process may still allocate, or None if unknown."""
    candidates = [_meminfo_available(), _cgroup_available()]
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        try:
            vsize = int(Path("/proc/self/statm").read_text().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            vsize = 0
        candidates.append(max(soft - vsize, 0))
    known = [c for c in candidates if c is not None]
    return min(known) if known else None


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB", "PB", "EB"):
        if abs(n) < 1024 or unit == "EB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} EB"


def evolve_memory(population: int, n_params: int, episodes: int = 1) -> int:
    """Lower bound of the coordinator's memory for a population of ``population`` genomes
    of ``n_params`` float64 values (:data:`EVOLVE_COPIES` copies; the per-episode figures
    are negligible beside them)."""
    return EVOLVE_COPIES * int(population) * int(n_params) * 8 + int(population) * int(episodes) * 3 * 8


def ppo_memory(
    steps_per_rank: int, ranks_here: int, obs_dim: int, act_dim: int, hid, n_params: int, itemsize: int
) -> int:
    """Lower bound of a PPO run's memory on this machine: per rank the epoch buffer
    (observations, actions, rewards, values, advantages, returns), the full-batch
    forward/backward work arrays of the policy and value networks (three per hidden
    layer each), and parameters with their gradients and Adam moments."""
    per_step = (obs_dim + act_dim) * itemsize + 4 * 8 + 2 * 3 * sum(int(h) for h in hid) * itemsize
    per_rank = int(steps_per_rank) * per_step + 5 * int(n_params) * itemsize
    return int(ranks_here) * per_rank


def check_memory(need: int, what: str) -> None:
    """Refuse (one line, exit code 2) a run needing ``need`` bytes when less is available."""
    have = available_memory()
    if have is not None and need > have:
        raise UsageError(
            f"{what} needs at least {fmt_bytes(need)} of memory; this machine has {fmt_bytes(have)} available"
        )


#: bytes of one single-episode task and its result on the coordinator (validation, selection
#: and test run one task per candidate and episode): 760 measured with tracemalloc
TASK_BYTES = 800


def episode_memory(cfg) -> int:
    """Lower bound of the memory of a run's per-episode arrays: seeds, returns and steps of
    a generation's training and validation episodes, of the final selection and of the test,
    and the tasks of the phases that send one task per episode."""
    per_generation = cfg.population * cfg.episodes + cfg.validation_count * cfg.validate_episodes
    selection = max(1, cfg.elite_count) * cfg.select_episodes
    tasks = max(cfg.validation_count * cfg.validate_episodes, selection, cfg.test_episodes)
    return (
        3 * 8 * (per_generation + cfg.validate_episodes + selection + cfg.select_episodes + cfg.test_episodes)
        + TASK_BYTES * tasks
    )


def free_disk(path: str | Path) -> int | None:
    """Bytes free for this user in the file system of ``path`` (or of its nearest existing folder)."""
    p = Path(path).absolute()
    while not p.exists() and p.parent != p:
        p = p.parent
    try:
        st = os.statvfs(p)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def check_run_file(cfg, n_params: int, out: str | Path) -> None:
    """Refuse (one line, exit code 2, nothing written) a run whose episode counts cannot
    work: per-episode arrays beyond this machine's memory, or a run file beyond the free
    disk space of its folder (its rows for the first generations are allocated at once)."""
    counts = (
        f"population {cfg.population:,} x {cfg.episodes:,} episodes, validation "
        f"{cfg.validation_count:,} x {cfg.validate_episodes:,}, selection {cfg.select_episodes:,}, "
        f"test {cfg.test_episodes:,} episodes"
    )
    check_memory(episode_memory(cfg), f"a run of {counts}")
    need = EvolveRunWriter.estimated_size(cfg, n_params)
    have = free_disk(out)
    if have is not None and need > have:
        raise UsageError(
            f"{option_value('out', str(out))}: the run file of {counts} takes at least {fmt_bytes(need)}; "
            f"its file system has {fmt_bytes(have)} free"
        )
