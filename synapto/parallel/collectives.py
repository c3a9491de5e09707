"""PPO's MPI collectives: broadcast, sums, maxima and means over ranks, in flat float64
buffers (one call per quantity, not per tensor); no-ops in a single process.

Training (:mod:`synapto.ppo.train`) makes every call on every rank in the same order;
logging and file writing happen on rank 0 only and contain no collectives.
"""

from __future__ import annotations

import time
from typing import overload

import numpy as np

clock = time.perf_counter


class Collectives:
    """The MPI calls of training; no-ops in a single process.  Times itself."""

    def __init__(self, comm):
        self.comm = comm
        self.size = 1 if comm is None else comm.Get_size()
        self.seconds = 0.0  # time spent inside collectives (transfer + waiting for other ranks)
        if comm is not None:
            from mpi4py import MPI

            self._MPI = MPI

    def bcast_(self, array: np.ndarray) -> None:
        if self.comm is not None:
            self.comm.Bcast(array, root=0)

    def gather_(self, array: np.ndarray) -> np.ndarray | None:
        """Every rank's ``array`` (all of one shape) stacked in rank order along the first
        axis, on rank 0 (None elsewhere); in a single process ``array`` itself."""
        if self.comm is None or self.size == 1:
            return array
        t = clock()
        array = np.ascontiguousarray(array)
        out = (
            np.empty((self.size * array.shape[0], *array.shape[1:]), array.dtype) if self.comm.Get_rank() == 0 else None
        )
        self.comm.Gather(array, out, root=0)
        self.seconds += clock() - t
        return out

    def _allreduce(self, array: np.ndarray, op_name: str) -> np.ndarray:
        if self.comm is not None and self.size > 1:
            t = clock()
            self.comm.Allreduce(self._MPI.IN_PLACE, array, op=getattr(self._MPI, op_name))
            self.seconds += clock() - t
        return array

    def sum_(self, array: np.ndarray) -> np.ndarray:
        return self._allreduce(array, "SUM")

    def max_(self, array: np.ndarray) -> np.ndarray:
        return self._allreduce(array, "MAX")

    def mean_(self, array: np.ndarray) -> np.ndarray:
        self._allreduce(array, "SUM")
        if self.size > 1:
            array /= self.size
        return array

    def statistics(self, x: np.ndarray) -> tuple[float, float, float, float]:
        """(mean, std, max, min) of the values of all ranks together (NaN if there are none)."""
        x = np.asarray(x, dtype=np.float64)
        s = self.sum_(np.array([x.sum(), x.size], dtype=np.float64))
        if s[1] == 0:
            self.sum_(np.zeros(1))  # every rank makes the same calls
            self.max_(np.full(2, -np.inf))
            return (np.nan,) * 4
        mean = s[0] / s[1]
        sq = self.sum_(np.array([np.sum((x - mean) ** 2)]))
        ext = self.max_(np.array([x.max() if x.size else -np.inf, -x.min() if x.size else -np.inf]))
        return float(mean), float(np.sqrt(sq[0] / s[1])), float(ext[0]), float(-ext[1])


@overload
def average_gradient(coll: Collectives, grad: np.ndarray, extra: float, buf: np.ndarray | None = None) -> float: ...
@overload
def average_gradient(
    coll: Collectives, grad: np.ndarray, extra: None = None, buf: np.ndarray | None = None
) -> None: ...
def average_gradient(
    coll: Collectives, grad: np.ndarray, extra: float | None = None, buf: np.ndarray | None = None
) -> float | None:
    """Replace ``grad`` by its mean over ranks -- one flat float64 Allreduce, with ``extra``
    (a scalar to average, e.g. the KL) riding along.  Returns the averaged ``extra``."""
    n = grad.size
    if buf is None:
        buf = np.empty(n + 1, np.float64)
    buf[:n] = grad
    buf[n] = 0.0 if extra is None else extra
    coll.mean_(buf)
    grad[...] = buf[:n]
    return None if extra is None else float(buf[n])
