"""Training episodes of Box2D tasks on envpool's C++ simulator, in lockstep
(env option ``train_backend=envpool``; the ``envpool`` extra).

envpool's ``BipedalWalker-v3``, ``LunarLander-v3`` and ``LunarLanderContinuous-v3`` are
built from the same Box2D 2.3.10 source as gymnasium's, but draw their terrain and
initial pushes with their own generator: a seed's episode differs from gymnasium's.
So only *training* episodes (those whose returns the strategy learns from, and their
replay) run here; validation, selection, the champion's test and render stay on
gymnasium's env, and the run file's config records the option.

A chunk of training tasks (individuals x episodes rows) is one envpool pool with one
env per row, made with the rows' episode seeds as its per-env seed list (envpool
fixes seeds when a pool is made and takes them in int32's range: an episode's seed
modulo 2**31), so every row is a fresh env reset with its own seed.  Each step, one
batched forward pass (:meth:`Agent.batch_policy`) acts for the rows, and the pool
steps only the rows still running (``env_id``); a row's episode ends at its own
``terminated``/``truncated`` and its env is never stepped again (envpool would reset
it).  Ended rows are dropped from the policy once a quarter of them has ended.

Per row, as :func:`synapto.evolution.worker.evaluate.evaluate` does for one env:

* observation normalisation and counting as :class:`~synapto.evolution.obs_norm.NormalisedActor`
  (``clip((obs - mean) / std)`` in float64; the observations the policy acted on are
  counted, summed and squared per episode, and an individual's episodes are added in
  order);
* the shaping of :mod:`synapto.shaping` as :class:`~synapto.shaping.ShapedEnv` (fall
  reward, finish bonus, reward floor, stall stop on the env's own reward) and the
  generation's step cap ``max_steps``;
* a non-finite observation or action ends the individual's evaluation there (fitness
  -inf; later episodes count 0).

A row's arithmetic does not depend on the rows beside it: envpool's envs are separate
Box2D worlds, and the Box-action forward passes sum in a fixed order
(:func:`synapto.agents.batched.rows.rows_product`; Discrete actions are certified equal
to the one-row policy's).  So results do not depend on chunking: a run file is
bit-identical for any number of ranks, and ``replay`` (which evaluates each training
item alone, here too) reproduces it bit for bit.  ``tests/test_fast_box2d.py`` checks these.

A run's farm and its replay's are set up with evaluator ``"envpool"``
(:class:`~synapto.evolution.worker.spec.EvolveSpec`): :class:`FastEvaluator` runs
training tasks here, in chunks or alone, and hands everything else to the one-env
:class:`~synapto.evolution.worker.evaluate.Evaluator`.
"""

from __future__ import annotations

import time

import numpy as np

from synapto.agents import build_agent
from synapto.common.errors import UsageError
from synapto.evolution.worker.batched import Chunk, batch_results
from synapto.evolution.worker.evaluate import Evaluator
from synapto.evolution.worker.tasks import Episodes, EvalResult, SampleContext
from synapto.shaping import FALL_PENALTY, Shaping

#: envpool's seeds lie in int32's range: an episode's seed is taken modulo this
SEED_MOD = 1 << 31
#: drop ended rows from the policy when at most this fraction of its rows still runs
COMPACT_AT = 0.75


def require(cfg, agent=None) -> None:
    """One-line errors before a run or replay whose training episodes run on envpool starts:
    envpool missing, or an agent (by default ``cfg``'s) without a batched policy."""
    if cfg.envs.train_backend != "envpool":
        return

    agent = build_agent(cfg) if agent is None else agent
    try:
        import envpool  # noqa: F401
    except ImportError:
        raise UsageError(
            "env option train_backend=envpool needs the envpool extra: pip install -e .[envpool]"
        ) from None
    if agent.batch_policy(np.zeros((1, agent.n_params)), False) is None:
        raise UsageError(
            f"env option train_backend=envpool: agent {agent.name} (with these options) has no batched policy"
        )


def make_pool(env_id: str, seeds: np.ndarray):
    """A pool of one env per seed, env ``i`` reset with ``seeds[i]`` (mod 2**31), one thread."""
    import envpool

    n = len(seeds)
    return envpool.make(
        env_id, env_type="gymnasium", num_envs=n, batch_size=n, num_threads=1, seed=[int(s) % SEED_MOD for s in seeds]
    )


def evaluate_tasks(agent, env_id: str, tasks, shaping: Shaping | None = None) -> list[EvalResult]:
    """Evaluate training ``tasks`` on envpool, one row per (task, episode); tasks with and
    without observation normalisation go in separate pools (a row's result is the same)."""
    tasks = list(tasks)
    out: list = [None] * len(tasks)
    for normed in (False, True):
        idx = [i for i, t in enumerate(tasks) if (t.episodes.obs_norm is not None) == normed]
        if idx:
            for i, r in zip(idx, _evaluate(agent, env_id, [tasks[i] for i in idx], shaping or Shaping())):
                out[i] = r
    return out


class _Rows:
    """The running rows' state, by position (compacted with the policy)."""

    def __init__(self, n: int, obs_dim: int, tasks: list[Episodes], episodes: int, count: bool):
        self.rows = np.arange(n)  # position -> original row (= env id in the pool)
        self.live = np.ones(n, bool)
        self.ret = np.zeros(n)
        self.neg = np.zeros(n, np.int64)  # consecutive negative rewards (stall stop)
        self.cap = np.repeat([t.max_steps for t in tasks], episodes)
        norms = [t.obs_norm for t in tasks if t.obs_norm is not None]  # all or none (evaluate_tasks)
        self.mean = np.repeat(np.stack([m for m, _ in norms]), episodes, 0) if norms else None
        self.std = np.repeat(np.stack([s for _, s in norms]), episodes, 0) if norms else None
        self.count = count
        self.osum = np.zeros((n, obs_dim)) if count else None
        self.osumsq = np.zeros((n, obs_dim)) if count else None

    def keep(self, keep: np.ndarray) -> None:
        for k in ("rows", "live", "ret", "neg", "cap", "mean", "std", "osum", "osumsq"):
            v = getattr(self, k)
            if v is not None:
                setattr(self, k, v[keep])


def _evaluate(agent, env_id: str, tasks, shaping: Shaping) -> list[EvalResult]:
    clock = time.perf_counter
    t0 = clock()
    genomes = np.stack([np.asarray(t.genome, dtype=np.float64) for t in tasks])
    eps = [t.episodes for t in tasks]
    seeds = np.stack([np.asarray(ep.seeds) for ep in eps])
    K, E = seeds.shape
    N, d = K * E, agent.space.obs_dim
    count = any(ep.count_obs for ep in eps)
    policy = agent.batch_policy(genomes, eps[0].want_stats, episodes=E)
    st = _Rows(N, d, eps, E, count)
    ret, steps, bad, ocount = np.zeros(N), np.zeros(N, np.int64), np.zeros(N, bool), np.zeros(N, np.int64)
    osum, osumsq = (np.zeros((N, d)), np.zeros((N, d))) if count else (None, None)
    t_agent = clock() - t0
    t0 = clock()
    pool = make_pool(env_id, seeds.ravel())
    obs, info = pool.reset()
    x = np.zeros((N, d), np.float32)
    x[info["env_id"]] = obs
    t_env = clock() - t0
    discrete = agent.space.discrete
    t = 0
    out = (ret, steps, osum, osumsq)
    while st.live.any():
        t0 = clock()
        action = _act(st, x, policy, discrete, t, ocount, bad, out)
        go = np.flatnonzero(st.live)
        t1 = clock()
        t_agent += t1 - t0
        if len(go) == 0:
            break
        go, o, r, term, trunc = _step(pool, action, go, st.rows, discrete)
        t2 = clock()
        t_env += t2 - t1
        t += 1
        x[go] = o
        trunc = _shape(st, go, r.astype(np.float64), term, trunc.copy(), t, shaping)
        ended = go[term | trunc]
        if len(ended):
            _end(st, ended, t, out, policy)
            if st.live.sum() <= COMPACT_AT * len(st.live):
                keep = np.flatnonzero(st.live)
                st.keep(keep)
                x = x[keep]
                policy.keep(keep)
        t_agent += clock() - t2
    pool.close()
    t0 = clock()
    stats = policy.trace_stats() if eps[0].want_stats else None
    results = batch_results(agent, genomes, ret.reshape(K, E), steps.reshape(K, E), bad.reshape(K, E), stats)
    if count:
        assert osum is not None and osumsq is not None  # made with count
        _fold_obs(results, eps, ocount.reshape(K, E), osum.reshape(K, E, d), osumsq.reshape(K, E, d))
    share = steps.reshape(K, E).sum(axis=1) / max(int(steps.sum()), 1)
    t_agent += clock() - t0
    for k, res in enumerate(results):
        res.env_seconds, res.agent_seconds = t_env * share[k], t_agent * share[k]
    return results


def _act(st: _Rows, x: np.ndarray, policy, discrete: bool, t: int, ocount, bad, out) -> np.ndarray:
    """The policy's actions on the rows' observations ``x``: counted (``count_obs``: what
    the policy is given, as :class:`~synapto.evolution.obs_norm.NormalisedActor` records
    it) and normalised first; a row whose observation or action is not finite ends its
    evaluation there (``bad``; ``out``: the per-row totals :func:`_end` writes)."""
    live = st.live
    ok = np.isfinite(x).all(axis=1)
    if st.count:
        assert st.osum is not None and st.osumsq is not None  # made with count
        seen = live & ok
        x64 = x.astype(np.float64)
        np.add(st.osum, x64, out=st.osum, where=seen[:, None])
        np.add(st.osumsq, np.square(x64), out=st.osumsq, where=seen[:, None])
        ocount[st.rows[seen]] += 1
    xin = x
    if st.mean is not None:
        xin = np.subtract(x, st.mean)
        xin /= st.std
        np.clip(xin, -5.0, 5.0, out=xin)
    with np.errstate(over="ignore", invalid="ignore"):
        action = policy.act(xin)
    if not discrete:
        ok &= np.isfinite(action).all(axis=1)
    stop = live & ~ok
    if stop.any():  # a non-finite observation or action: the evaluation stops there
        bad[st.rows[stop]] = True
        _end(st, np.flatnonzero(stop), t, out, policy)
    return action


def _step(pool, action: np.ndarray, go: np.ndarray, rows: np.ndarray, discrete: bool):
    """Step the pool's envs of positions ``go``: ``(go, obs, reward, terminated, truncated)``,
    ``go`` reordered as the pool answered (it places results by env id)."""
    a = action[go].astype(np.int32 if discrete else np.float32)
    o, r, term, trunc, info = pool.step(a, rows[go].astype(np.int32))
    if not np.array_equal(info["env_id"], rows[go]):  # results in another order: place by id
        where = np.argsort(rows[go])
        go = go[where[np.searchsorted(rows[go][where], info["env_id"])]]
    return go, o, r, term, trunc


def _shape(
    st: _Rows, go: np.ndarray, raw: np.ndarray, term: np.ndarray, trunc: np.ndarray, t: int, s: Shaping
) -> np.ndarray:
    """Add the stepped rows' (positions ``go``) shaped rewards to their returns, as
    :class:`~synapto.shaping.ShapedEnv` shapes them; returns their ``truncated``."""
    r = raw
    if s.rewards_shaped:
        r = raw.copy()
        fall = term & (raw == FALL_PENALTY)
        if s.fall_reward is not None:
            r[fall] = s.fall_reward
        r[term & ~fall] += s.finish_bonus
        if s.reward_floor is not None:
            low = r < s.reward_floor
            r[low] = s.reward_floor
    st.ret[go] += r
    if s.stall_steps:
        neg = np.where(raw < 0, st.neg[go] + 1, 0)
        st.neg[go] = neg
        trunc |= neg >= s.stall_steps
    cap = st.cap[go]
    trunc |= (cap > 0) & (t >= cap)
    return trunc


def _end(st: _Rows, pos: np.ndarray, t: int, out: tuple, policy) -> None:
    """The episodes of positions ``pos`` ended after ``t`` steps: into ``out``, the per-row
    totals ``(ret, steps, osum, osumsq)`` (the last two None without ``count_obs``)."""
    ret, steps, osum, osumsq = out
    rows = st.rows[pos]
    ret[rows] = st.ret[pos]
    steps[rows] = t
    if st.count:
        assert st.osum is not None and st.osumsq is not None  # made with count
        osum[rows] = st.osum[pos]
        osumsq[rows] = st.osumsq[pos]
    st.live[pos] = False
    policy.end_episodes(pos)


def _fold_obs(results, eps: list[Episodes], ocount, osum, osumsq) -> None:
    """Each counting task's observation totals: its episodes in order, up to the first
    bad one (the one-at-a-time path stops there)."""
    for k, (res, ep) in enumerate(zip(results, eps)):
        if not ep.count_obs:
            continue
        bad = ~np.isfinite(res.returns)
        ran = int(np.argmax(bad)) + 1 if bad.any() else len(res.returns)
        res.obs_count = int(ocount[k, :ran].sum())
        res.obs_sum, res.obs_sumsq = np.zeros(osum.shape[-1]), np.zeros(osum.shape[-1])
        for e in range(ran):
            res.obs_sum += osum[k, e]
            res.obs_sumsq += osumsq[k, e]


class FastEvaluator:
    """A worker's handler (evaluator ``"envpool"``): training tasks on envpool, in a
    :class:`~synapto.evolution.worker.batched.Chunk` or alone (replay, a failed chunk's
    retry); every other task on gymnasium's env, one at a time (:class:`Evaluator`)."""

    def __init__(self, spec):
        self.serial = Evaluator(spec)
        self.agent, self.env, self.shaping = self.serial.agent, spec.env, spec.shaping

    def __call__(self, task, context: SampleContext | None = None):
        if isinstance(task, Chunk):
            return evaluate_tasks(self.agent, self.env, task.tasks(context), self.shaping)
        if context is not None:
            task = context.task(task)
        if task.episodes.shaped:
            return evaluate_tasks(self.agent, self.env, [task], self.shaping)[0]
        return self.serial(task)
