"""How a test episode ended and how large its actions were: what ``synapto show`` reads.

Both are recorded during test episodes that run anyway (the champion's test of an
evolution run, the final policy's test of a PPO run), so they cost no env step:

- the **outcome** (:func:`outcome`), from the episode's last step: a terminating step whose
  reward is exactly :data:`~synapto.shaping.FALL_PENALTY` (-100: BipedalWalker's fall,
  LunarLander's crash or flight off the screen) is :data:`FELL`; any other terminating
  step is :data:`FINISHED` (BipedalWalker: the end of the course; LunarLander: at rest);
  a truncated one (the time limit, a PPO run's ``max_ep_len``) is :data:`OUT_OF_TIME`; an
  episode stopped by a non-finite observation or action is :data:`STOPPED`.  Elsewhere
  (CartPole, say) FINISHED only means "terminated by the task", whatever that means there.
- the **action magnitude** (:func:`magnitude`, summed over the episode's steps): the mean
  over the action's components of ``|a|``, ``a`` clipped to the action space's bounds;
  NaN for a Discrete space (a choice has no size).  BipedalWalker-v3 subtracts
  ``0.00035 * 80 * sum_i min(|a_i|, 1)`` from every step's reward, so its torque cost over
  an episode is ``0.00035 * 80 * 4 = 0.112`` times the episode's action magnitude.
"""

from __future__ import annotations

import numpy as np

from synapto.shaping import FALL_PENALTY

#: outcome codes (int8 in run files)
NOT_RUN, FINISHED, FELL, OUT_OF_TIME, STOPPED = -1, 0, 1, 2, 3


def outcome(terminated: bool, truncated: bool, reward: float) -> int:
    """The outcome of an episode whose last step returned ``terminated``, ``truncated``,
    ``reward`` (a step both terminated and truncated ended by the task)."""
    if terminated:
        return FELL if float(reward) == FALL_PENALTY else FINISHED
    return OUT_OF_TIME if truncated else STOPPED


def magnitude(action, low: np.ndarray, high: np.ndarray) -> float:
    """One step's action magnitude: the mean of ``|clip(action, low, high)|``."""
    return float(np.mean(np.abs(np.clip(np.ravel(action), low, high))))


class ActionMeter:
    """``act`` (observation -> action), summing each action's :func:`magnitude` into
    :attr:`total` (set it to 0 at an episode's start)."""

    def __init__(self, act, low: np.ndarray, high: np.ndarray):
        self.act, self.low, self.high = act, low, high
        self.total = 0.0

    def __call__(self, obs):
        action = self.act(obs)
        self.total += magnitude(action, self.low, self.high)
        return action


class LockstepEnds:
    """Outcomes and action magnitudes of ``n`` episodes stepped in lockstep on the sub-envs
    of a vector env (:mod:`synapto.evolution.worker.batched`): per sub-env the magnitude
    so far, per episode (original row) its figures once ended.  ``bounds``: the action
    space's ``(low, high)``, None for a Discrete space."""

    def __init__(self, n: int, width: int, bounds: tuple[np.ndarray, np.ndarray] | None):
        self.outcomes = np.full(n, NOT_RUN, dtype=np.int8)
        self.cost = np.full(n, np.nan)
        self.bounds = bounds
        self.cur = np.zeros(width)

    def add(self, action: np.ndarray) -> None:
        """One step's actions ``(width, act_dim)`` (ended sub-envs' rows are not read later)."""
        if self.bounds is not None:
            self.cur += np.abs(np.clip(action, *self.bounds)).mean(axis=1)

    def ended(self, rows, idx, reward, terminated, truncated, stepping) -> None:
        """Sub-envs ``idx`` ended episodes ``rows`` on this step; ``stepping``: which sub-envs
        stepped (None: all; one that did not had a non-finite action)."""
        term, trunc = np.asarray(terminated)[idx], np.asarray(truncated)[idx]
        fell = np.asarray(reward)[idx] == FALL_PENALTY
        codes = np.where(term, np.where(fell, FELL, FINISHED), np.where(trunc, OUT_OF_TIME, STOPPED))
        if stepping is not None:
            codes = np.where(np.asarray(stepping)[idx], codes, STOPPED)
        self.outcomes[rows] = codes
        if self.bounds is not None:
            self.cost[rows] = self.cur[idx]

    def restart(self, idx) -> None:
        """Sub-envs ``idx`` start new episodes."""
        self.cur[idx] = 0.0

    def keep(self, keep: np.ndarray) -> None:
        """Only sub-envs ``keep`` go on (compaction)."""
        self.cur = self.cur[keep]
