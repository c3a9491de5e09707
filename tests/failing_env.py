"""CartPoles that fail or stall on demand (worker failures, evaluations in flight).

``--env failing_env:FailingCartPole-v0``: an episode whose reset seed is divisible by
``FAIL_EVERY`` raises on its 5th step.  ``--env failing_env:HoldCartPole-v0``: see
:class:`HoldCartPole`.
"""

import os
import time

import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

FAIL_EVERY = 5


class FailingCartPole(CartPoleEnv):
    def reset(self, *, seed=None, options=None):
        self._doomed = seed is not None and seed % FAIL_EVERY == 0
        self._t = 0
        return super().reset(seed=seed, options=options)

    def step(self, action):
        self._t += 1
        if self._doomed and self._t == 5:
            raise RuntimeError("simulated environment failure")
        return super().step(action)


if "FailingCartPole-v0" not in gym.registry:
    gym.register("FailingCartPole-v0", entry_point=FailingCartPole, max_episode_steps=200)


class HoldCartPole(CartPoleEnv):
    """CartPole whose step() waits while the file named by ``$SYNAPTO_TEST_HOLD`` exists:
    evaluations in flight stall on demand (the results are CartPole's)."""

    def step(self, action):
        hold = os.environ.get("SYNAPTO_TEST_HOLD")
        while hold and os.path.exists(hold):
            time.sleep(0.01)
        return super().step(action)


if "HoldCartPole-v0" not in gym.registry:
    gym.register("HoldCartPole-v0", entry_point=HoldCartPole, max_episode_steps=500)
