"""A one-step environment whose return is a known function of the action.

``--env analytic_env:Analytic-v0``: the observation is the constant vector
``OBS`` (Box, 3 components), the action a Box of ``len(TARGET)`` components in
[-1, 1]; the one step ends the episode with reward ``-|action - TARGET|^2``.  The
best return is 0, reached by any policy whose action is ``TARGET``; the seed
changes nothing.  A pruned-mlp's action is ``tanh(... tanh(OBS @ W1) ... @ Wk)``,
so evolution on this env optimises a known function of the genome, and every
return is at most 0.
"""

import gymnasium as gym
import numpy as np

OBS = np.array([1.0, -0.5, 0.25])
TARGET = np.array([0.5, -0.25])


def analytic_return(action) -> float:
    """The return of the episode that takes ``action``."""
    d = np.asarray(action, dtype=np.float64) - TARGET
    return -float(d @ d)


class AnalyticEnv(gym.Env):
    """One step, constant observation, reward ``-|action - TARGET|^2``."""

    observation_space = gym.spaces.Box(-2.0, 2.0, shape=(OBS.size,), dtype=np.float64)
    action_space = gym.spaces.Box(-1.0, 1.0, shape=(TARGET.size,), dtype=np.float64)

    def __init__(self, render_mode=None):
        self.render_mode = render_mode

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return OBS.copy(), {}

    def step(self, action):
        return OBS.copy(), analytic_return(action), True, False, {}


if "Analytic-v0" not in gym.registry:
    gym.register("Analytic-v0", entry_point=AnalyticEnv, max_episode_steps=1)
