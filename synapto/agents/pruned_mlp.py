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

from typing import Any, ClassVar

import numpy as np

from synapto.agents.base import Agent, Block, GenomeLayout, Policy, check_fraction, layer_shapes
from synapto.agents.batched.mlp import MLPBatchPolicy
from synapto.common.errors import UsageError


class MLPPolicy(Policy):
    """Per step: the observation is copied into a float64 buffer, then one ``dot``
    and one in-place ``tanh`` per layer into preallocated buffers; the returned
    action is the only new array (bit for bit ``tanh(x @ W)`` chained).  ``act`` is a
    closure over those buffers, made once per policy: no attribute lookups per step."""

    def __init__(self, agent: PrunedMLP, genome: np.ndarray):
        self._mats = [genome[s].reshape(shape) for s, shape in zip(agent._slices, agent._shapes)]
        self._map = agent.action_map()
        self._discrete = agent.space.discrete
        self._x0 = np.zeros(agent._shapes[0][0])
        bufs = [np.zeros(w.shape[1]) for w in self._mats]
        ins = [self._x0, *bufs[:-1]]
        self._layers = tuple(zip(ins[:-1], self._mats[:-1], bufs[:-1]))  # (input, W, output) of hidden layers
        self._last = (ins[-1], self._mats[-1])
        self._z = bufs[-1]
        self.act = self._make_act()  # type: ignore[method-assign]  # the per-instance fast path

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


class PrunedMLP(Agent):
    name = "pruned-mlp"
    OPTIONS: ClassVar[dict[str, Any]] = {
        "init_prune": 0.25,  # fraction pruned at random in generation 0
        "min_rate": 0.001,  # bounds of the adaptive pruning rate
        "max_rate": 0.0125,
    }

    def __init__(self, space, hidden, options=None):
        super().__init__(space, hidden, options)
        check_fraction(self.options, "init_prune", below_one=True)
        check_fraction(self.options, "min_rate")
        check_fraction(self.options, "max_rate")
        if self.options["min_rate"] > self.options["max_rate"]:
            raise UsageError(
                f"agent option min_rate must not exceed max_rate ({self.options['max_rate']!r}), "
                f"got {self.options['min_rate']!r}"
            )
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
    def initial_rate(self) -> float:  # type: ignore[override]  # Agent's is a plain attribute: subclasses may set it
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

    def layout(self):
        sizes = (self._shapes[0][0], *(b for _, b in self._shapes))
        return GenomeLayout(
            sizes,
            tuple(Block(i, i + 1, s, shape) for i, (s, shape) in enumerate(zip(self._slices, self._shapes))),
            tuple(f"a{k}" for k in range(sizes[-1])),
        )

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
