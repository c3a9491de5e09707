"""The race's projection: wall time to the threshold at 2-64 cores, for both methods,
from what the race measured on this machine.  A **projection**, not a measurement.

It rests on four figures, each measured:

1. **steps to threshold**: the race's tested point past the threshold (generation
   ``g*`` or epoch ``k*``), held fixed at every core count.  For evolution this is exact
   (a run is bit-identical at any worker count); for PPO it is an assumption (the envs
   split over processes keep their number and length, but each process draws its own
   exploration noise, so the data differ);
2. **evolution's per-generation costs**, from the run file's ``/timing``: the
   coordinator's own time (``wall - eval_wall - validation``, kept as it is), each
   task's worker time (``worker_compute`` shared out in proportion to the task's env
   steps), the validation map's worker time likewise;
3. **the coordinator's cost per task** ``c`` (``bench farm``'s noise-key figure,
   docs/bench_farm.md: 24 µs at 64 workers): each task holds its worker ``c`` longer
   and a map takes at least ``tasks x c``;
4. **PPO's per-epoch split**, from the run file's ``/timing`` (rank 0): the rollout,
   which splits over processes, and the rest (values, GAE, the minibatch update with
   its Allreduces, statistics), PPO's **serial share**, kept as it is.

At ``C`` cores, evolution runs ``W = C - 1`` workers (``W = C`` when the race shared the
coordinator's core, ``--shared-coordinator``): generation ``g`` takes its
coordinator time plus the makespan of its tasks on ``W`` workers, each task to the
first free worker (:func:`synapto.bench.evolve.projection.simulate_farm`).  PPO runs
``P'`` processes (:func:`synapto.bench.race.runs.ppo_processes`: no more than its
``n_envs``); epoch ``k`` takes ``rollout_k P / P' + serial_k`` (``P``: the processes it
was measured on).  What the model leaves out: the update's Allreduce growing with the
process count (flattering PPO at many cores), memory bandwidth and turbo clocks shared
by busy cores (flattering both), and the load the measurement itself ran under.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from synapto.bench.evolve.projection import simulate_farm
from synapto.bench.race.runs import ppo_processes

CORES = (2, 4, 8, 16, 32, 64)
#: bench farm's coordinator CPU per noise-key task at 64 workers (docs/bench_farm.md), seconds
COORDINATOR_S = 24e-6


def _until(label: str | None, total: int) -> int | None:
    """Generations (epochs) up to and including the tested point ``label``."""
    if label is None:
        return None
    if label == "final":
        return total
    word, n = label.split()
    return int(n) if word == "generation" else int(n) + 1


def _tasks(compute: float, steps: np.ndarray) -> np.ndarray:
    steps = np.asarray(steps, dtype=float).ravel()
    if steps.size == 0 or not np.isfinite(compute):
        return np.zeros(0)
    return compute * steps / steps.sum() if steps.sum() > 0 else np.full(steps.size, compute / steps.size)


def evolve_time(path: Path, workers_measured: int, workers: int, generations: int, per_task: float) -> float:
    """Projected wall time of the first ``generations`` generations at ``workers`` workers."""
    from synapto.bench.evolve.runs import read_run

    run = read_run(path)
    t = {k: np.nan_to_num(v) for k, v in run["timing"].items()}
    total = 0.0
    for g in range(min(generations, run["generations"])):
        serial = max(t["wall"][g] - t["eval_wall"][g] - t.get("validation", np.zeros(g + 1))[g], 0.0)
        train = _tasks(t["worker_compute"][g], run["steps"][g])
        total += serial + max(simulate_farm(train, workers, "dynamic", per_task), train.size * per_task)
        if "validation_steps" in run and t.get("validation") is not None and t["validation"][g] > 0:
            vsteps = run["validation_steps"][g]
            busy = min(workers_measured, np.asarray(vsteps).size)
            val = _tasks(t["validation"][g] * busy, vsteps)
            total += max(simulate_farm(val, workers, "dynamic", per_task), val.size * per_task)
    return total


def ppo_time(path: Path, processes_measured: int, processes: int, epochs: int) -> float:
    """Projected wall time of the first ``epochs`` epochs on ``processes`` processes."""
    from synapto.store import PPORun

    with PPORun(path) as run:
        rollout = np.nan_to_num(run.timing("rollout"))[:epochs]
        epoch = np.nan_to_num(run.timing("epoch"))[:epochs]
    serial = np.maximum(epoch - rollout, 0.0)
    return float(np.sum(rollout * processes_measured / processes + serial))


def serial_share(path: Path, processes: int) -> float:
    """PPO's serial share of an epoch, as one process would run it: ``serial / (serial +
    rollout x P)`` (sums over the run's epochs)."""
    from synapto.store import PPORun

    with PPORun(path) as run:
        rollout = float(np.nansum(run.timing("rollout")))
        epoch = float(np.nansum(run.timing("epoch")))
    serial = max(epoch - rollout, 0.0)
    return serial / (serial + rollout * processes) if serial + rollout > 0 else math.nan


def project_run(run: dict, cores=CORES, per_task: float = COORDINATOR_S) -> dict[int, float] | None:
    """``{cores: projected wall to threshold}`` for one race run (None: it never reached it)."""
    from synapto.store import RunData

    with RunData(run["out"]) as f:
        total = f.completed
        cfg = f.config
    n = _until(run.get("point_at_threshold"), total)
    if n is None:
        return None
    if run["method"] == "evolve":
        shared = run.get("shared_coordinator", False)
        measured = run.get("workers", run["cores"] - 1)
        return {c: evolve_time(Path(run["out"]), measured, c if shared else c - 1, n, per_task) for c in cores}
    n_envs = int(cfg.get("n_envs", 1))
    return {c: ppo_time(Path(run["out"]), run["processes"], ppo_processes(n_envs, c), n) for c in cores}


def crossing(evolve: dict[int, float], ppo: dict[int, float]) -> int | None:
    """The fewest cores at which evolution's projected time is at most PPO's (None: none)."""
    return next((c for c in sorted(evolve) if c in ppo and evolve[c] <= ppo[c]), None)


def project(runs: list[dict], cores=CORES, per_task: float = COORDINATOR_S) -> list[dict]:
    """Per task: the median over seeds of each method's projected wall to threshold per
    core count, the crossing point, PPO's serial share, and the model's figure at the
    cores the race ran on beside the measured one."""
    out = []
    cores = tuple(sorted(set(cores) | {r["cores"] for r in runs}))
    for task in dict.fromkeys(r["task"] for r in runs):
        row = {"task": task, "cores": list(cores), "coordinator_s_per_task": per_task}
        for method in ("evolve", "ppo"):
            mine = [r for r in runs if r["task"] == task and r["method"] == method]
            proj = [p for p in (project_run(r, cores, per_task) for r in mine) if p is not None]
            row[method] = {c: float(np.median([p[c] for p in proj])) for c in cores} if proj else {}
            row[f"{method}_seeds"] = len(proj)
            row[f"{method}_model_at_measured"] = [
                {
                    "seed": r["seed"],
                    "cores": r["cores"],
                    "measured": r["wall_to_threshold_s"],
                    "model": (project_run(r, (r["cores"],), per_task) or {}).get(r["cores"]),
                }
                for r in mine
            ]
        ppo_runs = [r for r in runs if r["task"] == task and r["method"] == "ppo"]
        row["ppo_serial_share"] = (
            float(np.median([serial_share(Path(r["out"]), r["processes"]) for r in ppo_runs])) if ppo_runs else math.nan
        )
        row["crossing_cores"] = crossing(row["evolve"], row["ppo"]) if row["evolve"] and row["ppo"] else None
        out.append(row)
    return out
