"""Pruning to a connection budget on a schedule: the strategies' ``prune_to`` options.

Without a target (``prune_to = 0``, the default) every strategy prunes as before, with
the agent's own :meth:`~synapto.agents.base.Agent.mutate` at its adaptive rate.  With a
target fraction ``f`` of the dense network's ``N`` connections (the genome length), the
genomes evaluated in generation ``g`` have at most

    budget(g) = N                                          for g <= start
              = round(N (f + (1 - f) (1 - (t - start) / (end - start))^3))   in between
              = round(N f)                                 for g >= end

connections, ``t`` being ``g`` rounded down to the schedule's step (``prune_every``
generations after ``start``).  The cubic is the gradual schedule of Zhu & Gupta (2017):
it prunes fast while the network has many redundant connections and slowly near the
target.  A genome over its budget loses the connections the criterion ranks lowest:

- ``magnitude``: the smallest ``|weight|``;
- ``trace``: the weakest mean ``|Hebbian trace|`` in the trace statistics its
  evaluation returned (agents with traces: hebbian-dag);
- ``random``: uniformly at random (the reference's pruning, for comparison).

For ``magnitude`` and ``trace``, connections that cannot change any action go first
(:func:`inert`): those out of a unit that receives nothing (its activity is always
``tanh(0) = 0``: there are no biases), those into a unit that reaches no output, and
those into an output unit that never acts (hebbian-dag's modulation unit when it
does not modulate); so do the connections a removal leaves inert (removal goes in
rounds, see :func:`prune_to`).  Removing an inert connection never changes the
network's actions.  Ties are broken at random.  A pruned connection never comes back.

The options' values are checked in :mod:`.options` (:func:`~.options.check_target`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from synapto.common.errors import UsageError
from synapto.evolution.strategies.options import CRITERIA, Option

#: the options every strategy has for a target (defaults: no target, the pruning of before)
OPTIONS: dict[str, Option] = {
    "prune_to": Option(
        0.0,
        "target: the fraction of the dense network's connections (the genome length) "
        "left once the schedule ends, in (0, 1]; 0: no target, the agent's own pruning "
        "at its adaptive rate",
    ),
    "prune_by": Option(
        "magnitude",
        'with a target: which connections go first: "magnitude" (smallest '
        '|weight|), "trace" (weakest Hebbian trace; hebbian-dag), "random" '
        "(the reference's pruning); magnitude and trace remove connections that "
        "cannot change an action first",
    ),
    "prune_start": Option(
        0, "with a target: the generation the schedule starts from (all connections allowed until then)"
    ),
    "prune_end": Option(
        100,
        "with a target: the first generation held to the target; the budget falls "
        "on a cubic from prune_start to here, in steps of prune_every generations",
    ),
}


def check_agent(agent, options: dict[str, Any]) -> None:
    """Refuse a criterion the agent cannot serve, or a target that leaves no connection (one line)."""
    n = int(getattr(agent, "n_params", 0))
    if options["prune_to"] > 0 and n and int(round(n * options["prune_to"])) < 1:
        raise UsageError(
            f"strategy option prune_to {options['prune_to']:g} leaves no connection of the "
            f"network's {n:,}: give at least {1 / n:.3g} (one connection)"
        )
    if options["prune_to"] > 0 and options["prune_by"] == "trace" and not getattr(agent, "traces", False):
        raise UsageError(
            f"strategy option prune_by 'trace' needs an agent with Hebbian traces (hebbian-dag); "
            f"{getattr(agent, 'name', type(agent).__name__)!r} has none"
        )


@dataclass(frozen=True)
class Schedule:
    """The connection budget of every generation (see the module docstring)."""

    dense: int  #: connections of the dense network (the genome length)
    target: float  #: fraction left at the end
    start: int
    end: int
    every: int = 1  #: generations between two steps of the budget

    @classmethod
    def of(cls, agent, options: dict[str, Any]) -> Schedule | None:
        """The schedule of ``options`` (None without a target)."""
        if options["prune_to"] <= 0:
            return None
        return cls(
            int(agent.n_params),
            options["prune_to"],
            options["prune_start"],
            options["prune_end"],
            int(options.get("prune_every", 1)),
        )

    @property
    def final(self) -> int:
        return int(round(self.dense * self.target))

    def budget(self, generation: int) -> int:
        """Most connections a genome evaluated in ``generation`` may have."""
        if generation <= self.start:
            return self.dense
        if generation >= self.end:
            return self.final
        t = self.start + (generation - self.start) // self.every * self.every
        left = 1.0 - (t - self.start) / (self.end - self.start)
        return max(self.final, min(self.dense, int(round(self.dense * (self.target + (1 - self.target) * left**3)))))


def inert(layout, genome: np.ndarray) -> np.ndarray:
    """Mask of ``genome``'s surviving connections that cannot change any action (see the
    module docstring); all False without a layout."""
    genome = np.asarray(genome)
    out = np.zeros(genome.shape, dtype=bool)
    if layout is None:
        return out
    sizes = layout.sizes
    n_layers = len(sizes)
    mats = [(b, genome[b.index].reshape(b.shape) != 0) for b in layout.blocks]
    # units with an input (observations always): forward, layer by layer
    fed = [np.ones(sizes[0], bool)] + [np.zeros(n, bool) for n in sizes[1:]]
    for layer in range(1, n_layers):
        for b, m in mats:
            if b.target == layer:
                fed[layer] |= (m & fed[b.source][:, None]).any(axis=0)
    # units that reach an acting output: backward
    acting = np.ones(sizes[-1], bool)
    acting[list(getattr(layout, "inert_outputs", ()))] = False
    reach = [np.zeros(n, bool) for n in sizes[:-1]] + [acting]
    for layer in range(n_layers - 2, -1, -1):
        for b, m in mats:
            if b.source == layer:
                reach[layer] |= (m & reach[b.target][None, :]).any(axis=1)
    for b, m in mats:
        useful = m & fed[b.source][:, None] & reach[b.target][None, :]
        out[b.index] = (m & ~useful).ravel()
    return out


def prune_to(
    genome: np.ndarray, keep: int, criterion: str, stats: np.ndarray | None, rng: np.random.Generator, layout=None
) -> np.ndarray:
    """``genome`` with at most ``keep`` surviving connections: the ones ``criterion`` ranks
    lowest are set to 0 (a copy; nothing drawn when it is within budget).  For
    ``magnitude`` and ``trace`` the inert connections go first, including those made
    inert by the removals themselves: removal goes in rounds, each taking the inert
    connections if there are any, else the lowest-ranked quarter of the connections
    still to go (at least one), so a unit cut off in one round loses its other
    connections in the next."""
    genome = np.asarray(genome, dtype=np.float64)
    alive = np.flatnonzero(genome)
    excess = alive.size - max(int(keep), 0)
    child = genome.copy()
    if excess <= 0:
        return child
    tie = rng.random(alive.size)
    if criterion == "random":
        child[alive[np.argsort(tie, kind="stable")[:excess]]] = 0.0
        return child
    score = np.abs(genome[alive]) if criterion == "magnitude" else np.abs(np.asarray(stats, dtype=np.float64)[alive])
    ranked = alive[np.lexsort((tie, score))]  # lowest first
    if layout is None:
        child[ranked[:excess]] = 0.0
        return child
    while excess > 0:
        ranked = ranked[child[ranked] != 0]
        dead = inert(layout, child)[ranked]
        drop = ranked[dead][:excess] if dead.any() else ranked[: max(1, excess // 4)]
        child[drop] = 0.0
        excess -= drop.size
    return child


def cut_rows(
    genomes: np.ndarray, keep: int, criterion: str, stats: np.ndarray | None, rng: np.random.Generator, layout=None
) -> np.ndarray:
    """Every row of ``genomes`` held to ``keep`` connections (:func:`prune_to`, row by row in
    order; row ``i`` ranked by ``stats[i]`` for ``trace``): a copy."""
    out = np.array(genomes, dtype=np.float64, copy=True)
    for i in range(out.shape[0]):
        out[i] = prune_to(out[i], keep, criterion, None if stats is None else stats[i], rng, layout)
    return out


def layout_of(agent):
    """The agent's genome layout, or None (agents without one, e.g. test doubles)."""
    fn = getattr(agent, "layout", None)
    return fn() if callable(fn) else None


def mean_stats(stats: np.ndarray, fitness: np.ndarray) -> np.ndarray:
    """Mean trace statistics over the rows of finite fitness (all rows if none is)."""
    fitness = np.asarray(fitness, dtype=np.float64)
    finite = np.isfinite(fitness)
    rows = np.asarray(stats, dtype=np.float64)
    return np.mean(rows[finite] if finite.any() else rows, axis=0)


__all__ = ["CRITERIA", "OPTIONS", "Schedule", "check_agent", "cut_rows", "inert", "layout_of", "mean_stats", "prune_to"]
