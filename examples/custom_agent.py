"""An agent of your own: a linear policy with biases, evolved by synapto's OpenAI-ES.

    python examples/custom_agent.py          # CartPole-v1, under a minute on one core
    python examples/custom_agent.py --tiny   # two small generations, a few seconds

An agent describes a family of networks (``synapto.agents.base.Agent``): its genome is a
flat float64 vector, a weight of exactly 0 is a pruned connection, and it makes the policy
that acts for a genome.  ``EvolveConfig(agent="module:Class")`` (on the command line,
``--agent module:Class``) runs it; the module must be importable where the run evaluates
(here: this script's folder, which Python puts on the path).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

import synapto
from synapto.agents.base import Agent, Policy
from synapto.common.errors import UsageError

TINY = "--tiny" in sys.argv[1:]
OUT = Path("runs/examples")


class LinearPolicy(Policy):
    """``action = f(obs @ W + b)``: argmax for discrete actions, tanh scaled to the bounds for boxes."""

    def __init__(self, agent: LinearAgent, genome: np.ndarray):
        self.agent = agent
        self.w = genome[: agent.n_weights].reshape(agent.space.obs_dim, agent.space.act_dim)
        self.b = genome[agent.n_weights :]

    def reset(self) -> None:
        pass  # nothing carries over from one episode to the next

    def act(self, obs: np.ndarray) -> Any:
        return self.agent.output_to_action(np.asarray(obs, dtype=np.float64) @ self.w + self.b)


class LinearAgent(Agent):
    """A linear policy with a bias per action; pruning removes weights at random."""

    name = "linear-bias"
    OPTIONS: ClassVar[dict[str, Any]] = {"init_std": 0.5, "prune_rate": 0.01}

    def __init__(self, space, hidden, options=None):
        super().__init__(space, hidden, options)
        if self.hidden:
            raise UsageError(f"agent {self.name!r} has no hidden layers: give hidden = [], got {list(self.hidden)}")
        self.n_weights = space.obs_dim * space.act_dim

    @property
    def n_params(self) -> int:
        return self.n_weights + self.space.act_dim

    def init_genome(self, rng: np.random.Generator) -> np.ndarray:
        return self.options["init_std"] * rng.standard_normal(self.n_params)

    def policy(self, genome: np.ndarray) -> Policy:
        return LinearPolicy(self, np.array(genome, dtype=np.float64))

    def groups(self) -> list[list[slice]]:
        return [[slice(0, self.n_weights)], [slice(self.n_weights, self.n_params)]]  # weights, biases

    def mutate(self, genome, stats, rate, rng) -> np.ndarray:
        return genome * (rng.random(genome.shape[0]) >= rate)

    @property
    def initial_rate(self) -> float:  # type: ignore[override]
        return float(self.options["prune_rate"])


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    cfg = synapto.EvolveConfig(
        env="CartPole-v1",
        agent="custom_agent:LinearAgent",
        hidden=(),
        strategy="openai-es",
        strategy_options={"sigma": 0.1, "lr": 0.05},
        population=8 if TINY else 16,
        generations=2 if TINY else 30,
        episodes=1,
        validate_top=1,
        validate_episodes=2 if TINY else 4,
        test_episodes=5 if TINY else 100,
        seed=1,
    )
    summary = synapto.evolve(cfg, OUT / "custom_agent.h5", force=True)
    policy = synapto.load_policy(OUT / "custom_agent.h5")
    print(
        f"agent {type(policy.agent).__name__}: {policy.agent.n_params} parameters, "
        f"{policy.agent.connections(policy.genome)} connections left; champion test {summary.test_mean:.1f}"
    )


if __name__ == "__main__":
    main()
