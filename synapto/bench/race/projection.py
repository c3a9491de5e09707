"""The race's projection: wall time to each threshold at 2-1,024 cores, per method, from
what the race measured on this machine.  A **projection**, not a measurement: the model
is :mod:`.model`; this module reads its inputs from the race's runs.

The inputs, each measured:

1. **steps to threshold**: the run's first tested point past the threshold (generation
   ``g*`` or epoch ``k*``; within ``--max-minutes`` where the race had a cap), held
   fixed at every core count.  For evolution this is exact (a run is bit-identical at
   any worker count); for PPO it is an assumption (the envs split over processes keep
   their number and length, but each process draws its own exploration noise, so the
   data differ);
2. **evolution's per-generation costs**, from the run file's ``/timing``: the
   coordinator's own time (``wall - eval_wall - validation``), each training task's
   worker time (``worker_compute`` shared out in proportion to the task's env steps),
   the validation map's worker time likewise (its wall time times the workers it kept
   busy);
3. **the coordinator's cost per task** ``c`` (``--coordinator-us``; ``bench farm``'s
   noise-key figure, docs/bench_farm.md: 24 µs at 64 workers);
4. **PPO's per-epoch split**, from the run file's ``/timing`` (rank 0): the rollout and
   the rest, PPO's **serial share**;
5. **a Stable-Baselines3 run's wall time** to the threshold, held at every core count
   (one process: its env steps and gradient steps alternate; torch's threads over more
   cores are left out, so below the cores it ran on the figure flatters it);
6. **the population** of each evolution run (its config): with a population per worker
   ``K``, evolution at ``W`` workers uses the runs of the largest measured population up
   to ``K x W`` (:func:`synapto.bench.race.model.choose_population`).

What the model leaves out: the update's Allreduce growing with PPO's process count
(flattering PPO at many cores), memory bandwidth and turbo clocks shared by busy cores
(flattering every method), and the load the measurement itself ran under.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from synapto.bench.evolve.runs import read_run
from synapto.bench.race.model import (
    COORDINATOR_S,
    CORES,
    EvolveInputs,
    FlatInputs,
    PPOInputs,
    crossing,
    error,
    evolve_lines,
    rival_line,
)
from synapto.bench.race.runs import reach
from synapto.store import PPORun


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


def evolve_inputs(run: dict) -> tuple[EvolveInputs, int]:
    """A whole evolution run's inputs, and its completed generations."""
    data = read_run(Path(run["out"]))
    t = {k: np.nan_to_num(v) for k, v in data["timing"].items()}
    n = data["generations"]
    val_wall = t.get("validation", np.zeros(n))
    serial = np.maximum(t["wall"][:n] - t["eval_wall"][:n] - val_wall[:n], 0.0)
    train = [_tasks(t["worker_compute"][g], data["steps"][g]) for g in range(n)]
    val = []
    if "validation_steps" in data:
        measured = run.get("workers") or run["cores"] - 1
        for g in range(n):
            vsteps = np.asarray(data["validation_steps"][g])
            busy = min(measured, vsteps.size)
            val.append(_tasks(val_wall[g] * busy, vsteps) if val_wall[g] > 0 else np.zeros(0))
    population = int(data["config"].get("population", len(data["steps"][0])))
    shared = bool(run.get("shared_coordinator", False))
    return EvolveInputs(population, serial, train, val, shared), n


def ppo_inputs(run: dict) -> tuple[PPOInputs, int]:
    """A whole PPO run's inputs, and its completed epochs."""
    with PPORun(run["out"]) as f:
        rollout = np.nan_to_num(f.timing("rollout"))
        epoch = np.nan_to_num(f.timing("epoch"))
        n_envs = int(f.config.get("n_envs", 1))
        done = f.completed
    return PPOInputs(rollout, np.maximum(epoch - rollout, 0.0), int(run["processes"]), n_envs), done


def upto(inputs, n: int):
    """The inputs of the first ``n`` generations (epochs)."""
    if isinstance(inputs, EvolveInputs):
        return dataclasses.replace(inputs, serial=inputs.serial[:n], train=inputs.train[:n], val=inputs.val[:n])
    return dataclasses.replace(inputs, rollout=inputs.rollout[:n], serial=inputs.serial[:n])


class Loaded:
    """Each run's whole inputs, read once."""

    def __init__(self):
        self.cache: dict[str, tuple] = {}

    def full(self, run: dict):
        if run["out"] not in self.cache:
            self.cache[run["out"]] = evolve_inputs(run) if run["method"] == "evolve" else ppo_inputs(run)
        return self.cache[run["out"]]

    def at(self, run: dict, threshold: float):
        """The run's inputs up to its point past ``threshold`` (None: not reached)."""
        hit = reach(run["curve"], threshold, run.get("max_minutes"))
        if hit is None:
            return None
        if run["method"].startswith("sb3-"):
            return FlatInputs(hit["wall_s"])
        inputs, total = self.full(run)
        return upto(inputs, _until(hit["label"], total) or 0)


def describe(run: dict, inputs, threshold: float, per_task: float) -> dict:
    """What the model took from one run, and its figure at the run's own cores."""
    hit = reach(run["curve"], threshold, run.get("max_minutes"))
    row = {"method": run["method"], "seed": run["seed"], "cores": run["cores"], "reached": inputs is not None}
    row["measured_s"] = None if hit is None else hit["wall_s"]
    if isinstance(inputs, EvolveInputs):
        tasks = np.concatenate(inputs.train) if inputs.train else np.zeros(0)
        vals = np.concatenate(inputs.val) if inputs.val else np.zeros(0)
        row.update(
            population=inputs.population,
            generations=len(inputs.train),
            coordinator_s_per_generation=float(np.mean(inputs.serial)),
            tasks_per_generation=tasks.size / max(len(inputs.train), 1),
            worker_s_per_task=float(tasks.mean()) if tasks.size else None,
            worker_s_per_validation_task=float(vals.mean()) if vals.size else None,
        )
    elif isinstance(inputs, PPOInputs):
        row.update(
            epochs=len(inputs.rollout),
            processes=inputs.processes,
            rollout_s_per_epoch=float(np.mean(inputs.rollout)),
            serial_s_per_epoch=float(np.mean(inputs.serial)),
            serial_share=inputs.serial_share(),
        )
    model = None if inputs is None else inputs.seconds(run["cores"], per_task)
    row.update(model_s=model, error=None if isinstance(inputs, FlatInputs) else error(model, row["measured_s"]))
    return row


def project_task(runs: list[dict], task: str, threshold: float, loaded: Loaded, cores, per_task, per_worker) -> dict:
    """One task at one threshold: each method's projected seconds per core count, the
    crossing points, and what the model took from every run."""
    mine = [r for r in runs if r["task"] == task]
    inputs = [(r, loaded.at(r, threshold)) for r in mine]
    evolve = [i for r, i in inputs if r["method"] == "evolve" and i is not None]
    methods = evolve_lines(evolve, cores, per_task, per_worker) or {"evolve": rival_line([], cores)}
    rivals = list(dict.fromkeys(r["method"] for r in mine if r["method"] != "evolve"))
    for m in rivals:
        methods[m] = rival_line([i for r, i in inputs if r["method"] == m and i is not None], cores)
    return {
        "task": task,
        "threshold": threshold,
        "cores": list(cores),
        "coordinator_s_per_task": per_task,
        "population_per_worker": per_worker,
        "methods": methods,
        "crossing": {
            e: {m: crossing(methods[e]["seconds"], methods[m]["seconds"], cores) for m in rivals}
            for e in methods
            if e.startswith("evolve")
        },
        "inputs": [describe(r, i, threshold, per_task) for r, i in inputs],
    }


def project(
    runs: list[dict],
    thresholds: dict[str, list[float]],
    cores=CORES,
    per_task: float = COORDINATOR_S,
    per_worker: int | None = None,
) -> list[dict]:
    """Per task and threshold (:func:`project_task`), the cores the runs ran on added."""
    cores = tuple(sorted(set(cores) | {r["cores"] for r in runs}))
    loaded = Loaded()
    return [
        project_task(runs, task, x, loaded, cores, per_task, per_worker)
        for task in dict.fromkeys(r["task"] for r in runs)
        for x in thresholds[task]
    ]
