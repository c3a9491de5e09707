"""The strategy seam: how the next generation is made, as ask / tell.

One generation of :func:`synapto.evolution.loop.run_evolution` talks to its strategy
in three calls::

    genomes = strategy.ask()                    # (P, n): the genomes to evaluate
    ... the farm evaluates them on training episodes -> fitness, trace statistics
    cand = strategy.candidates(fitness, K)      # which genomes to validate (K may be 0)
    ... the farm evaluates cand.genomes on fresh validation episodes
    strategy.tell(Feedback(...))                # everything the evaluations found

A strategy owns one ``np.random.Generator`` (:attr:`Strategy.rng`, the run's EVOLVE
stream) and draws every random number from it; its whole state goes to and from
the checkpoint as named arrays and scalars (:meth:`Strategy.state`,
:meth:`Strategy.restore`) plus that Generator's state, so a resumed run continues
bit for bit.  It knows the agent (genome length, pruning, connection counts), not
the farm, the run file or the environment.

Genomes are the agent's flat ``float64`` weight vectors; a weight that is exactly
0 is a pruned connection and stays 0 in everything the strategy asks for later
("synaptolysis": :func:`check_never_revived` states the rule, the tests enforce it).
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from synapto.errors import UsageError


@dataclass(frozen=True)
class Option:
    """One documented strategy option."""

    default: Any
    help: str


@dataclass(frozen=True)
class Candidates:
    """Genomes a strategy wants validated this generation."""

    #: (K,) index into this generation's population, or -1 for a genome that is not in
    #: it (an ES centre, say; the run file then stores it under ``/strategy``)
    individual: np.ndarray
    genomes: np.ndarray  #: (K, n)


@dataclass(frozen=True)
class Feedback:
    """What the evaluations of one generation found (the argument of :meth:`Strategy.tell`)."""

    generation: int
    fitness: np.ndarray  #: (P,) training fitness (-inf: non-finite or failed)
    stats: np.ndarray  #: (P, n) per-connection trace statistics (zeros where the agent has none)
    connections: np.ndarray  #: (P,) surviving connections of each genome
    candidates: Candidates  #: what was validated (K = 0 when validation is off)
    validation_fitness: np.ndarray  #: (K,) the candidates' fitness on validation episodes

    def select_fitness(self) -> np.ndarray:
        """The fitness that chooses among the population: the validation fitness for
        validated members (-inf for the others) when there was validation, else the
        training fitness.  Candidates outside the population are not in it."""
        if self.candidates.individual.size == 0:
            return self.fitness
        out = np.full(self.fitness.shape, -np.inf)
        inside = self.candidates.individual >= 0
        out[self.candidates.individual[inside]] = self.validation_fitness[inside]
        return out


@dataclass(frozen=True)
class Champion:
    """The best agent so far, as the strategy judges it."""

    genome: np.ndarray
    fitness: float  #: -inf before the first generation
    generation: int  #: -1 before the first generation


class Strategy(ABC):
    """How the next generation is made (see the module docstring)."""

    #: the ``--strategy`` name
    name: ClassVar[str] = "strategy"
    #: options accepted from ``strategy_options`` / the command line, with defaults and help
    OPTIONS: ClassVar[dict[str, Option]] = {}

    def __init__(self, agent, population: int, options: Mapping[str, Any] | None,
                 rng: np.random.Generator):
        self.agent = agent
        self.population = int(population)
        self.options = self.check_options(options or {})
        self.rng = rng

    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> dict[str, Any]:
        """``options`` completed with defaults; unknown names are refused with one line.
        Subclasses extend this with checks of the values (raise :class:`UsageError`)."""
        unknown = sorted(set(options) - set(cls.OPTIONS))
        if unknown:
            raise UsageError(f"strategy {cls.name!r} has no option(s) {', '.join(unknown)}; "
                             f"known: {', '.join(sorted(cls.OPTIONS)) or 'none'}")
        return {**{k: o.default for k, o in cls.OPTIONS.items()}, **dict(options)}

    @classmethod
    def check_population(cls, population: int, options: Mapping[str, Any]) -> None:
        """Refuse a population this strategy cannot use (one-line :class:`UsageError`)."""

    @classmethod
    def memory(cls, n_params: int, population: int, options: Mapping[str, Any]) -> int:
        """Lower bound, in bytes, of this strategy's own arrays beyond the population's
        (:func:`synapto.resources.evolve_memory` counts those); checked before it is built."""
        return 0

    @abstractmethod
    def start(self) -> None:
        """Draw the state of generation 0 from :attr:`rng` (a new run; a resumed run
        calls :meth:`restore` instead)."""

    # -- one generation --------------------------------------------------------
    @abstractmethod
    def ask(self) -> np.ndarray:
        """The genomes of this generation, (P, n).  Repeated calls before :meth:`tell`
        return the same genomes (and draw nothing)."""

    def candidates(self, fitness: np.ndarray, k: int) -> Candidates:
        """The genomes to validate, given this generation's training fitness: by default
        the ``k`` best (ties to the lower index)."""
        idx = rank_order(fitness)[:k].astype(np.int64)
        return Candidates(idx, self.ask()[idx])

    @abstractmethod
    def tell(self, feedback: Feedback) -> None:
        """Advance to the next generation."""

    @property
    @abstractmethod
    def champion(self) -> Champion:
        """The best agent so far (chosen on validation fitness when there is validation)."""

    def final_candidates(self) -> list[Champion]:
        """Genomes worth a final re-evaluation on fresh episodes (with the fitness and
        generation they were judged by), best first; by default the champion alone."""
        return [self.champion]

    def record(self) -> dict[str, float]:
        """Per-generation figures (after :meth:`tell`): at least ``prune_rate`` (in ``/stats``);
        any other name goes to ``/strategy/<name>``.  The same names every generation."""
        return {"prune_rate": float("nan")}

    def record_arrays(self) -> dict[str, np.ndarray]:
        """Per-generation arrays for ``/strategy/<name>``, read *before* :meth:`tell` (the
        generation's own: e.g. the centre its genomes were drawn around, which a
        validated individual -1 refers to); fixed shapes across generations.  None by
        default."""
        return {}

    def samples(self):
        """The genomes :meth:`ask` returns as a :class:`synapto.noise.Samples` (centre, step
        sizes, noise keys) -- the ``ga``'s as a :class:`synapto.lineage.Lineage` -- sent to
        workers and stored in the run file instead of the genomes; None (the default) where
        the strategy has no such form."""
        return None

    # -- checkpoint ------------------------------------------------------------
    @abstractmethod
    def state(self) -> tuple[dict[str, np.ndarray], dict[str, int | float]]:
        """``(arrays, scalars)``: the whole state but :attr:`rng`, by name."""

    @abstractmethod
    def restore(self, arrays: Mapping[str, np.ndarray], scalars: Mapping[str, int | float]) -> None:
        """Set the state from :meth:`state`'s output (the Generator is restored apart)."""


def rank_order(fitness: np.ndarray) -> np.ndarray:
    """Indices by descending fitness, ties broken by lower index (NaN last)."""
    fitness = np.asarray(fitness, dtype=np.float64)
    return np.lexsort((np.arange(fitness.size), -fitness))


# -- what every strategy does the same way ---------------------------------------------
def check_told(feedback: Feedback, expected: int) -> None:
    """A strategy is told the generation it asked for, and no other."""
    if feedback.generation != expected:
        raise RuntimeError(f"told generation {feedback.generation}, expected {expected}")


def keep_best(k: int, new_fitness, old_fitness, *pairs) -> tuple:
    """A hall of fame's update: the ``k`` best of the new entries and the old ones by fitness,
    new ones first on ties.  ``pairs``: ``(new, old)`` arrays that come along row by row
    (genomes, their generations, their statistics).  Returns ``(fitness, *arrays)``."""
    fitness = np.concatenate([np.asarray(new_fitness, dtype=np.float64), np.asarray(old_fitness, dtype=np.float64)])
    pick = rank_order(fitness)[:k]
    return (fitness[pick], *(np.concatenate([new, old])[pick] for new, old in pairs))


def distinct(candidates: list[Champion]) -> list[Champion]:
    """``candidates`` without those whose genome equals an earlier one's (final candidates are
    re-evaluated once each)."""
    out: list[Champion] = []
    for c in candidates:
        if not any(np.array_equal(c.genome, u.genome) for u in out):
            out.append(c)
    return out


def check_never_revived(before: np.ndarray, after: np.ndarray) -> bool:
    """True if every connection pruned (exactly 0) in ``before`` is still 0 in ``after``
    (rows of ``after`` broadcast against ``before``)."""
    return bool(np.all(np.asarray(after)[..., np.asarray(before) == 0] == 0))


#: ``--strategy`` names and their classes (module:Class)
STRATEGIES = {
    "ga": "synapto.evolution.strategies.ga:GA",
    "openai-es": "synapto.evolution.strategies.openai_es:OpenAIES",
    "pgpe": "synapto.evolution.strategies.pgpe:PGPE",
    "cmaes": "synapto.evolution.strategies.cmaes:CMAES",
    "ars": "synapto.evolution.strategies.ars:ARS",
}


def strategy_class(name: str) -> type[Strategy]:
    """The class of ``--strategy name``; one-line error for unknown names."""
    target = STRATEGIES.get(name)
    if target is None:
        raise UsageError(f"--strategy {name!r} is unknown: expected one of {', '.join(STRATEGIES)}")
    module, _, cls = target.partition(":")
    return getattr(importlib.import_module(module), cls)
