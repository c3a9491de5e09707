"""The batched policy of ``pruned-mlp`` (see :class:`synapto.agents.pruned_mlp.PrunedMLP`).

``agent`` is a :class:`~synapto.agents.pruned_mlp.PrunedMLP`,
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


class MLPBatchPolicy(RowsLastBatchPolicy):
    """Rows last: weights (in, out, rows), activities (units, rows); one ``einsum`` and
    one in-place :func:`synapto.common.fastmath.tanh_` per layer, into buffers made once per width.

    Discrete actions: float32 with certified decisions (see :mod:`synapto.agents.batched.certify`): every
    action is the one-row policy's, bit for bit.  Box actions: float64, within rounding
    of the one-row path.  Supports refilling (:meth:`load`).
    """

    def __init__(self, agent: Agent, genomes: np.ndarray, episodes: int = 1):
        self.agent = agent = cast("LayeredAgent", agent)  # a PrunedMLP or a HebbianDAG (see the docstring)
        self.genomes = genomes  # one per individual; row r runs genome r // episodes
        self.episodes = episodes
        k = genomes.shape[0]
        self.discrete = agent.space.discrete
        self.dtype = np.float32 if self.discrete else np.float64
        self.ids = np.arange(k * episodes)
        self._mats = None
        self._w64: list[np.ndarray] | None = None
        if self.discrete:
            layers = [
                (i, [(layer, genomes[:, s].reshape(k, i, o))])
                for layer, (s, (i, o)) in enumerate(zip(agent._slices, agent._shapes))
            ]
            self._a_all, self._b_all, self._a64, self._b64 = (
                np.repeat(v, episodes) for v in decision_bounds(layers, out_tanh=False)
            )
            self.exact = ExactRows(agent, genomes, episodes)

    def _build(self) -> None:
        n, dt = len(self.ids), self.dtype
        if self._mats is None:
            self._mats = self._weights(self.ids)
        self._x0: np.ndarray = np.zeros((self.agent._shapes[0][0], n), dt)
        self._bufs: list[np.ndarray] = [np.zeros((w.shape[1], n), dt) for w in self._mats]
        if self.discrete:
            self._a, self._b = self._a_all[self.ids], self._b_all[self.ids]
            self._abs = np.zeros_like(self._x0)
            self._m, self._margin, self._bound = (np.zeros(n, np.float32) for _ in range(3))
            self._tmp = np.zeros((2, n), np.float32)
            self._action = np.zeros(n, np.int64)
            self._ok = np.zeros(n, bool)

    def act(self, obs):
        if self._mats is None:
            self._build()
        assert self._mats is not None  # _build made them
        x = self._x0
        np.copyto(x, obs.T, casting="unsafe")
        last = len(self._mats) - 1
        for i, (w, h) in enumerate(zip(self._mats, self._bufs)):
            rows_product(w, x, h)
            if i < last:
                tanh_(h)
            x = h
        if not self.discrete:
            return batch_actions(self.agent, x)
        action, margin, bound, m = self._action, self._margin, self._bound, self._m
        argmax_margin(x, action, margin, self._tmp)
        np.abs(self._x0, out=self._abs)
        np.maximum.reduce(self._abs, axis=0, out=m)
        np.multiply(self._a, m, out=bound)
        bound += self._b
        certify(action, margin, bound, self._ok, self.exact, self.ids, obs, self._refine)
        return action

    def _refine(self, rows, obs):
        """The float64 pass for current rows ``rows`` (observations ``obs``, as given to
        :meth:`act`): (action, margin, bound)."""
        ids = self.ids[rows]
        gi = ids // self.episodes
        if self._w64 is None:  # rows first, float64: the genomes' own matrices
            n = self.genomes.shape[0]
            self._w64 = [
                np.ascontiguousarray(self.genomes[:, s].reshape(n, *shape))
                for s, shape in zip(self.agent._slices, self.agent._shapes)
            ]
        x = obs.reshape(len(ids), 1, -1)  # (k, 1, in)
        m = np.abs(x).max(axis=2)[:, 0]
        last = len(self._w64) - 1
        for i, w in enumerate(self._w64):
            x = np.matmul(x, w[gi])
            if i < last:
                np.tanh(x, out=x)
        out = np.ascontiguousarray(x[:, 0, :].T)
        action = np.zeros(len(ids), np.int64)
        margin = np.zeros(len(ids))
        argmax_margin(out, action, margin, np.zeros((2, len(ids))))
        return action, margin, self._a64[ids] * m + self._b64[ids]
