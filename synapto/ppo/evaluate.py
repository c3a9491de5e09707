"""The deterministic test of a trained policy on the test seed stream: ``synapto ppo-eval``,
and the test a run with ``test_episodes`` stores at its end."""

from __future__ import annotations

import dataclasses

import numpy as np

from synapto.common.blas import limit_blas_threads
from synapto.common.errors import RunFileError
from synapto.common.seeding import Stream, int_seed
from synapto.outcomes import NOT_RUN, magnitude, outcome
from synapto.ppo.config import PPOConfig
from synapto.ppo.env import open_env
from synapto.ppo.normalise import normalise
from synapto.ppo.policy import Policy
from synapto.store import PPORun


def test_policy(cfg: PPOConfig, pi_params: np.ndarray, episodes: int, norm=None) -> dict[str, np.ndarray]:
    """``episodes`` episodes of the policy's mean action (most likely choice): episode ``e``
    starts from ``reset(seed=int_seed(seed, PPO_TEST, e))`` in a fresh env, a stream no
    training episode uses, and ends at termination, the env's time limit or ``max_ep_len``.
    ``norm``: the observation normalisation ``(mean, std)`` the policy acts through.
    Returns each episode's ``seeds``, ``returns``, ``lengths``, and its ``outcomes`` and
    ``action_cost`` (action magnitude), taken from the same steps (:mod:`synapto.outcomes`)."""
    handle, info = open_env(cfg)
    handle.env.close()
    policy = Policy(info.obs_dim, info.act_dim, cfg.hid, info.discrete, np.asarray(pi_params).astype(cfg.dtype))
    obs = np.zeros(info.obs_dim, cfg.dtype)
    seeds = np.array([int_seed(cfg.seed, Stream.PPO_TEST, e) for e in range(episodes)], dtype=np.int64)
    out: dict[str, np.ndarray] = {
        "seeds": seeds,
        "returns": np.zeros(episodes),
        "lengths": np.zeros(episodes, np.int64),
        "outcomes": np.full(episodes, NOT_RUN, np.int8),
        "action_cost": np.full(episodes, np.nan),
    }
    bounds = None if info.discrete else (info.low, info.high)
    for e in range(episodes):
        figures = _episode(cfg, policy, obs, int(seeds[e]), norm, bounds)
        for name, value in zip(("returns", "lengths", "outcomes", "action_cost"), figures):
            out[name][e] = value
    return out


def _episode(cfg: PPOConfig, policy: Policy, obs: np.ndarray, seed: int, norm, bounds):
    """One test episode on a fresh env: ``(return, length, outcome, action magnitude)``;
    ``bounds``: the action space's ``(low, high)`` (None: Discrete, magnitude NaN)."""
    handle, _ = open_env(cfg)
    o, _ = handle.reset(seed=seed)
    total, n, cost = 0.0, 0, 0.0 if bounds is not None else np.nan
    while True:
        obs[:] = np.ravel(o) if norm is None else normalise(np.ravel(o), *norm)
        action = policy.mode(obs)
        if bounds is not None:
            cost += magnitude(action, *bounds)
        o, r, terminated, truncated, _ = handle.step(action)
        total += r
        n += 1
        if terminated or truncated or n >= handle.limit:
            break
    handle.env.close()
    return total, n, outcome(terminated, truncated or n >= handle.limit, r), cost


def evaluate_run(path, episodes: int, which: str = "latest", max_ep_len: int | None = None) -> dict:
    """Deterministic test of a run's policy (:func:`test_policy`), with the run's observation
    normalisation of the epoch its parameters come from; episodes end at ``max_ep_len``
    (default: the run's)."""
    with PPORun(path) as run:
        cfg = run.parse_config(PPOConfig.from_json)
        pi_params, _, label = run.params(which)
        dims = (run.obs_dim, run.act_dim, run.discrete)
        # "epoch K" of --save-freq; "final" and the checkpoint are after the last completed epoch
        epoch = int(label.split()[1]) if label.startswith("epoch ") else run.completed - 1
        norm = run.policy_norm(epoch)
    if max_ep_len is not None:
        cfg = dataclasses.replace(cfg, max_ep_len=max_ep_len)
    handle, info = open_env(cfg)
    handle.env.close()
    if (info.obs_dim, info.act_dim, info.discrete) != dims:
        raise RunFileError(f"{str(path)!r}: the run's spaces {dims} do not match {cfg.env}'s")
    limit_blas_threads(1)
    out = test_policy(cfg, pi_params, episodes, norm)
    return {"returns": out["returns"], "lengths": out["lengths"], "params": label, "env": cfg.env, "seed": cfg.seed}
