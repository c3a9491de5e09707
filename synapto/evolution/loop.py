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

from synapto import faults, seeding
from synapto.agents import build_agent
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


def validate(cfg: EvolveConfig, g: int, genomes, fitness, farm, map_kw, agent) -> dict:
    """Re-evaluate the top candidates (by training fitness) on fresh validation episodes.

    All candidates of generation ``g`` face the same ``validate_episodes`` episodes of
    the VALIDATE stream.  Returns the candidates' indices, validation fitness,
    returns, steps and seeds, and ``select``: the fitness that chooses the best-ever
    agent and the hall of fame (validation fitness for candidates, -inf elsewhere;
    the training fitness itself when validation is off).
    """
    K, V = cfg.validation_count, cfg.validate_episodes
    seeds = seeding.validation_seeds(cfg.seed, g, V)
    if K == 0:
        return {"individual": np.zeros(0, np.int64), "fitness": np.zeros(0), "returns": np.zeros((0, V)),
                "steps": np.zeros(0, np.int64), "seeds": seeds, "select": fitness}
    cand = rank_order(fitness)[:K]
    results = farm.map([EvalTask(genomes[i], seeds, want_stats=False) for i in cand], **map_kw)
    for fail in farm.last_failures:
        results[fail.index] = _failed_result(agent.n_params, V)
    vfit = np.array([r.fitness for r in results])
    select = np.full(len(fitness), -np.inf)
    select[cand] = vfit
    return {"individual": cand.astype(np.int64), "fitness": vfit,
            "returns": np.stack([r.returns for r in results]),
            "steps": np.array([int(r.steps.sum()) for r in results], dtype=np.int64),
            "seeds": seeds, "select": select}


@dataclass(frozen=True)
class RunOptions:
    """How a run is executed; none of these change its results."""

    schedule: str = "dynamic"  #: "dynamic" or "waves" (see synapto.parallel.farm)
    on_error: str = "abort"  #: "abort": checkpoint and stop; "skip": fitness -inf, go on
    checkpoint_every: int = 1  #: generations between checkpoints
    #: "auto": evaluate chunks of individuals in lockstep on a numpy-batched env where the env and
    #: agent support it (synapto.evolution.batched); "off": one environment at a time
    batch: str = "auto"


class RunStopped(Exception):
    """The run stopped early; the checkpoint of the last completed generation is on disk."""

    def __init__(self, message: str, out: Path, generation: int, failure=None):
        super().__init__(message)
        self.out, self.generation, self.failure = out, generation, failure


def _failed_result(n_params: int, episodes: int):
    from synapto.evolution.evaluate import EvalResult

    return EvalResult(-np.inf, np.full(episodes, np.nan), np.zeros(episodes, dtype=np.int64),
                      np.zeros(n_params), False, 0.0, 0.0)


def run_evolution(cfg: EvolveConfig, out: Path, farm, log: Callable[[str], None] = print,
                  options: RunOptions = RunOptions(), resume: bool = False,
                  stop: Callable[[], bool] | None = None) -> RunSummary:
    """Run ``cfg`` to completion on ``farm``, writing the run file ``out``.

    With ``resume`` the run continues from ``out``'s checkpoint (rows after it are
    dropped).  ``stop()`` returning True (a signal arrived) ends the run after the
    tasks in flight, with the checkpoint of the last completed generation on disk:
    :class:`RunStopped` is raised, as it is when an evaluation fails under
    ``on_error="abort"``.
    """
    from synapto.parallel.farm import FarmInterrupted, WorkerFailure
    from synapto.runfile import read_checkpoint, rebuild_prefix, write_checkpoint

    t_start = time.perf_counter()
    cpu_start = time.process_time()
    agent = build_agent(cfg)
    P, E, k = cfg.population, cfg.episodes, cfg.elite_count
    cfg_json = cfg.to_json()
    checkpoint = read_checkpoint(out) if resume else None
    if checkpoint is not None:
        state = checkpoint[0]
        writer = rebuild_prefix(out, state.generation, cfg, agent.n_params, agent.name)
        log(f"resuming {out} at generation {state.generation} of {cfg.generations}")
    else:
        rng = seeding.generator(cfg.seed, seeding.Stream.EVOLVE)
        state = EvolutionState.initial(agent, P, k, rng)
        writer = EvolveRunWriter.create(out, cfg, agent.n_params, agent.name)
        write_checkpoint(out, state, cfg_json)
    saved_generation = state.generation  # generation of the checkpoint on disk
    from synapto.evolution.batched import batching_farm

    farm = batching_farm(farm, spec_of(cfg), agent, options.batch)
    progress = Progress()
    map_kw = dict(schedule=options.schedule, stop=stop, progress=progress,
                  on_error="skip" if options.on_error == "skip" else "raise")
    log(f"synapto evolve: {cfg.env}, {cfg.agent} {list(cfg.hidden)}, population {P}, "
        f"{cfg.generations} generations, {E} episodes, seed {cfg.seed}, "
        f"{farm.n_workers} worker(s) -> {out}")

    def save() -> None:
        nonlocal saved_generation
        if saved_generation != state.generation:
            write_checkpoint(out, state, cfg_json)
            saved_generation = state.generation

    try:
        try:
            while state.generation < cfg.generations:
                g = state.generation
                t0 = time.perf_counter()
                seeds = seeding.train_seeds(cfg.seed, g, P, E, common=cfg.crn)
                genomes = state.genomes
                tasks = [EvalTask(genomes[i], seeds[i]) for i in range(P)]
                faults.point("generation", g)
                try:
                    results = farm.map(tasks, **map_kw)
                except WorkerFailure as exc:
                    exc.generation, exc.seeds = g, seeds[exc.index]
                    raise
                finally:
                    progress.clear()
                t_eval = time.perf_counter() - t0
                mstats = farm.last_stats
                failed = np.zeros(P, dtype=bool)
                for fail in farm.last_failures:
                    failed[fail.index] = True
                    results[fail.index] = _failed_result(agent.n_params, E)
                    log(f"warning: generation {g} individual {fail.index} failed on rank {fail.rank} "
                        f"({fail.host}): {str(fail).split(': ', 1)[-1]}; fitness set to -inf")

                fitness = np.array([r.fitness for r in results])
                nonfinite = np.array([r.nonfinite for r in results])
                returns = np.stack([r.returns for r in results])
                steps = np.array([int(r.steps.sum()) for r in results], dtype=np.int64)
                stats = np.stack([r.stats if r.stats is not None else np.zeros(agent.n_params)
                                  for r in results])
                connections = np.array([agent.connections(x) for x in genomes], dtype=np.int64)
                for i in np.flatnonzero(nonfinite):
                    log(f"warning: generation {g} individual {i}: non-finite action or return; "
                        f"fitness set to -inf")
                state.env_steps += int(steps.sum())

                t_val = time.perf_counter()
                validation = validate(cfg, g, genomes, fitness, farm, map_kw, agent)
                state.validation_steps += int(validation["steps"].sum())
                t_val = time.perf_counter() - t_val

                t1 = time.perf_counter()
                next_generation(state, fitness, stats, agent, k, connections,
                                select_fitness=validation["select"], mutation_std=cfg.mutation_std)
                t_update = time.perf_counter() - t1
                gstats = generation_stats(g, fitness, connections, k, state, nonfinite)
                gstats["failure_count"] = float(failed.sum())
                vf = validation["fitness"]
                gstats["validation_best"] = float(vf.max()) if vf.size else float("nan")
                gstats["validation_mean"] = float(vf[np.isfinite(vf)].mean()) if np.isfinite(vf).any() \
                    else float("nan")
                gstats["validation_env_steps"] = float(state.validation_steps)

                t2 = time.perf_counter()
                writer.append(g, {"fitness": fitness, "returns": returns, "steps": steps, "seeds": seeds,
                                  "population": genomes, "connections": connections,
                                  "nonfinite": nonfinite, "failed": failed,
                                  "validation/individual": validation["individual"],
                                  "validation/fitness": vf, "validation/returns": validation["returns"],
                                  "validation/steps": validation["steps"],
                                  "validation/seeds": validation["seeds"]},
                              gstats,
                              {"wall": time.perf_counter() - t0, "eval_wall": t_eval,
                               "worker_compute": mstats.compute, "worker_idle": mstats.idle,
                               "worker_env": float(sum(r.env_seconds for r in results)),
                               "worker_agent": float(sum(r.agent_seconds for r in results)),
                               "validation": t_val, "update": t_update, "write": time.perf_counter() - t2})
                if state.generation % options.checkpoint_every == 0 or state.generation == cfg.generations:
                    save()
                elapsed = time.perf_counter() - t_start
                val = f"val {gstats['validation_best']:9.2f}  " if validation["fitness"].size else ""
                log(f"gen {g + 1:>4}/{cfg.generations}  best {gstats['best_fitness']:9.2f}  {val}"
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
                try:
                    results = farm.map(tasks, **{**map_kw, "on_error": "raise"})
                finally:
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
        except FarmInterrupted:
            save()
            raise RunStopped(f"stopped at generation {state.generation}", out, state.generation) from None
        except WorkerFailure as exc:
            save()
            raise RunStopped(str(exc), out, state.generation, failure=exc) from None
    finally:
        writer.close()
    wall = time.perf_counter() - t_start
    cpu = time.process_time() - cpu_start
    log(f"done in {_fmt_time(wall)}: {state.env_steps:,} env steps -> {out} "
        f"(coordinator CPU {cpu:.1f} s, {100 * cpu / max(wall, 1e-9):.0f} % of wall time)")
    return RunSummary(out, state.generation, state.env_steps, state.best_fitness, test_mean, test_std, wall)


def run_status(out: Path) -> tuple[int, bool]:
    """``(generations completed, finished)`` of an existing run file."""
    from synapto.runfile import open_run

    with open_run(out, kind="evolve") as f:
        return int(f["completed"][0]), bool(f["champion/tested"][0])
