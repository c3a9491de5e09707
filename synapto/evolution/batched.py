"""Batched evaluation: many (individual, episode) pairs in lockstep on one numpy-batched env.

For environments with a numpy-batched implementation (gymnasium's vector entry point,
e.g. ``CartPole-v1``), a worker evaluates a whole *chunk* of individuals x episodes at
once: one vector env with one sub-env per (individual, episode), and one batched
forward pass over the chunk's stacked genomes per step (:meth:`Agent.batch_policy`).

Semantics are those of :func:`synapto.evolution.evaluate.evaluate`:

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
Chunks are formed by the coordinator from the task list alone (:data:`CHUNK_ROWS`
rows; a one-process run merges them), so a batched run file is bit-identical across
rank counts.  ``tests/test_batched.py`` checks all of these.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from synapto.evolution.evaluate import EvalResult, EvalTask, Evaluator, EvolveSpec

#: sub-envs (individual x episode rows) per chunk; fixed, never derived from the rank count
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
class BatchTask:
    """Evaluate ``genomes`` (K, n) on ``seeds`` (K, E), one episode per seed."""

    genomes: np.ndarray
    seeds: np.ndarray
    want_stats: bool = True


class CartPoleStep:
    """gymnasium's ``CartPoleVectorEnv.step`` without its per-call overhead (the action
    space check, fresh arrays per operation, random autoresets): the same float64
    operations in the same order on preallocated buffers, so states are bit for bit
    those of the vector env and of the single env (tests).  Ended sub-envs are not
    reset; their rows are masked by the caller and refilled or dropped."""

    def __init__(self, u):
        self.u = u
        self.unit_reward = True

    @staticmethod
    def applies(u) -> bool:
        try:
            from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv
        except ImportError:  # pragma: no cover
            return False
        return (type(u) is CartPoleVectorEnv and u.kinematics_integrator == "euler"
                and not getattr(u, "_sutton_barto_reward", False))

    def start(self, states: np.ndarray) -> None:
        n = states.shape[1]
        self.state = np.ascontiguousarray(states, dtype=np.float64)
        self.steps = np.zeros(n, np.int64)
        self.obs_t = self.state.astype(np.float32)  # (4, n): obs rows last
        self.obs = self.obs_t.T
        self._b = np.zeros((4, n))
        self._acc = np.zeros((2, n))  # xacc, thetaacc
        self._pair = np.zeros((2, n))
        self._over = np.zeros((2, n), bool)
        self._limits = np.array([[self.u.x_threshold], [self.u.theta_threshold_radians]])
        self._term = np.zeros(n, bool)
        self._trunc = np.zeros(n, bool)
        self._reward = np.ones(n, np.float32)

    def step(self, action):
        u, st, b = self.u, self.state, self._b
        theta, theta_dot = st[2], st[3]
        force, cos, sin, temp = b
        xacc, acc = self._acc
        # force = sign(action - 0.5) * force_mag, for actions 0 and 1
        np.multiply(action, 2.0 * u.force_mag, out=force)
        force -= u.force_mag
        np.cos(theta, out=cos)
        np.sin(theta, out=sin)
        # temp = (force + polemass_length * theta_dot ** 2 * sin) / total_mass
        np.square(theta_dot, out=temp)
        np.multiply(u.polemass_length, temp, out=temp)
        temp *= sin
        np.add(force, temp, out=temp)
        temp /= u.total_mass
        # thetaacc = (gravity * sin - cos * temp) / (length * (4/3 - masspole * cos ** 2 / total_mass))
        np.square(cos, out=force)
        np.multiply(u.masspole, force, out=force)
        force /= u.total_mass
        np.subtract(4.0 / 3.0, force, out=force)
        np.multiply(u.length, force, out=force)
        np.multiply(u.gravity, sin, out=acc)
        np.multiply(cos, temp, out=sin)
        acc -= sin
        acc /= force
        # xacc = temp - polemass_length * thetaacc * cos / total_mass
        np.multiply(u.polemass_length, acc, out=force)
        force *= cos
        force /= u.total_mass
        np.subtract(temp, force, out=xacc)
        # Euler, positions (x, theta) from the old velocities, then velocities
        pos, vel, pair = st[0::2], st[1::2], self._pair
        np.multiply(u.tau, vel, out=pair)
        pos += pair
        np.multiply(u.tau, self._acc, out=pair)
        vel += pair
        # terminated: |x| > x_threshold or |theta| > theta_threshold
        np.abs(pos, out=pair)
        np.greater(pair, self._limits, out=self._over)
        np.logical_or(self._over[0], self._over[1], out=self._term)
        self.steps += 1
        np.greater_equal(self.steps, u.max_episode_steps, out=self._trunc)
        np.copyto(self.obs_t, st, casting="same_kind")
        return self.obs, self._reward, self._term, self._trunc

    def load(self, slots, states) -> None:
        self.state[:, slots] = states
        self.steps[slots] = 0
        self.obs_t[:, slots] = states  # the single env's obs: its state as float32

    def clear(self, slots) -> None:
        """Park ended sub-envs at rest (their values are not used)."""
        self.state[:, slots] = 0.0

    def compact(self, keep) -> None:
        steps = self.steps[keep]
        self.start(self.state[:, keep])
        self.steps = steps


class SeededVectorEnv:
    """A gymnasium vector env whose sub-envs start from per-seed single-env resets.

    Made once per worker and reused for every chunk.  For gymnasium's CartPole the
    dynamics run through :class:`CartPoleStep`; other supported vector envs are
    stepped through their unwrapped ``step``.
    """

    def __init__(self, env_id: str):
        from synapto.envs import _gym, make_env

        self.gym = _gym()
        self.env_id = env_id
        self.single = make_env(env_id)
        self._initial_cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.vec = None
        self.fast = None
        self.unit_reward = False
        self._quick = None  # a faster way to a seed's initial state (checked against real resets)

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
            if self._quick is not None:
                hit = self._quick(seed)
            else:
                obs, _ = self.single.reset(seed=seed)
                hit = (np.array(self.single.unwrapped.state, dtype=np.float64), np.asarray(obs))
            if len(self._initial_cache) > 65536:
                self._initial_cache.clear()
            self._initial_cache[seed] = hit
        return hit

    def _single_initial(self, seed: int):
        obs, _ = self.single.reset(seed=seed)
        return np.array(self.single.unwrapped.state, dtype=np.float64), np.asarray(obs)

    @staticmethod
    def _cartpole_initial(seed: int):
        """CartPole's reset without the env: gymnasium seeds a PCG64 Generator with
        ``SeedSequence(seed)`` and draws the state uniformly from [-0.05, 0.05)
        (about a third of a reset's 50 us; used only after it matched real resets)."""
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed)))
        state = rng.uniform(low=-0.05, high=0.05, size=(4,))
        return state, np.array(state, dtype=np.float32)

    def _check_quick(self) -> None:
        """Use :meth:`_cartpole_initial` if it gives the single env's resets, bit for bit."""
        seeds = [0, 1, 2, 7, 12345, 2 ** 31 - 1, 2 ** 40 + 3, 2 ** 62 + 11]
        ok = all(np.array_equal(a, b) and a.dtype == b.dtype
                 for s in seeds for a, b in zip(self._cartpole_initial(s), self._single_initial(s)))
        self._quick = self._cartpole_initial if ok else None

    def _initials(self, seeds):
        """Initial states (state_dim, n) and observations (n, obs_dim) of ``seeds``; each
        distinct seed is reset once (common random numbers share a few)."""
        uniq, inverse = np.unique(np.asarray(seeds), return_inverse=True)
        states, obs = zip(*(self._initial(int(s)) for s in uniq))
        return np.stack(states, axis=-1)[..., inverse], np.stack(obs)[inverse]

    def _resize(self, n: int) -> None:
        """The vector env with ``n`` sub-envs (made once; later resized in place)."""
        from gymnasium.vector.utils import batch_space

        if self.vec is None:
            self.vec = self.gym.make_vec(self.env_id, num_envs=n, vectorization_mode="vector_entry_point")
            self.vec.reset(seed=0)
            u = self.vec.unwrapped
            self.fast = CartPoleStep(u) if CartPoleStep.applies(u) else None
            self.unit_reward = self.fast is not None
            if self.fast is not None:
                self._check_quick()
        u = self.vec.unwrapped
        if self.fast is None and u.num_envs != n:
            u.num_envs = n
            u.action_space = batch_space(u.single_action_space, n)
            u.observation_space = batch_space(u.single_observation_space, n)

    def start(self, seeds) -> np.ndarray:
        """Sub-env ``i`` starts episode ``seeds[i]``; returns the observations (n, obs_dim)."""
        n = len(seeds)
        self._resize(n)
        states, obs = self._initials(seeds)
        if self.fast is not None:
            self.fast.start(states)
            return self.fast.obs
        u = self.vec.unwrapped
        u.state = states.astype(u.state.dtype)
        u.steps = np.zeros(n, dtype=u.steps.dtype)
        u.prev_done = np.zeros(n, dtype=bool)
        return obs

    # kept for callers of the former interface
    reset = start

    def step(self, actions):
        if self.fast is not None:
            return self.fast.step(actions)
        obs, reward, terminated, truncated, _ = self.vec.unwrapped.step(actions)
        return obs, reward, terminated, truncated

    def load(self, slots, seeds, obs: np.ndarray) -> None:
        """Sub-envs ``slots`` start episodes ``seeds``; their rows of ``obs`` are set."""
        states, first = self._initials(seeds)
        if self.fast is not None:
            self.fast.load(slots, states)
            return
        u = self.vec.unwrapped
        u.state[..., slots] = states
        u.steps[slots] = 0
        u.prev_done[slots] = False
        obs[slots] = first

    def clear(self, slots) -> None:
        if self.fast is not None:
            self.fast.clear(slots)

    def compact(self, keep: np.ndarray) -> None:
        """Keep only sub-envs ``keep`` (all running, so ``prev_done`` is False for them)."""
        if self.fast is not None:
            self.fast.compact(keep)
            return
        u = self.vec.unwrapped
        u.state = np.ascontiguousarray(u.state[..., keep])
        u.steps = u.steps[keep]
        u.prev_done = u.prev_done[keep]
        self._resize(len(keep))

    def close(self) -> None:
        if self.vec is not None:
            self.vec.close()
        self.single.close()


def evaluate_batch(agent, venv: SeededVectorEnv, genomes: np.ndarray, seeds: np.ndarray,
                   want_stats: bool = True, slots: int | None = None) -> list[EvalResult]:
    """:func:`~synapto.evolution.evaluate.evaluate` for every row of ``genomes`` (K, n)
    on the episodes ``seeds`` (K, E), in lockstep on ``venv``: at most ``slots``
    (default :data:`SLOTS`) sub-envs at a time, ended ones refilled from the queue of
    rows when the policy supports it.  A row's result does not depend on the slot or
    the company it runs in."""
    clock = time.perf_counter
    t0 = clock()
    genomes = np.asarray(genomes, dtype=np.float64)
    seeds = np.asarray(seeds)
    K, E = seeds.shape
    N = K * E
    flat_seeds = seeds.ravel()
    import inspect

    if "episodes" in inspect.signature(agent.batch_policy).parameters:
        policy = agent.batch_policy(genomes, want_stats, episodes=E)
    else:  # an agent written for the former signature: one genome per row
        policy = agent.batch_policy(np.repeat(genomes, E, axis=0), want_stats)
    if policy is None:
        raise ValueError(f"agent {agent.name!r} has no batched policy")
    width = N
    if callable(getattr(policy, "load", None)) and N > (slots or SLOTS):
        width = slots or SLOTS
        policy.keep(np.arange(width))
    discrete = agent.space.discrete
    ret = np.zeros(N)  # by original row (individual-major)
    steps = np.zeros(N, dtype=np.int64)
    bad = np.zeros(N, dtype=bool)  # a non-finite action or return
    t_agent = clock() - t0
    t0 = clock()
    obs = venv.start(flat_seeds[:width])
    t_env = clock() - t0
    unit = venv.unit_reward
    rows = np.arange(width)  # current sub-env -> original row
    nxt = width  # next original row to start
    live = np.ones(width, dtype=bool)
    done = np.zeros(width, dtype=bool)
    cur_ret = np.zeros(width)
    cur_steps = np.zeros(width, dtype=np.int64)
    free: list[np.ndarray] = []  # ended sub-envs waiting for a refill
    n_free = 0
    n_live = width
    refill_at = max(1, int(width * REFILL_FRACTION))
    while n_live:
        t0 = clock()
        action = policy.act(obs)
        stepping = None
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
        # ended sub-envs keep stepping until refilled or dropped: their sums are not read
        if stepping is None:
            cur_steps += 1
            if not unit:
                cur_ret += reward
            np.logical_or(terminated, truncated, out=done)
            done &= live
        else:
            cur_steps += stepping
            cur_ret += np.where(stepping, reward, 0.0)
            done = live & (terminated | truncated | ~stepping)
        if done.any():
            idx = np.flatnonzero(done)
            ended = rows[idx]
            steps[ended] = cur_steps[idx]
            ret[ended] = cur_steps[idx] if unit else cur_ret[idx]
            policy.end_episodes(idx)
            live[idx] = False
            n_live -= len(idx)
            if nxt < N:
                free.append(idx)
                n_free += len(idx)
                if n_free >= refill_at or n_live == 0:
                    slots_free = np.concatenate(free)
                    take = min(len(slots_free), N - nxt)
                    fill, rest = slots_free[:take], slots_free[take:]
                    new = np.arange(nxt, nxt + take)
                    nxt += take
                    t3 = clock()
                    venv.load(fill, flat_seeds[new], obs)
                    t_env += clock() - t3
                    policy.load(fill, new)
                    rows[fill] = new
                    live[fill] = True
                    cur_steps[fill] = 0
                    cur_ret[fill] = 0.0
                    n_live += take
                    free, n_free = ([rest], len(rest)) if len(rest) else ([], 0)
                    if len(rest):
                        venv.clear(rest)
                else:
                    venv.clear(idx)
            elif n_live and n_live <= COMPACT_AT * len(live) and len(live) > MIN_COMPACT:
                keep = np.flatnonzero(live)
                rows, cur_ret, cur_steps = rows[keep], cur_ret[keep], cur_steps[keep]
                obs = obs[keep]
                live = np.ones(len(keep), dtype=bool)
                done = np.zeros(len(keep), dtype=bool)
                t3 = clock()
                venv.compact(keep)
                if venv.fast is not None:
                    obs = venv.fast.obs
                t_env += clock() - t3
                policy.keep(keep)
            else:
                venv.clear(idx)
        t_agent += clock() - t2 + t1 - t0
    t0 = clock()
    stats = policy.trace_stats() if want_stats else None
    ret = ret.reshape(K, E)
    steps = steps.reshape(K, E)
    bad = bad.reshape(K, E) | ~np.isfinite(ret)
    fitness = ret.mean(axis=1) - agent.batch_penalty(genomes)
    if stats is not None:
        stats = stats.reshape(K, E, -1)
        mean_stats = stats.sum(axis=1) / E
    results = []
    share = steps.sum(axis=1) / max(int(steps.sum()), 1)
    for k in range(K):
        r, s = ret[k].copy(), steps[k].copy()
        nonfinite = bool(bad[k].any())
        st = None if stats is None else mean_stats[k]
        if nonfinite:  # as the one-at-a-time path: stop at the first bad episode
            e = int(np.argmax(bad[k]))
            r[e] = np.nan
            r[e + 1:] = 0.0
            s[e + 1:] = 0
            f = -math.inf
            if stats is not None:
                st = stats[k, : e + 1].sum(axis=0) / (e + 1)
        else:
            f = float(fitness[k])
        results.append(EvalResult(f, r, s, st, nonfinite, 0.0, 0.0))
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

    Results are per task, as from the wrapped farm: a failing chunk fails each of its
    tasks (their :class:`~synapto.parallel.farm.Failure` rides with the results, or the
    raised :class:`~synapto.parallel.farm.TaskFailed` names the chunk's first task).

    ``local=True`` (a farm evaluating in this process, i.e. a one-process run): the
    chunks are merged (only tasks of different episode counts or ``want_stats`` stay
    apart) and evaluated together, :data:`SLOTS` sub-envs at a time with refilling,
    so a map has one tail of long episodes instead of one per chunk.  A row's result
    does not depend on its company, so this gives the same results as the chunks of
    ``chunk_rows`` rows that worker ranks evaluate (tested).
    """

    def __init__(self, farm, chunk_rows: int = CHUNK_ROWS, local: bool = False):
        self.farm = farm
        self.chunk_rows = chunk_rows
        self.local = local

    def __getattr__(self, name):
        return getattr(self.farm, name)

    def map(self, payloads, **kw):
        from synapto.parallel.farm import Results, TaskFailed

        payloads = list(payloads)
        if not payloads or not all(isinstance(p, EvalTask) for p in payloads):
            return self.farm.map(payloads, **kw)
        ranges = chunks_of(payloads, 1 << 62 if self.local else self.chunk_rows)
        batch = [BatchTask(np.stack([payloads[i].genome for i in range(a, b)]),
                           np.stack([np.asarray(payloads[i].seeds) for i in range(a, b)]),
                           payloads[a].want_stats) for a, b in ranges]
        progress = kw.pop("progress", None)
        if progress is not None:
            n = len(payloads)
            kw["progress"] = lambda done, total: progress(ranges[done - 1][1] if done else 0, n)
        try:
            out = self.farm.map(batch, **kw)
        except TaskFailed as exc:
            raise TaskFailed(replace(exc.failure, index=ranges[exc.failure.index][0])) from None
        values: list = []
        for (a, b), r in zip(ranges, out):
            values.extend(r if r is not None else [None] * (b - a))
        failures = {i: replace(f, index=i) for c, f in out.failures.items() for i in range(*ranges[c])}
        return Results(values, failures, out.stats)


def batching_farm(farm, spec: EvolveSpec, agent, mode: str = "auto"):
    """Set ``farm`` up for ``spec``; batched (returns a :class:`BatchingFarm`) when
    ``mode`` is ``"auto"`` and both the env and the agent support it."""
    if mode == "auto" and batch_unsupported(spec, agent) is None:
        import os

        from synapto.parallel.farm import SerialFarm

        farm.setup(BatchedSpec(spec))
        # the coordinator alone forms chunks; SYNAPTO_BATCH_ROWS changes their size (tests)
        return BatchingFarm(farm, int(os.environ.get("SYNAPTO_BATCH_ROWS", CHUNK_ROWS)),
                            local=isinstance(farm, SerialFarm))
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
