"""The GA's operators on populations, apart from its state (:mod:`.ga`): the parents'
selection weights (:func:`rank_weights`) and recombination by swapping whole groups of
weights between children (:func:`recombine`, which carries their trace statistics and
lineage along).  Pure functions of their inputs and an explicit ``np.random.Generator``.
"""

from __future__ import annotations

import numpy as np

from synapto import lineage as lin


def rank_weights(n: int) -> np.ndarray:
    """Rank-proportional selection probabilities ``n, n-1, ..., 1`` normalised."""
    w = np.arange(n, 0, -1, dtype=np.float64)
    return w / w.sum()


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
