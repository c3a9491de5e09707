"""Row bookkeeping shared by the built-in batched policies, and batched action maps."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from synapto.agents.base import Agent, BatchPolicy

if TYPE_CHECKING:
    from synapto.agents.batched.certify import ExactRows

    class LayeredAgent(Agent):
        """What the built-in batched policies read of their agent (a PrunedMLP or a
        HebbianDAG) beyond :class:`Agent`: each weight matrix's genome slice and shape, the
        units per layer and their offsets (HebbianDAG).  Declared for the type checker only:
        the agents import this package, so it names them by what it reads."""

        sizes: list[int]
        _slices: list[slice]
        _shapes: list[tuple[int, int]]
        _cum: list[int]


class RowsLastBatchPolicy(BatchPolicy):
    """The row bookkeeping the built-in batched policies share: weights stored rows last
    (``(in, out, rows)`` per matrix, in :attr:`dtype`), current rows :attr:`ids` (original
    row numbers; row ``r`` runs genome ``r // episodes``), compaction (:meth:`keep`),
    refilling (:meth:`load`) and, for Discrete actions, the certified-decision bounds
    ``_a_all``/``_b_all`` and the one-row fallback :attr:`exact`.  Subclasses set those
    in ``__init__`` and implement ``_build`` (buffers for the current width) and ``act``;
    ``_keep_rows``/``_load_rows`` are hooks for per-row state of their own."""

    agent: LayeredAgent
    genomes: np.ndarray
    episodes: int
    dtype: type
    discrete: bool
    ids: np.ndarray
    _mats: list[np.ndarray] | None
    _a: np.ndarray  #: (Discrete) the current rows' error bound coefficients
    _b: np.ndarray
    _a_all: np.ndarray  #: (Discrete) every original row's
    _b_all: np.ndarray
    exact: ExactRows  #: (Discrete) the one-row fallback

    def _weights(self, rows) -> list[np.ndarray]:
        g = self.genomes[rows // self.episodes]
        return [
            np.ascontiguousarray(g[:, s].reshape(len(rows), *shape).transpose(1, 2, 0), dtype=self.dtype)
            for s, shape in zip(self.agent._slices, self.agent._shapes)
        ]

    def _build(self) -> None:
        raise NotImplementedError

    def _keep_rows(self, rows) -> None:
        """Hook: keep only ``rows`` of the subclass's own per-row state."""

    def _load_rows(self, slots) -> None:
        """Hook: reset the subclass's own per-row state of ``slots``."""

    def keep(self, rows):
        self.ids = self.ids[rows]
        if self._mats is not None:
            self._mats = [np.ascontiguousarray(w[:, :, rows]) for w in self._mats]
            self._keep_rows(rows)
            self._build()

    def load(self, slots, rows):
        """Current rows ``slots`` (ended episodes) now run the original rows ``rows``."""
        self.ids[slots] = rows
        if self._mats is None:
            return
        for w, new in zip(self._mats, self._weights(rows)):
            w[:, :, slots] = new
        self._load_rows(slots)
        if self.discrete:
            self._a[slots], self._b[slots] = self._a_all[rows], self._b_all[rows]

    def end_episodes(self, rows):
        if self.discrete and self.exact.policies:
            self.exact.drop(self.ids[rows])


def rows_product(w: np.ndarray, x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``out[j, r] = sum_i w[i, j, r] x[i, r]`` for every row ``r`` (rows last).

    float32 (the certified passes, whose bounds hold for any order of summation): one
    ``einsum``.  float64 (Box actions): the products, then their sum over ``i`` as a
    fixed tree of elementwise additions (the top half added onto the bottom half until
    one is left), so a row's value is the same bits whatever the rows beside it and
    however many there are (an ``einsum`` or BLAS product may change its order of
    summation with the batch's shape); a few calls per layer, not two per input."""
    if out.dtype != np.float64:
        return np.einsum("ijr,ir->jr", w, x, out=out)
    p = np.multiply(w, x[:, None, :])
    m = p.shape[0]
    while m > 1:
        h = m // 2
        p[:h] += p[m - h : m]
        m -= h
    np.copyto(out, p[0])
    return out


def batch_actions(agent: Agent, out: np.ndarray) -> np.ndarray:
    """:meth:`Agent.output_to_action` for outputs ``out`` (act_dim, rows), rows first in
    the result; the same elementwise operations, so bit for bit the one-row result."""
    if agent.space.discrete:
        return out.argmax(axis=0)
    # a C-contiguous copy: numpy may take another code path (other rounding) for strided
    # arrays, and out.T is strided but for one row
    a = np.tanh(np.ascontiguousarray(out.T))
    bounds = agent._bounds
    if bounds is not None:
        lo, hi = bounds
        a += 1.0
        a *= 0.5
        a *= hi - lo
        a = lo + a
    return a
