"""The generation loop on the coordinator: ask -> farm.map(evaluate) -> tell -> record.

One generation ``g``:

1. training seeds for every (individual, episode) from ``(run seed, g, i, e)``;
2. the farm evaluates every individual (any number of workers, results by index);
3. statistics are computed and the population is advanced
   (:func:`synapto.evolution.select.next_generation`, the coordinator's Generator);
4. the generation is appended to the run file and flushed.

After the last generation the best-ever agent is tested on ``test_episodes``
episodes from the test seed stream.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from synapto import seeding
from synapto.config import EvolveConfig
from synapto.evolution.evaluate import EvalTask, EvolveSpec
from synapto.evolution.select import EvolutionState, next_generation, rank_order
from synapto.runfile import EvolveRunWriter


@dataclass
class RunSummary:
    out: Path
    generations: int
    env_steps: int
    best_fitness: float
    test_mean: float | None
    test_std: float | None
    wall: float


def make_agent(cfg: EvolveConfig):
    from agents import load_agent_class
    from synapto.envs import space_info

    return load_agent_class(cfg.agent)(space_info(cfg.env), cfg.hidden, cfg.agent_options)


def spec_of(cfg: EvolveConfig) -> EvolveSpec:
    return EvolveSpec(cfg.env, cfg.agent, tuple(cfg.hidden), dict(cfg.agent_options))


def _fmt_time(s: float) -> str:
    s = int(s)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


class Progress:
    """A live progress bar on a terminal; silent otherwise."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stdout
        self.enabled = self.stream.isatty()
        self._last = 0.0

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if done < total and now - self._last < 0.1:
            return
        self._last = now
        width = 30
        fill = int(width * done / max(total, 1))
        self.stream.write(f"\r  [{'#' * fill}{'.' * (width - fill)}] {done}/{total}")
        self.stream.flush()

    def clear(self) -> None:
        if self.enabled:
            self.stream.write("\r" + " " * 60 + "\r")
            self.stream.flush()


def generation_stats(g, fitness, connections, elite, state, nonfinite) -> dict[str, float]:
    order = rank_order(fitness)
    fin = fitness[np.isfinite(fitness)]
    elite_f = fitness[order[:elite]]
    def s(fn, a):
        return float(fn(a)) if a.size else float("nan")
    return {
        "generation": float(g),
        "env_steps": float(state.env_steps),
        "best_fitness": float(fitness[order[0]]),
        "best_ever_fitness": float(state.best_fitness),
        "pop_mean": s(np.mean, fin), "pop_std": s(np.std, fin),
        "pop_min": s(np.min, fin), "pop_max": s(np.max, fin),
        "elite_mean": s(np.mean, elite_f), "elite_std": s(np.std, elite_f),
        "elite_min": s(np.min, elite_f), "elite_max": s(np.max, elite_f),
        "connections_mean": float(np.mean(connections)),
        "connections_std": float(np.std(connections)),
        "champion_connections": float(np.count_nonzero(state.best_genome)),
        "prune_rate": float(state.rate),
        "nonfinite_count": float(np.count_nonzero(nonfinite)),
    }


def run_evolution(cfg: EvolveConfig, out: Path, farm, log: Callable[[str], None] = print,
                  schedule: str = "dynamic") -> RunSummary:
    """Run ``cfg`` to completion on ``farm``, writing the run file ``out``."""
    t_start = time.perf_counter()
    agent = make_agent(cfg)
    farm.setup(spec_of(cfg))
    P, E, k = cfg.population, cfg.episodes, cfg.elite_count
    rng = seeding.generator(cfg.seed, seeding.Stream.EVOLVE)
    state = EvolutionState.initial(agent, P, k, rng)
    writer = EvolveRunWriter.create(out, cfg, agent.n_params, agent.name)
    progress = Progress()
    log(f"synapto evolve: {cfg.env}, {cfg.agent} {list(cfg.hidden)}, population {P}, "
        f"{cfg.generations} generations, {E} episodes, seed {cfg.seed}, "
        f"{farm.n_workers} worker(s) -> {out}")
    try:
        while state.generation < cfg.generations:
            g = state.generation
            t0 = time.perf_counter()
            seeds = seeding.train_seeds(cfg.seed, g, P, E)
            genomes = state.genomes
            tasks = [EvalTask(genomes[i], seeds[i]) for i in range(P)]
            results = farm.map(tasks, schedule=schedule, progress=progress)
            progress.clear()
            t_eval = time.perf_counter() - t0
            mstats = farm.last_stats

            fitness = np.array([r.fitness for r in results])
            nonfinite = np.array([r.nonfinite for r in results])
            returns = np.stack([r.returns for r in results])
            steps = np.array([int(r.steps.sum()) for r in results], dtype=np.int64)
            stats = np.stack([r.stats if r.stats is not None else np.zeros(agent.n_params) for r in results])
            connections = np.array([agent.connections(x) for x in genomes], dtype=np.int64)
            for i in np.flatnonzero(nonfinite):
                log(f"warning: generation {g} individual {i}: non-finite action or return; fitness set to -inf")
            state.env_steps += int(steps.sum())

            t1 = time.perf_counter()
            next_generation(state, fitness, stats, agent, k, connections)
            t_update = time.perf_counter() - t1
            gstats = generation_stats(g, fitness, connections, k, state, nonfinite)

            t2 = time.perf_counter()
            writer.append(g, {"fitness": fitness, "returns": returns, "steps": steps, "seeds": seeds,
                              "population": genomes, "connections": connections, "nonfinite": nonfinite},
                          gstats,
                          {"wall": time.perf_counter() - t0, "eval_wall": t_eval,
                           "worker_compute": mstats.compute, "worker_idle": mstats.idle,
                           "worker_env": float(sum(r.env_seconds for r in results)),
                           "worker_agent": float(sum(r.agent_seconds for r in results)),
                           "update": t_update, "write": time.perf_counter() - t2})
            elapsed = time.perf_counter() - t_start
            log(f"gen {g + 1:>4}/{cfg.generations}  best {gstats['best_fitness']:9.2f}  "
                f"mean {gstats['pop_mean']:9.2f}  conn {gstats['connections_mean']:8.1f}  "
                f"steps {state.env_steps:>10,}  {int(steps.sum()) / max(t_eval, 1e-9):9,.0f} steps/s  "
                f"elapsed {_fmt_time(elapsed)}")

        test_mean = test_std = None
        seeds = seeding.test_seeds(cfg.seed, cfg.test_episodes)
        if cfg.test_episodes:
            log(f"testing the champion (generation {state.best_generation}, fitness "
                f"{state.best_fitness:.2f}) on {cfg.test_episodes} test episodes")
            tasks = [EvalTask(state.best_genome, seeds[e:e + 1], want_stats=False)
                     for e in range(cfg.test_episodes)]
            results = farm.map(tasks, schedule=schedule, progress=progress)
            progress.clear()
            test_returns = np.concatenate([r.returns for r in results])
            test_steps = np.concatenate([r.steps for r in results])
            test_mean, test_std = float(np.mean(test_returns)), float(np.std(test_returns))
            log(f"champion test: {test_mean:.2f} +/- {test_std:.2f} over {cfg.test_episodes} episodes")
        else:
            test_returns = np.zeros(0)
            test_steps = np.zeros(0, dtype=np.int64)
        writer.write_champion(state.best_genome, state.best_fitness, state.best_generation,
                              seeds, test_returns, test_steps)
    finally:
        writer.close()
    wall = time.perf_counter() - t_start
    log(f"done in {_fmt_time(wall)}: {state.env_steps:,} env steps -> {out}")
    return RunSummary(out, state.generation, state.env_steps, state.best_fitness, test_mean, test_std, wall)
