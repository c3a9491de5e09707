"""The honest final champion: choose among the strategy's final candidates on fresh
episodes of a selection stream of their own, then test the chosen one on the test stream.

A champion chosen on the same episodes that picked it overstates itself (it is the
luckiest of many); the selection episodes (``--select-episodes``, stream SELECT) are
fresh for every candidate and shared between them (common random numbers), and the
test episodes (``--test-episodes``, stream TEST) are fresh again, so the test figure is
an unbiased estimate of the chosen champion's return.  Each candidate runs with the
observation normalisation of the generation it was judged in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from synapto.common import seeding
from synapto.evolution.config import EvolveConfig
from synapto.evolution.generation import Evaluations, num
from synapto.evolution.strategies.base import Champion, rank_order
from synapto.evolution.worker.tasks import Episodes, EvalTask


@dataclass
class Selection:
    """The final candidates re-evaluated on the selection episodes."""

    candidates: list[Champion]
    seeds: np.ndarray  #: (S,) shared by the candidates
    fitness: np.ndarray  #: (C,) mean selection return minus the agent's penalty
    returns: np.ndarray  #: (C, S)
    steps: np.ndarray  #: (C,) env steps of each candidate's selection episodes
    chosen: int  #: index of the champion (best selection fitness, ties to the earlier candidate)


@dataclass
class Test:
    seeds: np.ndarray
    returns: np.ndarray
    steps: np.ndarray
    #: each episode's outcome and action magnitude (:mod:`synapto.outcomes`)
    outcomes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int8))
    action_cost: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def mean(self) -> float | None:
        return float(np.mean(self.returns)) if self.returns.size else None

    @property
    def std(self) -> float | None:
        return float(np.std(self.returns)) if self.returns.size else None


def select(
    cfg: EvolveConfig,
    candidates: list[Champion],
    evals: Evaluations,
    generation: int,
    norm_of: Callable[[int], tuple | None],
    agent,
) -> Selection:
    """Evaluate every candidate on the same ``select_episodes`` episodes (one task per
    candidate and episode); the best wins."""
    seeds = seeding.selection_seeds(cfg.seed, cfg.select_episodes)
    results, _ = evals.candidates(
        np.array([c.genome for c in candidates]),
        np.arange(len(candidates)),
        seeds,
        [norm_of(c.generation) for c in candidates],
        generation,
        "selection",
        agent,
        skip=False,
    )
    fitness = np.array([r.fitness for r in results])
    return Selection(
        candidates,
        seeds,
        fitness,
        np.stack([r.returns for r in results]),
        np.array([int(r.steps.sum()) for r in results], dtype=np.int64),
        int(rank_order(fitness)[0]),
    )


def test(cfg: EvolveConfig, champion: Champion, evals: Evaluations, generation: int, norm: tuple | None) -> Test:
    """The champion on ``test_episodes`` episodes of the test stream, one task each, with
    each episode's outcome and action magnitude (:mod:`synapto.outcomes`)."""
    seeds = seeding.test_seeds(cfg.seed, cfg.test_episodes)
    if not cfg.test_episodes:
        return Test(seeds, np.zeros(0), np.zeros(0, dtype=np.int64))
    tasks = [
        EvalTask(champion.genome, Episodes(seeds[e : e + 1], False, norm, diagnose=True))
        for e in range(cfg.test_episodes)
    ]
    results = evals.map(tasks, generation, np.arange(len(tasks)), "test", skip=False)

    def joined(name: str) -> np.ndarray:
        return np.concatenate([getattr(r, name) for r in results])

    return Test(seeds, joined("returns"), joined("steps"), joined("outcomes"), joined("action_cost"))


def named(generation: int, generations: int) -> str:
    """The genome a champion of ``generation`` is, in a run of ``generations`` completed
    generations (numbered from 0): a strategy's final centre carries the number of the
    generation it would have started (``generations``), which no generation line names."""
    if generation >= generations:
        return f"the final centre, after generation {generations - 1}"
    return f"generation {generation}"


def summary_line(champion: Champion, validated: bool, selection: Selection | None, t: Test, generations: int) -> str:
    """Validation (or training), selection and test figures side by side."""
    chosen_on = (
        "not validated"
        if np.isnan(champion.fitness)
        else f"{'validation' if validated else 'training'} {num(champion.fitness, 0)}"
    )
    parts = [f"champion ({named(champion.generation, generations)}): {chosen_on}"]
    if selection is not None:
        parts.append(
            f"selection {num(selection.fitness[selection.chosen], 0)} "
            f"({selection.returns.shape[1]} episodes, best of {len(selection.candidates)})"
        )
    if t.mean is not None and t.std is not None:  # test episodes ran
        parts.append(f"test {num(t.mean, 0)} +/- {num(t.std, 0)} ({t.returns.size} episodes)")
    return ", ".join(parts)
