"""Ask / tell: a synapto strategy driven by your own evaluation loop.

    search = synapto.AskTell(agent, "openai-es", population=16, seed=0, sigma=0.1)
    search = synapto.AskTell.vector(np.zeros(10), "cmaes", population=16, seed=0)   # any vector
    for _ in range(100):
        xs = search.ask()
        search.tell([f(x) for x in xs])
    search.champion            # the best genome told so far, its fitness and generation

Over an agent's genome, a weight that is exactly 0 is a pruned connection and stays 0
(synapto's rule, :mod:`synapto.evolution.strategies.base`).  Over a plain vector
(:meth:`AskTell.vector`) nothing is pruned and zeros are ordinary values: the strategy
searches ``y = x - x0 + 1`` (so that no coordinate starts at 0) and ``ask``/``champion``
give ``x``; the centre strategies start at ``x0`` (``init_std`` 0 unless given) and
``openai-es``'s weight decay is off unless given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from synapto.agents.base import Agent, Policy
from synapto.common import seeding
from synapto.common.errors import UsageError
from synapto.envs import SpaceInfo
from synapto.evolution.strategies import strategy_class
from synapto.evolution.strategies.base import Candidates, Champion, Feedback, Strategy


class VectorGenome(Agent):
    """A plain vector of ``n`` numbers as a genome: nothing to prune, nothing to play."""

    name = "vector"

    def __init__(self, start: np.ndarray):
        self.start = np.array(start, dtype=np.float64).ravel()
        self.space = SpaceInfo(0, 0, False, None, None, None)  # no environment: nothing reads it
        self.hidden = ()
        self.options = {}

    @property
    def n_params(self) -> int:
        return self.start.size

    def init_genome(self, rng: np.random.Generator) -> np.ndarray:
        return self.start.copy()

    def policy(self, genome: np.ndarray) -> Policy:
        raise UsageError("a plain vector has no policy: evaluate it in your own loop")

    def groups(self) -> list[list[slice]]:
        return [[slice(0, self.n_params)]]

    def mutate(self, genome, stats, rate, rng) -> np.ndarray:
        return np.array(genome, dtype=np.float64)  # never pruned

    def connections(self, genome: np.ndarray) -> int:
        return int(np.size(genome))


class AskTell:
    """A strategy for your own evaluation loop: ``ask()`` genomes, ``tell(fitness)``.

    ``strategy`` is a ``--strategy`` name; ``options`` its options (``sigma=0.1``...);
    every random number comes from the seed's EVOLVE stream, so the same calls give the
    same genomes.  :meth:`state` / :meth:`from_state` checkpoint it exactly (strategy,
    population and options included).
    """

    def __init__(self, agent, strategy: str = "openai-es", population: int = 64, seed: int = 0, **options: Any):
        self._setup(agent, strategy, population, options, seeding.generator(seed, seeding.Stream.EVOLVE), offset=None)
        self.strategy.start()

    @classmethod
    def vector(
        cls, x0: Sequence[float], strategy: str = "openai-es", population: int = 64, seed: int = 0, **options: Any
    ) -> AskTell:
        """Ask/tell over a plain vector starting at ``x0`` (see the module docstring)."""
        start = np.array(x0, dtype=np.float64).ravel()
        if start.size == 0 or not np.all(np.isfinite(start)):
            raise UsageError(f"x0 must be a non-empty vector of finite numbers, got {start!r}")
        self = cls.__new__(cls)
        cls_ = strategy_class(strategy)
        options = {**_vector_defaults(cls_), **options}
        self._setup(
            VectorGenome(np.ones_like(start)),
            strategy,
            population,
            options,
            seeding.generator(seed, seeding.Stream.EVOLVE),
            offset=start - 1.0,
        )
        self.strategy.start()
        return self

    def _setup(self, agent, strategy: str, population: int, options: dict, rng, offset) -> None:
        cls = strategy_class(strategy)
        opts = cls.check_options(options)
        cls.check_population(population, opts)
        self.agent = agent
        self.name, self.population, self.options = strategy, int(population), dict(options)
        self.offset = offset
        self.generation = 0
        self.best = Champion(np.zeros(agent.n_params), -np.inf, -1)
        self.strategy: Strategy = cls(agent, population, options, rng)

    def _out(self, genomes: np.ndarray) -> np.ndarray:
        return genomes if self.offset is None else genomes + self.offset

    def ask(self) -> np.ndarray:
        """The genomes to evaluate now, (population, n_params) (a copy: yours to change)."""
        return np.array(self._out(self.strategy.ask()))

    def tell(self, fitness: Sequence[float], stats: np.ndarray | None = None) -> None:
        """The fitness of each asked genome (higher is better; -inf for a failed one) and,
        optionally, per-connection trace statistics (hebbian-dag's pruning uses them)."""
        genomes = self.strategy.ask()
        scores = np.asarray(fitness, dtype=np.float64)
        if scores.shape != (genomes.shape[0],):
            raise UsageError(f"tell needs one fitness per asked genome ({genomes.shape[0]}), got shape {scores.shape}")
        scores = np.where(np.isnan(scores), -np.inf, scores)
        traces = np.zeros_like(genomes) if stats is None else np.asarray(stats, dtype=np.float64)
        connections = np.array([self.agent.connections(g) for g in genomes], dtype=np.int64)
        i = int(np.argmax(scores))  # the first of the best
        if scores[i] > self.best.fitness:
            self.best = Champion(np.array(self._out(genomes[i])), float(scores[i]), self.generation)
        none = Candidates(np.zeros(0, np.int64), np.zeros((0, genomes.shape[1])))
        self.strategy.tell(Feedback(self.generation, scores, traces, connections, none, np.zeros(0)))
        self.generation += 1

    @property
    def champion(self) -> Champion:
        """The best genome told so far (the first of equals), its fitness and generation."""
        return self.best

    def state(self) -> dict[str, Any]:
        """Everything needed to continue exactly: the strategy's arrays and scalars, the
        Generator's state, the strategy's name, population and options, the best told."""
        arrays, scalars = self.strategy.state()
        return {
            "arrays": arrays,
            "scalars": {**scalars, "generation": self.generation},
            "rng": self.strategy.rng.bit_generator.state,
            "search": {
                "strategy": self.name,
                "population": self.population,
                "options": dict(self.options),
                "offset": None if self.offset is None else np.array(self.offset),
            },
            "best": {
                "genome": np.array(self.best.genome),
                "fitness": self.best.fitness,
                "generation": self.best.generation,
            },
        }

    @classmethod
    def from_state(
        cls,
        state: dict[str, Any],
        agent=None,
        strategy: str | None = None,
        population: int | None = None,
        **options: Any,
    ) -> AskTell:
        """The search of :meth:`state`, continued.  ``strategy``, ``population`` and
        ``options`` default to the stored ones (a state of an older synapto lacks them:
        then they must be given); ``agent`` is needed for an agent's genome only."""
        search = state.get("search", {})
        strategy = strategy or search.get("strategy")
        population = population or search.get("population")
        options = {**search.get("options", {}), **options}
        if strategy is None or population is None:
            raise UsageError("from_state needs strategy and population (this state does not hold them)")
        offset = search.get("offset")
        if offset is not None:
            agent = VectorGenome(np.ones(len(offset)))
        elif agent is None:
            raise UsageError("from_state of an agent's search needs the agent")
        bitgen = getattr(np.random, state["rng"]["bit_generator"])()
        bitgen.state = state["rng"]
        self = cls.__new__(cls)
        self._setup(
            agent,
            strategy,
            population,
            options,
            np.random.Generator(bitgen),
            None if offset is None else np.asarray(offset, dtype=np.float64),
        )
        self.generation = int(state["scalars"]["generation"])
        self.strategy.restore(state["arrays"], state["scalars"])
        if "best" in state:
            b = state["best"]
            self.best = Champion(np.array(b["genome"]), float(b["fitness"]), int(b["generation"]))
        return self


def _vector_defaults(cls) -> dict[str, Any]:
    """Options of a plain-vector search that differ from an agent's: start at x0, no
    pruning, no weight decay towards a point that means nothing for a plain vector."""
    wanted = {"init_std": 0.0, "prune": False, "weight_decay": 0.0}
    return {k: v for k, v in wanted.items() if k in cls.OPTIONS}
