"""The environment a PPO rank steps: :func:`open_env` makes it with the config's episode
limit and, when gymnasium's wrappers change nothing but bookkeeping, hands out the bare
env's ``step`` (the rollout applies the time limit itself).

Used by the training loop (:mod:`synapto.ppo.train`), its rollout (:mod:`synapto.ppo.rollout`)
and the deterministic test (:mod:`synapto.ppo.evaluate`); it sits below all three so that
none of them imports another for it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from synapto.envs import SpaceInfo, make_env
from synapto.ppo.config import PPOConfig

if TYPE_CHECKING:
    import gymnasium

#: wrappers that gym.make adds and that change nothing but bookkeeping: with only these,
#: the rollout steps the bare env and applies the time limit itself (~10 % faster)
_TRANSPARENT_WRAPPERS = {"TimeLimit", "OrderEnforcing", "PassiveEnvChecker"}


@dataclass
class EnvHandle:
    env: gymnasium.Env  # what gym.make returned (closed after the epoch)
    step: Callable  # the step function the rollout calls
    reset: Callable
    limit: int  # steps after which an episode is truncated


def open_env(cfg: PPOConfig) -> tuple[EnvHandle, SpaceInfo]:
    env = make_env(cfg.env)
    info = SpaceInfo.of(env)
    names, e = [], env
    while hasattr(e, "env"):
        names.append(type(e).__name__)
        e = e.env
    stepped = env.unwrapped if set(names) <= _TRANSPARENT_WRAPPERS else env
    limits = [x for x in (cfg.max_ep_len, info.max_episode_steps) if x is not None]
    limit = min(limits) if limits else 2**62
    return EnvHandle(env, stepped.step, stepped.reset, limit), info
