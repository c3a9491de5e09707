"""Running moments: a count, and per component a sum and a sum of squares, in float64 --
the one implementation behind evolution's observation normalisation
(:class:`synapto.evolution.obs_norm.ObsStats`, and the workers' counting) and PPO's
(:class:`synapto.ppo.normalise.Moments`).

The totals live in one packed vector ``[count, sum (dim), sumsq (dim)]`` (so that ranks can
add theirs with one collective), optionally started from a prior of weight ``prior`` with
mean 0 and variance 1.  From them::

    mean = sum / count,   var = max(sumsq / count - mean * mean, floor),   std = sqrt(var + eps)

Rows are added as ``count += n``, ``sum += x.sum(axis=0)`` and ``sumsq +=`` the sum of their
squares, computed in one of two orders (which differ in the last bit, and each run file
depends on its own): ``"einsum"`` (``np.einsum("ij,ij->j", x, x)``, PPO's) or ``"square"``
(``np.square(x).sum(axis=0)``, evolution's workers').  This module imports neither evolution
nor PPO code.
"""

from __future__ import annotations

import numpy as np

#: the orders in which the sum of squares of added rows may be computed
SQUARES = ("einsum", "square")


class RunningMoments:
    """Count, sum and sum of squares per component (float64), packed in :attr:`totals`."""

    def __init__(self, dim: int, prior: float = 0.0, squares: str = "einsum"):
        if squares not in SQUARES:
            raise ValueError(f"squares must be one of {SQUARES}, not {squares!r}")
        self.dim = dim
        self.squares = squares
        self.totals = np.concatenate([[prior], np.zeros(dim), np.full(dim, prior)])

    @property
    def count(self) -> float:
        return self.totals[0]

    @property
    def sum(self) -> np.ndarray:
        """The sum per component (a view into :attr:`totals`)."""
        return self.totals[1 : 1 + self.dim]

    @property
    def sumsq(self) -> np.ndarray:
        """The sum of squares per component (a view into :attr:`totals`)."""
        return self.totals[1 + self.dim :]

    def add_rows(self, x) -> None:
        """Add the rows of ``x`` (n, dim) -- or one value per row for ``dim`` 1 (n,)."""
        x = np.asarray(x, dtype=np.float64).reshape(-1, self.dim)
        d = self.dim
        self.totals[0] += x.shape[0]
        self.totals[1 : 1 + d] += x.sum(axis=0)
        if self.squares == "einsum":
            self.totals[1 + d :] += np.einsum("ij,ij->j", x, x)
        else:
            self.totals[1 + d :] += np.square(x).sum(axis=0)

    def add_totals(self, count: int, sum_: np.ndarray, sumsq: np.ndarray) -> None:
        """Add totals counted elsewhere (a worker's): ``count`` rows, their sum and sum of squares."""
        self.totals[0] += count
        self.totals[1 : 1 + self.dim] += sum_
        self.totals[1 + self.dim :] += sumsq

    def mean_std(self, floor: float = 0.0, eps: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """``(mean, sqrt(max(var, floor) + eps))`` of the totals (``count`` must not be 0)."""
        t, d = self.totals, self.dim
        mean = t[1 : 1 + d] / t[0]
        var = np.maximum(t[1 + d :] / t[0] - mean * mean, floor)
        return mean, (np.sqrt(var + eps) if eps else np.sqrt(var))

    def load(self, totals) -> None:
        """Replace the totals with ``totals`` (a packed vector, as :attr:`totals`)."""
        self.totals = np.array(totals, dtype=np.float64)
