"""``ga``: selection, recombination and pruning (synaptolysis), optionally with
Gaussian weight mutation -- the reference's algorithm with its defects fixed.

Pure functions of their inputs and one explicit ``np.random.Generator`` (here and in
:mod:`.ga_operators`), behind the :class:`GA` strategy.  One generation's update (after
the reference's HebbianDAG.update_pop, with its defects fixed), with ``k = ceil(P / 8)``:

1. Rank the population by fitness (descending; ties by index, so the order is
   deterministic).
2. Best-ever agent: replaced when this generation's best is at least as good.
3. Hall of fame: the ``k`` best individuals seen so far (new ones first on ties).
4. Parent pool, best first: hall of fame, best-ever, this generation's top ``k``;
   parents are drawn with probability proportional to reversed pool position
   (``n, n-1, ..., 1``).
5. Elites: slot 0 is the best-ever agent, slots ``1..k-1`` this generation's top
   ``k-1``; they are copied unchanged.
6. The other ``P - k`` slots are drawn parents, varied by ``k`` recombination
   swaps between random pairs (a whole group of matrices, e.g. every input of a
   layer, or a single matrix, with equal probability), then pruned by the agent
   using the trace statistics the parent's evaluation returned (the statistics
   follow the swapped matrices), then -- with ``mutation_std > 0`` -- perturbed
   by Gaussian noise on the surviving weights.

With validation, steps 2, 3 and 5 rank by validation fitness (fresh episodes)
instead of the noisy training fitness.

With a target (``prune_to``, :mod:`.prune`) the agent's own pruning in step 6 is
replaced by the schedule's: every child, elites included, is cut down to the next
generation's connection budget by the chosen criterion (a trace criterion uses the
statistics of the child's parent), and before step 2 the best-ever agent and hall-of-fame
members over this generation's budget are forgotten.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from synapto import lineage as lin
from synapto.common.errors import UsageError, option
from synapto.common.noise import KEY_WIDTH, key_of
from synapto.evolution.strategies import prune as target
from synapto.evolution.strategies.base import (
    Champion,
    Feedback,
    Strategy,
    distinct,
    rank_order,
)
from synapto.evolution.strategies.ga_operators import rank_weights, recombine
from synapto.evolution.strategies.hall import HallOfFame
from synapto.evolution.strategies.options import (
    MAX_SCALE,
    Option,
    check_target,
    need_int,
)
from synapto.lineage import Lineage, perturb


@dataclass
class EvolutionState:
    """Everything the next generation reads; checkpointed after each generation."""

    generation: int  #: index of the next generation to evaluate
    genomes: np.ndarray  #: (P, n) the population to evaluate next
    #: the ``k`` best individuals seen (:mod:`.hall`), with the columns ``stats`` (their trace
    #: statistics) and ``row`` (their row in their generation; -1: unknown)
    hof: HallOfFame
    best_genome: np.ndarray  #: (n,) best-ever agent
    best_stats: np.ndarray  #: (n,)
    best_fitness: float
    best_generation: int  #: -1 before the first generation
    rate: float  #: pruning rate of the next variation
    rng: np.random.Generator  #: the coordinator's evolution Generator
    best_ref: np.ndarray | None = None  #: (2,) generation and row of ``best_genome`` (-1: unknown)
    #: how ``genomes`` were made (:class:`synapto.lineage.Lineage`); None: not recorded
    lineage: Lineage | None = None

    @classmethod
    def initial(cls, agent, population: int, elite: int, rng: np.random.Generator) -> EvolutionState:
        keys = np.zeros((population, KEY_WIDTH), dtype=np.uint64)
        rows = []
        for i in range(population):
            key = key_of(rng)
            keys[i] = key if key is not None else 0
            rows.append(agent.init_genome(rng))
        genomes = np.stack(rows)
        n = agent.n_params
        bounds = lin.segments(agent.groups(), n)
        lineage = None
        if bounds is not None and key_of(rng) is not None:
            S = len(bounds) - 1
            lineage = Lineage(
                bounds,
                np.full((2 * elite + 1, 2), -1, np.int64),
                np.full((population, S), -1, np.int64),
                np.zeros((population, -(-n // 8)), np.uint8),
                keys,
                0.0,
                False,
                initial=genomes,
            )
        hof = HallOfFame.empty(elite, n, hof_columns(n))
        return cls(
            0,
            genomes,
            hof,
            genomes[0].copy(),
            np.zeros(n),
            -np.inf,
            -1,
            float(agent.initial_rate),
            rng,
            np.full(2, -1, np.int64),
            lineage,
        )


def hof_columns(n: int) -> dict[str, tuple[tuple[int, ...], str]]:
    """The ``ga``'s hall-of-fame columns besides genome, fitness and generation."""
    return {"stats": ((n,), "f8"), "row": ((), "i8")}


@dataclass
class Brood:
    """One generation's children between selection and variation: the elites and the
    drawn parents, recombined (:func:`breed`), then -- with a budget -- cut (:meth:`cut`),
    then varied into the next population (:func:`vary`)."""

    generation: int  #: the generation they are bred from
    genomes: np.ndarray  #: (P, n) that generation's population
    order: np.ndarray  #: (P,) its individuals, best first by the selection fitness
    children: np.ndarray  #: (P, n)
    stats: np.ndarray  #: (P, n) the trace statistics that came with each child's parts
    #: (P, S) the pool slot of each segment's parent, with the pruned bits and noise keys of each
    #: child; None where the lineage is not recorded
    origin: np.ndarray | None = None
    pruned: np.ndarray | None = None
    keys: np.ndarray | None = None

    def cut(self, children: np.ndarray) -> None:
        """The children, cut down to a connection budget (the pruned bits recorded)."""
        if self.pruned is not None:
            for i in range(len(children)):
                self.pruned[i] = lin.changed(self.children[i], children[i])
        self.children = np.array(children, dtype=np.float64)


def next_generation(
    state: EvolutionState,
    fitness: np.ndarray,
    stats: np.ndarray,
    agent,
    elite: int,
    connections: np.ndarray,
    select_fitness: np.ndarray | None = None,
    mutation_std: float = 0.0,
    prune: bool = True,
    schedule: target.Schedule | None = None,
    prune_by: str = "magnitude",
    layout=None,
) -> None:
    """Advance ``state`` in place from the evaluated ``state.genomes`` (see module doc):
    :func:`breed`, with a ``schedule`` the cut to the next generation's budget, :func:`vary`
    -- the steps :class:`GA` takes through :meth:`Strategy.tell`.

    ``select_fitness`` (default: ``fitness``) decides the best-ever agent, the hall
    of fame and the elites: with validation it holds the validation fitness of the
    validated candidates and -inf elsewhere (ties keep the training order).
    ``mutation_std > 0`` adds a Gaussian perturbation to the surviving weights of
    every non-elite child, after pruning.  ``prune=False`` skips the agent's pruning
    (no connection is removed; weights then change by mutation only).  With a
    ``schedule`` every child is cut down to the next generation's budget by
    ``prune_by`` instead (``layout``: the agent's, for the inert connections).
    """
    brood = breed(state, fitness, stats, agent, elite, connections, select_fitness, schedule)
    if schedule is not None:
        keep = schedule.budget(state.generation + 1)
        brood.cut(target.cut_rows(brood.children, keep, prune_by, brood.stats, state.rng, layout))
    state.generation += 1
    vary(state, brood, agent, mutation_std, prune and schedule is None, schedule is not None)


def breed(
    state: EvolutionState,
    fitness: np.ndarray,
    stats: np.ndarray,
    agent,
    elite: int,
    connections: np.ndarray,
    select_fitness: np.ndarray | None = None,
    schedule: target.Schedule | None = None,
) -> Brood:
    """Steps 1-5 and the recombination of step 6 (module docstring): ``state``'s best-ever
    agent, hall of fame and pruning rate updated, the children drawn and recombined.  With a
    ``schedule``, the best-ever agent and hall-of-fame members over this generation's
    budget are forgotten first."""
    genomes = state.genomes
    P, k = genomes.shape[0], elite
    if schedule is not None:
        _forget_over_budget(state, schedule.budget(state.generation))
    order = _rank(state, fitness, stats, fitness if select_fitness is None else select_fitness, k)
    parents, slots, traced = _draw_parents(state, fitness, stats, order, P - k)
    bounds = state.lineage.bounds if state.lineage is not None else None
    brood = Brood(state.generation, genomes, order, np.empty_like(genomes), np.zeros(stats.shape))
    if bounds is not None:
        brood.origin = np.empty((P, len(bounds) - 1), np.int64)
        brood.origin[:k] = np.arange(k, 2 * k)[:, None]
        brood.origin[k:] = slots[:, None]
        brood.pruned = np.zeros((P, -(-genomes.shape[1] // 8)), np.uint8)
        brood.keys = np.zeros((P, KEY_WIDTH), np.uint64)
    children, child_stats = brood.children, brood.stats
    sources = [(state.best_genome, state.best_stats), *((genomes[i], stats[i]) for i in order[: k - 1]), *parents]
    for i, (genome, row) in enumerate(sources):
        children[i] = genome
        if traced:  # else every statistic is 0 (an agent without traces): the children's stay zeros
            child_stats[i] = row
    elite_conn = np.concatenate([[agent.connections(state.best_genome)], connections[order[:k]]])
    state.rate = float(agent.next_rate(state.rate, elite_conn, float(np.mean(connections))))
    recombine(children, child_stats if traced else None, agent.groups(), k, k, state.rng, brood.origin, bounds)
    return brood


def _rank(state: EvolutionState, fitness, stats, select_fitness, k: int) -> np.ndarray:
    """The population best first by ``select_fitness`` (ties: the training order); the
    best-ever agent and the hall of fame take this generation's best."""
    genomes = state.genomes
    P = genomes.shape[0]
    order = rank_order(fitness)
    position = np.empty(P, dtype=np.int64)
    position[order] = np.arange(P)
    order = np.lexsort((position, -np.asarray(select_fitness, dtype=np.float64)))
    best = order[0]
    if select_fitness[best] >= state.best_fitness:
        state.best_fitness = float(select_fitness[best])
        state.best_genome = genomes[best].copy()
        state.best_stats = stats[best].copy()
        state.best_generation = state.generation
        state.best_ref = np.array([state.generation, best], np.int64)
    top = order[:k]
    state.hof.add(
        np.asarray(select_fitness, np.float64)[top],
        genomes[top],
        state.generation,
        stats=stats[top],
        row=np.asarray(top, np.int64),
    )
    return order


def _draw_parents(state: EvolutionState, fitness, stats, order, n: int) -> tuple:
    """``n`` parents drawn from the pool (hall of fame, best-ever, this generation's top ``k``)
    by :func:`rank_weights`: ``(their (genome, stats) rows, their pool slots, whether any
    statistic in the pool is not 0)``; rows are views, not copies."""
    k, hof, top = state.hof.size, state.hof, order[: state.hof.size]
    pool = [*zip(hof.genomes, hof.columns["stats"]), (state.best_genome, state.best_stats)]
    pool += [(state.genomes[i], stats[i]) for i in top]
    valid = np.isfinite(np.concatenate([hof.fitness, [state.best_fitness], fitness[top]]))
    # the pool's slots: hall of fame 0..k-1, best-ever k, this generation's top k+1..2k; with
    # every fitness non-finite, this generation's top (the population kept as it is)
    slots = np.flatnonzero(valid) if valid.any() else np.arange(k + 1, 2 * k + 1)
    slots = slots[state.rng.choice(len(slots), size=n, p=rank_weights(len(slots)))]
    return [pool[s] for s in slots], slots, any(row.any() for _, row in pool)


def vary(state: EvolutionState, brood: Brood, agent, mutation_std: float, prune: bool, assign: bool) -> None:
    """The rest of step 6: every non-elite child pruned by the agent (``prune``), then perturbed
    (``mutation_std > 0``); the children become ``state.genomes``, with their lineage where it
    is recorded (``assign``: the children were cut to a budget)."""
    rng, children, k = state.rng, brood.children, state.hof.size
    record = brood.origin is not None
    pruned, keys = brood.pruned, brood.keys  # not None where the origin is recorded
    for i in range(k, children.shape[0]):
        if prune:
            child = agent.mutate(children[i], brood.stats[i], state.rate, rng)
            if record and pruned is not None:
                pruned[i] = lin.changed(children[i], child)
            children[i] = child
        if mutation_std > 0:
            key = key_of(rng) if record else None
            if key is None or keys is None:
                record = False
            else:
                keys[i] = key
            perturb(children[i], mutation_std, rng, in_place=True)
    state.lineage = _lineage(state, brood, mutation_std, assign) if record else None
    state.genomes = children


def _lineage(state: EvolutionState, brood: Brood, std, assign) -> Lineage:
    """The children's :class:`Lineage`: the pool slots they use, as distinct parents."""
    hof, k = state.hof, state.hof.size
    # called only while the lineage is recorded: the brood has its origin, pruned bits and keys
    assert brood.origin is not None and brood.pruned is not None and brood.keys is not None
    assert state.lineage is not None
    refs = np.full((2 * k + 1, 2), -1, np.int64)
    used: list[tuple[int, int]] = []
    parents: list[np.ndarray] = []
    index: dict[tuple[int, int], int] = {}
    remap = np.empty(2 * k + 1, np.int64)
    for slot in np.unique(brood.origin):
        if slot < k:
            g, r, genome = hof.generation[slot], hof.columns["row"][slot], hof.genomes[slot]
        elif slot == k:
            assert state.best_ref is not None  # kept with the lineage
            (g, r), genome = state.best_ref, state.best_genome
        else:
            g, r = brood.generation, brood.order[slot - k - 1]
            genome = brood.genomes[r]
        ref = (int(g), int(r))
        if ref not in index or ref[0] < 0:
            index[ref] = len(used)
            used.append(ref)
            parents.append(genome)
        remap[slot] = index[ref]
    refs[: len(used)] = used
    return Lineage(
        state.lineage.bounds,
        refs,
        remap[brood.origin],
        brood.pruned,
        brood.keys,
        float(std),
        bool(assign),
        parents=np.stack(parents),
    )


def _forget_over_budget(state: EvolutionState, keep: int) -> None:
    """The best-ever agent and hall-of-fame members with more than ``keep`` connections
    are forgotten, so that the champion is always within the budget."""
    if np.count_nonzero(state.best_genome) > keep:
        state.best_fitness, state.best_generation = -np.inf, -1
    state.hof.forget(np.count_nonzero(state.hof.genomes, axis=1) > keep)


class GA(Strategy):
    """The strategy ``ga``: the steps of :func:`next_generation` on an :class:`EvolutionState`
    (:func:`breed`, the budget's cut by the base, :func:`vary`), with ``k = ceil(P / 8)``
    elites, hall-of-fame places and recombination swaps."""

    name = "ga"
    OPTIONS: ClassVar[dict[str, Option]] = {
        "mutation_std": Option(
            0.5,
            "std of the Gaussian perturbation of every non-elite child's surviving "
            "weights, after pruning; 0 keeps pure pruning (the reference)",
        ),
        "prune": Option(True, "the agent prunes every non-elite child (synaptolysis); false: never"),
        "prune_every": Option(1, "with a target (prune_to): generations between two steps of the budget"),
        **target.OPTIONS,
    }
    #: checkpoint names of the state besides the hall of fame's (``hof_genomes``, ``hof_fitness``,
    #: ``hof_generation``, ``hof_stats``, ``hof_row``: :meth:`.hall.HallOfFame.state`), kept from the
    #: first run-file format; ``genomes`` is left out where the lineage (``lineage_<name>``) rebuilds them
    ARRAYS = ("genomes", "best_genome", "best_stats")

    def __init__(self, agent, population, options, rng):
        super().__init__(agent, population, options, rng)
        self.elite = -(-self.population // 8)
        self.evo: EvolutionState | None = None  #: the state the next generation reads
        self._brood: Brood | None = None  #: the children between the steps of :meth:`tell`

    @classmethod
    def check_options(cls, options):
        out = super().check_options(options)
        std = out["mutation_std"]
        if isinstance(std, bool) or not isinstance(std, (int, float)) or not 0 <= std <= MAX_SCALE:
            raise UsageError(f"{option('mutation_std')} must be a number in [0, {MAX_SCALE:g}], got {std!r}")
        if not isinstance(out["prune"], bool):
            raise UsageError(f"{option('prune')} must be on or off, got {out['prune']!r}")
        if not (out["prune"] or out["mutation_std"]):
            raise UsageError(
                f"strategy 'ga' with {option('prune')} off and {option('mutation_std')} 0 would never change a genome"
            )
        out["prune_every"] = need_int("prune_every", out["prune_every"])
        return check_target(out)

    @property
    def generation(self) -> int:
        """The generation :meth:`ask` is for (the state's counter)."""
        return self.evo.generation if self.evo is not None else 0

    @generation.setter
    def generation(self, value: int) -> None:
        self.current.generation = int(value)

    @property
    def current(self) -> EvolutionState:
        """The state the next generation reads (made by :meth:`start` or :meth:`restore`)."""
        if self.evo is None:
            raise RuntimeError("strategy 'ga' has no state yet: start() or restore() first")
        return self.evo

    @property
    def brood(self) -> Brood:
        """The children between the steps of :meth:`tell` (made by :meth:`_step`)."""
        if self._brood is None:
            raise RuntimeError("strategy 'ga' has no children yet: _step() first")
        return self._brood

    def start(self):
        self.evo = EvolutionState.initial(self.agent, self.population, self.elite, self.rng)

    def ask(self):
        return self.current.genomes

    # -- tell (Strategy.tell): breed, cut the children to the budget, count, vary --
    def _step(self, feedback: Feedback):
        self._brood = breed(
            self.current,
            feedback.fitness,
            feedback.stats,
            self.agent,
            self.elite,
            feedback.connections,
            feedback.select_fitness(),
            self.schedule,
        )

    def _budgeted(self):
        return self.brood.children

    def _budget_stats(self, feedback):
        return self.brood.stats  # each child's, its parts' parents'

    def _set_budgeted(self, genomes):
        self.brood.cut(genomes)

    def _populate(self):
        brood, self._brood = self.brood, None
        vary(
            self.current,
            brood,
            self.agent,
            float(self.options["mutation_std"]),
            bool(self.options["prune"]) and self.schedule is None,
            self.schedule is not None,
        )

    @property
    def champion(self):
        s = self.current
        return Champion(s.best_genome, float(s.best_fitness), int(s.best_generation))

    def final_candidates(self):
        """The best-ever agent, then the hall of fame (places never filled, and members
        equal to an earlier candidate, left out)."""
        return distinct([self.champion, *self.current.hof.members()])

    def record(self):
        if self.schedule is None:
            return {"prune_rate": float(self.current.rate)}
        return {
            "prune_rate": float(self.current.rate),
            "connection_budget": float(self.schedule.budget(self.current.generation - 1)),
        }  # the generation told

    def samples(self):
        """The population as its :class:`~synapto.lineage.Lineage` (parents, segments,
        pruned bits, noise keys), None where it was not recorded."""
        return self.current.lineage

    def state(self):
        e = self.current
        arrays = {name: getattr(e, name) for name in self.ARRAYS}
        arrays.update(e.hof.state())
        if e.best_ref is not None:  # where the best-ever agent was evaluated (a lineage reference)
            arrays["best_ref"] = e.best_ref
        if e.lineage is not None:  # the population as its lineage: its few parents rather than every genome
            del arrays["genomes"]
            arrays.update({f"lineage_{k}": v for k, v in e.lineage.state().items()})
        return (
            arrays,
            {"best_fitness": float(e.best_fitness), "best_generation": int(e.best_generation), "rate": float(e.rate)},
        )

    def restore(self, arrays, scalars):
        """``scalars`` also holds the loop's ``generation`` (the checkpoint's counter).  Older
        checkpoints may lack the members' generations and rows, and ``best_ref``."""
        arrays = dict(arrays)
        part = {k[len("lineage_") :]: np.asarray(v) for k, v in arrays.items() if k.startswith("lineage_")}
        lineage = Lineage.from_arrays(part["bounds"], part) if part else None
        if "genomes" not in arrays:
            assert lineage is not None  # a checkpoint without genomes stores their lineage
            arrays["genomes"] = lineage.genomes()
        self.evo = EvolutionState(
            generation=int(scalars["generation"]),
            rate=float(scalars["rate"]),
            best_fitness=float(scalars["best_fitness"]),
            best_generation=int(scalars["best_generation"]),
            rng=self.rng,
            hof=HallOfFame.restore(arrays, columns=("stats", "row")),
            **{name: np.asarray(arrays[name]) for name in self.ARRAYS},
            best_ref=np.asarray(arrays["best_ref"]) if "best_ref" in arrays else None,
            lineage=lineage,
        )
