"""Re-run stored evaluations from a run file and compare them bit for bit."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from synapto.common import seeding
from synapto.common.errors import RunFileError, UsageError
from synapto.evolution.config import EvolveConfig
from synapto.evolution.loop import restore_strategy, spec_of
from synapto.evolution.obs_norm import ObsStats
from synapto.evolution.worker.fast_box2d import require
from synapto.evolution.worker.tasks import Episodes, EvalTask
from synapto.parallel.results import TaskFailed
from synapto.store import RunData, read_checkpoint


@dataclass
class ReplayItem:
    generation: int
    individual: int
    genome: np.ndarray
    seeds: np.ndarray
    fitness: float | None  #: None for a generation that did not complete
    returns: np.ndarray | None
    norm: tuple[np.ndarray, np.ndarray] | None = None  #: the generation's observation normalisation
    shaped: bool = False  #: a training evaluation: the run's shaping applies (:mod:`synapto.shaping`)
    max_steps: int = 0  #: its training episodes' step cap (0: none)


@dataclass
class ReplayPlan:
    path: Path
    config: EvolveConfig
    items: list[ReplayItem]
    note: str


def plan_replay(path, generation=None, individual=None, sample=None, sample_seed=0, validation=False) -> ReplayPlan:
    """Read what to replay; one-line errors for bad files and out-of-range picks.

    With ``validation`` the validation evaluations (fresh episodes of the top
    candidates) are replayed instead of the training ones.  ``--sample`` leaves out
    evaluations recorded as failed (``--on-error skip``: there is no result to compare)
    and says how many.
    """
    if sample is None and (generation is None or individual is None):
        raise UsageError("replay needs --generation G --individual I, or --sample K")
    if sample is not None and (generation is not None or individual is not None):
        raise UsageError("replay takes either --generation/--individual or --sample, not both")
    with RunData(path, kind="evolve") as run:
        cfg = EvolveConfig.from_json(run.config_json)
        done = run.completed
        P = cfg.population
        if sample is None and generation == done and not run.tested:
            return _plan_unfinished(Path(path), cfg, generation, individual, validation)
        if done == 0:
            raise RunFileError(f"{str(path)!r} has no completed generation to replay")
        if sample is not None:
            picks, note = _sampled(run, path, done, P, sample, sample_seed)
        else:
            picks, note = _chosen(run, done, P, generation, individual, validation)
        if validation:
            return _plan_validation(Path(path), run, cfg, done, generation, individual, sample, sample_seed)
        items = [
            ReplayItem(
                g,
                i,
                run.population(g, i),
                run.seeds(g, i),
                float(run.fitness(g, i)),
                run.returns(g, i),
                run.obs_norm(g),
                True,
                training_cap(cfg, run, g),
            )
            for g, i in picks
        ]
    return ReplayPlan(Path(path), cfg, items, note)


def _sampled(run, path, done: int, P: int, sample: int, sample_seed: int) -> tuple[list, str]:
    """``--sample``: the training evaluations drawn (leaving out those recorded as failed), and the note."""
    if sample < 1:
        raise UsageError(f"--sample must be >= 1, got {sample}")
    failed = run.failed()
    ok = np.flatnonzero(~failed.ravel())
    if ok.size == 0:
        raise RunFileError(f"{str(path)!r}: every evaluation is recorded as failed; nothing to replay")
    rng = seeding.generator(sample_seed, seeding.Stream.REPLAY_SAMPLE)
    if failed.any():
        flat = ok[rng.choice(ok.size, size=min(sample, ok.size), replace=False)]
    else:  # the draw of files without failures, as it always was
        flat = rng.choice(done * P, size=min(sample, done * P), replace=False)
    picks = sorted((int(x) // P, int(x) % P) for x in flat)
    note = f"replaying {len(picks)} evaluation(s) drawn with --sample-seed {sample_seed}"
    if failed.any():
        note += f" (leaving out the {int(failed.sum())} recorded as failed)"
    return picks, note


def _chosen(run, done: int, P: int, generation: int, individual: int, validation: bool) -> tuple[list, str]:
    """``--generation G --individual I``, checked against the run: the one pick, and the note."""
    if not 0 <= generation < done:
        raise UsageError(f"--generation {generation} is out of range: the run has generations 0..{done - 1}")
    if not 0 <= individual < P and not (validation and individual == -1):
        raise UsageError(
            f"--individual {individual} is out of range: the population has 0..{P - 1}"
            + (" (or -1, a strategy's centre, with --validation)" if validation else "")
        )
    if not validation and run.failed(generation, individual):
        raise UsageError(
            f"generation {generation} individual {individual} is recorded as failed "
            f"(--on-error skip): it has no result to compare"
        )
    return [(generation, individual)], f"replaying generation {generation}, individual {individual}"


def training_cap(cfg: EvolveConfig, run, generation: int) -> int:
    """The step cap generation ``generation``'s training episodes ran with (the shaping's
    ``cap_factor`` of the previous generation's ``/steps``, its ``cap_steps``; 0: none)."""
    shaping = cfg.envs.shaping
    previous = np.asarray(run.steps(generation - 1)) if shaping.cap_factor and generation > 0 else None
    return shaping.cap(previous, cfg.episodes)


def _plan_validation(path, run, cfg, done, generation, individual, sample, sample_seed) -> ReplayPlan:
    K = cfg.validation_count
    if K == 0:
        raise UsageError(f"{str(path)!r} was run without validation (validate_episodes = 0)")
    who = run.validation_individual()
    if sample is not None:
        rng = seeding.generator(sample_seed, seeding.Stream.REPLAY_SAMPLE)
        flat = rng.choice(done * K, size=min(sample, done * K), replace=False)
        picks = sorted((int(x) // K, int(x) % K) for x in flat)
        note = f"replaying {len(picks)} validation evaluation(s) drawn with --sample-seed {sample_seed}"
    else:
        slots = np.flatnonzero(who[generation] == individual)
        if slots.size == 0:
            raise UsageError(
                f"--individual {individual} was not validated in generation {generation}; "
                f"validated: {sorted(int(i) for i in who[generation])}"
            )
        picks = [(generation, int(slots[0]))]
        note = f"replaying the validation of generation {generation}, individual {individual}"

    def genome(g, i):  # individual -1: the strategy's centre of that generation
        return run.population(g, i) if i >= 0 else run.strategy("centre", g)

    items = [
        ReplayItem(
            g,
            int(who[g, j]),
            genome(g, int(who[g, j])),
            run.validation_seeds(g),
            float(run.validation_fitness(g, j)),
            run.validation_returns(g, j),
            run.obs_norm(g),
        )
        for g, j in picks
    ]
    return ReplayPlan(path, cfg, items, note)


def _plan_unfinished(
    path: Path, cfg: EvolveConfig, generation: int, individual: int, validation: bool = False
) -> ReplayPlan:
    """Replay an individual of the generation that did not complete (e.g. one whose
    evaluation raised): its genome is in the checkpoint (``validation`` and individual -1:
    the strategy's centre), its seeds (training or validation) follow from the config."""
    checkpoint = read_checkpoint(path)
    if checkpoint is None or checkpoint.scalars["generation"] != generation:
        raise UsageError(f"--generation {generation} did not complete and {str(path)!r} has no checkpoint of it")
    if not 0 <= individual < cfg.population and not (validation and individual == -1):
        raise UsageError(f"--individual {individual} is out of range: the population has 0..{cfg.population - 1}")
    if validation and not cfg.validation_count:
        raise UsageError(f"{str(path)!r} was run without validation (validate_episodes = 0)")
    strategy = restore_strategy(cfg, checkpoint)
    genomes = strategy.ask()
    if validation:
        seeds = seeding.validation_seeds(cfg.seed, generation, cfg.validate_episodes)
        centre = strategy.record_arrays().get("centre")
        if individual == -1 and centre is None:
            raise UsageError(f"--individual -1 (a strategy's centre): {cfg.strategy} has none")
        genome = np.asarray(centre) if individual == -1 else genomes[individual]
    else:
        seeds = seeding.train_seeds(cfg.seed, generation, cfg.population, cfg.episodes, common=cfg.crn)[individual]
        genome = genomes[individual]
    norm = None
    if cfg.obs_norm:
        stats = ObsStats(len(checkpoint.arrays["obs_sum"]))
        stats.restore(checkpoint.arrays)
        norm = stats.frozen()
    if validation:  # validation episodes: the task's own, unshaped and uncapped
        item = ReplayItem(generation, individual, genome, seeds, None, None, norm)
    else:
        with RunData(path, kind="evolve") as run:
            cap = training_cap(cfg, run, generation)
        item = ReplayItem(generation, individual, genome, seeds, None, None, norm, True, cap)
    what = "the validation of individual" if validation else "individual"
    return ReplayPlan(
        path,
        cfg,
        [item],
        f"replaying generation {generation} (not completed: from the checkpoint), {what} {individual}",
    )


def same_float(a, b) -> bool:
    """Bit-identical float64 values (NaN equal to NaN)."""
    return np.asarray(a, np.float64).tobytes() == np.asarray(b, np.float64).tobytes()


def run_replay(plan: ReplayPlan, farm, log=print) -> bool:
    log(plan.note)
    if any(it.shaped for it in plan.items):  # training episodes replay where the run played them
        require(plan.config)
    farm.setup(spec_of(plan.config))

    try:
        results = farm.map(
            [
                EvalTask(it.genome, Episodes(it.seeds, False, it.norm, shaped=it.shaped, max_steps=it.max_steps))
                for it in plan.items
            ]
        )
    except TaskFailed as exc:
        f = exc.failure
        it = plan.items[f.index]
        log(f"generation {it.generation} individual {it.individual} raised on rank {f.rank} ({f.host}):\n{f.traceback}")
        return False
    matches = unstored = 0
    for it, r in zip(plan.items, results):
        if it.fitness is None:
            log(
                f"generation {it.generation} individual {it.individual}: no stored result to compare; "
                f"recomputed {r.fitness!r}"
            )
            unstored += 1
            continue
        ok = same_float(it.fitness, r.fitness) and same_float(it.returns, r.returns)
        matches += ok
        log(
            f"generation {it.generation} individual {it.individual}: stored {it.fitness!r} "
            f"recomputed {r.fitness!r} {'match' if ok else 'MISMATCH'}"
        )
    compared = len(plan.items) - unstored
    if compared:
        log(f"{matches}/{compared} bit-identical")
    if unstored:
        log(f"{unstored} evaluation(s) without a stored result: recomputed, nothing compared")
    return matches == compared
