"""Training-time task shaping: how a run's *training* episodes differ from the task.

Validation, selection, the champion's test, render and ``bench`` always run the
unmodified task; only the episodes whose returns the strategy learns from are shaped,
and every env step they take is counted like any other.  The options are env options
(``--env-option KEY=VALUE``, a config's ``[env_options]`` table), recorded in the run
file's config with the rest, so replay and resume shape exactly as the run did:

===================  ==========================================================================
``fall_reward``      a training step that ends the episode with the env's fall penalty (a reward
                     of exactly -100 on a terminating step: BipedalWalker's fall, LunarLander's
                     crash) gets this reward instead (estool's walker: 0)
``finish_bonus``     added to a terminating step that is not a fall (BipedalWalker: the end of
                     the course; LunarLander: at rest)
``reward_floor``     every training step's reward is clipped from below at this value, after
                     ``fall_reward`` (linear ARS walkers: -1)
``stall_steps``      a training episode stops (truncated) after this many consecutive steps of
                     negative reward (the env's own reward): an agent standing still pays its
                     torque cost on every step (Najarro & Risi 2020 stop after 20-30)
``cap_factor``       training episodes of generation ``g > 0`` are capped at ``cap_factor``
                     times the mean training episode length of generation ``g - 1``, rounded
                     up (Salimans et al. 2017: 2); the cap follows from the run file's
                     ``/steps``, so resume and replay find it again
``cap_steps``        training episodes stop (truncated) after this many steps, from generation 0
                     (with ``cap_factor`` too, the lower cap holds): the return becomes the
                     progress made in that time, so a faster gait scores more -- BipedalWalker's
                     slow walkers score 230-270 by running out of its 1,600 steps
===================  ==========================================================================

Reward values (``fall_reward``, ``finish_bonus``, ``reward_floor``) are numbers in
-1e6..1e6 and step counts (``stall_steps``, ``cap_steps``) integers up to 1e9; anything
else is refused in one line.

Why each one exists: a -100 fall penalty makes standing still the
safest policy, so evolution finds statues before walkers; a stall stop and a cap cut the
env steps that statues and shufflers cost.

Everything here is a pure function of one episode's rewards: :class:`ShapedEnv` wraps
one env for one training episode (a few Python operations per step, against about
200 us of a BipedalWalker step).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from synapto.common.errors import UsageError

#: the reward a Box2D task gives the step that ends an episode in a fall or crash
FALL_PENALTY = -100.0
#: the largest magnitude of a reward option (``fall_reward``, ``finish_bonus``, ``reward_floor``,
#: and :mod:`synapto.envs`' ``reward_shift``): a million times a task's reward scale is already
#: no shaping, and near 1e308 a population's fitness statistics overflow
MAX_REWARD = 1e6
#: the largest step count of ``stall_steps`` and ``cap_steps`` (no episode runs that long)
MAX_STEPS = 1_000_000_000


def reward_option(key: str, v: Any) -> float:
    """A reward option's value: a finite number of magnitude <= :data:`MAX_REWARD`, else one line."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or abs(v) > MAX_REWARD:
        raise UsageError(f"env option {key} must be a finite number in -1e6..1e6, got {v!r}")
    return float(v)


@dataclass(frozen=True)
class Shaping:
    """A run's training-time shaping (all off by default)."""

    fall_reward: float | None = None
    finish_bonus: float = 0.0
    reward_floor: float | None = None
    stall_steps: int = 0
    cap_factor: float = 0.0
    cap_steps: int = 0

    KEYS = ("fall_reward", "finish_bonus", "reward_floor", "stall_steps", "cap_factor", "cap_steps")
    HELP: ClassVar[dict[str, str]] = {
        "fall_reward": "training episodes only: the reward of a fall (a terminating step of reward -100) "
        "instead of -100",
        "finish_bonus": "training episodes only: added to a terminating step that is not a fall",
        "reward_floor": "training episodes only: every step's reward clipped from below at this value",
        "stall_steps": "training episodes only: stop after this many consecutive steps of negative reward (0: never)",
        "cap_factor": "training episodes only: cap at this times the previous generation's mean episode length "
        "(0: no cap; else >= 1)",
        "cap_steps": "training episodes only: stop after this many steps (0: no cap)",
    }

    @classmethod
    def pop(cls, options: dict[str, Any]) -> Shaping:
        """The shaping options of ``options`` (removed from it); one-line errors for bad values."""
        values: dict[str, Any] = {}
        for key in ("fall_reward", "finish_bonus", "reward_floor"):
            if key in options:
                values[key] = reward_option(key, options.pop(key))
        for key in ("stall_steps", "cap_steps"):
            if key in options:
                v = options.pop(key)
                if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_STEPS:
                    raise UsageError(f"env option {key} must be an integer in 0..{MAX_STEPS:,}, got {v!r}")
                values[key] = v
        if "cap_factor" in options:
            v = options.pop("cap_factor")
            if (
                isinstance(v, bool)
                or not isinstance(v, (int, float))
                or not math.isfinite(v)
                or not (v == 0 or 1 <= v <= 1e6)
            ):
                raise UsageError(f"env option cap_factor must be 0 (no cap) or a number in 1..1e6, got {v!r}")
            values["cap_factor"] = float(v)
        return cls(**values)

    @property
    def active(self) -> bool:
        return self != Shaping()

    @property
    def rewards_shaped(self) -> bool:
        """Whether a step's reward can change (the other options only end episodes early)."""
        return self.fall_reward is not None or self.finish_bonus != 0 or self.reward_floor is not None

    def cap(self, previous_steps: np.ndarray | None, episodes: int) -> int:
        """The step cap of a generation's training episodes (0: none): ``cap_factor`` times
        the mean episode length of the previous generation, whose per-individual total
        env steps over ``episodes`` episodes are ``previous_steps`` (None: generation 0),
        or ``cap_steps`` where that is lower."""
        caps = [self.cap_steps] if self.cap_steps else []
        if self.cap_factor and previous_steps is not None and len(previous_steps) > 0:
            mean = float(np.mean(np.asarray(previous_steps, dtype=np.float64))) / episodes
            caps.append(max(1, math.ceil(self.cap_factor * mean)))
        return min(caps, default=0)

    def wrap(self, env, max_steps: int = 0):
        """``env`` for one shaped training episode (``env`` itself when nothing applies)."""
        if not self.active and not max_steps:
            return env
        return ShapedEnv(env, self, max_steps)


class ShapedEnv:
    """One env whose steps are shaped as :class:`Shaping` says; ``max_steps`` (0: none)
    truncates the episode after that many steps.  Only ``reset``, ``step`` and ``close``
    are offered: what an evaluation calls."""

    def __init__(self, env, shaping: Shaping, max_steps: int = 0):
        self.env, self.shaping, self.max_steps = env, shaping, int(max_steps)
        self.rewards_shaped = shaping.rewards_shaped  # once per episode, not per step
        self.t = self.negative = 0

    def reset(self, **kwargs):
        self.t = self.negative = 0
        return self.env.reset(**kwargs)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        s = self.shaping
        self.t += 1
        raw = float(reward)
        if self.rewards_shaped:
            r = raw
            if terminated:
                if raw == FALL_PENALTY:
                    if s.fall_reward is not None:
                        r = s.fall_reward
                else:
                    r += s.finish_bonus
            if s.reward_floor is not None and r < s.reward_floor:
                r = s.reward_floor
            reward = r
        if s.stall_steps:
            self.negative = self.negative + 1 if raw < 0 else 0
            if self.negative >= s.stall_steps:
                truncated = True
        if self.max_steps and self.t >= self.max_steps:
            truncated = True
        return obs, reward, terminated, truncated, info

    def close(self):
        self.env.close()

    @property
    def unwrapped(self):
        return self.env.unwrapped
