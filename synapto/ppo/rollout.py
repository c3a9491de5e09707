"""One rank's rollout of one PPO epoch: its ``n_envs / ranks`` environments stepped in lockstep.

The config's ``n_envs`` are split evenly over the ranks (rank ``r`` steps the envs
``r L .. (r + 1) L - 1``, ``L = n_envs / ranks``), so the epoch has the same envs and
the same env length at any rank count; with ``n_envs = 1`` every rank runs one env
instead (Spinning Up).  Each env runs ``T = steps_per_epoch // (ranks * L)`` steps; its steps fill the
buffer rows ``j T .. (j + 1) T - 1`` (env-major, so each episode piece is contiguous for
GAE).  Every epoch starts with fresh envs and fresh episodes -- as Spinning Up does --, so
an epoch depends only on the parameters, the normalisation moments and (seed, rank,
epoch): a checkpoint at an epoch boundary is all that resuming needs.

Seeds: with ``n_envs = 1``, episode ``e`` starts from ``reset(seed=int_seed(seed, PPO, 1,
rank, epoch, e))`` (as before vectorised envs existed: such runs are unchanged); with
several, episode ``e`` of global env ``g`` from ``int_seed(seed, PPO, 4, 0, epoch, g, e)``
(the same episodes at any rank count; one rank's runs are unchanged).  The
exploration noise of the whole epoch is drawn up front from ``generator(seed, PPO, 2,
rank, epoch)``, row ``t n_envs + j`` for env ``j``'s step ``t``.

An episode ends at termination (value 0 after it), at the env's time limit or
``max_ep_len``, or at the end of the epoch (both bootstrapped with V of the next
observation, normalised like the others but not added to the moments).
"""

from __future__ import annotations

import time

import numpy as np

from synapto.common.seeding import Stream, generator, int_seed
from synapto.ppo.env import open_env
from synapto.ppo.normalise import normalise

clock = time.perf_counter


def episode_seed(cfg, local: int, rank: int, epoch: int, env: int, episode: int) -> int:
    """Episode ``episode`` of the rank's env ``env`` (of ``local``): keyed by the env's
    global index ``rank * local + env`` when the config's ``n_envs`` are split over the
    ranks, so that an env starts the same episodes whichever rank steps it."""
    if cfg.n_envs == 1:
        return int_seed(cfg.seed, Stream.PPO, 1, rank, epoch, episode)
    return int_seed(cfg.seed, Stream.PPO, 4, 0, epoch, rank * local + env, episode)


def boot_obs(norm, obs: np.ndarray) -> np.ndarray:
    """The observation a truncated episode is bootstrapped from, as the value function sees
    it (normalised with the moments of the moment, which it does not join)."""
    if norm is None:
        return obs.copy()
    return normalise(obs, *norm.moments.mean_std())


def rollout(trainer, epoch: int, timing: dict) -> tuple[list[float], list[int]]:
    """Fill ``trainer.buf`` with epoch ``epoch``'s steps; return the (env's own) returns and
    lengths of the episodes that ended."""
    cfg, buf, pi, info = trainer.cfg, trainer.buf, trainer.pi, trainer.info
    N = trainer.n_envs
    T = buf.n // N
    t_start = clock()
    buf.clear()
    noise = _noise(trainer, epoch)
    norm, scaler = trainer.obs_norm, trainer.reward_scale
    if scaler is not None:
        scaler.start()
    envs = _Envs(cfg, N, trainer.rank, epoch, info.obs_dim)
    t_env, t_act = envs.t_reset, 0.0
    rows = np.arange(N) * T  # buffer row of each env's step t = rows + t
    obs_buf, act_buf, rew_buf = buf.obs, buf.act, buf.rew
    single = pi.sampler() if N == 1 else None
    for step in range(T):
        t0 = clock()
        idx = rows + step
        if norm is not None:
            obs_buf[idx] = norm(envs.raw, np.empty((N, info.obs_dim)))
        else:
            obs_buf[idx] = envs.raw
        noise_t = noise[step * N : (step + 1) * N]
        if single is not None:  # one env: the one-row pass of runs before vectorised envs
            if info.discrete:
                act_buf[idx[0]] = single(obs_buf[idx[0]], noise_t[0])
            else:
                single(obs_buf[idx[0]], noise_t[0], act_buf[idx[0]])
        else:
            act_buf[idx] = pi.sample_batch(obs_buf[idx], noise_t)
        t1 = clock()
        t_act += t1 - t0
        envs.step(act_buf, idx, step + 1 < T, norm)
        t2 = clock()
        t_env += t2 - t1
        rew_buf[idx] = envs.rewards if scaler is None else scaler(envs.rewards, envs.ended)
    envs.close(buf, T, norm)
    timing["env"] += t_env
    timing["act"] += t_act
    timing["rollout"] += clock() - t_start
    return envs.ep_returns, envs.ep_lengths


def _noise(trainer, epoch: int) -> np.ndarray:
    """The exploration noise of the rank's whole epoch, scaled for the policy."""
    buf, info = trainer.buf, trainer.info
    rng = generator(trainer.cfg.seed, Stream.PPO, 2, trainer.rank, epoch)
    noise = rng.random(buf.n) if info.discrete else rng.standard_normal((buf.n, info.act_dim), dtype=trainer.dtype)
    return trainer.pi.scale_noise(noise)


class _Envs:
    """The rank's ``n`` envs of one epoch: their current raw observations, their episodes
    so far, where each episode ended in the buffer, and the ended episodes' returns and
    lengths."""

    def __init__(self, cfg, n: int, rank: int, epoch: int, obs_dim: int):
        self.cfg, self.n, self.rank, self.epoch = cfg, n, rank, epoch
        self.handles = [open_env(cfg)[0] for _ in range(n)]
        self.steps = [h.step for h in self.handles]
        self.limit = self.handles[0].limit
        shape = self.handles[0].env.observation_space.shape
        assert shape is not None  # a PPO env has a Box or Discrete observation space
        self.flat = len(shape) == 1
        self.episode = [0] * n
        t = clock()
        self.raw = np.zeros((n, obs_dim))
        for j, h in enumerate(self.handles):
            o, _ = h.reset(seed=episode_seed(cfg, n, rank, epoch, j, 0))
            self.raw[j] = o if self.flat else np.ravel(o)
        self.t_reset = clock() - t
        self.ep_ret, self.ep_len = np.zeros(n), np.zeros(n, np.int64)
        #: (end row, boot obs) of each env's episodes
        self.ends: list[list[tuple[int, np.ndarray | None]]] = [[] for _ in range(n)]
        self.ep_returns: list[float] = []
        self.ep_lengths: list[int] = []
        self.rewards, self.ended = np.zeros(n), np.zeros(n, bool)

    def step(self, act_buf: np.ndarray, idx: np.ndarray, more: bool, norm) -> None:
        """Step every env with its action ``act_buf[idx[j]]``; an env whose episode ends
        starts the next one if ``more`` steps follow in this epoch."""
        raw, ep_ret, ep_len, flat = self.raw, self.ep_ret, self.ep_len, self.flat
        for j in range(self.n):
            o, r, terminated, truncated, _ = self.steps[j](act_buf[idx[j]])
            self.rewards[j] = r
            ep_ret[j] += r
            ep_len[j] += 1
            raw[j] = o if flat else np.ravel(o)
            self.ended[j] = terminated or truncated or ep_len[j] >= self.limit
            if self.ended[j]:
                self.ends[j].append((int(idx[j]) + 1, None if terminated else boot_obs(norm, raw[j])))
                self.ep_returns.append(float(ep_ret[j]))
                self.ep_lengths.append(int(ep_len[j]))
                if more:
                    self.episode[j] += 1
                    o, _ = self.handles[j].reset(
                        seed=episode_seed(self.cfg, self.n, self.rank, self.epoch, j, self.episode[j])
                    )
                    raw[j] = o if flat else np.ravel(o)
                    ep_ret[j], ep_len[j] = 0.0, 0

    def close(self, buf, T: int, norm) -> None:
        """End every env's paths in ``buf`` (the last one cut by the end of the epoch) and
        close the envs."""
        for j in range(self.n):
            ends = self.ends[j]
            if not ends or ends[-1][0] != (j + 1) * T:
                ends.append(((j + 1) * T, boot_obs(norm, self.raw[j])))  # cut by the end of the epoch: not logged
            for end, boot in ends:
                buf.end_path(end, boot)
        for h in self.handles:
            h.env.close()
