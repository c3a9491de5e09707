"""A stored agent as a policy for your own loop: :func:`load_policy`.

    policy = synapto.load_policy("runs/quickstart.h5")        # the run's champion
    env = policy.make_env()
    obs, _ = env.reset(seed=int(policy.test_seeds[0]))
    policy.reset()
    while True:
        obs, reward, terminated, truncated, _ = env.step(policy.act(obs))
        ...

The policy acts exactly as in the run (the observation normalisation it ran with, the
flattening of image observations), so the champion's test episodes, replayed with
:attr:`LoadedPolicy.test_seeds` in fresh environments, give the stored test returns
bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


@dataclass
class LoadedPolicy:
    """An agent of a run file, ready to act: :meth:`act` maps a raw observation to an action."""

    config: Any  #: the run's EvolveConfig
    agent: Any
    genome: np.ndarray
    generation: int
    fitness: float
    test_seeds: np.ndarray  #: the seeds of the champion's test episodes (empty for other agents)
    test_returns: np.ndarray  #: their stored returns
    obs_norm: tuple[np.ndarray, np.ndarray] | None
    description: str

    def __post_init__(self):
        from synapto.evolution.evaluate import acting

        self._policy = self.agent.policy(self.genome)
        self._act = acting(self.agent, self._policy, self.obs_norm)

    @property
    def env_id(self) -> str:
        return self.config.env

    def make_env(self, **kwargs):
        """A fresh environment of the run (its env options included; ``render_mode=...`` may be given)."""
        from synapto.envs import make_env

        return make_env(self.config.env, **{**self.config.make_kwargs, **kwargs})

    def reset(self) -> None:
        """Call at the start of every episode (a Hebbian agent's traces start afresh)."""
        self._policy.reset()

    def act(self, obs):
        """The action for the environment's raw observation ``obs``."""
        return self._act(obs)

    def end_episode(self) -> None:
        self._policy.end_episode()


def load_policy(path: str | Path, generation: int | None = None, individual: int | None = None) -> LoadedPolicy:
    """The champion of the finished evolution run ``path`` (the best agent so far of an
    unfinished one), or its individual ``individual`` of generation ``generation``."""
    from synapto.seeding import test_seeds
    from synapto.viz import pick_genome

    pick = pick_genome(path, generation, individual)
    returns = np.asarray(pick.test_returns, dtype=np.float64)
    seeds = np.asarray(test_seeds(pick.config.seed, returns.size), dtype=np.int64)
    return LoadedPolicy(pick.config, pick.agent, pick.genome, pick.generation, pick.fitness, seeds, returns,
                        pick.obs_norm, pick.what)
