"""CartPoles that fail or stall on demand (worker failures, evaluations in flight).

``--env failing_env:FailingCartPole-v0``: an episode whose reset seed is divisible by
``FAIL_EVERY`` raises on its 5th step.  ``failing_env:HoldCartPole-v0`` and
``failing_env:StallCartPole-v0``: see :class:`HoldCartPole` and :class:`StallCartPole`.
"""

import os
import signal
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
    evaluations in flight stall on demand (the results are CartPole's).  A stalled step
    says so by creating ``<that file>.held``."""

    def step(self, action):
        hold = os.environ.get("SYNAPTO_TEST_HOLD")
        if hold and os.path.exists(hold):
            open(hold + ".held", "a").close()
            while os.path.exists(hold):
                time.sleep(0.01)
        return super().step(action)


if "HoldCartPole-v0" not in gym.registry:
    gym.register("HoldCartPole-v0", entry_point=HoldCartPole, max_episode_steps=500)


class StallCartPole(CartPoleEnv):
    """CartPole of which one evaluation stalls: ``$SYNAPTO_TEST_STALL`` is ``MARKER:HOW``; the
    first episode any process resets creates the file MARKER (holding ``rank pid``), then
    ``HOW=stop`` stops that process (SIGSTOP: a rank that no longer answers) and
    ``HOW=sleep`` sleeps in step() for good (an evaluation that never ends)."""

    def reset(self, *, seed=None, options=None):
        self._stall = None
        marker, _, how = os.environ.get("SYNAPTO_TEST_STALL", "").rpartition(":")
        if marker:
            try:
                fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            except FileExistsError:
                pass
            else:
                os.write(fd, f"{os.environ.get('PMI_RANK', '0')} {os.getpid()}\n".encode())
                os.close(fd)
                self._stall = how
        return super().reset(seed=seed, options=options)

    def step(self, action):
        if self._stall == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)
        while self._stall == "sleep":
            time.sleep(0.05)
        return super().step(action)


if "StallCartPole-v0" not in gym.registry:
    gym.register("StallCartPole-v0", entry_point=StallCartPole, max_episode_steps=500)


class DyingCartPole(CartPoleEnv):
    """CartPole whose first episode in a worker rank (not rank 0) kills that process with
    SIGSEGV -- a rank that dies outright -- once per marker file ``$SYNAPTO_TEST_DIE``
    (created then: a rerun or ``--resume`` of the same command does not die)."""

    def reset(self, *, seed=None, options=None):
        marker = os.environ.get("SYNAPTO_TEST_DIE")
        rank = os.environ.get("PMI_RANK", "0")
        if marker and rank != "0":
            try:  # O_EXCL: of two workers that reset at once, exactly one dies
                fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            except FileExistsError:
                fd = None
            if fd is not None:
                os.write(fd, f"{rank} {os.getpid()}\n".encode())
                os.close(fd)
                os.kill(os.getpid(), signal.SIGSEGV)
        return super().reset(seed=seed, options=options)


if "DyingCartPole-v0" not in gym.registry:
    gym.register("DyingCartPole-v0", entry_point=DyingCartPole, max_episode_steps=200)


class NaNObsCartPole(CartPoleEnv):
    """CartPole whose episodes with a reset seed divisible by ``NAN_EVERY`` observe NaN in
    their 3rd step's observation (a sensor that fails)."""

    def reset(self, *, seed=None, options=None):
        self._doomed = seed is not None and seed % NAN_EVERY == 0
        self._t = 0
        return super().reset(seed=seed, options=options)

    def step(self, action):
        self._t += 1
        obs, reward, terminated, truncated, info = super().step(action)
        if self._doomed and self._t == 3:
            obs = obs.copy()
            obs[1] = float("nan")
        return obs, reward, terminated, truncated, info


NAN_EVERY = 3

if "NaNObsCartPole-v0" not in gym.registry:
    gym.register("NaNObsCartPole-v0", entry_point=NaNObsCartPole, max_episode_steps=200)
