"""The agent interface: the plug-in point for ``--agent package.module:Class``.

An agent describes a family of networks for one environment.  Its genomes are flat
``float64`` arrays of length :attr:`Agent.n_params`; a connection is *pruned* when
its weight is exactly 0, and pruned connections never come back.  Agents know
networks, not populations: selection, the hall of fame and the generation loop are
generic (:mod:`synapto.evolution`).  An agent supplies

* :meth:`Agent.init_genome`  -- a genome of generation 0, from the given Generator;
* :meth:`Agent.policy`       -- a :class:`Policy` that acts in the environment;
* :meth:`Agent.mutate`       -- pruning (and nothing else), using per-connection
  statistics that the policy collected while it was evaluated;
* :meth:`Agent.groups`       -- the units swapped by recombination;
* :meth:`Agent.penalty`      -- a complexity penalty subtracted from fitness;
* :meth:`Agent.next_rate`    -- the pruning rate of the next generation;
* :meth:`Agent.layout`       -- optional: where each weight matrix lives in the genome
  (a :class:`GenomeLayout`), for ``synapto draw``.

All randomness comes from the ``np.random.Generator`` passed in; an agent never
touches global random state.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from synapto.common.errors import UsageError, option
from synapto.envs import SpaceInfo


@dataclass(frozen=True)
class Block:
    """One weight matrix of a genome: the connections from layer ``source`` to layer
    ``target`` (layer 0 is the observation).  Its weights are
    ``genome[index].reshape(shape)``, rows for the source's units, columns for the
    target's."""

    source: int
    target: int
    index: slice
    shape: tuple[int, int]


@dataclass(frozen=True)
class GenomeLayout:
    """A layered network read off a genome: units per layer (observation first, outputs
    last), the weight matrices, and a name for each output unit."""

    sizes: tuple[int, ...]
    blocks: tuple[Block, ...]
    output_labels: tuple[str, ...]
    modulation_unit: bool = False  #: output unit 0 modulates plasticity (not an action)
    #: output units whose value never reaches an action (the modulation unit of an agent that
    #: does not modulate): connections into them are inert
    inert_outputs: tuple[int, ...] = ()


class Policy(ABC):
    """One genome acting in an environment, episode after episode."""

    @abstractmethod
    def reset(self) -> None:
        """Start an episode: clear every per-episode state (e.g. Hebbian traces)."""

    @abstractmethod
    def act(self, obs: np.ndarray) -> Any:
        """The action for observation ``obs`` (an int for Discrete spaces)."""

    def end_episode(self) -> None:
        """Finish an episode's bookkeeping (called after its last step)."""

    def trace_stats(self) -> np.ndarray | None:
        """Per-connection statistics (genome layout) for :meth:`Agent.mutate`, or None."""
        return None


class BatchPolicy(ABC):
    """Optional: many genomes acting in lockstep, one row (a sub-environment running one
    episode) each; see :meth:`Agent.batch_policy` and :mod:`synapto.evolution.worker.batched`.

    Rows are numbered as in the genomes given to :meth:`Agent.batch_policy`; after
    :meth:`keep` the current rows are a subset, in the same relative order.
    """

    @abstractmethod
    def act(self, obs: np.ndarray) -> np.ndarray:
        """Actions for the current rows' observations ``obs`` (rows, obs_dim):
        ints (rows,) for Discrete spaces, floats (rows, act_dim) for Box."""

    @abstractmethod
    def keep(self, rows: np.ndarray) -> None:
        """Drop every current row but ``rows`` (indices into the current rows)."""

    # Optional: ``load(slots, rows)`` -- current rows ``slots`` (whose episodes ended) now
    # run the original rows ``rows`` from the start of an episode.  Policies that have it
    # are refilled as episodes end (see :mod:`synapto.evolution.worker.batched`).

    def end_episodes(self, rows: np.ndarray) -> None:
        """The episodes of current rows ``rows`` ended with the last step."""

    def trace_stats(self) -> np.ndarray | None:
        """Per-row statistics (original rows, n_params) summed over ended episodes, or None."""
        return None


class Agent(ABC):
    """A family of networks for one environment (see the module docstring)."""

    #: short name written to run files
    name: ClassVar[str] = "agent"
    #: options accepted from the config's ``agent_options`` table, with defaults; a value given
    #: for an option whose default is a bool, an int or a float must be one too (a finite number
    #: for a float; true or false, never a word, for a bool), else it is refused in one line
    OPTIONS: ClassVar[dict[str, Any]] = {}
    #: whether the policy's :meth:`Policy.trace_stats` are Hebbian traces (pruning by trace needs them)
    traces: ClassVar[bool] = False

    def __init__(self, space: SpaceInfo, hidden: tuple[int, ...], options: Mapping[str, Any] | None = None):
        hidden = tuple(int(h) for h in hidden)
        if any(h <= 0 for h in hidden):
            raise UsageError(f"{option('hidden')} sizes must be positive integers, got {list(hidden)}")
        self.space = space
        self.hidden = hidden
        options = dict(options or {})
        unknown = sorted(set(options) - set(self.OPTIONS))
        if unknown:
            raise UsageError(
                f"agent {self.name!r} has no option(s) {', '.join(unknown)}; "
                f"known: {', '.join(sorted(self.OPTIONS)) or 'none'}"
            )
        for key, value in options.items():
            check_option_type(key, value, self.OPTIONS[key])
        self.options = {**self.OPTIONS, **options}

    # -- genome ---------------------------------------------------------------
    @property
    @abstractmethod
    def n_params(self) -> int:
        """Length of a genome."""

    @abstractmethod
    def init_genome(self, rng: np.random.Generator) -> np.ndarray:
        """A generation-0 genome."""

    @abstractmethod
    def policy(self, genome: np.ndarray) -> Policy:
        """A policy running ``genome`` (the genome is not modified)."""

    def batch_policy(self, genomes: np.ndarray, want_stats: bool = True, episodes: int = 1) -> BatchPolicy | None:
        """Optional: a :class:`BatchPolicy` running ``genomes`` (K, n_params) in lockstep,
        each for ``episodes`` consecutive rows (row ``r`` runs genome ``r // episodes``),
        or None (the default): this agent cannot be evaluated batched.  Agents written
        for the former signature (no ``episodes``) are given repeated genomes."""
        return None

    @abstractmethod
    def groups(self) -> list[list[slice]]:
        """Recombination units: groups (e.g. all inputs of a layer) of matrices (slices)."""

    @abstractmethod
    def mutate(self, genome: np.ndarray, stats: np.ndarray | None, rate: float, rng: np.random.Generator) -> np.ndarray:
        """A pruned copy of ``genome``; ``stats`` are its policy's trace statistics."""

    def connections(self, genome: np.ndarray) -> int:
        """Number of surviving (non-zero) connections."""
        return int(np.count_nonzero(genome))

    def penalty(self, genome: np.ndarray) -> float:
        """Complexity penalty subtracted from the mean episode return."""
        return 0.0

    def batch_penalty(self, genomes: np.ndarray) -> np.ndarray:
        """:meth:`penalty` of every row of ``genomes``, bit for bit (agents may vectorise)."""
        return np.array([self.penalty(g) for g in genomes], dtype=np.float64)

    def layout(self) -> GenomeLayout | None:
        """Where each weight matrix lives in the genome (None: not a layered network)."""
        return None

    initial_rate: float = 0.01

    def next_rate(self, rate: float, elite_connections: np.ndarray, mean_connections: float) -> float:
        """Pruning rate for the next generation (constant unless overridden)."""
        return rate

    # -- actions --------------------------------------------------------------
    def output_to_action(self, out: np.ndarray):
        """Map a network output to an env action: argmax for Discrete; tanh for Box,
        scaled to the action bounds when they are finite and not [-1, 1]."""
        if self.space.discrete:
            return int(np.argmax(out))
        a = np.tanh(out)
        if self._bounds is not None:
            lo, hi = self._bounds
            a = lo + (a + 1.0) * 0.5 * (hi - lo)
        return a

    def action_map(self) -> ActionMap:
        """A callable doing :meth:`output_to_action` with preallocated scratch buffers
        (for a policy's per-step path; one per policy)."""
        return ActionMap(self)

    @property
    def action_bounds(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``(low, high)`` that :meth:`output_to_action` scales to, or None (Discrete, or [-1, 1])."""
        return None if self.space.discrete else self._bounds

    @property
    def _bounds(self):
        cached = self.__dict__.get("_bounds_cache", False)
        if cached is not False:
            return cached
        lo, hi = self.space.low, self.space.high
        bounds = None
        if (
            lo is not None
            and hi is not None
            and np.all(np.isfinite(lo))
            and np.all(np.isfinite(hi))
            and not (np.all(lo == -1.0) and np.all(hi == 1.0))
        ):
            bounds = (lo, hi)
        self.__dict__["_bounds_cache"] = bounds
        return bounds


class ActionMap:
    """:meth:`Agent.output_to_action` for the per-step path, bit for bit the same.

    The only array allocated per call is the returned action (the caller keeps
    it; a policy must not hand out an array it will overwrite later).  Scaling to
    finite bounds runs in place in a scratch buffer, in the same operation order
    as :meth:`Agent.output_to_action`.
    """

    __slots__ = ("_lo", "_span", "_tmp", "discrete", "fn")

    def __init__(self, agent: Agent):
        self.discrete = agent.space.discrete
        bounds = None if self.discrete else agent._bounds
        self._lo = self._span = self._tmp = None
        if bounds is not None:
            lo, hi = bounds
            self._lo, self._span = lo, hi - lo
            self._tmp = np.zeros(lo.shape)
        #: the cheapest callable doing the same (no method dispatch, no branches): for a
        #: per-step path to bind once
        self.fn = self._argmax if self.discrete else np.tanh if self._tmp is None else self.__call__

    @staticmethod
    def _argmax(out: np.ndarray) -> int:
        return int(out.argmax())

    def __call__(self, out: np.ndarray):
        if self.discrete:
            return int(out.argmax())
        if self._tmp is None:
            return np.tanh(out)
        t = self._tmp
        np.tanh(out, t)
        t += 1.0
        t *= 0.5
        t *= self._span
        return self._lo + t


def layer_shapes(sizes: list[int]) -> list[tuple[int, int]]:
    return [(sizes[i], sizes[i + 1]) for i in range(len(sizes) - 1)]


def check_option_type(name: str, value: Any, default: Any) -> None:
    """Refuse an agent option ``name = value`` whose type is not its ``default``'s (see
    :attr:`Agent.OPTIONS`): ``neuromodulate = "no"`` would otherwise be a true value."""
    if isinstance(default, bool):
        ok, want = isinstance(value, bool), "true or false"
    elif isinstance(default, int):
        ok, want = isinstance(value, int) and not isinstance(value, bool), "an integer"
    elif isinstance(default, float):
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        ok, want = number and math.isfinite(value), "a finite number"
    else:
        return
    if not ok:
        raise UsageError(f"agent option {name} must be {want}, got {value!r}")


def check_fraction(options: Mapping[str, Any], name: str, below_one: bool = False) -> None:
    """Refuse an agent option ``name`` (a number, see :func:`check_option_type`) outside
    [0, 1], or [0, 1) with ``below_one`` (a fraction of connections pruned at once: 1
    would prune them all)."""
    value = options[name]
    if not (0 <= value < 1 if below_one else 0 <= value <= 1):
        raise UsageError(f"agent option {name} must be in [0, {'1)' if below_one else '1]'}, got {value!r}")
