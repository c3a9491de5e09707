"""Gymnasium environments: creation, space checks, friendly errors."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from synapto.errors import UsageError


def _gym():
    warnings.filterwarnings("ignore", module="gymnasium")
    warnings.filterwarnings("ignore", module="pygame")
    import gymnasium

    return gymnasium


def import_env_module(env_id: str) -> None:
    """Import the module of ``module:EnvId`` ids (gymnasium's own convention)."""
    if ":" in env_id:
        module = env_id.split(":", 1)[0]
        import importlib

        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise UsageError(f"--env {env_id!r}: cannot import module {module!r} ({exc})") from None


def make_env(env_id: str, render_mode: str | None = None, **kwargs):
    """``gymnasium.make`` without the passive checker, with a one-line error for bad ids.

    ``render_mode`` is passed only when given: an env whose constructor takes no
    ``render_mode`` (gymnasium does not require one) is made all the same."""
    gym = _gym()
    import_env_module(env_id)
    options = dict(kwargs)
    if render_mode is not None:
        kwargs["render_mode"] = render_mode
    try:
        return gym.make(env_id, disable_env_checker=True, **kwargs)
    except TypeError as exc:
        if render_mode is not None and "render_mode" in str(exc):
            raise UsageError(f"--env {env_id!r} cannot render: its constructor takes no render_mode") from None
        if options:
            raise UsageError(f"--env-option {options!r}: {env_id}'s constructor refuses them ({exc})") from None
        raise
    except gym.error.Error as exc:
        raise UsageError(f"--env {env_id!r} is not a registered gymnasium environment ({exc})") from None
    except ImportError as exc:
        raise UsageError(f"--env {env_id!r} needs a missing dependency ({exc})") from None


@dataclass(frozen=True)
class SpaceInfo:
    """What an agent needs to know about an environment's spaces."""

    obs_dim: int
    act_dim: int  #: number of action components (Box) or of choices (Discrete)
    discrete: bool
    low: np.ndarray | None  #: Box action bounds, None for Discrete
    high: np.ndarray | None
    max_episode_steps: int | None
    #: the observation's shape (policies see it flattened to ``obs_dim`` values)
    obs_shape: tuple[int, ...] = ()

    @classmethod
    def of(cls, env) -> "SpaceInfo":
        gym = _gym()
        obs, act = env.observation_space, env.action_space
        if not isinstance(obs, gym.spaces.Box):
            raise UsageError(f"observation space must be a Box, got {obs}")
        limit = env.spec.max_episode_steps if env.spec is not None else None
        shape = tuple(int(d) for d in obs.shape)
        if isinstance(act, gym.spaces.Discrete):
            return cls(int(np.prod(obs.shape)), int(act.n), True, None, None, limit, shape)
        if isinstance(act, gym.spaces.Box):
            return cls(int(np.prod(obs.shape)), int(np.prod(act.shape)), False,
                       act.low.astype(np.float64).ravel(), act.high.astype(np.float64).ravel(), limit, shape)
        raise UsageError(f"action space must be Box or Discrete, got {act}")


def space_info(env_id: str, env_options=None) -> SpaceInfo:
    env = make_env(env_id, **dict(env_options or {}))
    try:
        return SpaceInfo.of(env)
    finally:
        env.close()
