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
* :meth:`Agent.next_rate`    -- the pruning rate of the next generation.

All randomness comes from the ``np.random.Generator`` passed in; an agent never
touches global random state.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Mapping

import numpy as np

from synapto.envs import SpaceInfo
from synapto.errors import UsageError


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
    episode) each; see :meth:`Agent.batch_policy` and :mod:`synapto.evolution.batched`.

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
    # are refilled as episodes end (see :mod:`synapto.evolution.batched`).

    def end_episodes(self, rows: np.ndarray) -> None:
        """The episodes of current rows ``rows`` ended with the last step."""

    def trace_stats(self) -> np.ndarray | None:
        """Per-row statistics (original rows, n_params) summed over ended episodes, or None."""
        return None


class RowsLastBatchPolicy(BatchPolicy):
    """The row bookkeeping the built-in batched policies share: weights stored rows last
    (``(in, out, rows)`` per matrix, in :attr:`dtype`), current rows :attr:`ids` (original
    row numbers; row ``r`` runs genome ``r // episodes``), compaction (:meth:`keep`),
    refilling (:meth:`load`) and, for Discrete actions, the certified-decision bounds
    ``_a_all``/``_b_all`` and the one-row fallback :attr:`exact`.  Subclasses set those
    in ``__init__`` and implement ``_build`` (buffers for the current width) and ``act``;
    ``_keep_rows``/``_load_rows`` are hooks for per-row state of their own."""

    agent: "Agent"
    genomes: np.ndarray
    episodes: int
    dtype: type
    discrete: bool
    ids: np.ndarray
    _mats: list | None

    def _weights(self, rows) -> list[np.ndarray]:
        g = self.genomes[rows // self.episodes]
        return [np.ascontiguousarray(g[:, s].reshape(len(rows), *shape).transpose(1, 2, 0), dtype=self.dtype)
                for s, shape in zip(self.agent._slices, self.agent._shapes)]

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


class Agent(ABC):
    """A family of networks for one environment (see the module docstring)."""

    #: short name written to run files
    name: ClassVar[str] = "agent"
    #: options accepted from the config's ``agent_options`` table, with defaults
    OPTIONS: ClassVar[dict[str, Any]] = {}

    def __init__(self, space: SpaceInfo, hidden: tuple[int, ...], options: Mapping[str, Any] | None = None):
        hidden = tuple(int(h) for h in hidden)
        if any(h <= 0 for h in hidden):
            raise UsageError(f"--hidden sizes must be positive integers, got {list(hidden)}")
        self.space = space
        self.hidden = hidden
        options = dict(options or {})
        unknown = sorted(set(options) - set(self.OPTIONS))
        if unknown:
            raise UsageError(
                f"agent {self.name!r} has no option(s) {', '.join(unknown)}; "
                f"known: {', '.join(sorted(self.OPTIONS)) or 'none'}"
            )
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
    def mutate(self, genome: np.ndarray, stats: np.ndarray | None, rate: float,
               rng: np.random.Generator) -> np.ndarray:
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

    def action_map(self) -> "ActionMap":
        """A callable doing :meth:`output_to_action` with preallocated scratch buffers
        (for a policy's per-step path; one per policy)."""
        return ActionMap(self)

    @property
    def _bounds(self):
        cached = self.__dict__.get("_bounds_cache", False)
        if cached is not False:
            return cached
        lo, hi = self.space.low, self.space.high
        bounds = None
        if lo is not None and np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) \
                and not (np.all(lo == -1.0) and np.all(hi == 1.0)):
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

    __slots__ = ("discrete", "_lo", "_span", "_tmp", "fn")

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


# -- certified float32 decisions -------------------------------------------------
#
# A batched policy for a Discrete action space runs its forward pass in float32 (about
# 3x faster than float64 in numpy) and takes the float32 argmax only where it is
# *certified* to be the one-row path's float64 argmax: the margin between the best and
# the second-best output exceeds an upper bound on the difference between the two
# computations.  The other rows are recomputed in float64 (their own, much smaller
# bound), and rows that this cannot certify either (exact ties, non-finite values) take
# the agent's one-row policy's action.  Batched actions, returns and fitness are then
# those of one env at a time, bit for bit.
#
# The bound, per unit: a layer with ``n`` inputs sums products of float32-rounded
# weights and inputs (observations rounded at most once), in any order, so its
# pre-activation is off by at most ``sum_j |W_j|^T e_j + (n + 3) u (|W_0|^T 1 m +
# sum_{j>0} |W_j|^T 1)``: source ``j`` = 0 is the observation (largest magnitude ``m``,
# no error), ``j`` > 0 a tanh layer (values in [-1, 1], error ``e_j`` per unit), ``u`` the
# unit roundoff; tanh adds its own error and is 1-Lipschitz.  The one-row float64 path
# obeys the same bound with float64's ``u``, so the sum of both uses ``u = U32 + U64``.
# Everything is linear in ``m``: per row, ``bound = a m + b`` with ``a`` and ``b``
# computed once from the weights; the margin's bound adds the two largest outputs'.

U32 = 2.0 ** -24  #: float32 unit roundoff
U64 = 2.0 ** -53  #: float64 unit roundoff
#: absolute error bound of :func:`synapto.fastmath.tanh_` in float32 (3.1 u measured; the tests check it)
TANH32_ERR = 16 * U32
#: absolute error bound of ``np.tanh`` in float64 (the one-row path)
TANH64_ERR = 4 * U64
#: factor on the bound (it is rounded to float32 and evaluated in float32)
BOUND_SAFETY = 1.25


def decision_bound(layers, out_tanh: bool, u: float = U32 + U64,
                   tanh_err: float = TANH32_ERR + TANH64_ERR) -> tuple[np.ndarray, np.ndarray]:
    """Per-row ``(a, b)`` with ``|margin_fast - margin_exact| <= a * m + b`` (see above).

    ``layers``: per layer ``(n_in, sources)``, ``sources`` a list of ``(j, W)`` with
    ``j`` = 0 for the observation and ``j`` = k for the output of layer ``k - 1`` (a
    tanh layer) and ``W`` (rows, inputs from j, out) the weights from that source.
    Hidden layers are tanh; the last one too if ``out_tanh``.  Error bounds propagate
    per unit (``|W|^T e``), and the margin's bound is the sum of the two largest
    output bounds.  ``u`` and ``tanh_err``: the sums for the two computations compared
    (default: float32 against float64).
    """
    err = {0: None}  # source -> (a, b) per unit (rows, units): error <= a m + b
    a = b = None
    for i, (n_in, sources) in enumerate(layers):
        c = (n_in + 3) * u
        a = b = 0.0
        for j, w in sources:
            aw = np.abs(w)
            col = aw.sum(axis=1)  # (rows, out)
            if j == 0:
                a = a + c * col
            else:
                ea, eb = err[j]
                a = a + np.einsum("ri,rio->ro", ea, aw)
                b = b + np.einsum("ri,rio->ro", eb, aw) + c * col
        if i < len(layers) - 1 or out_tanh:
            b = b + tanh_err
        err[i + 1] = (np.broadcast_to(a, col.shape), np.broadcast_to(b, col.shape))
    a, b = err[len(layers)]
    if a.shape[1] > 1:  # the two largest per row
        a = np.sort(a, axis=1)[:, -2:].sum(axis=1)
        b = np.sort(b, axis=1)[:, -2:].sum(axis=1)
    else:
        a, b = a[:, 0] * 2, b[:, 0] * 2
    return np.asarray(BOUND_SAFETY * a, dtype=np.float64), np.asarray(BOUND_SAFETY * b, dtype=np.float64)


def decision_bounds(layers, out_tanh: bool):
    """``(a32, b32, a64, b64)``: :func:`decision_bound` of the float32 pass (as float32)
    and of the float64 refinement (see :func:`certify`) against the one-row path."""
    a, b = decision_bound(layers, out_tanh)
    a64, b64 = decision_bound(layers, out_tanh, 2 * U64, 2 * TANH64_ERR)
    return a.astype(np.float32), b.astype(np.float32), a64, b64


class ExactRows:
    """The one-row policies of rows whose float32 decision is not certified, made on
    first need and dropped when the row's episode ends."""

    def __init__(self, agent: "Agent", genomes: np.ndarray, episodes: int = 1):
        self.agent = agent
        self.genomes = genomes  # row r runs genome r // episodes
        self.episodes = episodes
        self.policies: dict[int, Policy] = {}
        self.calls = 0  #: actions taken by one-row policies (diagnostics)

    def act(self, row: int, obs: np.ndarray):
        p = self.policies.get(row)
        if p is None:
            p = self.policies[row] = self.agent.policy(self.genomes[row // self.episodes])
            p.reset()
        self.calls += 1
        return p.act(obs)

    def drop(self, rows) -> None:
        if self.policies:
            for r in rows:
                self.policies.pop(int(r), None)


def argmax_margin(out: np.ndarray, action: np.ndarray, margin: np.ndarray, tmp: np.ndarray) -> None:
    """Rows-last outputs ``out`` (k, rows): ``action`` = first argmax (``np.argmax`` of
    finite values), ``margin`` = best minus second best (NaN or inf when a value is
    not finite: never certified).  ``tmp`` (2, rows) scratch."""
    k = out.shape[0]
    if k == 1:
        action[:] = 0
        margin[:] = np.finfo(margin.dtype).max  # one choice: always certified
        return
    if k == 2:
        np.subtract(out[1], out[0], out=margin)
        np.greater(margin, 0.0, out=action, casting="unsafe")
        np.abs(margin, out=margin)
        return
    best, second = tmp[0], tmp[1]
    np.copyto(best, out[0])
    second[:] = -np.inf
    action[:] = 0
    gt = np.empty(out.shape[1], dtype=bool)
    for j in range(1, k):
        np.greater(out[j], best, out=gt)
        np.maximum(second, np.where(gt, best, out[j]), out=second)
        np.copyto(best, out[j], where=gt)
        action[gt] = j
    np.subtract(best, second, out=margin)
    margin += np.add.reduce(out, axis=0) * 0.0  # NaN where any output is not finite


def certify(action: np.ndarray, margin: np.ndarray, bound: np.ndarray, ok: np.ndarray, exact: ExactRows,
            ids: np.ndarray, obs: np.ndarray, refine=None) -> None:
    """Keep ``action`` where ``bound < margin < inf``.  Elsewhere, ``refine(rows, obs)``
    (if given; ``obs`` those rows' observations, float64) recomputes them in float64 and returns ``(action, margin, bound)`` of
    that pass against the one-row path; rows it cannot certify either (exact ties,
    non-finite values) take the one-row policy's action (``ids``: the rows' original
    numbers, ``obs`` (rows, obs_dim))."""
    np.greater(margin, bound, out=ok)
    if ok.all() and np.isfinite(np.add.reduce(margin)):
        return
    ok &= np.isfinite(margin)
    rows = np.flatnonzero(~ok)
    if refine is not None:
        act64, margin64, bound64 = refine(rows, np.asarray(obs[rows], dtype=np.float64))
        good = (margin64 > bound64) & np.isfinite(margin64)
        action[rows[good]] = act64[good]
        rows = rows[~good]
    for r in rows:
        action[r] = exact.act(int(ids[r]), obs[r])


def batch_actions(agent: "Agent", out: np.ndarray) -> np.ndarray:
    """:meth:`Agent.output_to_action` for outputs ``out`` (act_dim, rows), rows first in
    the result; the same elementwise operations, so bit for bit the one-row result."""
    if agent.space.discrete:
        return out.argmax(axis=0)
    a = np.tanh(out.T)
    bounds = agent._bounds
    if bounds is not None:
        lo, hi = bounds
        a += 1.0
        a *= 0.5
        a *= hi - lo
        a = lo + a
    return a


def layer_shapes(sizes: list[int]) -> list[tuple[int, int]]:
    return [(sizes[i], sizes[i + 1]) for i in range(len(sizes) - 1)]
