"""An environment whose episodes end in a known way, chosen by the reset seed.

``--env outcome_env:Outcome-v0``: observation Box(3), action Box(2) in [-0.1, 0.1]; every step
but the last pays 1.  By ``seed % 3`` an episode

- 0: falls: its 3rd step ends it (terminated) with the fall penalty -100 -> return -98;
- 1: finishes: its 4th step ends it (terminated) with +10 -> return 13;
- 2: runs out of time: gymnasium's time limit truncates it after 6 steps -> return 6.

Whatever the policy does.  The env also keeps, per reset seed, the sum over the episode's
steps of the mean ``min(|a_i|, 0.1)`` of its actions (:data:`MAGNITUDE`: the actions clipped
to the space's bounds, as the env would apply them), worked out here in plain Python, so that
a test can hold the recorded action magnitude against it.
"""

import gymnasium as gym
import numpy as np

#: seed % 3 -> (outcome, length, return)
KINDS = {0: ("fell", 3, -98.0), 1: ("finished", 4, 13.0), 2: ("out of time", 6, 6.0)}
LIMIT = 6
BOUND = 0.1
#: reset seed -> the episode's action magnitude (sum over steps of the mean min(|a_i|, BOUND))
MAGNITUDE: dict[int, float] = {}


class OutcomeEnv(gym.Env):
    observation_space = gym.spaces.Box(-10.0, 10.0, shape=(3,), dtype=np.float64)
    action_space = gym.spaces.Box(-BOUND, BOUND, shape=(2,), dtype=np.float64)

    def __init__(self, render_mode=None):
        self.render_mode = render_mode
        self.seed_, self.t = 0, 0

    def _obs(self):
        return np.array([self.t / 3.0, (self.seed_ % 7) / 7.0 - 0.5, 1.0])

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.seed_, self.t = int(seed or 0), 0
        MAGNITUDE[self.seed_] = 0.0
        return self._obs(), {}

    def step(self, action):
        parts = [min(abs(float(x)), BOUND) for x in np.ravel(action)]
        MAGNITUDE[self.seed_] += sum(parts) / len(parts)
        self.t += 1
        kind = self.seed_ % 3
        if kind == 0 and self.t == 3:
            return self._obs(), -100.0, True, False, {}
        if kind == 1 and self.t == 4:
            return self._obs(), 10.0, True, False, {}
        return self._obs(), 1.0, False, False, {}


if "Outcome-v0" not in gym.registry:
    gym.register("Outcome-v0", entry_point=OutcomeEnv, max_episode_steps=LIMIT)
