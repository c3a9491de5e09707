"""Rollouts of one individual, one env at a time: fitness, env steps and trace statistics
(:func:`evaluate`), and the worker's handler that runs them (:class:`Evaluator`, built
from an :class:`~synapto.evolution.worker.spec.EvolveSpec`).

This is the per-step hot path: one ``policy.act`` and one ``env.step`` per step,
nothing else but a finiteness check of the action and two clock reads for the
time breakdown.  The tasks and results themselves: :mod:`.tasks`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from synapto.agents import build_agent
from synapto.envs import SpaceInfo, make_env
from synapto.evolution.obs_norm import NormalisedActor
from synapto.evolution.worker.tasks import EvalResult, EvalTask, SampleContext
from synapto.outcomes import NOT_RUN, STOPPED, ActionMeter, outcome


def evaluate(
    agent,
    env_factory,
    genome: np.ndarray,
    seeds,
    want_stats: bool = True,
    obs_norm: tuple[np.ndarray, np.ndarray] | None = None,
    count_obs: bool = False,
    diagnose: bool = False,
) -> EvalResult:
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

    ``diagnose``: the result also holds each episode's outcome and action magnitude
    (:mod:`synapto.outcomes`), taken from the steps the episodes take anyway.
    """
    clock = time.perf_counter
    t0 = clock()
    policy = agent.policy(genome)
    act = record = acting(agent, policy, obs_norm, count_obs)
    if not (obs_norm is not None or count_obs):
        record = None
    meter = None
    if diagnose and not agent.space.discrete:
        act = meter = ActionMeter(act, agent.space.low, agent.space.high)
    t_agent = clock() - t0
    returns, steps, ends, cost, nonfinite, t_env, t_play = _episodes(
        env_factory, seeds, policy, act, record, _checks(agent.space), meter
    )
    counted = record if count_obs else None
    result = _result(agent, genome, policy, returns, steps, nonfinite, want_stats, t_env, t_agent + t_play, counted)
    if diagnose:
        result.outcomes, result.action_cost = ends, cost
    return result


def _episodes(env_factory, seeds, policy, act, record, checks: tuple, meter):
    """One episode per seed, until the first non-finite one: ``(returns, steps, outcomes,
    action magnitudes, nonfinite, env seconds, agent seconds)``."""
    n = len(seeds)
    returns = np.zeros(n)
    steps = np.zeros(n, dtype=np.int64)
    ends, cost = np.full(n, NOT_RUN, dtype=np.int8), np.full(n, np.nan)
    nonfinite = False
    t_env = t_agent = 0.0
    # overflow in a policy (a Hebbian trace that grows without bound) or an env either
    # saturates (tanh of inf is 1) or ends in a NaN that the checks below turn into fitness
    # -inf, counted and warned about once per generation: numpy's own warnings would
    # repeat that on every step of every worker
    with np.errstate(over="ignore", invalid="ignore"):
        for e in range(n):
            if meter is not None:
                meter.total = 0.0
            total, count, nonfinite, env_s, agent_s, ends[e] = _episode(
                env_factory, int(seeds[e]), policy, act, record, checks
            )
            t_env += env_s
            t_agent += agent_s
            returns[e], steps[e] = (np.nan if nonfinite else total), count
            if meter is not None:
                cost[e] = meter.total
            if nonfinite or not math.isfinite(total):
                nonfinite = True
                break
    return returns, steps, ends, cost, nonfinite, t_env, t_agent


def _checks(space) -> tuple:
    """What the per-step checks need of the env's spaces: ``(check the action as an array,
    zeros of the action's size, zeros of the observation's size, flat observations)``."""
    return not space.discrete, np.zeros(space.act_dim), np.zeros(space.obs_dim), len(space.obs_shape) <= 1


def _episode(env_factory, seed: int, policy, act, record, checks: tuple):
    """One episode on a fresh env: ``(return, steps, nonfinite, env seconds, agent seconds,
    outcome)`` (:mod:`synapto.outcomes`)."""
    clock = time.perf_counter
    t0 = clock()
    env = env_factory()
    obs, _ = env.reset(seed=seed)
    t_loop = clock()
    t_env = t_loop - t0
    policy.reset()
    if record is not None:
        record.start()
    total, count, nonfinite, t_step, t_end, end = _play(obs, env.step, act, checks)
    t_env += t_step
    t_agent = t_end - t_loop - t_step  # the rest of the loop is the agent's
    t0 = clock()
    env.close()
    t_env += clock() - t0
    t0 = clock()
    policy.end_episode()
    if record is not None:
        record.end()
    t_agent += clock() - t0
    return total, count, nonfinite, t_env, t_agent, end


def _play(obs, step, act, checks: tuple):
    """Act and step from ``obs`` until the episode ends or an observation or action is not
    finite: ``(return, steps, nonfinite, seconds inside env.step, the clock at the end, outcome)``."""
    clock = time.perf_counter
    isfinite = math.isfinite
    check, zeros, obs_zeros, flat_obs = checks
    total, count = 0.0, 0
    t_step = 0.0
    while True:
        # obs . 0 is NaN iff a component is inf or NaN (an image is checked whole)
        try:
            obs_ok = isfinite(obs.dot(obs_zeros)) if flat_obs else bool(np.isfinite(obs).all())
        except (AttributeError, TypeError, ValueError):  # not a float array
            obs_ok = bool(np.isfinite(np.asarray(obs, dtype=np.float64)).all())
        if not obs_ok:
            return total, count, True, t_step, clock(), STOPPED
        action = act(obs)
        if check:
            # action . 0 is NaN iff a component is inf or NaN, and cannot overflow
            try:
                finite = isfinite(action.dot(zeros))
            except (AttributeError, TypeError, ValueError):  # not a flat float array
                finite = isfinite(float(np.sum(action)))
            if not finite:
                return total, count, True, t_step, clock(), STOPPED
        elif action.__class__ is not int and not _finite_choice(action):
            return total, count, True, t_step, clock(), STOPPED
        t1 = clock()
        obs, reward, terminated, truncated, _ = step(action)
        t2 = clock()
        t_step += t2 - t1
        total += float(reward)
        count += 1
        if terminated or truncated:
            return total, count, False, t_step, t2, outcome(terminated, truncated, reward)


def _result(
    agent, genome, policy, returns, steps, nonfinite: bool, want_stats: bool, t_env: float, t_agent: float, record
) -> EvalResult:
    """The evaluation's result from its episodes' ``returns`` and ``steps``; ``record``: the
    observation counter (``count_obs``), or None."""
    fitness = -math.inf
    if not nonfinite:
        fitness = float(np.mean(returns)) - agent.penalty(genome)
        if not math.isfinite(fitness):  # finite returns can overflow their mean; a penalty can be NaN
            nonfinite, fitness = True, -math.inf
    t0 = time.perf_counter()
    stats = policy.trace_stats() if want_stats else None
    t_agent += time.perf_counter() - t0
    if record is not None:
        return EvalResult(
            fitness, returns, steps, stats, nonfinite, t_env, t_agent, record.count, record.sum, record.sumsq
        )
    return EvalResult(fitness, returns, steps, stats, nonfinite, t_env, t_agent)


def acting(agent, policy, obs_norm=None, count_obs: bool = False):
    """The callable that turns an env's observation into ``policy``'s action: the policy's
    own ``act``, behind flattening (observations of more than one dimension) and the
    observation normalisation (:class:`~synapto.evolution.obs_norm.NormalisedActor`,
    which also counts).  Everything that plays a genome (evaluation, render, draw) uses it."""
    act = policy.act
    if len(agent.space.obs_shape) > 1:  # an image, say: the policy sees it flattened
        act = _flattening(act)
    if obs_norm is not None or count_obs:
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


class Evaluator:
    """A worker's env and agent, reused for every task."""

    def __init__(self, spec):
        """``spec``: the run's :class:`~synapto.evolution.worker.spec.EvolveSpec`."""
        self.make_env = partial(make_env, spec.env, **spec.make_kwargs)
        self.shaping = spec.shaping
        env = self.make_env()
        self.agent = build_agent(spec, SpaceInfo.of(env))
        env.close()

    def __call__(self, task: EvalTask | Any, context: SampleContext | None = None) -> EvalResult:
        if context is not None:
            task = context.task(task)
        ep = task.episodes
        make: Callable[[], Any] = self.make_env
        if ep.shaped and self.shaping is not None:
            shaping, cap = self.shaping, ep.max_steps

            def shaped_env():
                return shaping.wrap(self.make_env(), cap)

            make = shaped_env
        return evaluate(self.agent, make, task.genome, ep.seeds, ep.want_stats, ep.obs_norm, ep.count_obs, ep.diagnose)
