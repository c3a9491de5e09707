"""The GA's operators on populations, apart from its state (:mod:`.ga`): the parents'
selection weights (:func:`rank_weights`), recombination by swapping whole groups of
weights between children (:func:`recombine`, which carries their trace statistics and
lineage along), and the merge of a hall of fame with a generation's best
(:func:`merge_hall_of_fame`).  Pure functions of their inputs and an explicit
``np.random.Generator``.
"""

from __future__ import annotations

import numpy as np

from synapto import lineage as lin
from synapto.evolution.strategies.hall import HallOfFame


def rank_weights(n: int) -> np.ndarray:
    """Rank-proportional selection probabilities ``n, n-1, ..., 1`` normalised."""
    w = np.arange(n, 0, -1, dtype=np.float64)
    return w / w.sum()


def merge_hall_of_fame(
    hof_fitness,
    hof_genomes,
    hof_stats,
    fitness,
    genomes,
    stats,
    order,
    k,
    hof_generation=None,
    generation=None,
    hof_row=None,
):
    """The ``k`` best of (a hall of fame of ``k`` places, this generation's top ``k``); new ones
    first on ties (:meth:`.hall.HallOfFame.add`).  With ``hof_generation`` (and this
    ``generation``) the members' generations come along as a fourth result, and with
    ``hof_row`` their rows as a fifth."""
    k_old = len(hof_fitness)
    hof = HallOfFame(
        hof_fitness,
        hof_genomes,
        np.full(k_old, -1, np.int64) if hof_generation is None else hof_generation,
        {"stats": np.asarray(hof_stats), "row": np.full(k_old, -1, np.int64) if hof_row is None else hof_row},
    )
    top = order[:k]
    hof.add(
        np.asarray(fitness, np.float64)[top],
        genomes[top],
        -1 if generation is None else generation,
        stats=stats[top],
        row=np.asarray(top, np.int64),
    )
    out: tuple[np.ndarray, ...] = (hof.fitness, hof.genomes, hof.columns["stats"])
    out += (hof.generation,) if hof_generation is not None else ()
    return out + ((hof.columns["row"],) if hof_row is not None else ())


def recombine(
    children: np.ndarray,
    child_stats: np.ndarray | None,
    groups,
    n_swaps: int,
    lo: int,
    rng: np.random.Generator,
    origin: np.ndarray | None = None,
    bounds: np.ndarray | None = None,
) -> None:
    """``n_swaps`` swaps of a group or a single matrix between random pairs of rows >= lo, of
    ``children`` and of ``child_stats`` (None: all zeros, nothing to swap).  With ``origin``
    ((P, S) parents of the segments ``bounds``) the same swaps move it."""
    P = children.shape[0]
    if P - lo < 2 or not groups:
        return
    columns: dict[tuple, slice] = {}  # origin's columns of each slice: (start, stop) -> its segments
    if origin is not None:
        assert bounds is not None  # origin comes with its bounds
        columns = {(s.start, s.stop): lin.segment_range(bounds, s) for group in groups for s in group}
    for _ in range(n_swaps):
        a, b = rng.integers(lo, P, size=2)
        group = groups[rng.integers(len(groups))]
        parts = group if rng.integers(2) else [group[rng.integers(len(group))]]
        for s in parts:
            for arr, at in ((children, s), (child_stats, s), (origin, columns.get((s.start, s.stop)))):
                if arr is None:
                    continue
                tmp = arr[a, at].copy()
                arr[a, at] = arr[b, at]
                arr[b, at] = tmp
