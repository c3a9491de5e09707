"""Batched evaluation: many (individual, episode) pairs in lockstep on one numpy-batched env.

For environments with a numpy-batched implementation (gymnasium's vector entry point,
e.g. ``CartPole-v1``), a worker evaluates a whole *chunk* of individuals x episodes at
once: one vector env with one sub-env per (individual, episode), and one batched
forward pass over the chunk's stacked genomes per step (:meth:`Agent.batch_policy`).

Semantics are those of :func:`synapto.evolution.evaluate.evaluate`:

* every sub-env starts in the state a fresh single env reset with the episode's seed
  starts in (the vector env's own ``reset`` takes one seed for all sub-envs, so the
  initial state is taken from a single env reset with that seed -- cached per seed --
  and written into the vector env);
* an episode ends at its own ``terminated``/``truncated``; finished sub-envs are
  masked (gymnasium autoresets them on the next step) and, once at most half the
  sub-envs are still running, dropped from the vector env and from the policy
  ("compaction"), so a chunk costs about its useful steps, not its longest episode
  times its width.

Vector envs supported: those of gymnasium's classic-control kind, whose unwrapped env
keeps its state as an array ``state`` with one column per sub-env (last axis), a step
counter ``steps`` and a ``prev_done`` mask, and autoresets on the next step; the
single env of the same id must keep its state in ``unwrapped.state``.  A user's env
registered with a ``vector_entry_point`` following that layout is batched too.

Results.  The env dynamics run bit for bit as in the single env (float64 state, the
same operations).  The policy's matrix products sum in another order than the
one-row path (BLAS), so activities can differ in the last bits: returns are equal
unless an action flips on such a difference (a discrete argmax tie broken
differently, a continuous action off by an ulp); Hebbian trace statistics agree to
relative 1e-9.  ``tests/test_batched.py`` checks both.  Chunks are formed by the
coordinator from the task list alone (:data:`CHUNK_ROWS` rows), so a batched run file
is bit-identical across rank counts.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from synapto.evolution.evaluate import EvalResult, EvalTask, Evaluator, EvolveSpec

#: sub-envs (individual x episode rows) per chunk; fixed, never derived from the rank count
CHUNK_ROWS = 4096
#: compaction happens only above this width (below, masking is cheaper than copying)
MIN_COMPACT = 64


@dataclass(frozen=True)
class BatchTask:
    """Evaluate ``genomes`` (K, n) on ``seeds`` (K, E), one episode per seed."""

    genomes: np.ndarray
    seeds: np.ndarray
    want_stats: bool = True


class SeededVectorEnv:
    """A gymnasium vector env whose sub-envs start from per-seed single-env resets."""

    def __init__(self, env_id: str):
        from synapto.envs import _gym, make_env

        self.gym = _gym()
        self.env_id = env_id
        self.single = make_env(env_id)
        self._initial_cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.vec = None

    @staticmethod
    def supported(env_id: str) -> str | None:
        """None if ``env_id`` can be batched, else the reason why not."""
        from synapto.envs import _gym, import_env_module, make_env

        gym = _gym()
        import_env_module(env_id)
        try:
            spec = gym.spec(env_id)
        except gym.error.Error as exc:
            return f"not registered ({exc})"
        if getattr(spec, "vector_entry_point", None) is None:
            return "no vector entry point"
        try:
            vec = gym.make_vec(env_id, num_envs=2, vectorization_mode="vector_entry_point")
            vec.reset(seed=0)
            u = vec.unwrapped
            single = make_env(env_id)
            single.reset(seed=0)
            ok = (isinstance(getattr(u, "state", None), np.ndarray) and u.state.shape[-1] == 2
                  and hasattr(u, "steps") and hasattr(u, "prev_done")
                  and str(vec.metadata.get("autoreset_mode", "")).endswith("NEXT_STEP")
                  and isinstance(getattr(single.unwrapped, "state", None), np.ndarray)
                  and single.unwrapped.state.shape == u.state.shape[:-1])
            vec.close()
            single.close()
        except Exception as exc:  # a vector env we do not understand: one at a time
            return f"vector env not usable ({type(exc).__name__}: {exc})"
        return None if ok else "vector env keeps no per-sub-env state array"

    def _initial(self, seed: int):
        hit = self._initial_cache.get(seed)
        if hit is None:
            obs, _ = self.single.reset(seed=seed)
            if len(self._initial_cache) > 65536:
                self._initial_cache.clear()
            hit = self._initial_cache[seed] = (np.array(self.single.unwrapped.state, dtype=np.float64),
                                               np.asarray(obs))
        return hit

    def reset(self, seeds) -> np.ndarray:
        n = len(seeds)
        if self.vec is not None:
            self.vec.close()
        self.vec = self.gym.make_vec(self.env_id, num_envs=n, vectorization_mode="vector_entry_point")
        self.vec.reset(seed=0)
        states, obs = zip(*(self._initial(int(s)) for s in seeds))
        u = self.vec.unwrapped
        u.state = np.stack(states, axis=-1).astype(u.state.dtype)
        return np.stack(obs)

    def step(self, actions):
        obs, reward, terminated, truncated, _ = self.vec.step(actions)
        return obs, reward, terminated, truncated

    def compact(self, keep: np.ndarray) -> None:
        """Keep only sub-envs ``keep`` (all running, so ``prev_done`` is False for them)."""
        from gymnasium.vector.utils import batch_space

        u = self.vec.unwrapped
        n = len(keep)
        u.state = np.ascontiguousarray(u.state[..., keep])
        u.steps = u.steps[keep]
        u.prev_done = u.prev_done[keep]
        u.num_envs = n
        u.action_space = batch_space(u.single_action_space, n)
        u.observation_space = batch_space(u.single_observation_space, n)

    def close(self) -> None:
        if self.vec is not None:
            self.vec.close()
        self.single.close()


def evaluate_batch(agent, venv: SeededVectorEnv, genomes: np.ndarray, seeds: np.ndarray,
                   want_stats: bool = True) -> list[EvalResult]:
    """:func:`~synapto.evolution.evaluate.evaluate` for every row of ``genomes`` (K, n)
    on the episodes ``seeds`` (K, E), all in lockstep on ``venv``."""
    clock = time.perf_counter
    t0 = clock()
    genomes = np.asarray(genomes, dtype=np.float64)
    seeds = np.asarray(seeds)
    K, E = seeds.shape
    N = K * E
    policy = agent.batch_policy(np.repeat(genomes, E, axis=0), want_stats)
    if policy is None:
        raise ValueError(f"agent {agent.name!r} has no batched policy")
    discrete = agent.space.discrete
    ret = np.zeros(N)  # by original row (individual-major)
    steps = np.zeros(N, dtype=np.int64)
    bad = np.zeros(N, dtype=bool)  # a non-finite action or return
    t_agent = clock() - t0
    t0 = clock()
    obs = venv.reset(seeds.ravel())
    t_env = clock() - t0
    rows = np.arange(N)  # current row -> original row
    live = np.ones(N, dtype=bool)
    cur_ret = np.zeros(N)
    cur_steps = np.zeros(N, dtype=np.int64)
    n_live = N
    while n_live:
        t0 = clock()
        action = policy.act(obs)
        stepping = live
        if not discrete:
            finite = np.isfinite(action).all(axis=1)
            if not finite.all():
                hit = live & ~finite
                bad[rows[hit]] = True
                stepping = live & finite
                action = np.where(finite[:, None], action, 0.0)
        t1 = clock()
        obs, reward, terminated, truncated = venv.step(action)
        t2 = clock()
        t_env += t2 - t1
        cur_ret += np.where(stepping, reward, 0.0)
        cur_steps += stepping
        done = live & (terminated | truncated | ~stepping)
        if done.any():
            idx = np.flatnonzero(done)
            ret[rows[idx]] = cur_ret[idx]
            steps[rows[idx]] = cur_steps[idx]
            policy.end_episodes(idx)
            live[idx] = False
            n_live -= len(idx)
            if n_live and n_live * 2 <= len(live) and len(live) > MIN_COMPACT:
                keep = np.flatnonzero(live)
                rows, cur_ret, cur_steps, obs = rows[keep], cur_ret[keep], cur_steps[keep], obs[keep]
                live = np.ones(len(keep), dtype=bool)
                t3 = clock()
                venv.compact(keep)
                t_env += clock() - t3
                policy.keep(keep)
        t_agent += clock() - t2 + t1 - t0
    t0 = clock()
    stats = policy.trace_stats() if want_stats else None
    ret = ret.reshape(K, E)
    steps = steps.reshape(K, E)
    bad = bad.reshape(K, E) | ~np.isfinite(ret)
    results = []
    share = steps.sum(axis=1) / max(int(steps.sum()), 1)
    for k in range(K):
        r, s = ret[k].copy(), steps[k].copy()
        nonfinite = bool(bad[k].any())
        if nonfinite:  # as the one-at-a-time path: stop at the first bad episode
            e = int(np.argmax(bad[k]))
            r[e] = np.nan
            r[e + 1:] = 0.0
            s[e + 1:] = 0
            fitness = -math.inf
            ended = e + 1
        else:
            fitness = float(np.mean(r)) - agent.penalty(genomes[k])
            ended = E
        st = None
        if stats is not None:
            st = np.zeros(agent.n_params)
            for e in range(ended):
                st += stats[k * E + e]
            st = st / max(ended, 1)
        results.append(EvalResult(fitness, r, s, st, nonfinite, 0.0, 0.0))
    t_agent += clock() - t0
    for k, res in enumerate(results):
        res.env_seconds, res.agent_seconds = t_env * share[k], t_agent * share[k]
    return results


@dataclass(frozen=True)
class BatchedSpec:
    """A worker's recipe: the one-at-a-time :class:`Evaluator` plus a batched one."""

    spec: EvolveSpec

    def build(self) -> "BatchedEvaluator":
        return BatchedEvaluator(self.spec)


class BatchedEvaluator:
    def __init__(self, spec: EvolveSpec):
        self.serial = Evaluator(spec)
        self.agent = self.serial.agent
        self.venv = SeededVectorEnv(spec.env)

    def __call__(self, task):
        if isinstance(task, BatchTask):
            return evaluate_batch(self.agent, self.venv, task.genomes, task.seeds, task.want_stats)
        return self.serial(task)


def chunks_of(tasks: Sequence[EvalTask], chunk_rows: int = CHUNK_ROWS) -> list[tuple[int, int]]:
    """``[start, stop)`` ranges of consecutive tasks with equal episode counts and
    ``want_stats``, at most ``chunk_rows`` rows (and at least one task) each."""
    out, start = [], 0
    while start < len(tasks):
        E, ws = len(tasks[start].seeds), tasks[start].want_stats
        per = max(1, chunk_rows // max(E, 1))
        stop = start + 1
        while stop < len(tasks) and stop - start < per and len(tasks[stop].seeds) == E \
                and tasks[stop].want_stats == ws:
            stop += 1
        out.append((start, stop))
        start = stop
    return out


class BatchingFarm:
    """Wraps a farm: ``map`` of :class:`EvalTask` runs as chunks of :class:`BatchTask`.

    Results, ``last_failures`` and a raised :class:`WorkerFailure` are reported per
    task as by the wrapped farm (a failing chunk fails each of its tasks).
    """

    def __init__(self, farm, chunk_rows: int = CHUNK_ROWS):
        self.farm = farm
        self.chunk_rows = chunk_rows
        self.last_failures = []

    def __getattr__(self, name):
        return getattr(self.farm, name)

    def map(self, payloads, **kw):
        from synapto.parallel.farm import WorkerFailure

        payloads = list(payloads)
        if not payloads or not all(isinstance(p, EvalTask) for p in payloads):
            out = self.farm.map(payloads, **kw)
            self.last_failures = self.farm.last_failures
            return out
        ranges = chunks_of(payloads, self.chunk_rows)
        batch = [BatchTask(np.stack([payloads[i].genome for i in range(a, b)]),
                           np.stack([np.asarray(payloads[i].seeds) for i in range(a, b)]),
                           payloads[a].want_stats) for a, b in ranges]
        progress = kw.pop("progress", None)
        if progress is not None:
            n = len(payloads)
            kw["progress"] = lambda done, total: progress(ranges[done - 1][1] if done else 0, n)
        try:
            out = self.farm.map(batch, **kw)
        except WorkerFailure as exc:
            exc.index = ranges[exc.index][0]
            raise
        results: list = []
        for (a, b), r in zip(ranges, out):
            results.extend(r if r is not None else [None] * (b - a))
        self.last_failures = []
        for f in self.farm.last_failures:
            a, b = ranges[f.index]
            for i in range(a, b):
                self.last_failures.append(WorkerFailure(i, f.rank, f.host, f.traceback))
        return results


def batching_farm(farm, spec: EvolveSpec, agent, mode: str = "auto"):
    """Set ``farm`` up for ``spec``; batched (returns a :class:`BatchingFarm`) when
    ``mode`` is ``"auto"`` and both the env and the agent support it."""
    if mode == "auto" and batch_unsupported(spec, agent) is None:
        import os

        farm.setup(BatchedSpec(spec))
        # the coordinator alone forms chunks; SYNAPTO_BATCH_ROWS changes their size (tests)
        return BatchingFarm(farm, int(os.environ.get("SYNAPTO_BATCH_ROWS", CHUNK_ROWS)))
    farm.setup(spec)
    return farm


def batch_unsupported(spec: EvolveSpec, agent) -> str | None:
    """None if runs of ``spec`` can be evaluated batched, else why not."""
    reason = SeededVectorEnv.supported(spec.env)
    if reason is not None:
        return f"env {spec.env}: {reason}"
    probe = agent.batch_policy(np.zeros((1, agent.n_params)), False)
    if probe is None:
        return f"agent {agent.name} has no batched policy"
    return None
