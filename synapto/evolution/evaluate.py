"""Rollouts of one individual: fitness, env steps and trace statistics.

This is the per-step hot path: one ``policy.act`` and one ``env.step`` per step,
nothing else but a finiteness check and two clock reads for the time breakdown.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class EvalTask:
    """Evaluate ``genome`` on one episode per seed (``kind`` says which stream)."""

    genome: np.ndarray
    seeds: np.ndarray
    want_stats: bool = True


@dataclass
class EvalResult:
    fitness: float  #: mean return minus the agent's penalty; -inf if non-finite
    returns: np.ndarray  #: (E,) return of each episode
    steps: np.ndarray  #: (E,) env steps of each episode
    stats: np.ndarray | None  #: per-connection trace statistics (genome layout)
    nonfinite: bool  #: a non-finite action or return occurred
    env_seconds: float  #: time inside env.reset/env.step
    agent_seconds: float  #: time inside the policy (forward passes, traces)


def evaluate(agent, env_factory, genome: np.ndarray, seeds, want_stats: bool = True) -> EvalResult:
    """Run ``genome`` for one episode per seed; pure function of (genome, seeds).

    ``env_factory()`` makes a fresh environment for every episode: Box2D worlds
    (BipedalWalker, LunarLander) keep internal state across ``reset`` -- the same
    seed after a different history gives a different episode -- so reusing an env
    would make results depend on which evaluations a rank ran before.
    """
    policy = agent.policy(genome)
    n = len(seeds)
    returns = np.zeros(n)
    steps = np.zeros(n, dtype=np.int64)
    nonfinite = False
    clock = time.perf_counter
    t_env = t_agent = 0.0
    for e in range(n):
        t0 = clock()
        env = env_factory()
        obs, _ = env.reset(seed=int(seeds[e]))
        t1 = clock()
        t_env += t1 - t0
        policy.reset()
        total, count = 0.0, 0
        while True:
            t0 = clock()
            action = policy.act(obs)
            t1 = clock()
            if not agent.space.discrete and not math.isfinite(float(np.sum(action))):
                nonfinite = True
                t_agent += t1 - t0
                break
            obs, reward, terminated, truncated, _ = env.step(action)
            t2 = clock()
            t_agent += t1 - t0
            t_env += t2 - t1
            total += float(reward)
            count += 1
            if terminated or truncated:
                break
        t0 = clock()
        env.close()
        t_env += clock() - t0
        t0 = clock()
        policy.end_episode()
        t_agent += clock() - t0
        returns[e], steps[e] = (np.nan if nonfinite else total), count
        if nonfinite or not math.isfinite(total):
            nonfinite = True
            break
    if nonfinite:
        fitness = -math.inf
    else:
        fitness = float(np.mean(returns)) - agent.penalty(genome)
    stats = policy.trace_stats() if want_stats else None
    return EvalResult(fitness, returns, steps, stats, nonfinite, t_env, t_agent)


@dataclass(frozen=True)
class EvolveSpec:
    """Picklable recipe a worker uses to build its :class:`Evaluator` (farm setup)."""

    env: str
    agent: str
    hidden: tuple
    agent_options: dict

    def build(self) -> "Evaluator":
        return Evaluator(self)


class Evaluator:
    """A worker's env and agent, reused for every task."""

    def __init__(self, spec: EvolveSpec):
        from functools import partial

        from agents import load_agent_class
        from synapto.envs import SpaceInfo, make_env

        self.make_env = partial(make_env, spec.env)
        env = self.make_env()
        self.agent = load_agent_class(spec.agent)(SpaceInfo.of(env), spec.hidden, spec.agent_options)
        env.close()

    def __call__(self, task: EvalTask) -> EvalResult:
        return evaluate(self.agent, self.make_env, task.genome, task.seeds, task.want_stats)
