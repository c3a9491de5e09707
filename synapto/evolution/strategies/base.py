"""The strategy seam: how the next generation is made, as ask / tell.

One generation of :func:`synapto.evolution.loop.run_evolution` talks to its strategy
in three calls::

    genomes = strategy.ask()                    # (P, n): the genomes to evaluate
    ... the farm evaluates them on training episodes -> fitness, trace statistics
    cand = strategy.candidates(fitness, K)      # which genomes to validate (K may be 0)
    ... the farm evaluates cand.genomes on fresh validation episodes
    strategy.tell(Feedback(...))                # everything the evaluations found

:meth:`Strategy.tell` is the same for every strategy (a template method): it checks
what it is told, takes the algorithm's own step (:meth:`Strategy._step`, the one hook
a strategy must implement), cuts what the next generation is made of down to the
connection budget where the options set one (``prune_to``, :mod:`.prune`), and counts
the generation.  Option checks live in :mod:`.options`, the hall of fame every
strategy keeps in :mod:`.hall`.

A strategy owns one ``np.random.Generator`` (:attr:`Strategy.rng`, the run's EVOLVE
stream) and draws every random number from it; its whole state goes to and from
the checkpoint as named arrays and scalars (:meth:`Strategy.state`,
:meth:`Strategy.restore`: by default the attributes :attr:`Strategy.STATE` declares)
plus that Generator's state, so a resumed run continues bit for bit.  It knows the
agent (genome length, pruning, connection counts), not the farm, the run file or the
environment.

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

from synapto.common.errors import UsageError, option_value
from synapto.evolution.strategies import prune as target
from synapto.evolution.strategies.options import Option, complete


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

    #: the generation :meth:`ask` is for (counted by :meth:`tell`)
    generation: int = 0
    #: the connection budget of every generation (None: no ``prune_to`` target, see :mod:`.prune`)
    schedule: target.Schedule | None = None
    #: the agent's genome layout where a budget is cut by ``magnitude`` or ``trace`` (its inert connections)
    layout: Any = None
    #: the attributes that are the strategy's state (besides :attr:`rng` and the generation
    #: counter), saved and restored by the base's :meth:`state` and :meth:`restore` under their
    #: own names: a ``numpy`` array as a float64 array, anything else as a float scalar
    STATE: ClassVar[tuple[str, ...]] = ()

    def __init__(self, agent, population: int, options: Mapping[str, Any] | None, rng: np.random.Generator):
        self.agent = agent
        self.population = int(population)
        self.options = self.check_options(options or {})
        self.rng = rng
        self.check_population(self.population, self.options)
        if "prune_to" in self.options:  # a strategy with the budget options of .prune
            target.check_agent(agent, self.options)
            self.schedule = target.Schedule.of(agent, self.options)
            self.layout = target.layout_of(agent) if self.schedule is not None else None

    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> dict[str, Any]:
        """``options`` completed with defaults; unknown names are refused with one line.
        Subclasses extend this with checks of the values (:mod:`.options`)."""
        return complete(cls.name, cls.OPTIONS, options)

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

    def tell(self, feedback: Feedback) -> None:
        """Advance to the next generation, in the same steps for every strategy:

        1. check what is told (:meth:`check_feedback`);
        2. the algorithm's own step (:meth:`_step`);
        3. with a connection budget (option ``prune_to``), cut what the next generation is
           made of down to its budget (:meth:`cut_to_budget`);
        4. count the generation, and draw what the next one asks for (:meth:`_populate`).
        """
        self.check_feedback(feedback)
        self._step(feedback)
        self.cut_to_budget(feedback)
        self.generation += 1
        self._populate()

    def check_feedback(self, feedback: Feedback) -> None:
        """A strategy is told the generation it asked for, one fitness per genome, and one
        validation fitness per candidate."""
        check_told(feedback, self.generation)
        if np.shape(feedback.fitness) != (self.population,):
            raise RuntimeError(
                f"told {np.shape(feedback.fitness)} fitness values for a population of {self.population}"
            )
        if np.shape(feedback.validation_fitness) != np.shape(feedback.candidates.individual):
            raise RuntimeError(
                f"told {np.size(feedback.validation_fitness)} validation fitness values for "
                f"{np.size(feedback.candidates.individual)} candidates"
            )

    @abstractmethod
    def _step(self, feedback: Feedback) -> None:
        """The algorithm's own update from ``feedback`` (checked), before any budget is cut."""

    def cut_to_budget(self, feedback: Feedback) -> None:
        """Every genome the next generation is made of (:meth:`_budgeted`) cut down to that
        generation's budget by the option ``prune_by`` (:func:`.prune.cut_rows`); nothing
        without a budget."""
        if self.schedule is None:
            return
        keep = self.schedule.budget(self.generation + 1)
        by = self.options["prune_by"]
        stats = self._budget_stats(feedback) if by == "trace" else None
        self._set_budgeted(target.cut_rows(self._budgeted(), keep, by, stats, self.rng, self.layout))

    def _budgeted(self) -> np.ndarray:
        """What the next generation is made of, (R, n), after :meth:`_step`: by default the
        population :meth:`ask` returns."""
        return self.ask()

    def _budget_stats(self, feedback: Feedback) -> np.ndarray:
        """The trace statistics (R, n) that rank the rows of :meth:`_budgeted` (``prune_by =
        "trace"``): by default the told population's mean, for every row."""
        mean = target.mean_stats(feedback.stats, feedback.fitness)
        return np.broadcast_to(mean, np.shape(self._budgeted()))

    def _set_budgeted(self, genomes: np.ndarray) -> None:
        """Take the rows of :meth:`_budgeted`, cut: by default written over the population
        :meth:`ask` returns."""
        self.ask()[...] = genomes

    def _populate(self) -> None:
        """Set up the generation just counted (draw what :meth:`ask` returns); nothing by default."""

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
        """The genomes :meth:`ask` returns as a :class:`synapto.common.noise.Samples` (centre, step
        sizes, noise keys) -- the ``ga``'s as a :class:`synapto.lineage.Lineage` -- sent to
        workers and stored in the run file instead of the genomes; None (the default) where
        the strategy has no such form."""
        return None

    # -- checkpoint ------------------------------------------------------------
    def state(self) -> tuple[dict[str, np.ndarray], dict[str, int | float]]:
        """``(arrays, scalars)``: the whole state but :attr:`rng`, by name.  By default the
        attributes :attr:`STATE` declares (copies of the arrays, the numbers as floats) and
        the generation counter; a strategy whose state is more overrides it."""
        values = {name: getattr(self, name) for name in self.STATE}
        arrays = {k: np.array(v, copy=True) for k, v in values.items() if isinstance(v, np.ndarray)}
        scalars = {k: float(v) for k, v in values.items() if k not in arrays}
        return arrays, {"generation": int(self.generation), **scalars}

    def restore(self, arrays: Mapping[str, np.ndarray], scalars: Mapping[str, int | float]) -> None:
        """Set the state from :meth:`state`'s output (the Generator is restored apart): by
        default the attributes :attr:`STATE` declares (arrays as float64) and the counter."""
        for name in self.STATE:
            setattr(self, name, np.array(arrays[name], dtype=np.float64) if name in arrays else float(scalars[name]))
        self.generation = int(scalars["generation"])


def rank_order(fitness: np.ndarray) -> np.ndarray:
    """Indices by descending fitness, ties broken by lower index (NaN last)."""
    fitness = np.asarray(fitness, dtype=np.float64)
    return np.lexsort((np.arange(fitness.size), -fitness))


# -- what every strategy does the same way ---------------------------------------------
def check_told(feedback: Feedback, expected: int) -> None:
    """A strategy is told the generation it asked for, and no other."""
    if feedback.generation != expected:
        raise RuntimeError(f"told generation {feedback.generation}, expected {expected}")


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
        raise UsageError(f"{option_value('strategy', name)} is unknown: expected one of {', '.join(STRATEGIES)}")
    module, _, cls = target.partition(":")
    return getattr(importlib.import_module(module), cls)
