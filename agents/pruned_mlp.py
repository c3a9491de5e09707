"""``pruned-mlp``: a tanh MLP whose weights all start at 1.0 and only ever get pruned.

After the reference's PruneableAgent.  Layers ``[obs, *hidden, act]`` without
biases; hidden units are tanh; the output is tanh (Box, scaled to the bounds) or
argmax (Discrete).  Generation 0 prunes 25 % of the connections at random; later
generations prune with an adaptive rate: the spread (root mean square deviation)
of the elites' connection counts around the population's mean count, divided by
that mean, clipped to [``min_rate``, ``max_rate``] (the reference computes this
clip but never applies it).  Fitness is the mean return minus a complexity
penalty, the mean over layers of the mean absolute weight.
"""

from __future__ import annotations

import numpy as np

from agents.base import (Agent, ExactRows, Policy, argmax_margin, batch_actions, certify, decision_bounds,
                         layer_shapes, RowsLastBatchPolicy)
from synapto.fastmath import tanh_


class MLPPolicy(Policy):
    """Per step: the observation is copied into a float64 buffer, then one ``dot``
    and one in-place ``tanh`` per layer into preallocated buffers; the returned
    action is the only new array (bit for bit ``tanh(x @ W)`` chained).  ``act`` is a
    closure over those buffers, made once per policy: no attribute lookups per step."""

    def __init__(self, agent: "PrunedMLP", genome: np.ndarray):
        self._mats = [genome[s].reshape(shape) for s, shape in zip(agent._slices, agent._shapes)]
        self._map = agent.action_map()
        self._discrete = agent.space.discrete
        self._x0 = np.zeros(agent._shapes[0][0])
        bufs = [np.zeros(w.shape[1]) for w in self._mats]
        ins = [self._x0, *bufs[:-1]]
        self._layers = tuple(zip(ins[:-1], self._mats[:-1], bufs[:-1]))  # (input, W, output) of hidden layers
        self._last = (ins[-1], self._mats[-1])
        self._z = bufs[-1]
        self.act = self._make_act()

    def _make_act(self):
        copyto, tanh, x0, layers, z, to_action = np.copyto, np.tanh, self._x0, self._layers, self._z, self._map.fn
        x_last, w_last = self._last

        def act(obs):
            copyto(x0, obs, casting="unsafe")
            for x, w, h in layers:
                x.dot(w, h)
                tanh(h, h)
            return to_action(x_last.dot(w_last, z))

        return act

    def reset(self) -> None:
        pass

    def act(self, obs):  # replaced per instance by the closure of _make_act
        return self._make_act()(obs)


class MLPBatchPolicy(RowsLastBatchPolicy):
    """Rows last: weights (in, out, rows), activities (units, rows); one ``einsum`` and
    one in-place :func:`synapto.fastmath.tanh_` per layer, into buffers made once per width.

    Discrete actions: float32 with certified decisions (see :mod:`agents.base`): every
    action is the one-row policy's, bit for bit.  Box actions: float64, within rounding
    of the one-row path.  Supports refilling (:meth:`load`).
    """

    def __init__(self, agent: "PrunedMLP", genomes: np.ndarray, episodes: int = 1):
        self.agent = agent
        self.genomes = genomes  # one per individual; row r runs genome r // episodes
        self.episodes = episodes
        k = genomes.shape[0]
        self.discrete = agent.space.discrete
        self.dtype = np.float32 if self.discrete else np.float64
        self.ids = np.arange(k * episodes)
        self._mats = self._w64 = None
        if self.discrete:
            layers = [(i, [(l, genomes[:, s].reshape(k, i, o))])
                      for l, (s, (i, o)) in enumerate(zip(agent._slices, agent._shapes))]
            self._a_all, self._b_all, self._a64, self._b64 = (
                np.repeat(v, episodes) for v in decision_bounds(layers, out_tanh=False))
            self.exact = ExactRows(agent, genomes, episodes)

    def _build(self) -> None:
        n, dt = len(self.ids), self.dtype
        if self._mats is None:
            self._mats = self._weights(self.ids)
        self._x0 = np.zeros((self.agent._shapes[0][0], n), dt)
        self._bufs = [np.zeros((w.shape[1], n), dt) for w in self._mats]
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
        x = self._x0
        np.copyto(x, obs.T, casting="unsafe")
        last = len(self._mats) - 1
        for i, (w, h) in enumerate(zip(self._mats, self._bufs)):
            np.einsum("ijr,ir->jr", w, x, out=h)
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
            self._w64 = [np.ascontiguousarray(self.genomes[:, s].reshape(n, *shape))
                         for s, shape in zip(self.agent._slices, self.agent._shapes)]
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


class PrunedMLP(Agent):
    name = "pruned-mlp"
    OPTIONS = {
        "init_prune": 0.25,  # fraction pruned at random in generation 0
        "min_rate": 0.001,  # bounds of the adaptive pruning rate
        "max_rate": 0.0125,
    }

    def __init__(self, space, hidden, options=None):
        super().__init__(space, hidden, options)
        sizes = [space.obs_dim, *self.hidden, space.act_dim]
        self._shapes = layer_shapes(sizes)
        self._slices = []
        start = 0
        for a, b in self._shapes:
            self._slices.append(slice(start, start + a * b))
            start += a * b
        self._n = start

    @property
    def n_params(self) -> int:
        return self._n

    @property
    def initial_rate(self) -> float:
        return float(self.options["max_rate"])

    def init_genome(self, rng):
        keep = rng.random(self._n) >= self.options["init_prune"]
        return keep.astype(np.float64)

    def policy(self, genome):
        return MLPPolicy(self, np.array(genome, dtype=np.float64))

    def batch_policy(self, genomes, want_stats=True, episodes=1):
        return MLPBatchPolicy(self, np.asarray(genomes, dtype=np.float64), episodes)

    def groups(self):
        return [[s] for s in self._slices]

    def mutate(self, genome, stats, rate, rng):
        return genome * (rng.random(genome.shape[0]) >= rate)

    def penalty(self, genome):
        return float(np.mean([np.mean(np.abs(genome[s])) for s in self._slices]))

    def batch_penalty(self, genomes):
        """:meth:`penalty` per row, vectorised: the same reductions (row-wise means,
        then the mean of the layer means), bit for bit (tested)."""
        genomes = np.asarray(genomes, dtype=np.float64)
        means = np.stack([np.abs(genomes[:, s]).mean(axis=1) for s in self._slices], axis=1)
        return means.mean(axis=1)

    def next_rate(self, rate, elite_connections, mean_connections):
        if mean_connections <= 0:
            return float(self.options["min_rate"])
        spread = np.sqrt(np.mean((np.asarray(elite_connections, float) - mean_connections) ** 2))
        return float(np.clip(spread / mean_connections, self.options["min_rate"], self.options["max_rate"]))
