"""A CartPole that raises inside step() on some episodes: worker failures on demand.

``--env failing_env:FailingCartPole-v0``; an episode whose reset seed is divisible by
``FAIL_EVERY`` raises on its 5th step.
"""

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
