"""Rollouts of one individual: fitness, env steps and trace statistics.

This is the per-step hot path: one ``policy.act`` and one ``env.step`` per step,
nothing else but a finiteness check of the action and two clock reads for the
time breakdown.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from synapto.lineage import Lineage
    from synapto.noise import Samples
    from synapto.shaping import Shaping


@dataclass(frozen=True)
class EvalTask:
    """Evaluate ``genome`` on one episode per seed."""

    genome: np.ndarray
    seeds: np.ndarray
    want_stats: bool = True
    #: observation normalisation ``(mean, std)`` the policy sees ``clip((obs - mean) / std)``
    #: through (None: raw observations); see :mod:`synapto.evolution.obs_norm`
    obs_norm: tuple[np.ndarray, np.ndarray] | None = None
    #: return the observations' count, sum and sum of squares (training episodes)
    count_obs: bool = False
    #: a training evaluation: its episodes run the run's shaping (:mod:`synapto.shaping`)
    shaped: bool = False
    #: step cap of each episode (0: none; the shaping's ``cap_factor``)
    max_steps: int = 0


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


def evaluate(agent, env_factory, genome: np.ndarray, seeds, want_stats: bool = True,
             obs_norm: tuple[np.ndarray, np.ndarray] | None = None, count_obs: bool = False) -> EvalResult:
    """Run ``genome`` for one episode per seed; pure function of (genome, seeds, obs_norm).

    ``env_factory()`` makes a fresh environment for every episode: Box2D worlds
    (BipedalWalker, LunarLander) keep internal state across ``reset`` -- the same
    seed after a different history gives a different episode -- so reusing an env
    would make results depend on which evaluations a rank ran before.

    Time split: ``env_seconds`` covers making, resetting, stepping and closing the
    env; ``agent_seconds`` the policy (construction, forward passes, the action
    check, trace updates and statistics, observation normalisation) and the loop's
    own bookkeeping.  Two clock reads per step (about 0.1 % of a BipedalWalker step).

    ``obs_norm``: the policy acts on normalised observations; ``count_obs``: the raw
    observations the policy saw (every reset and step observation before the last
    action) are counted, summed and squared per component in float64, so that the
    coordinator can merge them (:mod:`synapto.evolution.obs_norm`).  Observations of
    more than one dimension (images) reach the policy flattened.

    Non-finite results: an observation that is not finite (checked before the policy
    sees it, so it never reaches the policy's action nor the observation statistics), an
    action that is not finite (a Box action with an inf or NaN component, a Discrete
    action that is not a finite number), a non-finite return, or a non-finite fitness
    (returns that overflow their mean, a NaN penalty) end the evaluation with fitness
    -inf and ``nonfinite`` set, whatever the action space.
    """
    clock = time.perf_counter
    t0 = clock()
    policy = agent.policy(genome)
    act = record = acting(agent, policy, obs_norm, count_obs)
    if not (obs_norm is not None or count_obs):
        record = None
    discrete = agent.space.discrete
    check = not discrete
    isfinite = math.isfinite
    zeros = np.zeros(agent.space.act_dim)
    obs_zeros = np.zeros(agent.space.obs_dim)
    flat_obs = len(agent.space.obs_shape) <= 1
    n = len(seeds)
    returns = np.zeros(n)
    steps = np.zeros(n, dtype=np.int64)
    nonfinite = False
    t_env = 0.0
    t_agent = clock() - t0
    # overflow in a policy (a Hebbian trace that grows without bound) or an env either
    # saturates (tanh of inf is 1) or ends in a NaN that the checks below turn into fitness
    # -inf, counted and warned about once per generation: numpy's own warnings would
    # repeat that on every step of every worker
    with np.errstate(over="ignore", invalid="ignore"):
        for e in range(n):
            t0 = clock()
            env = env_factory()
            obs, _ = env.reset(seed=int(seeds[e]))
            step = env.step
            t_loop = t2 = clock()
            t_env += t_loop - t0
            policy.reset()
            if record is not None:
                record.start()
            total, count = 0.0, 0
            t_step = 0.0  # this episode's time in env.step; the rest of the loop is the agent's
            while True:
                # obs . 0 is NaN iff a component is inf or NaN (an image is checked whole)
                try:
                    obs_ok = isfinite(obs.dot(obs_zeros)) if flat_obs else bool(np.isfinite(obs).all())
                except (AttributeError, TypeError, ValueError):  # not a float array
                    obs_ok = bool(np.isfinite(np.asarray(obs, dtype=np.float64)).all())
                if not obs_ok:
                    nonfinite = True
                    t2 = clock()
                    break
                action = act(obs)
                if check:
                    # action . 0 is NaN iff a component is inf or NaN, and cannot overflow
                    try:
                        finite = isfinite(action.dot(zeros))
                    except (AttributeError, TypeError, ValueError):  # not a flat float array
                        finite = isfinite(float(np.sum(action)))
                    if not finite:
                        nonfinite = True
                        t2 = clock()
                        break
                elif action.__class__ is not int and not _finite_choice(action):
                    nonfinite = True
                    t2 = clock()
                    break
                t1 = clock()
                obs, reward, terminated, truncated, _ = step(action)
                t2 = clock()
                t_step += t2 - t1
                total += float(reward)
                count += 1
                if terminated or truncated:
                    break
            t_env += t_step
            t_agent += t2 - t_loop - t_step
            t0 = clock()
            env.close()
            t_env += clock() - t0
            t0 = clock()
            policy.end_episode()
            if record is not None:
                record.end()
            t_agent += clock() - t0
            returns[e], steps[e] = (np.nan if nonfinite else total), count
            if nonfinite or not math.isfinite(total):
                nonfinite = True
                break
    fitness = -math.inf
    if not nonfinite:
        fitness = float(np.mean(returns)) - agent.penalty(genome)
        if not math.isfinite(fitness):  # finite returns can overflow their mean; a penalty can be NaN
            nonfinite, fitness = True, -math.inf
    t0 = clock()
    stats = policy.trace_stats() if want_stats else None
    t_agent += clock() - t0
    if count_obs:
        return EvalResult(fitness, returns, steps, stats, nonfinite, t_env, t_agent,
                          record.count, record.sum, record.sumsq)
    return EvalResult(fitness, returns, steps, stats, nonfinite, t_env, t_agent)


def merge_episodes(parts: list[EvalResult | None], penalty: float) -> EvalResult:
    """One evaluation's result from its episodes evaluated apart (``parts[e]``: the result
    of a task holding episode ``e`` alone; None where that task raised) -- exactly what
    :func:`evaluate` gives for all the episodes in one task: an evaluation stops at its
    first non-finite episode (the later ones count as 0 return and 0 steps), and one
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
    return EvalResult(fitness, returns, steps, None, nonfinite, sum(p.env_seconds for p in done[:ran]),
                      sum(p.agent_seconds for p in done[:ran]))


@dataclass(frozen=True, eq=False)
class SampleContext:
    """What the tasks of one map share when their genomes are samples of one generation
    (:class:`synapto.noise.Samples`): the farm sends it to each worker once, and each
    task's payload is only ``i`` (sample ``i`` on its own episodes ``seeds[i]``) or
    ``(i, e)`` (sample ``i`` -- the centre for ``i = -1`` -- on episode ``e`` of the
    episodes ``seeds`` that all share).  :meth:`task` makes the :class:`EvalTask`."""

    samples: Samples | Lineage  #: a centre strategy's samples, or a GA's lineage
    seeds: np.ndarray  #: (P, E): each sample's own episodes; or (V,): episodes shared by all
    want_stats: bool = True
    obs_norm: tuple[np.ndarray, np.ndarray] | None = None
    count_obs: bool = False
    shaped: bool = False  #: training tasks (:attr:`EvalTask.shaped`)
    max_steps: int = 0  #: their step cap (:attr:`EvalTask.max_steps`)

    def genome(self, i: int) -> np.ndarray:
        # i = -1, the centre, is asked of a centre strategy's Samples only
        return self.samples.centre if i < 0 else self.samples.genome(i)  # type: ignore[union-attr]

    def shape(self, payload) -> tuple[int, bool]:
        """``(episodes, want_stats)`` of a payload's task, without building its genome."""
        return (1 if isinstance(payload, tuple) else self.seeds.shape[1]), self.want_stats

    def task(self, payload) -> EvalTask:
        if isinstance(payload, tuple):
            i, e = payload
            seeds = self.seeds[e:e + 1]
        else:
            i, seeds = payload, self.seeds[payload]
        return EvalTask(self.genome(i), seeds, self.want_stats, self.obs_norm, self.count_obs, self.shaped,
                        self.max_steps)


def acting(agent, policy, obs_norm=None, count_obs: bool = False):
    """The callable that turns an env's observation into ``policy``'s action: the policy's
    own ``act``, behind flattening (observations of more than one dimension) and the
    observation normalisation (:class:`~synapto.evolution.obs_norm.NormalisedActor`,
    which also counts).  Everything that plays a genome (evaluation, render, draw) uses it."""
    act = policy.act
    if len(agent.space.obs_shape) > 1:  # an image, say: the policy sees it flattened
        act = _flattening(act)
    if obs_norm is not None or count_obs:
        from synapto.evolution.obs_norm import NormalisedActor

        act = NormalisedActor(act, agent.space.obs_dim, obs_norm, count_obs)
    return act


def _flattening(act):
    def flat(obs):
        return act(np.ravel(obs))

    return flat


def _finite_choice(action) -> bool:
    """A Discrete action that is not a Python int: acceptable if it is a finite number."""
    try:
        return math.isfinite(float(action))
    except (TypeError, ValueError):
        return False


@dataclass(frozen=True)
class EvolveSpec:
    """Picklable recipe a worker uses to build its :class:`Evaluator` (farm setup)."""

    env: str
    agent: str
    hidden: tuple
    agent_options: dict
    make_kwargs: dict = field(default_factory=dict)  #: gymnasium.make's keyword arguments (env options)
    shaping: Shaping | None = None  #: the run's shaping of training episodes (None: none)
    #: the simulator of training episodes ("gymnasium" or "envpool": :mod:`synapto.evolution.fast_box2d`)
    train_backend: str = "gymnasium"

    def build(self) -> Evaluator:
        return Evaluator(self)


class Evaluator:
    """A worker's env and agent, reused for every task."""

    def __init__(self, spec: EvolveSpec):
        from functools import partial

        from synapto.agents import build_agent
        from synapto.envs import SpaceInfo, make_env

        self.make_env = partial(make_env, spec.env, **spec.make_kwargs)
        self.shaping, self.env_id, self.fast = spec.shaping, spec.env, spec.train_backend == "envpool"
        env = self.make_env()
        self.agent = build_agent(spec, SpaceInfo.of(env))
        env.close()

    def __call__(self, task, context: SampleContext | None = None) -> EvalResult:
        if context is not None:
            task = context.task(task)
        if task.shaped and self.fast:  # a training task alone (replay, a failed chunk's retry)
            from synapto.evolution.fast_box2d import evaluate_tasks

            return evaluate_tasks(self.agent, self.env_id, [task], self.shaping)[0]
        make: Callable[[], Any] = self.make_env
        if task.shaped and self.shaping is not None:
            shaping, cap = self.shaping, task.max_steps

            def make():
                return shaping.wrap(self.make_env(), cap)
        return evaluate(self.agent, make, task.genome, task.seeds, task.want_stats,
                        task.obs_norm, task.count_obs)
