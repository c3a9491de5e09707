"""CartPoles that break a tune study: ``tune_envs:NanCartPole-v0`` pays NaN rewards (every
score is NaN), ``tune_envs:HangCartPole-v0`` never returns from its first step (a hung env),
``tune_envs:ScoreFailCartPole-v0`` raises on the episodes that score run seed 1000."""

import time

import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv


class NanCartPole(CartPoleEnv):
    def step(self, action):
        obs, _reward, terminated, truncated, info = super().step(action)
        return obs, float("nan"), terminated, truncated, info


class HangCartPole(CartPoleEnv):
    def step(self, action):
        time.sleep(3600)
        return super().step(action)


class ScoreFailCartPole(CartPoleEnv):
    def reset(self, *, seed=None, options=None):
        from synapto.common.seeding import tuning_seeds

        if seed is not None and seed in set(tuning_seeds(1000, 5).tolist()):
            raise RuntimeError("simulated failure on a scoring episode")
        return super().reset(seed=seed, options=options)


for _id, _cls in (
    ("NanCartPole-v0", NanCartPole),
    ("HangCartPole-v0", HangCartPole),
    ("ScoreFailCartPole-v0", ScoreFailCartPole),
):
    if _id not in gym.registry:
        gym.register(_id, entry_point=_cls, max_episode_steps=200)
