"""The projection's model: wall time to a threshold at ``C`` cores, from explicit inputs.

A **projection**, not a measurement.  Each method's inputs are what a race measured up
to the tested point past the threshold (:mod:`.projection` reads them from the run
files); the model below turns them into seconds at any core count:

* **evolution** (:class:`EvolveInputs`), per generation ``g``: the coordinator's own
  time ``serial[g]`` (kept as it is at every core count), the worker time of each
  training task ``train[g]`` and of each validation task ``val[g]``, and the
  coordinator's cost per task ``c``.  On ``W`` workers (``W = C`` when the coordinator
  shares the cores, ``C - 1`` otherwise) generation ``g`` takes
  ``serial[g] + map(train[g]) + map(val[g])``, where ``map`` is the makespan of the
  tasks in order, each to the first free worker and each ``c`` longer, and at least
  ``tasks x c`` (the coordinator hands them out one at a time);
* **PPO** (:class:`PPOInputs`), per epoch ``k``: the rollout ``rollout[k]`` measured on
  ``P`` processes, which splits over processes, and the rest ``serial[k]`` (values,
  GAE, the minibatch update), kept as it is.  On ``P'`` processes (the most, up to
  ``C``, that split its ``n_envs`` evenly) epoch ``k`` takes
  ``rollout[k] P / P' + serial[k]``;
* **a flat method** (:class:`FlatInputs`, Stable-Baselines3's one process): its measured
  wall time at every core count.

Per core count a method's figure is the median over its seeds.  With a population per
worker ``K``, evolution at ``W`` workers uses the runs whose population is the largest
measured one up to ``K x W`` (the smallest measured one where none is that small):
:func:`choose_population`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from synapto.bench.evolve.projection import simulate_farm
from synapto.bench.race.runs import ppo_processes

#: the core counts of the projection
CORES = (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
#: bench farm's coordinator CPU per noise-key task at 64 workers (docs/bench_farm.md), seconds
COORDINATOR_S = 24e-6


def farm_map(tasks: np.ndarray, workers: int, per_task: float) -> float:
    """Makespan of one map of ``tasks`` (worker seconds each) on ``workers`` workers."""
    tasks = np.asarray(tasks, dtype=float)
    if tasks.size == 0:
        return 0.0
    return max(simulate_farm(tasks, workers, "dynamic", per_task), tasks.size * per_task)


@dataclass
class EvolveInputs:
    """One evolution run up to its generation past the threshold."""

    population: int
    serial: np.ndarray  #: (G,) the coordinator's own seconds per generation
    train: list  #: G arrays: worker seconds of each training task
    val: list = field(default_factory=list)  #: G arrays (or none): worker seconds of each validation task
    shared: bool = False  #: the coordinator shares the workers' cores

    def workers(self, cores: int) -> int:
        return cores if self.shared else max(cores - 1, 1)

    def seconds(self, cores: int, per_task: float) -> float:
        w = self.workers(cores)
        total = float(np.sum(self.serial))
        for g in range(len(self.train)):
            total += farm_map(self.train[g], w, per_task)
            if g < len(self.val):
                total += farm_map(self.val[g], w, per_task)
        return total


@dataclass
class PPOInputs:
    """One PPO run up to its epoch past the threshold."""

    rollout: np.ndarray  #: (K,) seconds of each epoch's rollout on ``processes`` processes
    serial: np.ndarray  #: (K,) the rest of each epoch
    processes: int
    n_envs: int

    def seconds(self, cores: int, per_task: float = 0.0) -> float:
        p = ppo_processes(self.n_envs, cores)
        return float(np.sum(np.asarray(self.rollout) * self.processes / p + np.asarray(self.serial)))

    def serial_share(self) -> float:
        """``serial / (serial + rollout x P)``: the share of an epoch that one process would
        spend outside the rollout."""
        s, r = float(np.sum(self.serial)), float(np.sum(self.rollout)) * self.processes
        return s / (s + r) if s + r > 0 else math.nan


@dataclass
class FlatInputs:
    """A method held at its measured wall time at every core count."""

    wall: float

    def seconds(self, cores: int, per_task: float = 0.0) -> float:
        return float(self.wall)


def choose_population(populations, per_worker: int | None, workers: int) -> int:
    """The measured population evolution uses at ``workers`` workers: the largest one up to
    ``per_worker x workers``, else the smallest (``per_worker`` None: the only one)."""
    pops = sorted(set(populations))
    if per_worker is None:
        return pops[0]
    fitting = [p for p in pops if p <= per_worker * workers]
    return fitting[-1] if fitting else pops[0]


def median_seconds(inputs: list, cores: int, per_task: float) -> float | None:
    return float(np.median([i.seconds(cores, per_task) for i in inputs])) if inputs else None


def evolve_lines(runs: list[EvolveInputs], cores, per_task: float, per_worker: int | None) -> dict[str, dict]:
    """Evolution's projected lines: one per measured population, and with ``per_worker``
    one whose population grows with the workers.  Each: ``seconds`` and ``population``
    per core count, ``seeds`` (runs behind each figure)."""
    if not runs:
        return {}
    pops = sorted({r.population for r in runs})
    lines = {}
    for pop in pops:
        mine = [r for r in runs if r.population == pop]
        key = "evolve" if len(pops) == 1 and per_worker is None else f"evolve-p{pop}"
        lines[key] = {
            "seconds": [median_seconds(mine, c, per_task) for c in cores],
            "population": [pop] * len(cores),
            "seeds": [len(mine)] * len(cores),
        }
    if per_worker is not None:
        chosen = [choose_population(pops, per_worker, runs[0].workers(c)) for c in cores]
        groups = [[r for r in runs if r.population == p] for p in chosen]
        lines[f"evolve-{per_worker}-per-worker"] = {
            "seconds": [median_seconds(g, c, per_task) for g, c in zip(groups, cores)],
            "population": chosen,
            "seeds": [len(g) for g in groups],
        }
    return lines


def rival_line(runs: list, cores, per_task: float = 0.0) -> dict:
    return {"seconds": [median_seconds(runs, c, per_task) for c in cores], "seeds": [len(runs)] * len(cores)}


def crossing(evolve: list, rival: list, cores) -> int | None:
    """The fewest cores at which evolution's projected time is at most the rival's (None: none)."""
    return next(
        (c for c, e, r in zip(cores, evolve, rival) if e is not None and r is not None and e <= r),
        None,
    )


def error(model: float | None, measured: float | None) -> float | None:
    """The model's relative error against a measurement: ``(model - measured) / measured``."""
    if model is None or measured is None or not measured > 0:
        return None
    return (model - measured) / measured
