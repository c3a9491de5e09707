"""The hall of fame: the few best genomes a strategy has seen, kept across generations.

Every strategy keeps one (:class:`HallOfFame`): the ``ga`` its ``k`` best individuals
by the fitness that chooses among a population (they are parents again), a centre
strategy its best validated genomes (final candidates, and the champion).  Members
are ordered best first by fitness, new ones first on ties; each has the generation
it was evaluated in and whatever further columns a strategy keeps row by row (the
``ga``: the member's trace statistics and its row in its generation).  An empty
place has fitness -inf, generation -1, a zero genome, and 0 (floats) or -1
(integers) in its other columns; a member is forgotten by emptying its place.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from synapto.evolution.strategies.base import Champion, rank_order


def keep_best(k: int, new_fitness, old_fitness, *pairs) -> tuple:
    """The ``k`` best of the new entries and the old ones by fitness, new ones first on ties.
    ``pairs``: ``(new, old)`` arrays that come along row by row (genomes, their generations,
    their statistics).  Returns ``(fitness, *arrays)``."""
    fitness = np.concatenate([np.asarray(new_fitness, dtype=np.float64), np.asarray(old_fitness, dtype=np.float64)])
    pick = rank_order(fitness)[:k]
    return (fitness[pick], *(np.concatenate([new, old])[pick] for new, old in pairs))


def _empty_value(a: np.ndarray):
    return -1 if np.issubdtype(a.dtype, np.integer) else 0


class HallOfFame:
    """The best genomes seen so far (see the module docstring)."""

    def __init__(self, fitness, genomes, generation, columns: Mapping[str, np.ndarray] | None = None):
        self.fitness = np.asarray(fitness, dtype=np.float64)  #: (k,) best first; -inf: an empty place
        self.genomes = np.asarray(genomes, dtype=np.float64)  #: (k, n)
        self.generation = np.asarray(generation, dtype=np.int64)  #: (k,) -1: an empty place
        #: further (k, ...) columns, by name
        self.columns: dict[str, np.ndarray] = {name: np.asarray(a) for name, a in (columns or {}).items()}

    @classmethod
    def empty(cls, k: int, n: int, columns: Mapping[str, tuple[tuple[int, ...], str]] | None = None) -> HallOfFame:
        """``k`` empty places for genomes of length ``n``; ``columns``: name -> (shape of a row, dtype)."""
        cols = {}
        for name, (tail, dtype) in (columns or {}).items():
            a = np.zeros((k, *tail), dtype=dtype)
            cols[name] = np.full_like(a, _empty_value(a))
        return cls(np.full(k, -np.inf), np.zeros((k, n)), np.full(k, -1, dtype=np.int64), cols)

    @property
    def size(self) -> int:
        return int(self.fitness.size)

    def add(self, fitness, genomes, generation: int, **columns) -> None:
        """New entries, evaluated in ``generation``, with their rows of every column: the ``k``
        best of them and the members stay (new ones first on ties)."""
        fitness = np.asarray(fitness, dtype=np.float64)
        pairs = [
            (np.full(fitness.size, generation, dtype=np.int64), self.generation),
            (np.asarray(genomes, dtype=np.float64), self.genomes),
            *((np.asarray(columns[name]), self.columns[name]) for name in self.columns),
        ]
        self.fitness, self.generation, self.genomes, *cols = keep_best(self.size, fitness, self.fitness, *pairs)
        self.columns = dict(zip(self.columns, cols))

    def forget(self, places) -> None:
        """Empty the places ``places`` (a mask); the members left stay best first."""
        places = np.asarray(places, dtype=bool)
        if not places.any():
            return
        fitness = np.where(places, -np.inf, self.fitness)
        pick = rank_order(fitness)

        def emptied(a, value):
            a = np.array(a, copy=True)
            a[places] = value
            return a[pick]

        self.fitness = fitness[pick]
        self.generation = emptied(self.generation, -1)
        self.genomes = emptied(self.genomes, 0.0)
        self.columns = {name: emptied(a, _empty_value(a)) for name, a in self.columns.items()}

    def members(self) -> list[Champion]:
        """The places filled, best first, as :class:`Champion` s."""
        return [
            Champion(g, float(f), int(n))
            for g, f, n in zip(self.genomes, self.fitness, self.generation)
            if np.isfinite(f)
        ]

    def state(self, prefix: str = "hof_") -> dict[str, np.ndarray]:
        """The checkpoint's arrays: ``<prefix>fitness``, ``<prefix>genomes``, ``<prefix>generation``
        and ``<prefix><column>``."""
        return {
            f"{prefix}genomes": self.genomes,
            f"{prefix}fitness": self.fitness,
            f"{prefix}generation": self.generation,
            **{prefix + k: a for k, a in self.columns.items()},
        }

    @classmethod
    def restore(cls, arrays: Mapping[str, np.ndarray], columns=(), prefix: str = "hof_") -> HallOfFame:
        """The hall of fame of :meth:`state`'s arrays (copies); a checkpoint from before
        generations, or a column, was kept gets empty values for it."""
        fitness = np.array(arrays[f"{prefix}fitness"], dtype=np.float64)
        k = fitness.size
        generation = arrays.get(f"{prefix}generation", np.full(k, -1, dtype=np.int64))
        cols = {
            name: np.array(arrays[prefix + name]) if prefix + name in arrays else np.full(k, -1, dtype=np.int64)
            for name in columns
        }
        return cls(
            fitness, np.array(arrays[f"{prefix}genomes"], dtype=np.float64), np.array(generation, dtype=np.int64), cols
        )


__all__ = ["HallOfFame", "keep_best"]
