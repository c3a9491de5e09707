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
``H`` the running trace; then the traces are updated per step.  Two options shape
that update (their defaults are the reference's): ``trace_decay = d`` makes the
trace a running average, ``H <- (1 - d) H + outer(...)`` (0: a sum over the whole
episode, which grows with its length), and ``plastic_pruned = false`` keeps the
trace of a pruned connection at 0, so that a pruned connection carries nothing
(true: ``m * H`` acts on pruned connections too, as in the reference).  ``trace_norm = true``
is per-layer normalisation: after each step's update, the stacked trace ``H_i`` of target
layer ``i`` is scaled down to the Frobenius norm of that layer's evolved weights ``W_i``
where it exceeds it, ``H_i <- H_i * min(1, ||W_i|| / ||H_i||)``, so that the plastic part
never outweighs the evolved one and ``||W_i + m H_i|| <= 2 ||W_i||`` (``|m| <= 1``).  Without
it the update feeds back through ``W + m H`` and grows geometrically on long episodes
(BipedalWalker's 1,600 steps overflow even with a trace decay); a study of Hebbian plastic
networks on legged robots needed such a normalisation for the same reason (arXiv 2503.12406).

Pruning (:meth:`HebbianDAG.mutate`): in each block, every surviving connection is
pruned with probability ``softmax(-stat) * prune_rate * n_surviving`` (weak
Hebbian activity -> more likely pruned; the mean probability is ``prune_rate``);
then, with probability 1/2, a further ``random_prune`` uniform pruning.  The softmax
runs over surviving connections only: in the reference, already-pruned connections
(trace 0) soaked up most of the pruning budget.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from synapto.agents.base import Agent, Block, GenomeLayout, Policy, check_fraction
from synapto.agents.batched.dag import DAGBatchPolicy


class DAGPolicy(Policy):
    """Per step, without neuromodulation: the observation is copied into a work
    vector holding every unit's activity, then one ``dot`` and one in-place ``tanh``
    per layer through views made once; the activity is copied into a ring of
    ``RING`` preallocated rows, flushed into the episode record every ``RING``
    steps.  The returned action is the only array allocated per step."""

    RING = 64

    def __init__(self, agent: HebbianDAG, genome: np.ndarray):
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
        self._layers = tuple(
            (x[: self.cum[i + 1]], w, x[self.cum[i + 1] : self.cum[i + 2]]) for i, w in enumerate(self.mats)
        )
        self._x_out = x[self.out_lo :]
        self._ring = np.zeros((self.RING, units))
        self._ring_rows = list(self._ring)
        self._k = 0  # rows of the ring in use
        if self.neuromodulate:  # traces per step; no activity record
            self._traces = [np.zeros(m.shape) for m in self.mats]
            self._mod = 0.0
            self._keep = 1.0 - float(agent.options["trace_decay"])
            self._masks = None if agent.options["plastic_pruned"] else [m != 0 for m in self.mats]
            self._caps = [float(np.linalg.norm(m)) for m in self.mats] if agent.options["trace_norm"] else None
            self.act = self._act_modulated_step  # type: ignore[method-assign]  # the per-instance fast path
        else:
            self.act = self._make_act()  # type: ignore[method-assign]

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
        self._acts[t0 : t0 + k] = self._ring[:k]
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
            if self._keep != 1.0:
                h *= self._keep
            # per-block contribution x_j @ W_ij, broadcast back to the block's rows
            for j in range(i + 1):
                r0, r1 = cum[j], cum[j + 1]
                h[r0:r1] += np.outer(x[r0:r1], contrib[r0:r1].sum(axis=0))
            if self._masks is not None:
                h *= self._masks[i]
            if self._caps is not None:
                norm = float(np.sqrt(np.vdot(h, h)))
                if norm > self._caps[i]:
                    h *= self._caps[i] / norm
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


class HebbianDAG(Agent):
    name = "hebbian-dag"
    traces = True
    OPTIONS: ClassVar[dict[str, Any]] = {
        "init_prune": 0.025,  # fraction pruned at random in generation 0
        "prune_rate": 0.01,  # mean probability of Hebbian pruning per generation
        "random_prune": 0.01,  # extra uniform pruning, applied with probability 1/2
        "neuromodulate": False,  # effective weights W + m * H (see module docstring)
        "trace_decay": 0.0,  # neuromodulate: H <- (1 - trace_decay) H + outer(...) every step
        "plastic_pruned": True,  # neuromodulate: m * H acts on pruned connections too (the reference)
        "trace_norm": False,  # neuromodulate: each layer's trace kept within the norm of its weights
    }

    def __init__(self, space, hidden, options=None):
        super().__init__(space, hidden, options)  # types checked there
        check_fraction(self.options, "init_prune", below_one=True)
        check_fraction(self.options, "random_prune", below_one=True)
        check_fraction(self.options, "prune_rate")
        check_fraction(self.options, "trace_decay", below_one=True)
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
    def initial_rate(self) -> float:  # type: ignore[override]  # Agent's is a plain attribute: subclasses may set it
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

    def layout(self):
        blocks = tuple(
            Block(j, i + 1, s, (self.sizes[j], self.sizes[i + 1]))
            for i, group in enumerate(self._blocks)
            for j, s in enumerate(group)
        )
        labels = ("mod", *(f"a{k}" for k in range(self.sizes[-1] - 1)))
        return GenomeLayout(
            tuple(self.sizes),
            blocks,
            labels,
            modulation_unit=True,
            inert_outputs=() if self.options["neuromodulate"] else (0,),
        )

    def prune_probabilities(self, genome: np.ndarray, stats: np.ndarray, rate: float) -> np.ndarray:
        """Per-connection probability of Hebbian pruning (0 for pruned connections): within
        each block, a softmax of the negated statistics of its surviving connections, times
        ``rate`` times their count, at most 1.  Spelled out rather than through helpers, since
        the GA calls it for every child (the same operations in the same order)."""
        p = np.zeros(self._n)
        for group in self._blocks:
            for s in group:
                alive = np.asarray(genome[s]).nonzero()[0]
                if alive.size:
                    alive += s.start
                    x = -stats[alive]
                    z = np.exp(x - x.max())
                    p[alive] = np.minimum(z / z.sum() * rate * alive.size, 1.0)
        return p

    def mutate(self, genome, stats, rate, rng):
        if stats is None:
            stats = np.zeros(self._n)
        p = self.prune_probabilities(genome, stats, rate)
        child = genome * (rng.random(self._n) >= p)
        if rng.random() < 0.5:
            child = child * (rng.random(self._n) >= self.options["random_prune"])
        return child
