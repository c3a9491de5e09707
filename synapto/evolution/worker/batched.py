"""Batched evaluation: many (individual, episode) pairs in lockstep on one numpy-batched env.

For environments with a numpy-batched implementation (gymnasium's vector entry point,
e.g. ``CartPole-v1``), a worker evaluates a whole *chunk* of individuals x episodes at
once: one vector env with one sub-env per (individual, episode), and one batched
forward pass over the chunk's stacked genomes per step (:meth:`Agent.batch_policy`).

Semantics are those of :func:`synapto.evolution.worker.evaluate.evaluate`:

* every sub-env starts in the state a fresh single env reset with the episode's seed
  starts in (the vector env's own ``reset`` takes one seed for all sub-envs, so the
  initial state is taken from a single env reset with that seed -- cached per seed;
  for CartPole drawn as gymnasium's reset draws it, after checking that this matches
  real resets -- and written into the vector env);
* an episode ends at its own ``terminated``/``truncated``.  At most :data:`SLOTS` rows
  run at once; an ended sub-env is refilled with the next row of the queue (policies
  with ``load``), and once the queue is empty, ended sub-envs are dropped from the
  vector env and from the policy when a quarter of them has ended ("compaction"), so
  an evaluation costs about its useful steps, not its longest episode times its width.

Vector envs supported: those of gymnasium's classic-control kind, whose unwrapped env
keeps its state as an array ``state`` with one column per sub-env (last axis), a step
counter ``steps`` and a ``prev_done`` mask, and autoresets on the next step; the
single env of the same id must keep its state in ``unwrapped.state``.  A user's env
registered with a ``vector_entry_point`` following that layout is batched too.
gymnasium's CartPole runs through :class:`CartPoleStep` (same operations, no
per-call overhead).

Results.  The env dynamics run bit for bit as in the single env (float64 state, the
same operations).  For discrete actions every action is the one-row policy's (the
batched policies certify their float32 decisions and recompute the others, see
:mod:`agents.base`), so returns, steps and fitness are bit-identical to one env at a
time; Hebbian trace statistics come from float32 activities and agree to about 1e-5
relative.  A row's results do not depend on the rows beside it or on its sub-env.
Chunks are formed by the coordinator (:func:`chunks_of`): a map's tasks are dealt out
round-robin into one chunk per worker (more once a chunk would pass :data:`CHUNK_ROWS`
rows; a one-process run merges them into one), so every worker has a share of every
generation, and since no row's result depends on its company, a batched run file is
bit-identical across rank counts and to ``--batch off``.  A chunk that raises is
evaluated again task by task, so that exactly the failing individuals fail, as one at a
time.  ``tests/test_batched.py`` checks all of these.
"""

from __future__ import annotations

import inspect
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from synapto.evolution.worker.evaluate import Evaluator
from synapto.evolution.worker.tasks import EvalResult, EvalTask, SampleContext
from synapto.evolution.worker.vector_env import SeededVectorEnv
from synapto.outcomes import LockstepEnds
from synapto.parallel.results import Failure, Farm, Recipe, Results, TaskFailed

#: most sub-envs (individual x episode rows) per chunk; a map has at least one chunk per worker
CHUNK_ROWS = 4096
#: sub-envs stepped in lockstep: a chunk with more rows refills ended sub-envs from its
#: queue (policies with ``load``), so the width stays near this until the queue is empty
SLOTS = 8192
#: refill once this fraction of the sub-envs has ended (amortises the refill's calls)
REFILL_FRACTION = 1 / 32
#: once the queue is empty, the running sub-envs are compacted (ended ones dropped)
#: when at most this fraction of them is still running ...
COMPACT_AT = 0.75
#: ... and only above this width (below, masking is cheaper than copying)
MIN_COMPACT = 64


@dataclass(frozen=True)
class Chunk:
    """Tasks a worker evaluates together: :class:`~synapto.evolution.worker.tasks.EvalTask` s,
    or payloads of the map's :class:`~synapto.evolution.worker.tasks.SampleContext` (noise
    keys over the wire), whose genomes the worker builds."""

    payloads: tuple

    def tasks(self, context: SampleContext | None) -> list[EvalTask]:
        return list(self.payloads) if context is None else [context.task(p) for p in self.payloads]


def evaluate_batch(
    agent,
    venv: SeededVectorEnv,
    genomes: np.ndarray,
    seeds: np.ndarray,
    want_stats: bool = True,
    slots: int | None = None,
    diagnose: bool = False,
) -> list[EvalResult]:
    """:func:`~synapto.evolution.worker.evaluate.evaluate` for every row of ``genomes`` (K, n)
    on the episodes ``seeds`` (K, E), in lockstep on ``venv``: at most ``slots``
    (default :data:`SLOTS`) sub-envs at a time, ended ones refilled from the queue of
    rows when the policy supports it.  A row's result does not depend on the slot or
    the company it runs in.  ``diagnose``: as :func:`~synapto.evolution.worker.evaluate.evaluate`'s."""
    clock = time.perf_counter
    t0 = clock()
    genomes = np.asarray(genomes, dtype=np.float64)
    seeds = np.asarray(seeds)
    K, E = seeds.shape
    policy = _batch_policy(agent, genomes, want_stats, E)
    width = K * E
    if callable(getattr(policy, "load", None)) and width > (slots or SLOTS):
        width = slots or SLOTS
        policy.keep(np.arange(width))
    t_agent = clock() - t0
    run = _Lockstep(agent.space.discrete, venv, policy, seeds.ravel(), width)
    if diagnose:
        run.ends = LockstepEnds(K * E, width, None if agent.space.discrete else (agent.space.low, agent.space.high))
    run.t_agent += t_agent
    while run.n_live:
        run.step()
    t0 = clock()
    stats = policy.trace_stats() if want_stats else None
    steps = run.steps.reshape(K, E)
    results = batch_results(agent, genomes, run.ret.reshape(K, E), steps, run.bad.reshape(K, E), stats)
    share = steps.sum(axis=1) / max(int(run.steps.sum()), 1)
    run.t_agent += clock() - t0
    for k, res in enumerate(results):
        res.env_seconds, res.agent_seconds = run.t_env * share[k], run.t_agent * share[k]
        if run.ends is not None:
            res.outcomes, res.action_cost = run.ends.outcomes[k * E : (k + 1) * E], run.ends.cost[k * E : (k + 1) * E]
    return results


def _batch_policy(agent, genomes: np.ndarray, want_stats: bool, episodes: int):
    """``agent``'s batch policy of ``genomes``, each for ``episodes`` consecutive rows."""
    if "episodes" in inspect.signature(agent.batch_policy).parameters:
        policy = agent.batch_policy(genomes, want_stats, episodes=episodes)
    else:  # an agent written for the former signature: one genome per row
        policy = agent.batch_policy(np.repeat(genomes, episodes, axis=0), want_stats)
    if policy is None:
        raise ValueError(f"agent {agent.name!r} has no batched policy")
    return policy


class _Lockstep:
    """One :func:`evaluate_batch` in progress: the original rows (individual-major, one
    episode each) run on ``width`` sub-envs.  Per original row: its return, steps and
    non-finite flag; per sub-env: the row it runs, whether it still runs, its episode's
    sums so far.  Ended sub-envs keep stepping until refilled or dropped: their sums are
    not read."""

    def __init__(self, discrete: bool, venv: SeededVectorEnv, policy, seeds: np.ndarray, width: int):
        n = len(seeds)
        self.discrete, self.venv, self.policy, self.seeds, self.n = discrete, venv, policy, seeds, n
        self.ret = np.zeros(n)  # by original row
        self.steps = np.zeros(n, dtype=np.int64)
        self.bad = np.zeros(n, dtype=bool)  # a non-finite action or return
        self.t_agent = 0.0
        t0 = time.perf_counter()
        self.obs = venv.start(seeds[:width])
        self.t_env = time.perf_counter() - t0
        self.unit = venv.unit_reward
        self.rows = np.arange(width)  # current sub-env -> original row
        self.nxt = width  # next original row to start
        self.live = np.ones(width, dtype=bool)
        self.done = np.zeros(width, dtype=bool)
        self.cur_ret = np.zeros(width)
        self.cur_steps = np.zeros(width, dtype=np.int64)
        self.free: list[np.ndarray] = []  # ended sub-envs waiting for a refill
        self.n_free = 0
        self.n_live = width
        self.refill_at = max(1, int(width * REFILL_FRACTION))
        self.ends: LockstepEnds | None = None  #: outcomes and action magnitudes (``diagnose``)

    def step(self) -> None:
        """One step of every sub-env; then the ended episodes' bookkeeping."""
        clock = time.perf_counter
        t0 = clock()
        action, stepping = self._actions()
        if self.ends is not None:
            self.ends.add(action)
        t1 = clock()
        self.obs, reward, terminated, truncated = self.venv.step(action)
        t2 = clock()
        self.t_env += t2 - t1
        self._count(reward, terminated, truncated, stepping)
        if self.done.any():
            idx = np.flatnonzero(self.done)
            if self.ends is not None:
                self.ends.ended(self.rows[idx], idx, reward, terminated, truncated, stepping)
            self._ended(idx)
        self.t_agent += clock() - t2 + t1 - t0

    def _actions(self):
        """The policy's actions, and (Box actions with a non-finite row) which sub-envs step."""
        action = self.policy.act(self.obs)
        stepping = None
        if not self.discrete:
            finite = np.isfinite(action).all(axis=1)
            if not finite.all():
                self.bad[self.rows[self.live & ~finite]] = True
                stepping = self.live & finite
                action = np.where(finite[:, None], action, 0.0)
        return action, stepping

    def _count(self, reward, terminated, truncated, stepping) -> None:
        if stepping is None:
            self.cur_steps += 1
            if not self.unit:
                self.cur_ret += reward
            np.logical_or(terminated, truncated, out=self.done)
            self.done &= self.live
        else:
            self.cur_steps += stepping
            self.cur_ret += np.where(stepping, reward, 0.0)
            self.done = self.live & (terminated | truncated | ~stepping)

    def _ended(self, idx: np.ndarray) -> None:
        """Record the episodes of sub-envs ``idx``; refill, compact or clear."""
        ended = self.rows[idx]
        self.steps[ended] = self.cur_steps[idx]
        self.ret[ended] = self.cur_steps[idx] if self.unit else self.cur_ret[idx]
        self.policy.end_episodes(idx)
        self.live[idx] = False
        self.n_live -= len(idx)
        if self.nxt < self.n:
            self.free.append(idx)
            self.n_free += len(idx)
            if self.n_free >= self.refill_at or self.n_live == 0:
                self._refill()
            else:
                self.venv.clear(idx)
        elif self.n_live and self.n_live <= COMPACT_AT * len(self.live) and len(self.live) > MIN_COMPACT:
            self._compact()
        else:
            self.venv.clear(idx)

    def _refill(self) -> None:
        """The free sub-envs start the next rows of the queue (as many as are left)."""
        slots_free = np.concatenate(self.free)
        take = min(len(slots_free), self.n - self.nxt)
        fill, rest = slots_free[:take], slots_free[take:]
        new = np.arange(self.nxt, self.nxt + take)
        self.nxt += take
        t3 = time.perf_counter()
        self.venv.load(fill, self.seeds[new], self.obs)
        self.t_env += time.perf_counter() - t3
        self.policy.load(fill, new)
        self.rows[fill] = new
        self.live[fill] = True
        self.cur_steps[fill] = 0
        self.cur_ret[fill] = 0.0
        if self.ends is not None:
            self.ends.restart(fill)
        self.n_live += take
        self.free, self.n_free = ([rest], len(rest)) if len(rest) else ([], 0)
        if len(rest):
            self.venv.clear(rest)

    def _compact(self) -> None:
        """Drop the ended sub-envs from the vector env and the policy."""
        keep = np.flatnonzero(self.live)
        self.rows, self.cur_ret, self.cur_steps = self.rows[keep], self.cur_ret[keep], self.cur_steps[keep]
        self.obs = self.obs[keep]
        if self.ends is not None:
            self.ends.keep(keep)
        self.live = np.ones(len(keep), dtype=bool)
        self.done = np.zeros(len(keep), dtype=bool)
        t3 = time.perf_counter()
        self.venv.compact(keep)
        if self.venv.fast is not None:
            self.obs = self.venv.fast.obs
        self.t_env += time.perf_counter() - t3
        self.policy.keep(keep)


def batch_results(
    agent, genomes: np.ndarray, ret: np.ndarray, steps: np.ndarray, bad: np.ndarray, stats: np.ndarray | None
) -> list[EvalResult]:
    """Per individual (rows of ``genomes``), the :class:`EvalResult` of its episodes'
    returns, steps and non-finite flags (K, E) and its rows' trace statistics (K * E,
    n_params) -- as the one-at-a-time path gives: an individual with a bad episode stops
    there (later episodes count 0 return and 0 steps) with fitness -inf.  Times are 0."""
    K, E = ret.shape
    bad = bad | ~np.isfinite(ret)
    fitness = ret.mean(axis=1) - agent.batch_penalty(genomes)
    if stats is not None:
        stats = stats.reshape(K, E, -1)
        mean_stats = stats.sum(axis=1) / E
    results = []
    for k in range(K):
        r, s = ret[k].copy(), steps[k].copy()
        nonfinite = bool(bad[k].any())
        st = None if stats is None else mean_stats[k]
        if nonfinite:  # as the one-at-a-time path: stop at the first bad episode
            e = int(np.argmax(bad[k]))
            r[e] = np.nan
            r[e + 1 :] = 0.0
            s[e + 1 :] = 0
            f = -math.inf
            if stats is not None:
                st = stats[k, : e + 1].sum(axis=0) / (e + 1)
        else:
            f = float(fitness[k])
        results.append(EvalResult(f, r, s, st, nonfinite, 0.0, 0.0))
    return results


class BatchedEvaluator:
    """A worker's handler (evaluator ``"batched"``): a :class:`Chunk` in lockstep on one
    vector env, a single task on the one-at-a-time :class:`Evaluator`."""

    def __init__(self, spec):
        self.serial = Evaluator(spec)
        self.agent = self.serial.agent
        self.venv = SeededVectorEnv(spec.env)

    def __call__(self, task, context: SampleContext | None = None):
        if not isinstance(task, Chunk):
            return self.serial(task, context)
        tasks = task.tasks(context)
        ep = tasks[0].episodes
        genomes = np.stack([t.genome for t in tasks])
        seeds = np.stack([np.asarray(t.episodes.seeds) for t in tasks])
        return evaluate_batch(self.agent, self.venv, genomes, seeds, ep.want_stats, diagnose=ep.diagnose)


def chunks_of(shapes: Sequence[tuple], chunk_rows: int = CHUNK_ROWS, workers: int = 1) -> list[list[int]]:
    """The tasks of each chunk (indices, ascending), from each task's ``(episodes,
    want_stats, diagnose)``: tasks with equal shapes (consecutive runs of them) are dealt out
    round-robin into a multiple of ``workers`` chunks, as few as keep each within
    ``chunk_rows`` rows (and at least one task).  Dealing, not cutting, spreads a
    generation's elites (its first slots) over all chunks, so the chunks take about
    equally long."""
    out, start = [], 0
    while start < len(shapes):
        E = shapes[start][0]
        stop = start + 1
        while stop < len(shapes) and shapes[stop] == shapes[start]:
            stop += 1
        n = stop - start
        per_round = max(1, workers) * max(1, chunk_rows // max(E, 1))  # tasks in one round of chunks
        k = min(n, max(1, workers) * -(-n // per_round))
        out += [list(range(start + j, stop, k)) for j in range(k)]
        start = stop
    return out


class BatchingFarm:
    """Wraps a farm set up with a batching evaluator: ``map`` of
    :class:`~synapto.evolution.worker.tasks.EvalTask` s (or of a context's payloads) runs
    as :class:`Chunk` s -- every map, or with ``training_only`` (evaluator ``"envpool"``)
    only the training maps.  Results are per task, as from the wrapped farm: a chunk that
    raised is evaluated again one task at a time, so exactly the tasks that raise fail (the
    first of them raised under ``on_error="raise"``); one that ran past the farm's task
    timeout fails each of its tasks (evaluating them again could stall another worker).
    ``local=True`` (a farm in this process): the chunks are merged and evaluated together,
    :data:`SLOTS` sub-envs at a time, so a map has one tail of long episodes, not one per
    chunk; a row's result does not depend on its company, so the results are the same."""

    def __init__(self, farm: Farm, chunk_rows: int = CHUNK_ROWS, local: bool = False, training_only: bool = False):
        self.farm, self.chunk_rows, self.local, self.training_only = farm, chunk_rows, local, training_only
        self.n_workers, self.in_process = farm.n_workers, farm.in_process

    def setup(self, spec: Recipe) -> None:
        self.farm.setup(spec)

    def close(self) -> None:
        self.farm.close()

    def shapes(self, payloads: list, context: SampleContext | None) -> list[tuple] | None:
        """Each task's ``(episodes, want_stats, diagnose)`` if a map of ``payloads`` runs in
        chunks, else None."""
        if not payloads:
            return None
        if context is not None:
            go = context.episodes.shaped or not self.training_only
            return [context.shape(p) for p in payloads] if go else None
        if not all(isinstance(p, EvalTask) and (p.episodes.shaped or not self.training_only) for p in payloads):
            return None
        return [(len(p.episodes.seeds), p.episodes.want_stats, p.episodes.diagnose) for p in payloads]

    def map(
        self,
        payloads: Sequence,
        schedule: str = "dynamic",
        stop: Callable[[], bool] | None = None,
        progress: Callable[[int, int], None] | None = None,
        on_error: str = "raise",
        context: Any = None,
    ) -> Results:
        payloads = list(payloads)
        shapes = self.shapes(payloads, context)
        if shapes is None:
            return self.farm.map(payloads, schedule, stop, progress, on_error, context)
        workers = len(getattr(self.farm, "workers", ())) or self.farm.n_workers  # retired ranks excepted
        chunks = chunks_of(shapes, 1 << 62, 1) if self.local else chunks_of(shapes, self.chunk_rows, workers)
        n = len(payloads)
        scaled = None if progress is None else (lambda done, total: progress(n * done // max(total, 1), n))
        batch = [Chunk(tuple(payloads[i] for i in c)) for c in chunks]
        out = self.farm.map(batch, schedule, stop, scaled, "skip", context)
        values: list = [None] * n
        failures: dict[int, Failure] = {}
        for c, (tasks, r) in enumerate(zip(chunks, out)):
            f = out.failures.get(c)
            if f is None:
                for i, v in zip(tasks, r):
                    values[i] = v
            elif f.timeout:
                failures.update({i: replace(f, index=i) for i in tasks})
            else:  # which of the chunk's tasks raise: evaluated again one at a time
                again = self._again(payloads, tasks, schedule, stop, on_error, context)
                for j, i in enumerate(tasks):
                    values[i] = again[j]
                failures.update({tasks[j]: replace(g, index=tasks[j]) for j, g in again.failures.items()})
        if failures and on_error != "skip":
            raise TaskFailed(failures[min(failures)])
        return Results(values, dict(sorted(failures.items())), out.stats)

    def _again(self, payloads: list, tasks: list[int], schedule: str, stop, on_error: str, context) -> Results:
        """The ``tasks`` of a chunk that raised, one at a time; a failure raised names its
        index in ``payloads``."""
        try:
            return self.farm.map([payloads[i] for i in tasks], schedule, stop, None, on_error, context)
        except TaskFailed as exc:
            raise TaskFailed(replace(exc.failure, index=tasks[exc.failure.index])) from None


def batching_farm(farm: Farm, spec, agent, mode: str = "auto") -> Farm:
    """``farm`` set up for ``spec``, wrapped in a :class:`BatchingFarm` where its evaluator
    batches: evaluator ``"envpool"`` (its training maps), or -- ``mode`` ``"auto"`` and both
    the env and the agent support it -- a ``"serial"`` spec turned ``"batched"``."""
    if spec.evaluator == "serial" and mode == "auto" and batch_unsupported(spec, agent) is None:
        spec = replace(spec, evaluator="batched")
    farm.setup(spec)
    if spec.evaluator == "serial":
        return farm

    # the coordinator alone forms chunks; SYNAPTO_BATCH_ROWS changes their size (tests)
    rows = int(os.environ.get("SYNAPTO_BATCH_ROWS", CHUNK_ROWS))
    return BatchingFarm(farm, rows, local=farm.in_process, training_only=spec.evaluator == "envpool")


def batch_unsupported(spec, agent) -> str | None:
    """None if runs of ``spec`` can be evaluated batched, else why not."""
    if spec.make_kwargs:
        return "the env has options (--env-option): evaluated one env at a time"
    reason = SeededVectorEnv.supported(spec.env)
    if reason is not None:
        return f"env {spec.env}: {reason}"
    probe = agent.batch_policy(np.zeros((1, agent.n_params)), False)
    if probe is None:
        return f"agent {agent.name} has no batched policy"
    return None
