"""What travels between the coordinator and a worker: an evaluation's task
(:class:`EvalTask`: a genome on its :class:`Episodes`), its result (:class:`EvalResult`),
the data the tasks of one map share (:class:`SampleContext`), and :func:`merge_episodes`, which puts together an
evaluation whose episodes ran as separate tasks.

Plain data, so both sides import it: the coordinator's generation and replay build
tasks and read results; the worker's evaluators (:mod:`.evaluate`, :mod:`.batched`,
:mod:`.fast_box2d`) take the one and make the other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Episodes:
    """Which episodes an evaluation plays and what it records: what a task
    (:class:`EvalTask`) and the tasks of one map (:class:`SampleContext`) share."""

    seeds: np.ndarray  #: one episode per seed (a :class:`SampleContext`'s: (P, E) or (V,))
    want_stats: bool = True
    #: observation normalisation ``(mean, std)`` the policy sees ``clip((obs - mean) / std)``
    #: through (None: raw observations); see :mod:`synapto.evolution.obs_norm`
    obs_norm: tuple[np.ndarray, np.ndarray] | None = None
    #: return the observations' count, sum and sum of squares (training episodes)
    count_obs: bool = False
    #: a training evaluation: its episodes run the run's shaping (:mod:`synapto.shaping`)
    shaped: bool = False
    #: step cap of each episode (0: none; the shaping's ``cap_factor`` and ``cap_steps``)
    max_steps: int = 0
    #: also return each episode's outcome and action magnitude (test episodes; :mod:`synapto.outcomes`)
    diagnose: bool = False


@dataclass(frozen=True)
class EvalTask:
    """Evaluate ``genome`` on ``episodes``."""

    genome: np.ndarray
    episodes: Episodes


@dataclass
class EvalResult:
    fitness: float  #: mean return minus the agent's penalty; -inf if non-finite
    returns: np.ndarray  #: (E,) return of each episode
    steps: np.ndarray  #: (E,) env steps of each episode
    stats: np.ndarray | None  #: per-connection trace statistics (genome layout)
    nonfinite: bool  #: a non-finite action or return occurred
    env_seconds: float  #: time inside env.reset/env.step
    agent_seconds: float  #: time inside the policy (forward passes, traces)
    obs_count: int = 0  #: observations counted (``count_obs``)
    obs_sum: np.ndarray | None = None  #: their sum (float64), per component
    obs_sumsq: np.ndarray | None = None  #: their sum of squares
    #: (E,) int8 each episode's outcome (:mod:`synapto.outcomes`; ``diagnose`` tasks only, else None)
    outcomes: np.ndarray | None = None
    #: (E,) each episode's action magnitude (:mod:`synapto.outcomes`; ``diagnose`` tasks only, else None)
    action_cost: np.ndarray | None = None


def merge_episodes(parts: list[EvalResult | None], penalty: float) -> EvalResult:
    """One evaluation's result from its episodes evaluated apart (``parts[e]``: the result
    of a task holding episode ``e`` alone; None where that task raised) -- exactly what
    :func:`~synapto.evolution.worker.evaluate.evaluate` gives for all the episodes in one task: an
    evaluation stops at its first non-finite episode (the later ones count as 0 return and 0 steps), and one
    whose task raised counts as a failed evaluation (fitness -inf, returns NaN, 0 steps).
    ``penalty``: ``agent.penalty(genome)``.  Trace statistics and observation counts are
    not merged (the phases that split episodes ask for neither)."""
    n = len(parts)
    returns, steps = np.zeros(n), np.zeros(n, dtype=np.int64)
    done = [p for p in parts if p is not None]
    if len(done) < n:
        return EvalResult(-math.inf, np.full(n, np.nan), steps, None, False, 0.0, 0.0)
    nonfinite, ran = False, n
    for e, p in enumerate(done):
        returns[e], steps[e] = p.returns[0], p.steps[0]
        if p.nonfinite:
            nonfinite, ran = True, e + 1
            break
    fitness = -math.inf
    if not nonfinite:
        fitness = float(np.mean(returns)) - penalty
        if not math.isfinite(fitness):
            nonfinite, fitness = True, -math.inf
    return EvalResult(
        fitness,
        returns,
        steps,
        None,
        nonfinite,
        sum(p.env_seconds for p in done[:ran]),
        sum(p.agent_seconds for p in done[:ran]),
    )


@dataclass(frozen=True, eq=False)
class SampleContext:
    """What the tasks of one map share when their genomes are samples of one generation
    (:class:`synapto.common.noise.Samples`): the farm sends it to each worker once, and each
    task's payload is only ``i`` (sample ``i`` on its own episodes ``seeds[i]``) or
    ``(i, e)`` (sample ``i`` -- the centre for ``i = -1`` -- on episode ``e`` of the
    episodes ``seeds`` that all share).  :meth:`task` makes the :class:`EvalTask`."""

    samples: Any  #: a :class:`synapto.common.noise.Samples` (or a GA's :class:`synapto.lineage.Lineage`)
    #: ``seeds`` (P, E): each sample's own episodes; or (V,): episodes shared by all
    episodes: Episodes

    def genome(self, i: int) -> np.ndarray:
        return self.samples.centre if i < 0 else self.samples.genome(i)

    def shape(self, payload) -> tuple[int, bool, bool]:
        """``(episodes, want_stats, diagnose)`` of a payload's task, without building its genome."""
        ep = self.episodes
        return (1 if isinstance(payload, tuple) else ep.seeds.shape[1]), ep.want_stats, ep.diagnose

    def task(self, payload) -> EvalTask:
        ep = self.episodes
        if isinstance(payload, tuple):
            i, e = payload
            seeds = ep.seeds[e : e + 1]
        else:
            i, seeds = payload, ep.seeds[payload]
        return EvalTask(
            self.genome(i),
            Episodes(seeds, ep.want_stats, ep.obs_norm, ep.count_obs, ep.shaped, ep.max_steps, ep.diagnose),
        )
