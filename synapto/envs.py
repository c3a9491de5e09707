"""Gymnasium environments: creation, space checks, friendly errors, and a run's env options.

MuJoCo tasks (``HalfCheetah-v5``, ``Hopper-v5``, ...) need the ``mujoco`` extra
(``pip install 'synapto-evo[mujoco]'``, which ``make install`` does); without it their ids stop
with one line naming it.
"""

from __future__ import annotations

import importlib
import os
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from synapto.common.errors import UsageError, option_value
from synapto.shaping import Shaping, reward_option


@dataclass(frozen=True)
class EnvOptions:
    """A run's ``env_options`` (``--env-option KEY=VALUE``, a TOML ``[env_options]`` table),
    recorded in the run file's config: how its environments are made and its episodes run.

    ``reward_shift`` and the shaping options of :mod:`synapto.shaping` (``fall_reward``,
    ``finish_bonus``, ``reward_floor``, ``stall_steps``, ``cap_factor``, ``cap_steps``) are synapto's own,
    for training episodes only.  ``reward_shift`` is subtracted from every step's reward in the
    fitness the strategy learns from (training episodes only: ARS's removal of the survival
    bonus of Hopper, Walker2d, Ant and Humanoid), while the run file, validation,
    selection and test keep the task's own returns.  Every other option is a keyword
    argument of ``gymnasium.make``: the env's constructor's (``continuous=true`` for
    LunarLander-v3), or ``max_episode_steps``, which caps every episode of the run
    (training, validation, selection, test, replay and render alike: it is part of the
    task, so compare only runs with equal caps; 0 keeps the env's own time limit).
    """

    reward_shift: float = 0.0
    make: Mapping[str, Any] = field(default_factory=dict)  #: gymnasium.make's keyword arguments
    #: training-time shaping (``fall_reward``, ``stall_steps``, ...: :mod:`synapto.shaping`)
    shaping: Shaping = field(default_factory=Shaping)
    #: the simulator of training episodes: "gymnasium" or "envpool" (:mod:`synapto.evolution.worker.fast_box2d`)
    train_backend: str = "gymnasium"

    HELP: ClassVar[dict[str, str]] = {
        "max_episode_steps": "cap on the steps of every episode (0: the env's own time limit)",
        "reward_shift": "subtracted from every step's reward in the fitness the strategy learns from "
        "(training episodes only; ARS uses the survival bonus, 1 on Hopper-v5 and Walker2d-v5)",
        **Shaping.HELP,
        "train_backend": "training episodes only: gymnasium (default) or envpool (C++ Box2D in lockstep: "
        "BipedalWalker-v3, LunarLander-v3, LunarLanderContinuous-v3; the envpool extra)",
    }

    @classmethod
    def parse(cls, options: Mapping[str, Any] | None) -> EnvOptions:
        """The options of a mapping (config file table, ``--env-option``); one-line errors
        for synapto's own (the env's constructor refuses what it does not take when made)."""
        make = dict(options or {})
        shaping = Shaping.pop(make)
        backend = make.pop("train_backend", "gymnasium")
        if backend not in ("gymnasium", "envpool"):
            raise UsageError(f"env option train_backend must be gymnasium or envpool, got {backend!r}")
        shift = reward_option("reward_shift", make.pop("reward_shift", 0.0))
        cap = make.pop("max_episode_steps", 0)
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 0:
            raise UsageError(f"env option max_episode_steps must be an integer >= 0, got {cap!r}")
        if cap:
            make["max_episode_steps"] = cap
        return cls(float(shift), make, shaping, backend)

    def make_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``gymnasium.make`` for these options."""
        return dict(self.make)


def _gym():
    warnings.filterwarnings("ignore", module="gymnasium")
    warnings.filterwarnings("ignore", module="pygame")
    import gymnasium

    return gymnasium


def import_env_module(env_id: str) -> None:
    """Import the module of ``module:EnvId`` ids (gymnasium's own convention)."""
    if ":" in env_id:
        module = env_id.split(":", 1)[0]

        if not module.strip():
            raise UsageError(f"{option_value('env', env_id)}: no module before ':' (module:EnvId)")
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise UsageError(f"{option_value('env', env_id)}: cannot import module {module!r} ({exc})") from None
        except Exception as exc:  # the module itself raised on import
            raise UsageError(
                f"{option_value('env', env_id)}: importing module {module!r} raised {_one_line(exc)}"
            ) from None
        except SystemExit as exc:  # would end the command with its code and no word
            raise UsageError(
                f"{option_value('env', env_id)}: importing module {module!r} called sys.exit({exc.code!r})"
            ) from None


def make_env(env_id: str, render_mode: str | None = None, **kwargs):
    """``gymnasium.make`` without the passive checker, with a one-line error for bad ids.

    ``render_mode`` is passed only when given: an env whose constructor takes no
    ``render_mode`` (gymnasium does not require one) is made all the same."""
    gym = _gym()
    import_env_module(env_id)
    options = dict(kwargs)
    if render_mode is not None:
        kwargs["render_mode"] = render_mode
    _quiet_mujoco(gym, env_id)
    try:
        return gym.make(env_id, disable_env_checker=True, **kwargs)
    except TypeError as exc:
        if render_mode is not None and "render_mode" in str(exc):
            raise UsageError(
                f"{option_value('env', env_id)} cannot render: its constructor takes no render_mode"
            ) from None
        if options:
            raise UsageError(
                f"{option_value('env_options', options, '--env-option')}: {env_id}'s constructor refuses them ({exc})"
            ) from None
        raise
    except (ImportError, gym.error.DependencyNotInstalled) as exc:
        extra = (
            " (the mujoco extra: pip install 'synapto-evo[mujoco]'; in a checkout: make install)"
            if _is_mujoco(gym, env_id)
            else ""
        )
        raise UsageError(f"{option_value('env', env_id)} needs a missing dependency{extra}: {exc}") from None
    except gym.error.Error as exc:
        raise _not_registered(env_id, exc) from None
    except (Exception, SystemExit) as exc:  # the constructor refused its arguments in its own way, or exited
        given = f" with {option_value('env_options', options, '--env-option')}" if options else ""
        what = f"it called sys.exit({exc.code!r})" if isinstance(exc, SystemExit) else _one_line(exc)
        raise UsageError(f"{option_value('env', env_id)}{given} cannot be made: {what}") from None


def check_env_id(env_id: str) -> None:
    """One line unless ``env_id`` is a registered gymnasium environment, once the module of a
    ``module:Env-v0`` id is imported (the env is not made: its constructor's checks come then)."""
    gym = _gym()
    import_env_module(env_id)
    try:
        gym.spec(env_id.split(":", 1)[-1])  # module:Env-v0: Env-v0, once module registered it
    except gym.error.Error as exc:
        raise _not_registered(env_id, exc) from None


def _not_registered(env_id: str, exc: BaseException) -> UsageError:
    return UsageError(f"{option_value('env', env_id)} is not a registered gymnasium environment ({exc})")


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _is_mujoco(gym, env_id: str) -> bool:
    try:
        entry = gym.spec(env_id).entry_point
    except Exception:  # an unknown id: gym.make reports it
        return False
    return "mujoco" in str(entry)


#: MuJoCo's messages about gymnasium's own model files that are not ours to fix (printed on
#: stdout by the simulator otherwise); every other MuJoCo warning still reaches stderr
_MUJOCO_MODEL_NOTES = ("compiler attribute 'settotalmass' is deprecated",)
_mujoco_checked: set[str] = set()  #: env ids looked at (once per process each)


def _quiet_mujoco(gym, env_id: str) -> None:
    if env_id in _mujoco_checked:
        return
    _mujoco_checked.add(env_id)
    if not _is_mujoco(gym, env_id):
        return
    try:
        import mujoco
    except ImportError:  # gym.make names the missing extra
        return
    except Exception as exc:  # mujoco loads its OpenGL backend on import: a bad MUJOCO_GL fails here
        raise _opengl_error(f"{env_id}: MuJoCo cannot start", exc) from None

    def warn(message: str) -> None:
        if not message.startswith(_MUJOCO_MODEL_NOTES):
            sys.stderr.write(f"warning: MuJoCo: {message}\n")

    mujoco.set_mju_user_warning(warn)


def prepare_headless_render() -> None:
    """Choose MuJoCo's headless OpenGL backend (EGL) unless ``MUJOCO_GL`` says otherwise;
    call before the process makes its first env (MuJoCo reads it on import)."""
    os.environ.setdefault("MUJOCO_GL", "egl")


def _opengl_error(what: str, exc: BaseException) -> UsageError:
    text = str(exc).splitlines()[0] if str(exc) else "no OpenGL context"
    return UsageError(
        f"{what} with MUJOCO_GL={os.environ.get('MUJOCO_GL', '(unset)')} ({type(exc).__name__}: "
        f"{text}): headless MuJoCo needs libEGL (MUJOCO_GL=egl, Debian package libegl1) or "
        f"libOSMesa (MUJOCO_GL=osmesa, package libosmesa6)"
    )


def render_failed(env_id: str, exc: BaseException) -> UsageError:
    """The one-line error for an env that could not draw a frame headless."""
    if _is_mujoco(_gym(), env_id):
        return _opengl_error(f"{env_id} cannot render headless", exc)
    return UsageError(f"{env_id} cannot render headless ({type(exc).__name__}: {exc})")


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
    def of(cls, env) -> SpaceInfo:
        gym = _gym()
        obs, act = env.observation_space, env.action_space
        if not isinstance(obs, gym.spaces.Box):
            raise UsageError(f"observation space must be a Box, got {obs}")
        limit = env.spec.max_episode_steps if env.spec is not None else None
        shape = tuple(int(d) for d in obs.shape)
        if isinstance(act, gym.spaces.Discrete):
            return cls(int(np.prod(obs.shape)), int(act.n), True, None, None, limit, shape)
        if isinstance(act, gym.spaces.Box):
            return cls(
                int(np.prod(obs.shape)),
                int(np.prod(act.shape)),
                False,
                act.low.astype(np.float64).ravel(),
                act.high.astype(np.float64).ravel(),
                limit,
                shape,
            )
        raise UsageError(f"action space must be Box or Discrete, got {act}")


def space_info(env_id: str, make_kwargs=None) -> SpaceInfo:
    env = make_env(env_id, **dict(make_kwargs or {}))
    try:
        return SpaceInfo.of(env)
    finally:
        env.close()


#: gymnasium ids whose training episodes envpool runs (its task of the same id;
#: synapto.evolution.worker.fast_box2d)
COVERED = ("BipedalWalker-v3", "LunarLander-v3", "LunarLanderContinuous-v3")


def check_backend(env_id: str, envs) -> None:
    """One-line error if the run's ``train_backend`` cannot run ``env_id`` (pure: no import)."""
    if envs.train_backend != "envpool":
        return
    if env_id not in COVERED:
        raise UsageError(f"env option train_backend=envpool covers {', '.join(COVERED)}, not {env_id}")
    if envs.make:
        raise UsageError(
            f"env option train_backend=envpool takes no options of the env itself, got {', '.join(sorted(envs.make))}"
        )
