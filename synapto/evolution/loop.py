"""The generation loop on the coordinator: ask -> farm.map(evaluate) -> tell -> record.

A run is a strategy (:mod:`synapto.evolution.strategies`), a farm
(:mod:`synapto.parallel.farm`) and a run file with its checkpoint (:mod:`synapto.store`);
the loop knows those three and nothing of a strategy's internals.  One generation ``g``
(:func:`synapto.evolution.generation.run_generation`):

1. the strategy's genomes are evaluated on training episodes seeded from ``(run seed, g, i, e)``
   (any number of workers, results by index);
2. its candidates are re-evaluated on fresh validation episodes, and the strategy is told;
3. the generation is appended to the run file and flushed, then checkpointed.

After the last generation the strategy's final candidates are re-evaluated on
``select_episodes`` fresh episodes of the selection stream, the best becomes the
champion, and it is tested on ``test_episodes`` episodes of the test stream
(:mod:`synapto.evolution.champion`).  With ``obs_norm`` the coordinator keeps the
observation statistics (:mod:`synapto.evolution.obs_norm`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from synapto.agents import build_agent
from synapto.common import seeding
from synapto.common.shell import synapto_command
from synapto.evolution import champion as final
from synapto.evolution.config import EvolveConfig, RunOptions
from synapto.evolution.generation import (
    EvaluationFailed,
    EvaluationFailure,
    Evaluations,
    Generation,
    num,
    run_generation,
    statistics,
)
from synapto.evolution.obs_norm import ObsStats
from synapto.evolution.progress import Budget, Eta, RunProgress, fmt_time as _fmt_time, progress_line, shaping_words
from synapto.evolution.strategies import make_strategy
from synapto.evolution.strategies.base import Strategy
from synapto.evolution.worker.batched import batching_farm
from synapto.evolution.worker.fast_box2d import require
from synapto.evolution.worker.spec import EvolveSpec
from synapto.parallel.results import Farm, FarmInterrupted
from synapto.store import (
    Checkpoint,
    EvolveRunWriter,
    Extras,
    RunData,
    RunLock,
    grow,
    read_checkpoint,
    rebuild_prefix,
    write_checkpoint,
)
from synapto.store.evolve_rows import record, strategy_figures
from synapto.tracking.callbacks import GenerationReport, catch_up, close_all, report_to


@dataclass
class RunSummary:
    out: Path
    generations: int
    #: every env step of the run: training, validation, final selection and test (the "done" line's total)
    env_steps: int
    #: the champion's fitness as the run file stores it (training or validation; NaN for a final centre)
    best_fitness: float
    test_mean: float | None
    test_std: float | None
    wall: float


class RunStopped(Exception):
    """The run stopped early; the checkpoint of the last completed generation is on disk."""

    def __init__(self, message: str, out: Path, generation: int, failure: EvaluationFailure | None = None):
        super().__init__(message)
        self.out, self.generation, self.failure = out, generation, failure


def spec_of(cfg: EvolveConfig) -> EvolveSpec:
    """The recipe of ``cfg``'s farm: one env at a time, or envpool for a run whose training
    episodes run there (:func:`evaluation_farm` may batch the first)."""
    shaping = cfg.envs.shaping
    return EvolveSpec(
        cfg.env,
        cfg.agent,
        tuple(cfg.hidden),
        dict(cfg.agent_options),
        cfg.make_kwargs,
        shaping if shaping.active else None,
        "envpool" if cfg.envs.train_backend == "envpool" else "serial",
    )


def restore_strategy(cfg: EvolveConfig, checkpoint: Checkpoint, agent=None) -> Strategy:
    """The strategy of ``cfg`` in the state its checkpoint holds."""
    strategy = make_strategy(cfg, agent or build_agent(cfg), checkpoint.rng)
    strategy.restore(checkpoint.arrays, checkpoint.scalars)
    return strategy


class EvolutionRun:
    """One run's coordinator state: agent, strategy, run file, counters, and the
    generation of the checkpoint on disk."""

    LOOP_SCALARS = ("generation", "env_steps", "validation_steps")

    def __init__(self, cfg: EvolveConfig, out: Path, resume: bool, log: Callable[[str], None], overwrite: bool = True):
        self.cfg, self.out, self.log = cfg, out, log
        self.t_written = time.perf_counter()  #: when the last row was written (first: the run's start)
        self.agent = build_agent(cfg)
        self.cfg_json = cfg.to_json()
        self.obs = ObsStats(self.agent.space.obs_dim) if cfg.obs_norm else None
        self.selection_steps = 0  #: env steps of the final selection
        self.champion_fitness = float("nan")  #: the fitness the run file stores with its champion
        self.norms: list[tuple[np.ndarray, np.ndarray]] = []  #: the frozen normalisation of each generation
        self.shaping = cfg.envs.shaping
        self.prev_steps: np.ndarray | None = None  #: the last generation's ``/steps`` (the training cap's basis)
        self._writer: EvolveRunWriter | None = None
        self.saved: int | None = None  #: the generation of the last checkpoint (None: none yet)
        # One writer per run file, for the run's whole life: taken before anything is read,
        # created or rewritten; a second run on the same file stops here (exit code 2).
        self.lock = RunLock(out).acquire()
        try:
            self._open(resume, overwrite)
        except BaseException:
            self.close()
            raise

    def _open(self, resume: bool, overwrite: bool) -> None:
        cfg, out, log = self.cfg, self.out, self.log
        checkpoint = read_checkpoint(out) if resume else None
        if checkpoint is not None:
            self.strategy = restore_strategy(cfg, checkpoint, self.agent)
            if self.obs is not None:
                self.obs.restore(checkpoint.arrays)
            self.generation, self.env_steps, self.validation_steps = (
                int(checkpoint.scalars[k]) for k in self.LOOP_SCALARS
            )
            self.writer = rebuild_prefix(
                out, self.generation, cfg, self.agent.n_params, self.agent.name, self.extras(), run_id=checkpoint.run_id
            )
            if self.obs is not None:
                self.norms = self.writer.obs_norms(self.generation)
            if self.generation > 0:
                self.prev_steps = self.writer.steps_of(self.generation - 1)
            steps = self.env_steps + self.validation_steps
            done = Budget(cfg.generations, cfg.max_env_steps).status(self.generation, steps)
            log(f"resuming {out} at generation {self.generation} ({done})")
            self.saved = self.generation
        else:
            self.strategy = make_strategy(cfg, self.agent, seeding.generator(cfg.seed, seeding.Stream.EVOLVE))
            self.strategy.start()
            self.generation = self.env_steps = self.validation_steps = 0
            self.writer = EvolveRunWriter.create(
                out, cfg, self.agent.n_params, self.agent.name, self.extras(), overwrite=overwrite or resume
            )
            self.saved = None
            self.save()

    def extras(self) -> Extras:
        """The shapes of the run file's optional datasets: the strategy's own figures
        (those of :meth:`Strategy.record` beyond the common statistics) and arrays, and
        the observation size."""
        figures = dict.fromkeys(strategy_figures(self.strategy.record()), ())
        arrays = {k: np.shape(v) for k, v in self.strategy.record_arrays().items()}
        attrs = {"action_range": action_range(self.agent)}
        samples = self.strategy.samples()
        if samples is not None and samples.kind == "lineage":  # a GA's lineages (synapto.lineage)
            attrs["lineage_bounds"] = json.dumps([int(b) for b in samples.bounds])
        elif samples is None or "centre" not in arrays:  # populations are stored
            return Extras(self.agent.space.obs_dim, {**figures, **arrays}, attrs=attrs)
        return Extras(
            self.agent.space.obs_dim,
            {**figures, **arrays},
            samples.kind,
            {k: np.shape(v) for k, v in samples.arrays().items()},
            attrs,
        )

    def save(self) -> None:
        """Checkpoint the state the next generation reads (once per generation)."""
        if self.saved != self.generation:
            arrays, scalars = self.strategy.state()
            if self.obs is not None:
                arrays = {**arrays, **self.obs.state()}
            loop = dict(zip(self.LOOP_SCALARS, (self.generation, self.env_steps, self.validation_steps)))
            write_checkpoint(
                self.out, arrays, {**scalars, **loop}, self.strategy.rng, self.cfg_json, run_id=self.writer.run_id
            )
            self.saved = self.generation

    def report_of(self, generation: int) -> GenerationReport:
        """Generation ``generation``'s report, from the run file (a resumed run's tracking)."""
        stats, timing, wall = self.writer.figures(generation)
        steps = int(stats["env_steps"] + stats["validation_env_steps"])
        return GenerationReport(generation, stats, timing, steps, wall, Path(self.out), self.cfg)

    def norm(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The observation normalisation of the next generation (frozen from the totals so far)."""
        return None if self.obs is None else self.obs.frozen()

    def train_cap(self) -> int:
        """The step cap of the next generation's training episodes (0: none; ``cap_factor``, ``cap_steps``)."""
        return self.shaping.cap(self.prev_steps, self.cfg.episodes)

    def norm_of(self, generation: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The normalisation generation ``generation`` ran with (the next generation's for
        a genome not evaluated yet, e.g. an ES's last centre)."""
        if self.obs is None:
            return None
        return self.norms[generation] if generation < len(self.norms) else self.obs.frozen()

    def record(self, gen: Generation, checkpoint_every: int, norm) -> dict[str, float]:
        """Count, append generation ``gen`` to the run file, checkpoint on schedule.

        ``/timing/wall`` of a generation is the time from the previous generation's row
        (or from the start of this process's run: creating or rebuilding the file) to this
        one's: it covers the previous write and checkpoint too, so the walls add up to the
        run's wall time."""
        if self.obs is not None:
            self.norms.append(norm)
            self.obs.add(gen.results)
        self.env_steps += int(gen.steps.sum())
        self.prev_steps = gen.steps
        self.validation_steps += int(gen.validation.steps.sum())
        self.generation = gen.index + 1
        stats = statistics(gen, self.strategy, self.cfg.elite_count, self.env_steps, self.validation_steps)
        values, samples = gen.datasets(self.writer.compact)
        t = time.perf_counter()
        ms = gen.map_stats
        t_prev, self.t_written = self.t_written, t
        timing = {
            "wall": t - t_prev,
            **gen.timing,
            "worker_compute": ms.compute,
            "worker_idle": ms.idle,
            "worker_env": float(sum(r.env_seconds for r in gen.results)),
            "worker_agent": float(sum(r.agent_seconds for r in gen.results)),
        }
        if gen.index >= self.writer.capacity:
            self.writer = grow(self.writer, self.out, self.cfg, self.agent.n_params, self.agent.name, self.extras())
        row = record(
            values,
            stats,
            {**timing, "write": time.perf_counter() - t},
            samples=samples,
            norm=norm if self.obs is not None else None,
            arrays=gen.strategy_arrays,
        )
        self.writer.append(gen.index, row)
        self.timing = {**timing, "write": time.perf_counter() - t}
        last = not self.cfg.goes_on(self.generation, self.env_steps + self.validation_steps)
        if self.generation % checkpoint_every == 0 or last:
            self.save()
        return stats

    def finish(self, evals: Evaluations) -> final.Test:
        """Choose the champion (on the selection episodes if any), test it, write both."""
        cfg = self.cfg
        champion, selection = self.strategy.champion, None
        if cfg.select_episodes:
            candidates = self.strategy.final_candidates()
            self.log(
                f"selecting the champion among {len(candidates)} candidate(s) on {cfg.select_episodes} "
                f"fresh episodes each"
            )
            selection = final.select(cfg, candidates, evals, self.generation, self.norm_of, self.agent)
            champion = candidates[selection.chosen]
            self.selection_steps = int(selection.steps.sum())
            self.writer.write_selection(selection)
        if cfg.test_episodes:
            fitness = "not evaluated" if np.isnan(champion.fitness) else f"fitness {num(champion.fitness, 0)}"
            self.log(
                f"testing the champion ({final.named(champion.generation, self.generation)}, {fitness}) "
                f"on {cfg.test_episodes} test episodes"
            )
        test = final.test(cfg, champion, evals, self.generation, self.norm_of(champion.generation))
        if test.mean is not None and test.std is not None:  # test episodes ran
            self.log(f"champion test: {num(test.mean, 0)} +/- {num(test.std, 0)} over {cfg.test_episodes} episodes")
        if selection is not None:
            self.log(final.summary_line(champion, cfg.validation_count > 0, selection, test, self.generation))
        self.champion_fitness = float(champion.fitness)
        self.writer.write_champion(
            champion.genome,
            champion.fitness,
            champion.generation,
            test.seeds,
            test.returns,
            test.steps,
            norm=self.norm_of(champion.generation),
            outcomes=test.outcomes,
            action_cost=test.action_cost,
        )
        return test

    @property
    def writer(self) -> EvolveRunWriter:
        """The run file, open from :meth:`_open` on."""
        if self._writer is None:
            raise RuntimeError(f"{self.out} is not open")
        return self._writer

    @writer.setter
    def writer(self, writer: EvolveRunWriter) -> None:
        self._writer = writer

    def stopped(self, exc: FarmInterrupted | EvaluationFailed) -> RunStopped:
        """The run stopped by ``exc`` (a signal, or an evaluation that failed under
        ``on_error="abort"``), its checkpoint of the last completed generation saved."""
        self.save()
        if isinstance(exc, EvaluationFailed):
            return RunStopped(str(exc), self.out, self.generation, failure=exc.failure)
        return RunStopped(f"stopped at generation {self.generation}", self.out, self.generation)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self.lock.release()


def action_range(agent) -> str:
    """What the agent's actions span, in words (the run file's ``action_range`` attribute)."""
    space = agent.space
    if space.discrete:
        return f"one of {space.act_dim} choices (argmax)"
    if space.low is not None and np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high)):
        return "tanh scaled to the action space's bounds"
    return "tanh in [-1, 1]: the action space is unbounded, actions are not scaled"


def announce(cfg: EvolveConfig, agent, budget: Budget, workers: int, out, log) -> None:
    """The run's first line (and a warning for an action space that is not bounded)."""
    log(
        f"synapto evolve: {cfg.env}, {cfg.agent} {list(cfg.hidden)}, population {cfg.population}, "
        f"{budget.describe()}, {plural(cfg.episodes, 'episode')} per fitness, seed {cfg.seed}, "
        f"{plural(workers, 'worker')} -> {out}"
    )
    if shaping_words(cfg):
        log(
            f"training episodes are shaped ({shaping_words(cfg)}): the train(shaped) figures are "
            f"not {cfg.env}'s returns; val, the final selection and the test run the unmodified task"
        )
    if action_range(agent).startswith("tanh in [-1, 1]: "):
        log(
            f"warning: {cfg.env}'s action space is unbounded: the agent's actions are tanh outputs in [-1, 1] "
            f"(the run file's attribute action_range says so)"
        )


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def evaluation_farm(farm: Farm, cfg: EvolveConfig, agent, options: RunOptions) -> Farm:
    """``farm`` set up for the run: training on envpool (whatever ``--batch`` says: it
    changes results), else batched where supported and asked for."""
    spec = spec_of(cfg)
    return batching_farm(farm, spec, agent, "off" if cfg.obs_norm or spec.shaping else options.batch)


def stopped_by_callback(callbacks, run: EvolutionRun, gen, stats, steps: int, elapsed: float, log) -> bool:
    """Report generation ``gen`` to the ``callbacks``; True when one asks the run to stop
    (:class:`synapto.StopRun`): it then ends as at the end of its budget (checkpoint, final
    selection, champion test)."""
    report = GenerationReport(gen.index, stats, run.timing, steps, elapsed, Path(run.out), run.cfg)
    reason = report_to(callbacks, report)
    if reason is None:
        return False
    run.save()
    log(f"stopped by a callback after generation {gen.index}: {reason}")
    return True


def run_evolution(
    cfg: EvolveConfig,
    out: Path,
    farm: Farm,
    log: Callable[[str], None] = print,
    options: RunOptions = RunOptions(),
    resume: bool = False,
    stop: Callable[[], bool] | None = None,
    overwrite: bool = True,
    callbacks=(),
) -> RunSummary:
    """Run ``cfg`` to completion on ``farm``, writing the run file ``out``.

    With ``resume`` the run continues from ``out``'s checkpoint (rows after it are
    dropped).  ``stop()`` returning True (a signal arrived) ends the run after the
    tasks in flight, with the checkpoint of the last completed generation on disk:
    :class:`RunStopped` is raised, as it is when an evaluation fails under
    ``on_error="abort"``.  The run holds ``out``'s lock (:class:`synapto.store.RunLock`) from
    before it reads or creates anything until it returns; ``overwrite=False`` refuses an
    existing ``out`` (checked under the lock).  ``callbacks`` are called with a
    :class:`~synapto.tracking.callbacks.GenerationReport` after each generation's rows
    are written (:mod:`synapto.tracking.callbacks`).
    """
    t_start, cpu_start = time.perf_counter(), time.process_time()
    require(cfg)  # envpool's one-line checks come before the run file is touched
    budget = Budget(cfg.generations, cfg.max_env_steps)
    progress = RunProgress(budget, log=log, every=options.progress_every)
    run = EvolutionRun(cfg, out, resume, log, overwrite=overwrite)
    farm = evaluation_farm(farm, cfg, run.agent, options)
    keys = options.wire == "keys" and not farm.in_process  # a farm in this process takes genomes
    evals = Evaluations(farm, options.schedule, options.on_error, stop, progress, keys=keys)
    announce(cfg, run.agent, budget, farm.n_workers, out, log)
    eta = Eta(budget)
    progress.start(run.generation, run.env_steps + run.validation_steps)
    try:
        if resume:  # the tracking rows a kill or a failed write left out, from the run file
            catch_up(callbacks, run.generation, run.report_of, Path(out), cfg)
        while cfg.goes_on(run.generation, run.env_steps + run.validation_steps):
            norm = run.norm()
            gen = run_generation(cfg, run.generation, run.strategy, evals, run.agent, norm, run.train_cap())
            log_warnings(gen, out, log)
            stats = run.record(gen, options.checkpoint_every, norm)
            elapsed = time.perf_counter() - t_start
            steps = run.env_steps + run.validation_steps
            left = eta(run.generation, steps, elapsed)
            progress.advance(run.generation, steps, left)
            log(progress_line(cfg, run, gen, stats, elapsed, left))
            if stopped_by_callback(callbacks, run, gen, stats, steps, elapsed, log):
                break
        test = run.finish(evals)
    except (FarmInterrupted, EvaluationFailed) as exc:
        raise run.stopped(exc) from None
    finally:
        progress.stop()
        close_all(callbacks)
        run.close()
    wall, cpu = time.perf_counter() - t_start, time.process_time() - cpu_start
    total = done_line(run, test, out, wall, cpu, log)
    return RunSummary(out, run.generation, total, run.champion_fitness, test.mean, test.std, wall)


def log_warnings(gen: Generation, out, log) -> None:
    """A generation's warning lines, and how to reproduce each failed validation."""
    for line in gen.warnings:
        log(line)
    for who in gen.validation.failed_individuals():
        log(
            "reproduce: "
            + synapto_command("replay", out, "--generation", gen.index, "--individual", who, "--validation")
        )


def done_line(run: EvolutionRun, test, out, wall: float, cpu: float, log) -> int:
    """Log the run's last line; its env steps in all (training, validation, selection, test)."""
    sel, tst = run.selection_steps, int(test.steps.sum())
    total = run.env_steps + run.validation_steps + sel + tst
    log(
        f"done in {_fmt_time(wall)}: {total:,} env steps "
        f"({run.env_steps:,} training, {run.validation_steps:,} validation, {sel:,} selection, {tst:,} test) "
        f"-> {out} (coordinator CPU {cpu:.1f} s, {100 * cpu / max(wall, 1e-9):.0f} % of wall time)"
    )
    return total


def run_status(out: Path) -> tuple[int, bool]:
    """``(generations completed, finished)`` of an existing run file."""
    with RunData(out, kind="evolve") as run:
        return run.completed, run.tested
