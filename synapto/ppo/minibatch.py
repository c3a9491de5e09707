"""PPO's minibatch update (``minibatch_size > 0``): the update of rl-zoo's PPO.

``update_epochs`` passes over the epoch's steps.  Pass ``p`` of epoch ``k`` on rank ``r``
shuffles the rank's rows with ``generator(seed, PPO, 3, r, k, p)`` and walks them in
minibatches of ``minibatch_size // ranks`` rows (the last one shorter).  Per minibatch:

1. advantages normalised over the minibatch (mean, and the standard deviation with
   Bessel's correction, + 1e-8);
2. the policy loss: PPO-clip less ``ent_coef`` times the mean entropy; the value loss:
   the mean squared error to the lambda-returns ``A + V`` (GAE advantages plus the values
   of the rollout), times ``vf_coef``;
3. both gradients and the approximate KL averaged over ranks in one flat Allreduce; if
   ``target_kl > 0`` and the KL exceeds ``1.5 target_kl``, the update stops here;
4. the joint gradient norm clipped to ``max_grad_norm`` (both scaled by
   ``max_grad_norm / (norm + 1e-6)`` when that is below 1);
5. one Adam step of each network.

The figures returned (``LossPi``, ``LossV``, ...) are those of the first minibatch
(``Loss*``), the change to the last (``DeltaLoss*``), the mean entropy and clip fraction
and the last KL; ``StopIter`` counts the minibatch steps taken.

That is ``minibatch_update = "allreduce"``.  With rl-zoo's minibatches of 64 steps it
costs an Allreduce every 64 rows -- 10,240 an epoch of ``ppo_bipedal`` --, each a wait for
the slowest rank (6.3-7.2 s of update an epoch at 2 processes against 5.1 s for one
process's update; docs/compare.md).  So by default
(``"gathered"``, :func:`gathered_update`) the ranks send their rows to rank 0 once per
epoch (one Gather per array, in rank order: env-major rows, as one rank would hold
them), rank 0 runs the update above on all of them as a single process would
(minibatches of ``minibatch_size``, shuffled with ``generator(seed, PPO, 3, 0, epoch,
p)``), and broadcasts the two networks' parameters.  Only rank 0's Adam moments advance;
only rank 0 writes checkpoints, and a resume hands its moments to every rank.  The
others wait during the update, which is the serial share of an epoch.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

from synapto.common.seeding import Stream, generator
from synapto.parallel.collectives import Collectives

clock = time.perf_counter

#: the figures an update returns (``seconds`` aside)
FIGURES = ("LossPi", "DeltaLossPi", "Entropy", "KL", "ClipFrac", "StopIter", "LossV", "DeltaLossV")


class Rows(NamedTuple):
    """The rows an update walks, and over which ranks: ``rank`` keys the shuffle."""

    obs: np.ndarray
    act: np.ndarray
    adv: np.ndarray
    val: np.ndarray
    coll: Collectives
    rank: int


def gathered_update(trainer, epoch: int) -> dict[str, float]:
    """Every rank's rows to rank 0, the update there (:func:`minibatch_update` as one
    process), the parameters broadcast back.  The figures are rank 0's; NaN elsewhere."""
    coll, buf = trainer.coll, trainer.buf
    t = clock()
    obs, act, adv, val = (coll.gather_(a) for a in (buf.obs, buf.act, buf.adv, buf.val))
    out = dict.fromkeys(FIGURES, float("nan"))
    if trainer.rank == 0:
        out = minibatch_update(trainer, epoch, Rows(obs, act, adv, val, Collectives(None), 0))
    coll.bcast_(trainer.pi.params)
    coll.bcast_(trainer.vf.params)
    out["seconds"] = clock() - t
    return out


def minibatch_update(trainer, epoch: int, rows: Rows | None = None) -> dict[str, float]:
    """The update over ``rows`` (by default this rank's buffer, every rank together)."""
    cfg, buf, pi, vf = trainer.cfg, trainer.buf, trainer.pi, trainer.vf
    if rows is None:
        rows = Rows(buf.obs, buf.act, buf.adv, buf.val, trainer.coll, trainer.rank)
    coll = rows.coll
    t = clock()
    n = len(rows.obs)
    size = max(1, cfg.minibatch_size // coll.size)
    obs, act = rows.obs, rows.act
    adv = rows.adv
    ret = (rows.adv + rows.val).astype(trainer.dtype)
    logp_old = pi.logp(obs, act)
    n_pi, n_v = pi.params.size, vf.params.size
    comm = np.empty(n_pi + n_v + 1, np.float64)
    first: tuple[float, float] | None = None
    last: tuple[float, float] | None = None
    entropy, clip_frac, kl, steps, stopped = [], [], 0.0, 0, False
    for p in range(cfg.update_epochs):
        order = generator(cfg.seed, Stream.PPO, 3, rows.rank, epoch, p).permutation(n)
        for start in range(0, n, size):
            idx = order[start : start + size]
            a = _normalised(adv[idx]).astype(trainer.dtype)
            loss_pi, kl_local, ent, frac = pi.surrogate(
                obs[idx], act[idx], a, logp_old[idx], cfg.clip_ratio, cfg.ent_coef
            )
            loss_v = vf.loss(obs[idx], ret[idx])
            comm[:n_pi] = pi.grad
            comm[n_pi : n_pi + n_v] = vf.grad
            comm[n_pi : n_pi + n_v] *= cfg.vf_coef
            comm[-1] = kl_local
            coll.mean_(comm)
            kl = float(comm[-1])
            last = (loss_pi, loss_v)
            if first is None:
                first = last
            entropy.append(ent)
            clip_frac.append(frac)
            if cfg.target_kl > 0 and kl > 1.5 * cfg.target_kl:
                stopped = True
                break
            _step(trainer, comm[:-1], n_pi)
            steps += 1
        if stopped:
            break
    seconds = clock() - t
    assert first is not None and last is not None  # update_epochs >= 1 and n >= 1: one minibatch at least
    return {
        "LossPi": first[0],
        "DeltaLossPi": last[0] - first[0],
        "Entropy": float(np.mean(entropy)),
        "KL": kl,
        "ClipFrac": float(np.mean(clip_frac)),
        "StopIter": float(steps),
        "LossV": first[1],
        "DeltaLossV": last[1] - first[1],
        "seconds": seconds,
    }


def _normalised(a: np.ndarray) -> np.ndarray:
    """A minibatch's advantages less their mean, over their std (Bessel's) + 1e-8."""
    return (a - a.mean()) / (a.std(ddof=1) + 1e-8) if a.size > 1 else a


def _step(trainer, grads: np.ndarray, n_pi: int) -> None:
    """The rank-averaged gradients of both networks (``grads``, policy first), their joint
    norm clipped to ``max_grad_norm``, then one Adam step of each network."""
    cfg, pi, vf = trainer.cfg, trainer.pi, trainer.vf
    if cfg.max_grad_norm > 0:
        norm = float(np.sqrt(grads @ grads))
        scale = cfg.max_grad_norm / (norm + 1e-6)
        if scale < 1.0:
            grads *= scale
    pi.grad[...] = grads[:n_pi]
    vf.grad[...] = grads[n_pi:]
    trainer.pi_opt.step(pi.params, pi.grad)
    trainer.vf_opt.step(vf.params, vf.grad)
