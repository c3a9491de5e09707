"""``bench evolve``: its settings, running ``synapto evolve`` through the command line,
and what a run's file and log say (work done, where the worker-seconds went)."""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from synapto.bench.common import Logged, shares
from synapto.common.errors import UsageError
from synapto.store import RunData

#: the reference's algorithm, as experiments/bipedal_hebbian_dag.toml runs it (EvolveConfig's
#: defaults spelled out: without --config, evolve's defaults are the default experiment's)
REFERENCE_MODE = (
    *("--strategy", "ga", "--no-crn", "--validate-episodes", "0", "--mutation-std", "0"),
    *("--select-episodes", "0", "--max-env-steps", "0"),
)

#: parts of the worker-seconds, in report order: (key, label)
PARTS = (
    ("env", "env (make, reset, step, close)"),
    ("agent", "agent (forward, traces)"),
    ("task", "other work in a task"),
    ("comm", "serialisation + communication"),
    ("idle", "idle (load imbalance)"),
    ("validation", "validation episodes"),
    ("update", "coordinator update"),
    ("coordinator", "coordinator other"),
    ("write", "run file + checkpoint"),
)

_GEN_LINE = re.compile(r"^gen\s+(\d+)\s")  # the generation lines of `synapto evolve`


@dataclass
class Settings:
    env: str = "BipedalWalker-v3"
    agent: str = "hebbian-dag"
    hidden: tuple = (8, 8)
    population: int = 64
    generations: int = 5
    episodes: int = 2
    seeds: tuple = (13, 41337)
    workers: tuple = (1, 2)
    waves: bool = True
    raw_steps: int = 20000  #: env steps replayed per raw-ceiling process (0: no ceiling)
    out_dir: str = "bench"
    #: extra `synapto evolve` options for every run; by default the reference's algorithm
    #: (pure synaptolysis, as experiments/bipedal_hebbian_dag.toml runs the origin benchmark)
    evolve_options: tuple = REFERENCE_MODE

    def check(self) -> None:
        if self.population < 2:
            raise UsageError(f"--population must be >= 2, got {self.population}")
        if self.generations < 1 or self.episodes < 1:
            raise UsageError("--generations and --episodes must be >= 1")
        if not self.seeds:
            raise UsageError("--seed needs at least one value")
        if len(set(self.seeds)) != len(self.seeds):
            raise UsageError(f"--seed has repeated values {list(self.seeds)}")
        if not self.workers or any(n < 0 for n in self.workers):
            raise UsageError(f"--workers-list needs worker counts >= 0, got {list(self.workers)}")
        if len(set(self.workers)) != len(self.workers):
            raise UsageError(f"--workers-list has repeated values {list(self.workers)}")
        if self.raw_steps < 0:
            raise UsageError(f"--raw-steps must be >= 0, got {self.raw_steps}")

    @property
    def tag(self) -> str:
        return "".join(c if c.isalnum() or c in "-_" else "_" for c in self.agent.split(":")[-1])


# --------------------------------------------------------------------------- running evolve
def evolve_command(s: Settings, workers: int, schedule: str, seed: int, out: Path) -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "synapto",
        "evolve",
        "--env",
        s.env,
        "--agent",
        s.agent,
        "--hidden",
        *map(str, s.hidden),
    ]
    cmd += ["--population", str(s.population), "--generations", str(s.generations), "--episodes", str(s.episodes)]
    cmd += ["--seed", str(seed), "--test-episodes", "0", "--schedule", schedule, "--out", str(out), "--force"]
    if workers > 0:
        cmd += ["--workers", str(workers)]
    return cmd + list(s.evolve_options)


def loop_times(lines) -> tuple[float | None, list[float]]:
    """``(start, [end of generation 1, 2, ...])`` from time-stamped evolve output:
    the header line (printed just before the first generation) and each
    generation's line (printed after its rows and checkpoint are written)."""
    start: float | None = None
    ends: list[float] = []
    for t, line in lines:
        if line.startswith("synapto evolve:"):
            start, ends = t, []
        elif start is not None and _GEN_LINE.match(line):
            ends.append(t)
    return start, ends


# --------------------------------------------------------------------------- reading runs
def read_run(path: Path) -> dict:
    """What the benchmark needs from a finished run file."""
    with RunData(path, kind="evolve") as run:
        timing = {k: np.asarray(v, dtype=float) for k, v in run.timing_columns().items()}
        out = {
            "config": run.config,
            "generations": run.completed,
            "timing": timing,
            "steps": np.asarray(run.steps(), dtype=np.int64),
            "episodes_per_individual": run.episodes,
        }
        if run.has_validation:
            out["validation_steps"] = np.asarray(run.validation_steps(), dtype=np.int64)
            out["validation_episodes"] = run.validation_episodes
    return out


def run_work(run: dict) -> tuple[int, int]:
    """``(env steps, episodes)`` of a run's generations, validation episodes included."""
    steps = int(run["steps"].sum())
    episodes = int(run["steps"].size) * run["episodes_per_individual"]
    if "validation_steps" in run:
        steps += int(run["validation_steps"].sum())
        episodes += int(run["validation_steps"].size) * run["validation_episodes"]
    return steps, episodes


def breakdown(timing: dict, n_workers: int, cycles=None) -> dict[str, float]:
    """Worker-seconds of a run by part (seconds, summed over generations).

    Per generation, with ``n`` workers (a one-process run counts as one) and
    ``cycle`` the generation's full time (from the log; ``wall`` without it): the
    total is ``n * cycle``; ``env``, ``agent`` and ``task`` (the rest of
    ``worker_compute``) are worker time inside tasks; ``idle`` is worker time
    holding no task; ``comm`` is the rest of ``n * eval_wall`` (sending,
    serialising, receiving, polling latency); the coordinator's parts are
    ``n`` times its own time outside the evaluation map, since every worker waits
    for it then.  The parts sum to ``n * sum(cycle)`` by construction.
    """
    n = max(n_workers, 1)
    G = len(timing["wall"])
    z = np.zeros(G)
    get = lambda k: np.nan_to_num(np.asarray(timing.get(k, z), dtype=float))  # noqa: E731
    wall, ev, comp = get("wall"), get("eval_wall"), get("worker_compute")
    env, agent, idle = get("worker_env"), get("worker_agent"), get("worker_idle")
    val, upd, write = get("validation"), get("update"), get("write")
    cyc = wall if cycles is None else np.asarray(cycles, dtype=float)
    parts = {
        "env": env,
        "agent": agent,
        "task": comp - env - agent,
        "comm": n * ev - comp - idle,
        "idle": idle,
        "validation": n * val,
        "update": n * upd,
        "coordinator": n * (wall - ev - val - upd - write),
        "write": n * (write + cyc - wall),
    }
    return {k: float(np.sum(v)) for k, v in parts.items()}


def productive_share(parts: dict, timing: dict, n_workers: int) -> float:
    """Share of the worker-seconds spent evaluating (env, agent, the rest of a task).

    Validation maps are timed only as a whole; their evaluating share is taken to
    be that of the training maps (``worker_compute / (n * eval_wall)``).
    """
    total = sum(parts.values())
    inside = parts["env"] + parts["agent"] + parts["task"]
    map_time = max(n_workers, 1) * float(np.sum(np.nan_to_num(timing["eval_wall"])))
    if parts["validation"] and map_time:
        inside += parts["validation"] * float(np.sum(timing["worker_compute"])) / map_time
    return inside / total if total else math.nan


def summarise_run(run: dict, workers: int, logged: Logged | None) -> dict:
    steps, episodes = run_work(run)
    start, ends = loop_times(logged.lines) if logged is not None else (None, [])
    cycles = None
    if start is not None and len(ends) == run["generations"]:
        cycles = np.diff([start, *ends])
        loop = float(ends[-1] - start)
    else:
        loop = float(np.sum(run["timing"]["wall"]))
    n = max(workers, 1)
    parts = breakdown(run["timing"], workers, cycles)
    tasks = int(run["steps"].size + (run["validation_steps"].size if "validation_steps" in run else 0))
    return {
        "productive_share": productive_share(parts, run["timing"], workers),
        "process_wall": logged.wall if logged is not None else math.nan,
        "loop": loop,
        "generations": run["generations"],
        "env_steps": steps,
        "episodes": episodes,
        "steps_per_s": steps / loop,
        "steps_per_s_per_worker": steps / loop / n,
        "parts": parts,
        "shares": shares(parts),
        "cycles": None if cycles is None else [float(c) for c in cycles],
        "comm_per_task": parts["comm"] / tasks if tasks else 0.0,
        "tasks": tasks,
        "config": run["config"],
    }
