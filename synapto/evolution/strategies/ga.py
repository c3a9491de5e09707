"""``ga``: selection, recombination and pruning (synaptolysis), optionally with
Gaussian weight mutation -- the reference's algorithm with its defects fixed.

Pure functions of their inputs and one explicit ``np.random.Generator``, behind the
:class:`GA` strategy.  One generation's update (after the reference's HebbianDAG.update_pop, with its
defects fixed), with ``k = ceil(P / 8)``:

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
from synapto.errors import UsageError
from synapto.evolution.strategies import prune as target
from synapto.evolution.strategies.base import (
    Champion,
    Feedback,
    Option,
    Strategy,
    check_told,
    distinct,
    keep_best,
    rank_order,
)
from synapto.evolution.strategies.es import need_int
from synapto.lineage import Lineage, perturb
from synapto.noise import KEY_WIDTH, key_of


@dataclass
class EvolutionState:
    """Everything the next generation reads; checkpointed after each generation."""

    generation: int  #: index of the next generation to evaluate
    genomes: np.ndarray  #: (P, n) the population to evaluate next
    hof_genomes: np.ndarray  #: (k, n) hall of fame, best first
    hof_stats: np.ndarray  #: (k, n) their trace statistics
    hof_fitness: np.ndarray  #: (k,) -inf for empty places
    best_genome: np.ndarray  #: (n,) best-ever agent
    best_stats: np.ndarray  #: (n,)
    best_fitness: float
    best_generation: int  #: -1 before the first generation
    rate: float  #: pruning rate of the next variation
    rng: np.random.Generator  #: the coordinator's evolution Generator
    hof_generation: np.ndarray | None = None  #: (k,) generation of each hall-of-fame member (-1: empty)
    hof_row: np.ndarray | None = None  #: (k,) each member's row in its generation (-1: unknown)
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
            lineage = Lineage(bounds, np.full((2 * elite + 1, 2), -1, np.int64), np.full((population, S), -1, np.int64),
                              np.zeros((population, -(-n // 8)), np.uint8), keys, 0.0, False, initial=genomes)
        return cls(0, genomes, np.zeros((elite, n)), np.zeros((elite, n)), np.full(elite, -np.inf),
                   genomes[0].copy(), np.zeros(n), -np.inf, -1, float(agent.initial_rate), rng,
                   np.full(elite, -1, np.int64), np.full(elite, -1, np.int64), np.full(2, -1, np.int64), lineage)


def rank_weights(n: int) -> np.ndarray:
    """Rank-proportional selection probabilities ``n, n-1, ..., 1`` normalised."""
    w = np.arange(n, 0, -1, dtype=np.float64)
    return w / w.sum()


def merge_hall_of_fame(hof_fitness, hof_genomes, hof_stats, fitness, genomes, stats, order, k,
                       hof_generation=None, generation=None, hof_row=None):
    """The ``k`` best of (hall of fame, this generation's top ``k``); new ones first on ties.
    With ``hof_generation`` (and this ``generation``) the members' generations come along
    as a fourth result, and with ``hof_row`` their rows as a fifth."""
    top = order[:k]
    pairs = [(genomes[top], hof_genomes), (stats[top], hof_stats)]
    if hof_generation is not None:
        pairs.append((np.full(len(top), generation, np.int64), hof_generation))
    if hof_row is not None:
        pairs.append((np.asarray(top, np.int64), hof_row))
    return keep_best(k, fitness[top], hof_fitness, *pairs)


def recombine(children: np.ndarray, child_stats: np.ndarray, groups, n_swaps: int, lo: int,
              rng: np.random.Generator, origin: np.ndarray | None = None, bounds: np.ndarray | None = None) -> None:
    """``n_swaps`` swaps of a group or a single matrix between random pairs of rows >= lo.
    With ``origin`` ((P, S) parents of the segments ``bounds``) the same swaps move it."""
    P = children.shape[0]
    if P - lo < 2 or not groups:
        return
    for _ in range(n_swaps):
        a, b = rng.integers(lo, P, size=2)
        group = groups[rng.integers(len(groups))]
        parts = group if rng.integers(2) else [group[rng.integers(len(group))]]
        for s in parts:
            for arr, at in ((children, s), (child_stats, s), (origin, None)):
                if arr is None:
                    continue
                if at is None:  # origin: the columns of segment s
                    assert bounds is not None  # origin comes with its bounds
                    at = lin.segment_range(bounds, s)
                tmp = arr[a, at].copy()
                arr[a, at] = arr[b, at]
                arr[b, at] = tmp


def next_generation(state: EvolutionState, fitness: np.ndarray, stats: np.ndarray, agent, elite: int,
                    connections: np.ndarray, select_fitness: np.ndarray | None = None,
                    mutation_std: float = 0.0, prune: bool = True, schedule: target.Schedule | None = None,
                    prune_by: str = "magnitude", layout=None) -> None:
    """Advance ``state`` in place from the evaluated ``state.genomes`` (see module doc).

    ``select_fitness`` (default: ``fitness``) decides the best-ever agent, the hall
    of fame and the elites: with validation it holds the validation fitness of the
    validated candidates and -inf elsewhere (ties keep the training order).
    ``mutation_std > 0`` adds a Gaussian perturbation to the surviving weights of
    every non-elite child, after pruning.  ``prune=False`` skips the agent's pruning
    (no connection is removed; weights then change by mutation only).  With a
    ``schedule`` every child is cut down to the next generation's budget by
    ``prune_by`` instead (``layout``: the agent's, for the inert connections).
    """
    rng = state.rng
    genomes = state.genomes
    P, n = genomes.shape
    k = elite
    if schedule is not None:
        _forget_over_budget(state, schedule.budget(state.generation))
    order = rank_order(fitness)
    if select_fitness is None:
        select_fitness = fitness
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
    if state.hof_generation is None:
        state.hof_generation = np.full(len(state.hof_fitness), -1, np.int64)
    if state.hof_row is None:
        state.hof_row = np.full(len(state.hof_fitness), -1, np.int64)
    state.hof_fitness, state.hof_genomes, state.hof_stats, state.hof_generation, state.hof_row = merge_hall_of_fame(
        state.hof_fitness, state.hof_genomes, state.hof_stats, np.asarray(select_fitness, np.float64),
        genomes, stats, order, k, state.hof_generation, state.generation, state.hof_row)

    pool_g = np.concatenate([state.hof_genomes, state.best_genome[None], genomes[order[:k]]])
    pool_s = np.concatenate([state.hof_stats, state.best_stats[None], stats[order[:k]]])
    valid = np.isfinite(np.concatenate([state.hof_fitness, [state.best_fitness], fitness[order[:k]]]))
    pool_g, pool_s = pool_g[valid], pool_s[valid]
    if pool_g.shape[0] == 0:  # every fitness non-finite: keep the population as it is
        pool_g, pool_s = genomes[order[:k]], stats[order[:k]]
    draws = rng.choice(pool_g.shape[0], size=P - k, p=rank_weights(pool_g.shape[0]))
    # the pool's slots: hall of fame 0..k-1, best-ever k, this generation's top k+1..2k
    slots = (np.flatnonzero(valid) if valid.any() else np.arange(k + 1, 2 * k + 1))[draws]
    bounds = state.lineage.bounds if state.lineage is not None else None
    origin = None
    if bounds is not None:
        origin = np.empty((P, len(bounds) - 1), np.int64)
        origin[:k] = np.arange(k, 2 * k)[:, None]
        origin[k:] = slots[:, None]

    children = np.empty_like(genomes)
    child_stats = np.zeros_like(stats)
    children[0] = state.best_genome
    children[1:k] = genomes[order[: k - 1]]
    children[k:] = pool_g[draws]
    child_stats[0] = state.best_stats
    child_stats[1:k] = stats[order[: k - 1]]
    child_stats[k:] = pool_s[draws]
    elite_conn = np.concatenate([[agent.connections(state.best_genome)], connections[order[:k]]])
    state.rate = float(agent.next_rate(state.rate, elite_conn, float(np.mean(connections))))
    recombine(children, child_stats, agent.groups(), k, k, rng, origin, bounds)
    record = origin is not None
    pruned = np.zeros((P, -(-n // 8)), np.uint8) if record else None
    keys = np.zeros((P, KEY_WIDTH), np.uint64) if record else None
    if schedule is not None:
        keep = schedule.budget(state.generation + 1)
        for i in range(P):
            child = target.prune_to(children[i], keep, prune_by, child_stats[i], rng, layout)
            if record and pruned is not None:
                pruned[i] = lin.changed(children[i], child)
            children[i] = child
    for i in range(k, P):
        if prune and schedule is None:
            child = agent.mutate(children[i], child_stats[i], state.rate, rng)
            if record and pruned is not None:
                pruned[i] = lin.changed(children[i], child)
            children[i] = child
        if mutation_std > 0:
            key = key_of(rng) if record else None
            if key is None or keys is None:
                record = False
            else:
                keys[i] = key
            children[i] = perturb(children[i], mutation_std, rng)
    state.lineage = _lineage(state, genomes, order, origin, pruned, keys, mutation_std, schedule is not None) \
        if record else None
    state.genomes = children
    state.generation += 1


def _lineage(state: EvolutionState, genomes, order, origin, pruned, keys, std, assign) -> Lineage:
    """The children's :class:`Lineage`: the pool slots they use, as distinct parents."""
    assert state.lineage is not None  # called only while the lineage is recorded
    k = len(state.hof_fitness)
    refs = np.full((2 * k + 1, 2), -1, np.int64)
    used: list[tuple[int, int]] = []
    parents: list[np.ndarray] = []
    index: dict[tuple[int, int], int] = {}
    remap = np.empty(2 * k + 1, np.int64)
    for slot in np.unique(origin):
        if slot < k:
            assert state.hof_generation is not None and state.hof_row is not None  # kept with the lineage
            g, r, genome = state.hof_generation[slot], state.hof_row[slot], state.hof_genomes[slot]
        elif slot == k:
            assert state.best_ref is not None  # kept with the lineage
            (g, r), genome = state.best_ref, state.best_genome
        else:
            g, r = state.generation, order[slot - k - 1]
            genome = genomes[r]
        ref = (int(g), int(r))
        if ref not in index or ref[0] < 0:
            index[ref] = len(used)
            used.append(ref)
            parents.append(genome)
        remap[slot] = index[ref]
    refs[:len(used)] = used
    return Lineage(state.lineage.bounds, refs, remap[origin], pruned, keys, float(std), bool(assign),
                   parents=np.stack(parents))


def _forget_over_budget(state: EvolutionState, keep: int) -> None:
    """The best-ever agent and hall-of-fame members with more than ``keep`` connections
    are forgotten (fitness -inf), so that the champion is always within the budget."""
    if np.count_nonzero(state.best_genome) > keep:
        state.best_fitness, state.best_generation = -np.inf, -1
    over = np.count_nonzero(state.hof_genomes, axis=1) > keep
    if over.any():
        state.hof_fitness = np.where(over, -np.inf, state.hof_fitness)
        if state.hof_generation is not None:
            state.hof_generation = np.where(over, -1, state.hof_generation)
        pick = rank_order(state.hof_fitness)
        state.hof_fitness, state.hof_genomes, state.hof_stats = (
            state.hof_fitness[pick], state.hof_genomes[pick], state.hof_stats[pick])
        if state.hof_generation is not None:
            state.hof_generation = state.hof_generation[pick]
        if state.hof_row is not None:
            state.hof_row = state.hof_row[pick]


class GA(Strategy):
    """The strategy ``ga``: :func:`next_generation` on an :class:`EvolutionState`, with
    ``k = ceil(P / 8)`` elites, hall-of-fame places and recombination swaps."""

    name = "ga"
    OPTIONS: ClassVar[dict[str, Option]] = {
        "mutation_std": Option(0.5, "std of the Gaussian perturbation of every non-elite child's surviving "
                                    "weights, after pruning; 0 keeps pure pruning (the reference)"),
        "prune": Option(True, "the agent prunes every non-elite child (synaptolysis); false: never"),
        "prune_every": Option(1, "with a target (prune_to): generations between two steps of the budget"),
        **target.OPTIONS,
    }
    #: checkpoint names of the state (kept from the first run-file format); ``genomes`` is left out
    #: where the lineage (``lineage_<name>``) rebuilds them
    ARRAYS = ("genomes", "hof_genomes", "hof_stats", "hof_fitness", "hof_generation", "best_genome", "best_stats")
    #: where the hall of fame and the best-ever agent were evaluated (lineage references; newer checkpoints)
    REFS = ("hof_row", "best_ref")

    def __init__(self, agent, population, options, rng):
        super().__init__(agent, population, options, rng)
        self.elite = -(-self.population // 8)
        self.evo: EvolutionState | None = None  #: the state the next generation reads
        target.check_agent(agent, self.options)
        #: the connection budget per generation (None: the agent's own pruning)
        self.schedule = target.Schedule.of(agent, self.options)
        self.layout = target.layout_of(agent) if self.schedule is not None else None

    @classmethod
    def check_options(cls, options):
        out = super().check_options(options)
        std = out["mutation_std"]
        from synapto.evolution.strategies.es import MAX_SCALE

        if isinstance(std, bool) or not isinstance(std, (int, float)) or not 0 <= std <= MAX_SCALE:
            raise UsageError(f"--mutation-std must be a number in [0, {MAX_SCALE:g}], got {std!r}")
        if not isinstance(out["prune"], bool):
            raise UsageError(f"--prune must be on or off, got {out['prune']!r}")
        if not (out["prune"] or out["mutation_std"]):
            raise UsageError("strategy 'ga' with --prune off and --mutation-std 0 would never change a genome")
        out["prune_every"] = need_int("prune_every", out["prune_every"])
        return target.check_options(out)

    @property
    def current(self) -> EvolutionState:
        """The state the next generation reads (made by :meth:`start` or :meth:`restore`)."""
        if self.evo is None:
            raise RuntimeError("strategy 'ga' has no state yet: start() or restore() first")
        return self.evo

    def start(self):
        self.evo = EvolutionState.initial(self.agent, self.population, self.elite, self.rng)

    def ask(self):
        return self.current.genomes

    def tell(self, feedback: Feedback):
        check_told(feedback, self.current.generation)
        next_generation(self.current, feedback.fitness, feedback.stats, self.agent, self.elite,
                        feedback.connections, select_fitness=feedback.select_fitness(),
                        mutation_std=float(self.options["mutation_std"]), prune=bool(self.options["prune"]),
                        schedule=self.schedule, prune_by=self.options["prune_by"], layout=self.layout)

    @property
    def champion(self):
        s = self.current
        return Champion(s.best_genome, float(s.best_fitness), int(s.best_generation))

    def final_candidates(self):
        """The best-ever agent, then the hall of fame (places never filled, and members
        equal to an earlier candidate, left out)."""
        s = self.current
        assert s.hof_generation is not None  # made by initial() and restore()
        return distinct([self.champion, *(Champion(g, float(f), int(n)) for f, g, n in
                                          zip(s.hof_fitness, s.hof_genomes, s.hof_generation) if np.isfinite(f))])

    def record(self):
        if self.schedule is None:
            return {"prune_rate": float(self.current.rate)}
        return {"prune_rate": float(self.current.rate),
                "connection_budget": float(self.schedule.budget(self.current.generation - 1))}  # the generation told

    def samples(self):
        """The population as its :class:`~synapto.lineage.Lineage` (parents, segments,
        pruned bits, noise keys), None where it was not recorded."""
        return self.current.lineage

    def state(self):
        e = self.current
        arrays = {name: getattr(e, name) for name in self.ARRAYS}
        arrays.update({name: getattr(e, name) for name in self.REFS if getattr(e, name) is not None})
        if e.lineage is not None:  # the population as its lineage: its few parents rather than every genome
            del arrays["genomes"]
            arrays.update({f"lineage_{k}": v for k, v in e.lineage.state().items()})
        return (arrays,
                {"best_fitness": float(e.best_fitness), "best_generation": int(e.best_generation),
                 "rate": float(e.rate)})

    def restore(self, arrays, scalars):
        """``scalars`` also holds the loop's ``generation`` (the checkpoint's counter)."""
        arrays = dict(arrays)
        if "hof_generation" not in arrays:  # a checkpoint from before generations were kept
            arrays["hof_generation"] = np.full(len(arrays["hof_fitness"]), -1, np.int64)
        part = {k[len("lineage_"):]: np.asarray(v) for k, v in arrays.items() if k.startswith("lineage_")}
        lineage = Lineage.from_arrays(part["bounds"], part) if part else None
        if "genomes" not in arrays:
            assert lineage is not None  # a checkpoint without genomes stores their lineage
            arrays["genomes"] = lineage.genomes()
        self.evo = EvolutionState(
            generation=int(scalars["generation"]), rate=float(scalars["rate"]),
            best_fitness=float(scalars["best_fitness"]), best_generation=int(scalars["best_generation"]),
            rng=self.rng, **{name: np.asarray(arrays[name]) for name in self.ARRAYS},
            **{name: np.asarray(arrays[name]) for name in self.REFS if name in arrays}, lineage=lineage)
