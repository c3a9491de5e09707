"""``hebbian-dag``: the reference's HebbianDAG, with its defects fixed.

Layers ``[obs, *hidden, act + 1]``; every layer receives from *all* earlier layers
(a DAG with skip connections), one weight matrix per (source, target) pair, no
biases, tanh units everywhere.  Output unit 0 is the neuromodulatory unit; the
action is read from units 1.. (tanh, scaled to the bounds; argmax if Discrete).

Genome layout: for each target layer ``i`` one stacked matrix of shape
``(units of layers 0..i, size of layer i+1)``; the rows of source layer ``j`` are
the block ``(i, j)``.  The forward pass is thus one matrix product per layer.

Hebbian traces.  The trace of block ``(i, j)`` accumulates, over the steps of an
episode, ``outer(x_j, x_j @ W_ij)``: presynaptic activity times the connection's
contribution.  Traces start at zero every episode (the reference leaked them
across individuals and episodes).  The statistic the policy returns is the mean
over episodes of ``|trace at episode end|``, one number per connection, and it
travels back to the coordinator with the fitness (the reference's coordinator
pruned with its own all-zero traces, i.e. uniformly).  Without neuromodulation the
traces do not affect actions, so they are computed once per episode from the
recorded activations (two small matrix products per block), not per step.

With ``neuromodulate = true`` the effective weights are ``W + m * H`` where ``m``
is the modulation unit's output at the previous step (0 at episode start) and
``H`` the running trace; then the traces are updated per step.

Pruning (:meth:`HebbianDAG.mutate`): in each block, every surviving connection is
pruned with probability ``softmax(-stat) * prune_rate * n_surviving`` (weak
Hebbian activity -> more likely pruned; the mean probability is ``prune_rate``);
then, with probability 1/2, a further ``random_prune`` uniform pruning.  The softmax
runs over surviving connections only: in the reference, already-pruned connections
(trace 0) soaked up most of the pruning budget.
"""

from __future__ import annotations

import numpy as np

from agents.base import (Agent, ExactRows, Policy, argmax_margin, batch_actions, certify, decision_bounds,
                         RowsLastBatchPolicy)
from synapto.fastmath import tanh_


def _softmax(x: np.ndarray) -> np.ndarray:
    z = np.exp(x - np.max(x))
    return z / z.sum()


class DAGPolicy(Policy):
    """Per step, without neuromodulation: the observation is copied into a work
    vector holding every unit's activity, then one ``dot`` and one in-place ``tanh``
    per layer through views made once; the activity is copied into a ring of
    ``RING`` preallocated rows, flushed into the episode record every ``RING``
    steps.  The returned action is the only array allocated per step."""

    RING = 64

    def __init__(self, agent: "HebbianDAG", genome: np.ndarray):
        self.agent = agent
        self.genome = genome
        self.mats = [genome[s].reshape(shape) for s, shape in zip(agent._slices, agent._shapes)]
        self.cum = agent._cum
        self.obs_dim = agent.sizes[0]
        self.out_lo = agent._cum[-2] + 1  # skip the modulation unit
        self.neuromodulate = bool(agent.options["neuromodulate"])
        self._map = agent.action_map()
        units = agent._cum[-1]
        # the episode's record (rows 0.._t-1), doubled when an episode outgrows it
        self._rows = min(256, max(16, agent.space.max_episode_steps or 1000))
        self._acts = np.zeros((self._rows, units))
        self._t = 0
        self._stats = np.zeros(agent.n_params)
        self._episodes = 0
        # per-step work: the current activity and views of it made once
        x = self._x = np.zeros(units)
        self._x_obs = x[: self.obs_dim]
        self._layers = tuple((x[: self.cum[i + 1]], w, x[self.cum[i + 1]: self.cum[i + 2]])
                             for i, w in enumerate(self.mats))
        self._x_out = x[self.out_lo:]
        self._ring = np.zeros((self.RING, units))
        self._ring_rows = list(self._ring)
        self._k = 0  # rows of the ring in use
        if self.neuromodulate:  # traces per step; no activity record
            self._traces = [np.zeros(m.shape) for m in self.mats]
            self._mod = 0.0
            self.act = self._act_modulated_step
        else:
            self.act = self._make_act()

    def reset(self) -> None:
        self._t = 0
        self._k = 0
        if self.neuromodulate:
            for h in self._traces:
                h[:] = 0.0
            self._mod = 0.0

    def _flush(self) -> None:
        """Move the ring's rows to the episode record (growing it as needed)."""
        k, t0 = self._k, self._t - self._k
        if t0 + k > self._rows:
            grow = max(self._rows, t0 + k - self._rows)
            self._acts = np.concatenate([self._acts, np.zeros((grow, self._acts.shape[1]))])
            self._rows += grow
        self._acts[t0:t0 + k] = self._ring[:k]
        self._k = 0

    def _make_act(self):
        """The per-step ``act``: a closure over the buffers and views (no attribute
        lookups but the ring position)."""
        copyto, tanh, x, x_obs, layers = np.copyto, np.tanh, self._x, self._x_obs, self._layers
        ring_rows, ring, flush, x_out, to_action = self._ring_rows, self.RING, self._flush, self._x_out, self._map.fn

        def act(obs):
            copyto(x_obs, obs, casting="unsafe")
            for xin, w, xout in layers:
                xin.dot(w, xout)
                tanh(xout, xout)
            k = self._k
            copyto(ring_rows[k], x)
            self._t += 1
            self._k = k + 1
            if k + 1 == ring:
                flush()
            return to_action(x_out)

        return act

    def act(self, obs):  # replaced per instance (see __init__)
        return self._make_act()(obs)

    def _act_modulated_step(self, obs):
        np.copyto(self._x_obs, obs, casting="unsafe")
        self._act_modulated(self._x)
        self._t += 1
        return self._map(self._x_out)

    def _act_modulated(self, a: np.ndarray) -> None:
        cum = self.cum
        for i, (w, h) in enumerate(zip(self.mats, self._traces)):
            lo, hi = cum[i + 1], cum[i + 2]
            x = a[:lo]
            w_eff = w + self._mod * h
            contrib = x[:, None] * w_eff  # rows: presynaptic units
            a[lo:hi] = np.tanh(contrib.sum(axis=0))
            # per-block contribution x_j @ W_ij, broadcast back to the block's rows
            for j in range(i + 1):
                r0, r1 = cum[j], cum[j + 1]
                h[r0:r1] += np.outer(x[r0:r1], contrib[r0:r1].sum(axis=0))
        self._mod = float(a[cum[-2]])

    def end_episode(self) -> None:
        if self._k:
            self._flush()
        cum, stats = self.cum, self._stats
        if self.neuromodulate:
            for s, h in zip(self.agent._slices, self._traces):
                stats[s] += np.abs(h).ravel()
        else:
            x = self._acts[: self._t]
            for i, (w, s) in enumerate(zip(self.mats, self.agent._slices)):
                block = stats[s].reshape(w.shape)
                for j in range(i + 1):
                    r0, r1 = cum[j], cum[j + 1]
                    xj = x[:, r0:r1]
                    contrib = xj @ w[r0:r1]
                    block[r0:r1] += np.abs(xj.T @ contrib)
        self._episodes += 1

    def trace_stats(self):
        return self._stats / max(self._episodes, 1)


class DAGBatchPolicy(RowsLastBatchPolicy):
    """Rows last: weights (rows of the stacked matrix, out, rows), activities (units,
    rows); one ``einsum`` and one in-place :func:`synapto.fastmath.tanh_` per layer.

    Discrete actions: float32 with certified decisions (see :mod:`agents.base`): every
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

    def __init__(self, agent: "HebbianDAG", genomes: np.ndarray, want_stats: bool, episodes: int = 1):
        self.agent = agent
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
        self._mats = self._w64 = None
        if self.discrete:
            layers = []
            for i, (s, shape) in enumerate(zip(agent._slices, agent._shapes)):
                w = genomes[:, s].reshape(k, *shape)
                layers.append((shape[0], [(j, w[:, cum[j]:cum[j + 1]]) for j in range(i + 1)]))
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
        self._layers = [(w, self._x[: cum[i + 1]], self._x[cum[i + 1]: cum[i + 2]]) for i, w in enumerate(self._mats)]
        if self._stats is not None:
            if getattr(self, "_gram", None) is None or self._gram[0].shape[-1] != n:
                self._gram = [np.zeros((cum[j + 1] - cum[j],) * 2 + (n,), dt) for j in range(len(self._mats))]
            self._prod = np.zeros((max(self.agent.sizes[:-1]), n), dt)
            # per source unit a: G_j[a, a:] += x_a * x_a.. (the upper triangle)
            self._tri = [(self._x[cum[j] + a], self._x[cum[j] + a: cum[j + 1]], g[a, a:], self._prod[: cum[j + 1] - cum[j] - a])
                         for j, g in enumerate(self._gram) for a in range(cum[j + 1] - cum[j])]
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
        cum, x = self.cum, self._x
        x0 = x[: cum[1]]
        np.copyto(x0, obs.T, casting="unsafe")
        last = len(self._layers) - 1
        for i, (w, xin, h) in enumerate(self._layers):
            np.einsum("ijr,ir->jr", w, xin, out=h)
            if i < last or not self.discrete:
                tanh_(h)
        if self._stats is not None:
            for xa, xs, g, p in self._tri:
                np.multiply(xa, xs, out=p)
                g += p
        if not self.discrete:
            return batch_actions(self.agent, x[cum[-2] + 1:])
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
            self._w64 = [np.ascontiguousarray(self.genomes[:, s].reshape(k, *shape))
                         for s, shape in zip(agent._slices, agent._shapes)]
        ids = self.ids[rows]
        gi = ids // self.episodes
        x = np.zeros((len(ids), 1, cum[-1]))
        x[:, 0, : cum[1]] = obs.reshape(len(ids), -1)  # as given to act (not rounded to float32)
        m = np.abs(x[:, 0, : cum[1]]).max(axis=1)
        for i, w in enumerate(self._w64):
            h = x[:, :, cum[i + 1]: cum[i + 2]]
            np.matmul(x[:, :, : cum[i + 1]], w[gi], out=h)
            np.tanh(h, out=h)
        out = np.ascontiguousarray(x[:, 0, cum[-2] + 1:].T)
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
        for j, g in enumerate(grams):
            n = g.shape[0]
            lower = np.tril(np.ones((n, n), bool), -1)
            g[lower] = g.transpose(1, 0, 2)[lower]  # symmetric: the lower triangle from the upper
        for a in range(0, len(rows), self.FOLD_ROWS):
            part = slice(a, a + self.FOLD_ROWS)
            self._fold_rows(rows[part], [g[:, :, part] for g in grams])

    def _fold_rows(self, rows, grams) -> None:
        cum, agent = self.cum, self.agent
        k = len(rows)
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


class HebbianDAG(Agent):
    name = "hebbian-dag"
    OPTIONS = {
        "init_prune": 0.025,  # fraction pruned at random in generation 0
        "prune_rate": 0.01,  # mean probability of Hebbian pruning per generation
        "random_prune": 0.01,  # extra uniform pruning, applied with probability 1/2
        "neuromodulate": False,  # effective weights W + m * H (see module docstring)
    }

    def __init__(self, space, hidden, options=None):
        super().__init__(space, hidden, options)
        self.sizes = [space.obs_dim, *self.hidden, space.act_dim + 1]
        self._cum = np.concatenate([[0], np.cumsum(self.sizes)]).astype(int).tolist()
        self._shapes, self._slices, self._blocks = [], [], []
        start = 0
        for i in range(len(self.sizes) - 1):
            rows, cols = self._cum[i + 1], self.sizes[i + 1]
            self._shapes.append((rows, cols))
            self._slices.append(slice(start, start + rows * cols))
            self._blocks.append(
                [slice(start + self._cum[j] * cols, start + self._cum[j + 1] * cols) for j in range(i + 1)]
            )
            start += rows * cols
        self._n = start

    @property
    def n_params(self) -> int:
        return self._n

    @property
    def initial_rate(self) -> float:
        return float(self.options["prune_rate"])

    def init_genome(self, rng):
        genome = rng.standard_normal(self._n)
        return genome * (rng.random(self._n) >= self.options["init_prune"])

    def policy(self, genome):
        return DAGPolicy(self, np.array(genome, dtype=np.float64))

    def batch_policy(self, genomes, want_stats=True, episodes=1):
        if self.options["neuromodulate"]:
            return None  # traces change the weights every step: one-at-a-time only
        return DAGBatchPolicy(self, np.asarray(genomes, dtype=np.float64), want_stats, episodes)

    def groups(self):
        return self._blocks

    def prune_probabilities(self, genome: np.ndarray, stats: np.ndarray, rate: float) -> np.ndarray:
        """Per-connection probability of Hebbian pruning (0 for pruned connections)."""
        p = np.zeros(self._n)
        for group in self._blocks:
            for s in group:
                alive = np.flatnonzero(genome[s]) + s.start
                if alive.size:
                    p[alive] = np.minimum(_softmax(-stats[alive]) * rate * alive.size, 1.0)
        return p

    def mutate(self, genome, stats, rate, rng):
        if stats is None:
            stats = np.zeros(self._n)
        p = self.prune_probabilities(genome, stats, rate)
        child = genome * (rng.random(self._n) >= p)
        if rng.random() < 0.5:
            child = child * (rng.random(self._n) >= self.options["random_prune"])
        return child
