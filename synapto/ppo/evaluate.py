"""``synapto ppo-eval``: a trained policy tested deterministically on the test seed stream."""

from __future__ import annotations

import dataclasses

import numpy as np

from synapto.errors import RunFileError
from synapto.ppo.config import PPOConfig
from synapto.ppo.policy import Policy
from synapto.ppo.train import limit_blas_threads, open_env
from synapto.seeding import Stream, int_seed
from synapto.store import PPORun


def evaluate_run(path, episodes: int, which: str = "latest", max_ep_len: int | None = None) -> dict:
    """Deterministic test of a run's policy (mean action / most likely choice).

    Episode ``e`` starts from ``reset(seed=int_seed(seed, PPO_TEST, e))`` in a fresh env,
    a stream no training episode uses; episodes end at termination, the env's time
    limit or ``max_ep_len`` (default: the run's).
    """
    with PPORun(path) as run:
        cfg = run.parse_config(PPOConfig.from_json)
        pi_params, _, label = run.params(which)
        dims = (run.obs_dim, run.act_dim, run.discrete)
    if max_ep_len is not None:
        cfg = dataclasses.replace(cfg, max_ep_len=max_ep_len)
    handle, info = open_env(cfg)
    handle.env.close()
    if (info.obs_dim, info.act_dim, info.discrete) != dims:
        raise RunFileError(f"{str(path)!r}: the run's spaces {dims} do not match {cfg.env}'s")
    limit_blas_threads(1)
    policy = Policy(info.obs_dim, info.act_dim, cfg.hid, info.discrete, pi_params.astype(cfg.dtype))
    obs = np.zeros(info.obs_dim, cfg.dtype)
    returns = np.zeros(episodes)
    lengths = np.zeros(episodes, np.int64)
    for e in range(episodes):
        handle, _ = open_env(cfg)
        o, _ = handle.reset(seed=int_seed(cfg.seed, Stream.PPO_TEST, e))
        total, n = 0.0, 0
        while True:
            obs[:] = np.ravel(o)
            o, r, terminated, truncated, _ = handle.step(policy.mode(obs))
            total += r
            n += 1
            if terminated or truncated or n >= handle.limit:
                break
        handle.env.close()
        returns[e], lengths[e] = total, n
    return {"returns": returns, "lengths": lengths, "params": label, "env": cfg.env, "seed": cfg.seed}
