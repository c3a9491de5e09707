"""Certified float32 decisions for batched policies of Discrete action spaces."""

from __future__ import annotations

import numpy as np

from synapto.agents.base import Agent, Policy

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

U32 = 2.0**-24  #: float32 unit roundoff
U64 = 2.0**-53  #: float64 unit roundoff
#: absolute error bound of :func:`synapto.common.fastmath.tanh_` in float32 (3.1 u measured; the tests check it)
TANH32_ERR = 16 * U32
#: absolute error bound of ``np.tanh`` in float64 (the one-row path)
TANH64_ERR = 4 * U64
#: factor on the bound (it is rounded to float32 and evaluated in float32)
BOUND_SAFETY = 1.25


def decision_bound(
    layers, out_tanh: bool, u: float = U32 + U64, tanh_err: float = TANH32_ERR + TANH64_ERR
) -> tuple[np.ndarray, np.ndarray]:
    """Per-row ``(a, b)`` with ``|margin_fast - margin_exact| <= a * m + b`` (see above).

    ``layers``: per layer ``(n_in, sources)``, ``sources`` a list of ``(j, W)`` with
    ``j`` = 0 for the observation and ``j`` = k for the output of layer ``k - 1`` (a
    tanh layer) and ``W`` (rows, inputs from j, out) the weights from that source.
    Hidden layers are tanh; the last one too if ``out_tanh``.  Error bounds propagate
    per unit (``|W|^T e``), and the margin's bound is the sum of the two largest
    output bounds.  ``u`` and ``tanh_err``: the sums for the two computations compared
    (default: float32 against float64).
    """
    # source k >= 1 -> (a, b) per unit (rows, units): error <= a m + b
    err: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for i, (n_in, sources) in enumerate(layers):
        c = (n_in + 3) * u
        sum_a: float | np.ndarray = 0.0
        sum_b: float | np.ndarray = 0.0
        for j, w in sources:
            aw = np.abs(w)
            col = aw.sum(axis=1)  # (rows, out)
            if j == 0:
                sum_a = sum_a + c * col
            else:
                ea, eb = err[j]
                sum_a = sum_a + np.einsum("ri,rio->ro", ea, aw)
                sum_b = sum_b + np.einsum("ri,rio->ro", eb, aw) + c * col
        if i < len(layers) - 1 or out_tanh:
            sum_b = sum_b + tanh_err
        err[i + 1] = (np.broadcast_to(sum_a, col.shape), np.broadcast_to(sum_b, col.shape))
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

    def __init__(self, agent: Agent, genomes: np.ndarray, episodes: int = 1):
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


def certify(
    action: np.ndarray,
    margin: np.ndarray,
    bound: np.ndarray,
    ok: np.ndarray,
    exact: ExactRows,
    ids: np.ndarray,
    obs: np.ndarray,
    refine=None,
) -> None:
    """Keep ``action`` where ``bound < margin < inf``.  Elsewhere, ``refine(rows, obs)``
    (if given; ``obs`` those rows' observations, float64) recomputes them in float64 and
    returns ``(action, margin, bound)`` of that pass against the one-row path; rows it
    cannot certify either (exact ties, non-finite values) take the one-row policy's action
    (``ids``: the rows' original numbers, ``obs`` (rows, obs_dim))."""
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
