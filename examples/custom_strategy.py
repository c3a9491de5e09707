"""A strategy of your own through the strategy template: a (1 + lambda) hill climber.

    python examples/custom_strategy.py          # a 10-d quadratic, then CartPole-v1: under a minute
    python examples/custom_strategy.py --tiny   # a few seconds

``Strategy.tell`` is a template method (``synapto.evolution.strategies.base``): it checks what
it is told, calls the one hook a strategy must implement, ``_step``, cuts the next generation
to a connection budget where ``prune_to`` sets one, and counts the generation.  A strategy
also says what to evaluate (``start``, ``ask``), who its champion is, and how its state goes
to and from a checkpoint (``state``, ``restore``; the Generator ``self.rng`` is saved apart).

Registered in ``STRATEGIES`` under a name, it is a ``strategy`` like the shipped ones: for
``synapto.AskTell`` over any vector, and for ``synapto.evolve`` on an environment, with its
options checked, its state checkpointed and the run resumable.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import ClassVar

import numpy as np

import synapto
from synapto.evolution.strategies.base import STRATEGIES, Champion, Feedback, Strategy
from synapto.evolution.strategies.options import Option, need_positive

TINY = "--tiny" in sys.argv[1:]
OUT = Path("runs/examples")


class HillClimber(Strategy):
    """Row 0 of every generation is the parent, evaluated again; the other rows are the parent
    plus Gaussian noise on its surviving weights (a pruned weight stays 0).  The best row of
    a generation is the next parent; the best ever told is the champion."""

    name = "hill-climber"
    OPTIONS: ClassVar[dict[str, Option]] = {"sigma": Option(0.1, "standard deviation of each weight's step")}

    @classmethod
    def check_options(cls, options):
        out = super().check_options(options)  # unknown names refused in one line
        out["sigma"] = need_positive("sigma", out["sigma"])
        return out

    def start(self) -> None:
        self.parent = self.agent.init_genome(self.rng)
        self.best = Champion(self.parent.copy(), -np.inf, -1)
        self._populate()

    def _populate(self) -> None:  # the base calls this after counting a generation
        noise = self.options["sigma"] * self.rng.standard_normal((self.population - 1, self.parent.size))
        self.genomes = np.vstack([self.parent, self.parent + noise * (self.parent != 0)])

    def ask(self) -> np.ndarray:
        return self.genomes

    def _step(self, feedback: Feedback) -> None:
        fitness = feedback.select_fitness()  # validation fitness where rows were validated
        i = int(np.argmax(fitness))
        self.parent = self.genomes[i].copy()
        if fitness[i] > self.best.fitness:
            self.best = Champion(self.parent.copy(), float(fitness[i]), self.generation)

    @property
    def champion(self) -> Champion:
        return self.best

    def state(self):
        arrays = {"parent": self.parent, "genomes": self.genomes, "best_genome": self.best.genome}
        return arrays, {"best_fitness": self.best.fitness, "best_generation": self.best.generation}

    def restore(self, arrays, scalars) -> None:
        self.parent, self.genomes = np.array(arrays["parent"]), np.array(arrays["genomes"])
        self.best = Champion(
            np.array(arrays["best_genome"]), float(scalars["best_fitness"]), int(scalars["best_generation"])
        )
        self.generation = int(scalars["generation"])  # the checkpoint's counter


STRATEGIES.setdefault("hill-climber", "custom_strategy:HillClimber")  # importable from this folder


def quadratic() -> None:
    """Your own loop over a plain vector: ask, evaluate, tell."""
    target = np.linspace(-1.0, 1.0, 10)
    search = synapto.AskTell.vector(np.zeros(10), "hill-climber", population=8, seed=0, sigma=0.2)
    start = -float(np.sum(target**2))
    for _ in range(5 if TINY else 200):
        xs = search.ask()
        search.tell([-float(np.sum((x - target) ** 2)) for x in xs])
    best = search.champion.fitness
    print(f"quadratic: fitness {start:.2f} at the start, {best:.4f} after {search.generation} generations")


def cartpole() -> None:
    """A run with the command line's run file, checkpoints and final test."""
    OUT.mkdir(parents=True, exist_ok=True)
    cfg = synapto.EvolveConfig(
        env="CartPole-v1",
        agent="pruned-mlp",
        hidden=(4,),
        agent_options={"init_prune": 0.0},
        strategy="hill-climber",
        strategy_options={"sigma": 0.5},
        population=8,
        generations=2 if TINY else 30,
        episodes=1,
        validate_episodes=0,
        test_episodes=5 if TINY else 100,
        seed=1,
    )
    summary = synapto.evolve(cfg, OUT / "custom_strategy.h5", force=True, log=lambda line: None)
    print(f"cartpole: {summary.generations} generations of hill-climber, champion test {summary.test_mean:.1f}")


if __name__ == "__main__":
    quadratic()
    cartpole()
