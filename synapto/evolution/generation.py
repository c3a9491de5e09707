"""One generation on the coordinator: ask the strategy, evaluate on the farm, validate,
tell the strategy -- and what the run file and the log line make of it.

The loop (:mod:`synapto.evolution.loop`) calls :func:`run_generation` once per
generation; everything random comes from the strategy's Generator and the seeds of
:mod:`synapto.common.seeding`, so a generation is a pure function of the strategy's state.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from synapto.common import faults, seeding
from synapto.evolution.config import EvolveConfig
from synapto.evolution.strategies.base import Candidates, Feedback, Strategy, rank_order
from synapto.evolution.worker.tasks import Episodes, EvalResult, EvalTask, SampleContext, merge_episodes
from synapto.parallel.results import Failure, Farm, MapStats, Results, TaskFailed

if TYPE_CHECKING:
    from synapto.common.noise import Samples
    from synapto.lineage import Lineage


@dataclass(frozen=True)
class EvaluationFailure:
    """An evaluation that raised, in the run's terms: which generation and individual,
    its episode seeds, and the farm's :class:`~synapto.parallel.results.Failure`."""

    generation: int
    individual: int  #: index in the population (the test episode for ``phase="test"``)
    seeds: np.ndarray
    failure: Failure
    phase: str = "training"  #: "training", "validation" or "test"


class EvaluationFailed(Exception):
    """An evaluation raised under ``on_error="abort"``."""

    def __init__(self, failure: EvaluationFailure):
        super().__init__(str(failure.failure))
        self.failure = failure


@dataclass
class Evaluations:
    """How this run maps evaluations on its farm (schedule, stop callback, errors, wire)."""

    farm: Farm  #: what map() runs on
    schedule: str = "dynamic"
    on_error: str = "abort"  #: "abort" or "skip"
    stop: Callable[[], bool] | None = None
    progress: Callable[[int, int], None] | None = None
    #: send a centre strategy's samples as noise keys (:class:`SampleContext`) rather than genomes
    keys: bool = True

    def map(
        self,
        tasks: list,
        generation: int,
        who: np.ndarray,
        phase: str,
        skip: bool | None = None,
        context: SampleContext | None = None,
    ) -> Results:
        """Results of ``tasks`` (:class:`EvalTask` s, or payloads of ``context``); ``who[i]``
        names task ``i`` in an :class:`EvaluationFailure`."""
        skip = self.on_error == "skip" if skip is None else skip
        if self.progress is not None and hasattr(self.progress, "phase"):
            self.progress.phase(phase, generation)
        try:
            return self.farm.map(
                tasks,
                schedule=self.schedule,
                stop=self.stop,
                progress=faults.during(phase, generation, self.progress),
                on_error="skip" if skip else "raise",
                context=context,
            )
        except TaskFailed as exc:
            i = exc.failure.index
            task = tasks[i] if context is None else context.task(tasks[i])
            seeds = np.asarray(task.episodes.seeds)
            raise EvaluationFailed(EvaluationFailure(generation, int(who[i]), seeds, exc.failure, phase)) from None
        finally:
            if self.progress is not None and hasattr(self.progress, "clear"):
                self.progress.clear()

    def candidates(
        self,
        genomes: np.ndarray,
        who: np.ndarray,
        seeds: np.ndarray,
        norms: list,
        generation: int,
        phase: str,
        agent,
        samples=None,
        skip: bool | None = None,
    ) -> tuple[list[EvalResult], dict[int, Failure]]:
        """Candidates ``genomes`` (K, n) on the same episodes ``seeds`` (V,), candidate ``k``
        with the observation normalisation ``norms[k]``: one task per candidate and episode,
        so that a phase of 2 candidates x 8 episodes keeps 16 workers busy; each candidate's
        result merged from its episodes (:func:`merge_episodes`), the same as one task of
        all its episodes.  ``samples``: the candidates are ``who`` of these samples (-1: the
        centre), sent as noise keys; they all share ``norms[0]`` then.  Also returns the
        first failure of each candidate whose task raised (``skip``), by candidate index."""
        K, V = len(genomes), len(seeds)
        pairs = [(k, e) for k in range(K) for e in range(V)]
        who_task = np.array([who[k] for k, _ in pairs], dtype=np.int64)
        if samples is not None and self.keys:
            context = SampleContext(samples, Episodes(np.asarray(seeds), False, norms[0] if K else None))
            results = self.map([(int(who[k]), e) for k, e in pairs], generation, who_task, phase, skip, context)
        else:
            tasks = [EvalTask(genomes[k], Episodes(seeds[e : e + 1], False, norms[k])) for k, e in pairs]
            results = self.map(tasks, generation, who_task, phase, skip)
        failures: dict[int, Failure] = {}
        for t in sorted(results.failures):
            failures.setdefault(t // V, results.failures[t])
        return [
            merge_episodes([results[k * V + e] for e in range(V)], agent.penalty(genomes[k])) for k in range(K)
        ], failures


def num(x: float, width: int = 9) -> str:
    """``x`` in about ``width`` characters (log lines stay short): fixed point, or exponent
    notation from a million on."""
    return f"{x:{width}.2f}" if abs(x) < 1e6 or not np.isfinite(x) else f"{x:{width}.3g}"


def failed_result(n_params: int, episodes: int) -> EvalResult:
    """What an evaluation that raised counts as (``--on-error skip``)."""
    return EvalResult(
        -np.inf, np.full(episodes, np.nan), np.zeros(episodes, dtype=np.int64), np.zeros(n_params), False, 0.0, 0.0
    )


@dataclass
class Validation:
    """The candidates of one generation re-evaluated on fresh validation episodes."""

    candidates: Candidates
    fitness: np.ndarray  #: (K,)
    returns: np.ndarray  #: (K, V)
    steps: np.ndarray  #: (K,) env steps of each candidate's validation
    seeds: np.ndarray  #: (V,) shared by the candidates
    #: candidate slot -> the failure of its evaluation (``--on-error skip``: fitness -inf)
    failures: dict[int, Failure] = field(default_factory=dict)

    def failed_individuals(self) -> list[int]:
        """The individuals (-1: a strategy's centre) whose validation raised."""
        return [int(self.candidates.individual[k]) for k in sorted(self.failures)]

    def warnings(self, g: int) -> list[str]:
        return [
            f"warning: generation {g} validation of individual {self.candidates.individual[k]} failed on rank "
            f"{f.rank} ({f.host}): {f.message}; its validation fitness set to -inf"
            for k, f in sorted(self.failures.items())
        ]


@dataclass
class Generation:
    """Everything one generation computed (the rows of the run file)."""

    index: int
    genomes: np.ndarray
    seeds: np.ndarray
    fitness: np.ndarray
    returns: np.ndarray
    steps: np.ndarray
    connections: np.ndarray
    nonfinite: np.ndarray
    failed: np.ndarray
    results: list[EvalResult]
    validation: Validation
    map_stats: MapStats
    timing: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    #: the strategy's arrays of this generation (``record_arrays`` before it was told)
    strategy_arrays: dict[str, np.ndarray] = field(default_factory=dict)
    #: the genomes as centre, step sizes and noise keys (:class:`synapto.common.noise.Samples`), if the strategy has
    #: them
    samples: Samples | Lineage | None = None

    def datasets(self, compact: bool = False) -> tuple[dict[str, np.ndarray], dict[str, Any] | None]:
        """The evaluations by their run-file names (:data:`synapto.store.evolve_rows.ROWS`, for
        :func:`synapto.store.evolve_rows.record`), and -- ``compact`` -- the genomes as their samples
        (``/samples``; else they are the ``population`` among the first)."""
        v = self.validation
        values = {
            "fitness": self.fitness,
            "returns": self.returns,
            "steps": self.steps,
            "seeds": self.seeds,
            "connections": self.connections,
            "nonfinite": self.nonfinite,
            "failed": self.failed,
            "validation/individual": v.candidates.individual,
            "validation/fitness": v.fitness,
            "validation/returns": v.returns,
            "validation/steps": v.steps,
            "validation/seeds": v.seeds,
        }
        if not compact:
            return {**values, "population": self.genomes}, None
        if self.samples is None:
            raise RuntimeError(f"generation {self.index} has no noise keys for a run file that stores samples")
        return values, self.samples.arrays()


def validate(
    cfg: EvolveConfig,
    g: int,
    strategy: Strategy,
    fitness: np.ndarray,
    evals: Evaluations,
    agent,
    norm=None,
    samples=None,
) -> Validation:
    """The strategy's candidates (by default the top ``K`` by training fitness), all on the
    same ``validate_episodes`` episodes of the VALIDATE stream of generation ``g`` (with
    the generation's observation normalisation ``norm``)."""
    K, V = cfg.validation_count, cfg.validate_episodes
    seeds = seeding.validation_seeds(cfg.seed, g, V)
    if K == 0:
        cand = Candidates(np.zeros(0, np.int64), np.zeros((0, agent.n_params)))
        return Validation(cand, np.zeros(0), np.zeros((0, V)), np.zeros(0, np.int64), seeds)
    cand = strategy.candidates(fitness, K)
    results, failures = evals.candidates(
        cand.genomes, cand.individual, seeds, [norm] * K, g, "validation", agent, samples=samples
    )
    return Validation(
        cand,
        np.array([r.fitness for r in results]),
        np.stack([r.returns for r in results]),
        np.array([int(r.steps.sum()) for r in results], dtype=np.int64),
        seeds,
        failures,
    )


def _train(
    evals: Evaluations, g: int, P: int, genomes: np.ndarray, seeds: np.ndarray, samples, norm, max_steps: int
) -> Results:
    """Generation ``g``'s training evaluations (``P`` individuals) on the farm: shaped,
    capped at ``max_steps``, counting observations where ``norm`` is given; with noise keys
    over the wire (``samples`` and ``evals.keys``) each task is only its sample's index."""
    count = norm is not None
    if samples is not None and evals.keys:  # noise keys over the wire: each task is the sample's index
        context = SampleContext(samples, Episodes(seeds, True, norm, count, True, max_steps))
        return evals.map(list(range(P)), g, np.arange(P), "training", context=context)
    tasks = [EvalTask(genomes[i], Episodes(seeds[i], True, norm, count, True, max_steps)) for i in range(P)]
    return evals.map(tasks, g, np.arange(P), "training")


def run_generation(
    cfg: EvolveConfig, g: int, strategy: Strategy, evals: Evaluations, agent, norm=None, max_steps: int = 0
) -> Generation:
    """Ask, evaluate on training episodes, validate, tell: generation ``g``.  ``norm``: the
    frozen observation normalisation ``(mean, std)`` of this generation (``--obs-norm``),
    whose training episodes then also count observations.  Training episodes run the
    run's shaping (:mod:`synapto.shaping`), capped at ``max_steps`` steps (0: no cap);
    validation never does."""
    P, E = cfg.population, cfg.episodes
    t0 = time.perf_counter()
    seeds = seeding.train_seeds(cfg.seed, g, P, E, common=cfg.crn)
    genomes = strategy.ask()
    faults.point("generation", g)
    samples = strategy.samples()
    results = _train(evals, g, P, genomes, seeds, samples, norm, max_steps)
    t_eval = time.perf_counter() - t0
    failed = np.zeros(P, dtype=bool)
    warnings = []
    for i, fail in results.failures.items():
        failed[i] = True
        results[i] = failed_result(agent.n_params, E)
        warnings.append(
            f"warning: generation {g} individual {i} failed on rank {fail.rank} ({fail.host}): "
            f"{fail.message}; fitness set to -inf"
        )
    fitness, nonfinite = screen(results, genomes, failed, g, warnings)
    stats = trace_stats(results, agent.n_params)
    connections = np.array([agent.connections(x) for x in genomes], dtype=np.int64)
    steps = np.array([int(r.steps.sum()) for r in results], dtype=np.int64)
    learn = learning_fitness(fitness, steps, E, cfg.envs.reward_shift)

    t_val = time.perf_counter()
    validation = validate(cfg, g, strategy, learn, evals, agent, norm, samples)
    t_val = time.perf_counter() - t_val
    warnings += validation.warnings(g)

    arrays = {k: np.array(v) for k, v in strategy.record_arrays().items()}
    t1 = time.perf_counter()
    strategy.tell(Feedback(g, learn, stats, connections, validation.candidates, validation.fitness))
    t_update = time.perf_counter() - t1
    return Generation(
        g,
        genomes,
        seeds,
        fitness,
        np.stack([r.returns for r in results]),
        steps,
        connections,
        nonfinite,
        failed,
        list(results),
        validation,
        results.stats,
        {"eval_wall": t_eval, "validation": t_val, "update": t_update},
        warnings,
        arrays,
        samples,
    )


def screen(results: Results, genomes: np.ndarray, failed: np.ndarray, g: int, warnings: list[str]):
    """The training ``fitness`` and ``nonfinite`` flags of generation ``g``'s ``results``: -inf
    for every non-finite one, whatever found it -- the rollout, a batched evaluation's -inf or
    NaN, or a genome that is not finite (a Discrete policy's argmax would act on it silently);
    one warning line for them all."""
    fitness = np.array([r.fitness for r in results])
    bad = ~failed & (~np.isfinite(fitness) | ~np.isfinite(genomes).all(axis=1))
    fitness[bad] = -np.inf
    nonfinite = np.array([r.nonfinite for r in results]) | bad
    bad = np.flatnonzero(nonfinite)
    if bad.size:
        some = ", ".join(str(i) for i in bad[:8]) + (", ..." if bad.size > 8 else "")
        warnings.append(
            f"warning: generation {g}: {bad.size} individual(s) with a non-finite action, return "
            f"or fitness ({some}); fitness set to -inf"
        )
    return fitness, nonfinite


def trace_stats(results, n_params: int) -> np.ndarray:
    """The evaluations' trace statistics, (P, n): zeros where a result has none (an agent
    without traces has none at all, and gets one array of zeros rather than P stacked)."""
    if all(r.stats is None for r in results):
        return np.zeros((len(results), n_params))
    return np.stack([r.stats if r.stats is not None else np.zeros(n_params) for r in results])


def learning_fitness(fitness: np.ndarray, steps: np.ndarray, episodes: int, reward_shift: float) -> np.ndarray:
    """The fitness the strategy learns from: the training fitness less ``reward_shift`` per
    env step (env option ``reward_shift``: sum over an episode of ``r_t - shift`` is its return
    less ``shift`` times its length), averaged like the returns over the ``episodes``."""
    if reward_shift == 0:
        return fitness
    return fitness - reward_shift * (steps / episodes)


def statistics(
    gen: Generation, strategy: Strategy, elite: int, env_steps: int, validation_steps: int
) -> dict[str, float]:
    """The ``/stats`` row of a generation (after the strategy was told)."""
    fitness, champion = gen.fitness, strategy.champion
    order = rank_order(fitness)
    fin = fitness[np.isfinite(fitness)]
    elite_f = fitness[order[:elite]]
    vf = gen.validation.fitness

    def s(fn, a):
        return float(fn(a)) if a.size else float("nan")

    return {
        "generation": float(gen.index),
        "env_steps": float(env_steps),
        "best_fitness": float(fitness[order[0]]),
        "best_ever_fitness": float(champion.fitness),
        "pop_mean": s(np.mean, fin),
        "pop_std": s(np.std, fin),
        "pop_min": s(np.min, fin),
        "pop_max": s(np.max, fin),
        "elite_mean": s(np.mean, elite_f),
        "elite_std": s(np.std, elite_f),
        "elite_min": s(np.min, elite_f),
        "elite_max": s(np.max, elite_f),
        "connections_mean": float(np.mean(gen.connections)),
        "connections_std": float(np.std(gen.connections)),
        "champion_connections": float(np.count_nonzero(champion.genome)),
        **strategy.record(),
        "nonfinite_count": float(np.count_nonzero(gen.nonfinite)),
        "failure_count": float(gen.failed.sum() + len(gen.validation.failures)),  # training and validation
        "validation_best": float(vf.max()) if vf.size else float("nan"),
        "validation_mean": float(vf[np.isfinite(vf)].mean()) if np.isfinite(vf).any() else float("nan"),
        "validation_env_steps": float(validation_steps),
    }
