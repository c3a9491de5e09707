"""The batched policy of ``hebbian-dag`` (see :class:`synapto.agents.hebbian_dag.HebbianDAG`).

``agent`` is a :class:`~synapto.agents.hebbian_dag.HebbianDAG`,
typed as its base class: the agent imports this module when asked for a batch policy,
and this module imports nothing of the agent's, so the arrow between them points one way."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import numpy as np

from synapto.agents.base import Agent
from synapto.agents.batched.certify import ExactRows, argmax_margin, certify, decision_bounds
from synapto.agents.batched.rows import RowsLastBatchPolicy, batch_actions, rows_product
from synapto.common.fastmath import tanh_

if TYPE_CHECKING:
    from synapto.agents.batched.rows import LayeredAgent


class DAGBatchPolicy(RowsLastBatchPolicy):
    """Rows last: weights (rows of the stacked matrix, out, rows), activities (units,
    rows); one ``einsum`` (float64: :func:`rows_product`) and one in-place :func:`synapto.common.fastmath.tanh_` per
    layer.

    Discrete actions: float32 with certified decisions (see :mod:`synapto.agents.batched.certify`): every
    action is the one-row policy's, bit for bit.  The output layer's tanh is skipped:
    the argmax of ``tanh(z)`` is certified on the pre-activations ``z`` where all
    outputs lie in [-:data:`Z_SAT`, :data:`Z_SAT`]: there a margin in ``z`` above the
    bound plus :data:`Z_SLACK` keeps the float64 tanh values apart (``tanh(z_a) -
    tanh(z_b) >= 1e-5 sech^2(11.5) > 4e-15``, above twice float64 tanh's error); outputs
    near saturation go to the float64 refinement.  Box actions: float64.

    Traces without an activity record: the trace of block ``(i, j)`` is
    ``sum_t outer(x_j, x_j @ W_ij) = G_j @ W_ij`` with ``G_j = sum_t outer(x_j, x_j)``, the
    Gram matrix of source layer ``j``'s activity, symmetric: a step adds the upper
    triangle of one outer product per source layer (fewer products than the blocks'
    traces), and the rows' ``|G_j @ W_ij|`` (float64) are added to their statistics
    after their episodes end.  The activities and ``G`` are float32 where the one-row
    path's are float64, so the statistics agree with it to about 1e-5 relative to the
    row's largest (the tests check 1e-4); actions and returns are unaffected.
    Supports refilling.
    """

    #: largest |pre-activation| of the outputs certified without the float64 pass ...
    Z_SAT = 11.5
    #: ... with a margin in z at least this much above the error bound
    Z_SLACK = 1e-5

    _x: np.ndarray  #: every unit's activity, (units, rows)
    _gram: list[np.ndarray]  #: per source layer, (units, units, rows) sums of outer products (with statistics)
    _prod: np.ndarray  #: scratch of the outer products
    _abs: np.ndarray  #: (Discrete) scratch of the error bounds
    _z: np.ndarray  #: (Discrete) the output pre-activations
    _zabs: np.ndarray

    def __init__(self, agent: Agent, genomes: np.ndarray, want_stats: bool, episodes: int = 1):
        self.agent = agent = cast("LayeredAgent", agent)  # a PrunedMLP or a HebbianDAG (see the docstring)
        self.genomes = genomes  # one per individual; row r runs genome r // episodes
        self.episodes = episodes
        k = genomes.shape[0]
        n = k * episodes
        self.cum = cum = agent._cum
        self.discrete = agent.space.discrete
        self.dtype = np.float32 if self.discrete else np.float64
        self.ids = np.arange(n)
        self._stats = np.zeros((n, agent.n_params)) if want_stats else None
        self._pending: list = []  # (original rows, their G per source) of ended episodes, not folded in yet
        self._mats = None
        self._w64: list[np.ndarray] | None = None
        if self.discrete:
            layers = []
            for i, (s, shape) in enumerate(zip(agent._slices, agent._shapes)):
                w = genomes[:, s].reshape(k, *shape)
                layers.append((shape[0], [(j, w[:, cum[j] : cum[j + 1]]) for j in range(i + 1)]))
            a32, b32, _, _ = decision_bounds(layers, out_tanh=False)  # on z
            _, _, a64, b64 = decision_bounds(layers, out_tanh=True)  # on tanh(z), float64
            b32 = b32 + np.float32(self.Z_SLACK)
            self._a_all, self._b_all, self._a64, self._b64 = (np.repeat(v, episodes) for v in (a32, b32, a64, b64))
            self.exact = ExactRows(agent, genomes, episodes)

    def _build(self) -> None:
        n, dt, cum = len(self.ids), self.dtype, self.cum
        if self._mats is None:
            self._mats = self._weights(self.ids)
        self._x = np.zeros((cum[-1], n), dt)
        self._layers = [(w, self._x[: cum[i + 1]], self._x[cum[i + 1] : cum[i + 2]]) for i, w in enumerate(self._mats)]
        if self._stats is not None:
            if getattr(self, "_gram", None) is None or self._gram[0].shape[-1] != n:
                self._gram = [np.zeros((cum[j + 1] - cum[j],) * 2 + (n,), dt) for j in range(len(self._mats))]
            self._prod = np.zeros((max(self.agent.sizes[:-1]), n), dt)
            # per source unit a: G_j[a, a:] += x_a * x_a.. (the upper triangle)
            self._tri = [
                (self._x[cum[j] + a], self._x[cum[j] + a : cum[j + 1]], g[a, a:], self._prod[: cum[j + 1] - cum[j] - a])
                for j, g in enumerate(self._gram)
                for a in range(cum[j + 1] - cum[j])
            ]
        if self.discrete:
            self._a, self._b = self._a_all[self.ids], self._b_all[self.ids]
            self._abs = np.zeros((cum[1], n), dt)
            self._z = np.zeros((self.agent.sizes[-1], n), dt)
            self._zabs = np.zeros((self.agent.sizes[-1] - 1, n), dt)
            self._m, self._margin, self._bound, self._zmax = (np.zeros(n, np.float32) for _ in range(4))
            self._tmp = np.zeros((2, n), np.float32)
            self._action = np.zeros(n, np.int64)
            self._ok = np.zeros(n, bool)
            w, xin, _ = self._layers[-1]
            self._layers[-1] = (w, xin, self._z)

    def act(self, obs):
        if self._mats is None:
            self._build()
        assert self._mats is not None  # _build made them
        cum, x = self.cum, self._x
        x0 = x[: cum[1]]
        np.copyto(x0, obs.T, casting="unsafe")
        last = len(self._layers) - 1
        for i, (w, xin, h) in enumerate(self._layers):
            rows_product(w, xin, h)
            if i < last or not self.discrete:
                tanh_(h)
        if self._stats is not None:
            for xa, xs, g, p in self._tri:
                np.multiply(xa, xs, out=p)
                g += p
        if not self.discrete:
            return batch_actions(self.agent, x[cum[-2] + 1 :])
        action, margin, bound, m = self._action, self._margin, self._bound, self._m
        y = self._z[1:]
        argmax_margin(y, action, margin, self._tmp)
        np.abs(y, out=self._zabs)
        np.maximum.reduce(self._zabs, axis=0, out=self._zmax)
        np.less_equal(self._zmax, self.Z_SAT, out=self._ok)
        margin *= self._ok  # near saturation: margin 0, not certified
        np.abs(x0, out=self._abs)
        np.maximum.reduce(self._abs, axis=0, out=m)
        np.multiply(self._a, m, out=bound)
        bound += self._b
        certify(action, margin, bound, self._ok, self.exact, self.ids, obs, self._refine)
        return action

    def _refine(self, rows, obs):
        """The float64 pass for current rows ``rows`` (observations ``obs``; outputs through
        tanh, as the one-row path): (action, margin, bound)."""
        cum, agent = self.cum, self.agent
        if self._w64 is None:  # rows first, float64: the genomes' own matrices
            k = self.genomes.shape[0]
            self._w64 = [
                np.ascontiguousarray(self.genomes[:, s].reshape(k, *shape))
                for s, shape in zip(agent._slices, agent._shapes)
            ]
        ids = self.ids[rows]
        gi = ids // self.episodes
        x = np.zeros((len(ids), 1, cum[-1]))
        x[:, 0, : cum[1]] = obs.reshape(len(ids), -1)  # as given to act (not rounded to float32)
        m = np.abs(x[:, 0, : cum[1]]).max(axis=1)
        for i, w in enumerate(self._w64):
            h = x[:, :, cum[i + 1] : cum[i + 2]]
            np.matmul(x[:, :, : cum[i + 1]], w[gi], out=h)
            np.tanh(h, out=h)
        out = np.ascontiguousarray(x[:, 0, cum[-2] + 1 :].T)
        action = np.zeros(len(ids), np.int64)
        margin = np.zeros(len(ids))
        argmax_margin(out, action, margin, np.zeros((2, len(ids))))
        return action, margin, self._a64[ids] * m + self._b64[ids]

    #: rows folded at a time (keeps the fold's arrays in cache)
    FOLD_ROWS = 1024

    def _fold(self) -> None:
        """Set the statistics of the ended episodes' rows to ``|G_j @ W_ij|`` (from the
        snapshots of their G's upper triangles), vectorised over rows."""
        if not self._pending:
            return
        rows = np.concatenate([r for r, _ in self._pending])
        grams = [np.concatenate([gs[j] for _, gs in self._pending], axis=-1) for j in range(len(self._gram))]
        self._pending = []
        for g in grams:
            n = g.shape[0]
            lower = np.tril(np.ones((n, n), bool), -1)
            g[lower] = g.transpose(1, 0, 2)[lower]  # symmetric: the lower triangle from the upper
        for a in range(0, len(rows), self.FOLD_ROWS):
            part = slice(a, a + self.FOLD_ROWS)
            self._fold_rows(rows[part], [g[:, :, part] for g in grams])

    def _fold_rows(self, rows, grams) -> None:
        cum, agent = self.cum, self.agent
        k = len(rows)
        assert self._mats is not None  # built before any episode ends
        g_t = np.ascontiguousarray(self.genomes[rows // self.episodes].T)  # (n_params, k): rows last
        out = np.zeros((agent.n_params, k))
        for j, g in enumerate(grams):
            n = g.shape[0]
            gk = g.astype(np.float64)
            p = np.empty((n, max(agent._shapes[i][1] for i in range(j, len(self._mats))), k))
            for i in range(j, len(self._mats)):
                s, cols = agent._slices[i], agent._shapes[i][1]
                lo, hi = s.start + cum[j] * cols, s.start + cum[j + 1] * cols
                # t[a, b] = sum_c G[a, c] W[c, b] for every row (last axis), summed over c in
                # order by elementwise operations: per row exact whatever the rows beside it
                w = g_t[lo:hi].reshape(n, cols, k)
                t = out[lo:hi].reshape(n, cols, k)
                pc = p[:, :cols]
                np.multiply(gk[:, 0, None, :], w[0], out=t)
                for c in range(1, n):
                    np.multiply(gk[:, c, None, :], w[c], out=pc)
                    t += pc
                np.abs(t, out=t)
        assert self._stats is not None  # folded only when statistics are wanted
        self._stats[rows] = out.T  # every row's episode ends once

    def _keep_rows(self, rows) -> None:
        if self._stats is not None:
            self._gram = [np.ascontiguousarray(g[:, :, rows]) for g in self._gram]

    def _load_rows(self, slots) -> None:
        if self._stats is not None:
            for g in self._gram:
                g[:, :, slots] = 0.0

    def end_episodes(self, rows):
        if self._stats is not None and len(rows) and self._mats is not None:
            self._pending.append((self.ids[rows], [g[:, :, rows] for g in self._gram]))
        super().end_episodes(rows)

    def trace_stats(self):
        self._fold()
        return self._stats
