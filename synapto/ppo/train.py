"""The PPO training loop over MPI collectives (Spinning Up's PPO-clip, in numpy).

Per epoch, on every rank:

1. **Rollout**: ``steps_per_epoch // ranks`` steps in a fresh environment (or in the rank's
   share of ``n_envs``, :func:`local_envs`, see :mod:`synapto.ppo.rollout`).  Episode
   ``e`` of epoch ``k`` on rank ``r`` starts from ``reset(seed=int_seed(seed, PPO, 1,
   r, k, e))``; exploration noise for the whole epoch is drawn up front from
   ``generator(seed, PPO, 2, r, k)``.  Each epoch starts with a fresh reset (as Spinning
   Up does) and a fresh env object (Box2D worlds keep state across ``reset``), so an
   epoch depends only on the parameters and (seed, rank, epoch): a checkpoint at an
   epoch boundary is all that resuming needs.
2. **Values and GAE** (:mod:`synapto.ppo.buffer`), V in one batched forward pass.
3. **Advantage normalisation** with the mean and std over all ranks (2 Allreduces).
4. **Policy update**: minibatches (:mod:`synapto.ppo.minibatch`: by default on rank 0,
   with every rank's rows gathered there), or up to ``train_pi_iters`` full-batch Adam steps.  Each step sends
   the local gradient and the local approximate KL in *one* flat Allreduce; if the
   rank-averaged KL exceeds ``1.5 * target_kl`` the loop stops before stepping.
5. **Value update**: ``train_v_iters`` Adam steps on the mean squared error to the
   reward-to-go, one Allreduce each.
6. **Statistics**: one Allreduce of the update statistics, three of the episode and
   value statistics (sum, sum of squared deviations, max / -min).  Rank 0 writes.

Parameters are initialised on rank 0 from ``generator(seed, PPO, 0)`` and broadcast.
Gradients are averaged across ranks, so with equal local batches they equal the
gradient of the pooled batch, and every rank applies the same Adam step.  Outside MPI
(``comm is None``) the collectives are no-ops and mpi4py is never imported.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from synapto.common import faults
from synapto.common.blas import limit_blas_threads
from synapto.common.errors import DiskFullError, UsageError
from synapto.common.seeding import Stream, generator
from synapto.envs import SpaceInfo
from synapto.parallel.collectives import Collectives, average_gradient
from synapto.parallel.launch import abort_job
from synapto.ppo.adam import Adam
from synapto.ppo.buffer import EpochBuffer
from synapto.ppo.config import PPOConfig
from synapto.ppo.env import open_env
from synapto.ppo.evaluate import test_policy
from synapto.ppo.minibatch import gathered_update, minibatch_update
from synapto.ppo.normalise import ObsNormaliser, RewardScaler
from synapto.ppo.opening import Opened, broadcast_error, open_run, resume_command
from synapto.ppo.policy import Policy, ValueFunction
from synapto.ppo.progress import log_dir
from synapto.ppo.rollout import rollout
from synapto.ppo.threads import update_threads
from synapto.store import writing
from synapto.tracking.callbacks import GenerationReport, catch_up, close_all, notify

if TYPE_CHECKING:
    pass

clock = time.perf_counter


# ------------------------------------------------------------------------------ trainer
def _zero_timing() -> dict[str, float]:
    return dict.fromkeys(
        ("rollout", "env", "act", "values", "gae", "update", "update_pi", "update_v", "comm", "stats"), 0.0
    )


def local_envs(n_envs: int, ranks: int) -> int:
    """Envs per rank: ``n_envs`` split evenly over the ranks, or one each when ``n_envs`` is 1
    (Spinning Up's layout: the epoch's steps split instead).  Any other count that the
    ranks do not divide is refused: an uneven split would weight the ranks' gradients
    unequally and desynchronise their minibatch loops."""
    if n_envs == 1:
        return 1
    if n_envs % ranks:
        raise UsageError(
            f"--n-envs {n_envs} does not split evenly over {ranks} MPI ranks; use a rank count that "
            f"divides it (or --n-envs 1: one env per rank)"
        )
    return n_envs // ranks


class Trainer:
    """One rank's PPO state: networks, optimisers, buffer; :meth:`epoch` runs one epoch."""

    def __init__(self, cfg: PPOConfig, coll: Collectives, rank: int, info: SpaceInfo, checkpoint: dict | None = None):
        self.cfg, self.coll, self.rank = cfg, coll, rank
        self.info = info
        self.dtype = np.dtype(cfg.dtype)
        self.n_envs = local_envs(cfg.n_envs, coll.size)  #: this rank's envs
        self.n_local = cfg.steps_per_epoch // (coll.size * self.n_envs) * self.n_envs
        if self.n_local < 1:
            raise UsageError(
                f"--steps-per-epoch {cfg.steps_per_epoch} is smaller than the number of "
                f"MPI ranks ({coll.size}) times --n-envs ({cfg.n_envs}); each env needs a step"
            )
        hid, d = cfg.hid, self.dtype
        init = generator(cfg.seed, Stream.PPO, 0)
        pi = Policy.init_params(
            info.obs_dim, info.act_dim, hid, info.discrete, init, d, cfg.log_std_init, cfg.ortho_init
        )
        v = ValueFunction.init_params(info.obs_dim, hid, init, d, cfg.ortho_init)
        self.pi = Policy(info.obs_dim, info.act_dim, hid, info.discrete, pi)
        self.vf = ValueFunction(info.obs_dim, hid, v)
        self.pi_opt = Adam(pi.size, cfg.pi_lr, eps=cfg.adam_eps, dtype=d)
        self.vf_opt = Adam(v.size, cfg.vf_lr, eps=cfg.adam_eps, dtype=d)
        self.obs_norm = ObsNormaliser(info.obs_dim) if cfg.obs_norm else None
        self.reward_scale = RewardScaler(self.n_envs, cfg.gamma) if cfg.reward_scale else None
        if checkpoint is not None:
            self.pi.params[...] = checkpoint["pi"]
            self.vf.params[...] = checkpoint["v"]
            self.pi_opt.load_state({k: checkpoint[f"pi_adam_{k}"] for k in "mvt"})
            self.vf_opt.load_state({k: checkpoint[f"v_adam_{k}"] for k in "mvt"})
            if self.obs_norm is not None:
                self.obs_norm.moments.load(checkpoint["obs_moments"])
            if self.reward_scale is not None:
                self.reward_scale.moments.load(checkpoint["ret_moments"])
        # rank 0's parameters are everyone's (on resume every rank got the checkpoint)
        coll.bcast_(self.pi.params)
        coll.bcast_(self.vf.params)
        self.buf = EpochBuffer(self.n_local, info.obs_dim, info.act_dim, info.discrete, d)
        self._pi_comm = np.empty(self.pi.params.size + 1, np.float64)
        self._v_comm = np.empty(self.vf.params.size + 1, np.float64)
        #: run the value loop beside the policy loop (see :meth:`update`)
        self.concurrent = coll.size == 1 and update_threads() == 2
        #: rank 0 runs the minibatch update on every rank's rows (:func:`~synapto.ppo.minibatch.gathered_update`)
        self.gathered = coll.size > 1 and cfg.minibatch_size > 0 and cfg.minibatch_update == "gathered"

    # -- 1. rollout -----------------------------------------------------------------------
    def rollout(self, epoch: int, timing: dict) -> tuple[list[float], list[int]]:
        """Fill the buffer (:mod:`synapto.ppo.rollout`); return the returns and lengths of the
        episodes that ended.  Then the ranks' normalisation moments are merged."""
        out = rollout(self, epoch, timing)
        for norm in (self.obs_norm, self.reward_scale):
            if norm is not None:
                norm.moments.merge(self.coll)
        return out

    # -- 2.-3. values, GAE, normalised advantages --------------------------------------
    def advantages(self, timing: dict) -> None:
        cfg, buf = self.cfg, self.buf
        t = clock()
        values = self.vf.values

        def timed_values(obs):
            t0 = clock()
            out = values(obs)
            timing["values"] += clock() - t0
            return out

        buf.finish(timed_values, cfg.gamma, cfg.lam)
        if cfg.minibatch_size:  # normalised per minibatch instead (synapto.ppo.minibatch)
            timing["gae"] += clock() - t - timing["values"]
            return
        s = self.coll.sum_(np.array([buf.adv.sum(), buf.n], dtype=np.float64))
        mean = s[0] / s[1]
        buf.adv -= mean
        sq = self.coll.sum_(np.array([np.dot(buf.adv, buf.adv)]))
        std = np.sqrt(sq[0] / s[1])
        buf.adv /= std if std > 0 else 1.0
        timing["gae"] += clock() - t - timing["values"]

    # -- 4.-5. update ----------------------------------------------------------------------
    def _update_pi(self, obs, act, adv) -> dict:
        cfg, coll = self.cfg, self.coll
        t = clock()
        logp_old = self.pi.logp(obs, act)
        stop_iter = 0
        for i in range(cfg.train_pi_iters):
            loss_pi, kl, ent, clip_frac = self.pi.surrogate(obs, act, adv, logp_old, cfg.clip_ratio)
            if i == 0:
                loss_pi_old, ent_old = loss_pi, ent
            kl = average_gradient(coll, self.pi.grad, kl, self._pi_comm)
            stop_iter = i
            if cfg.target_kl > 0 and kl > 1.5 * cfg.target_kl:
                break
            self.pi_opt.step(self.pi.params, self.pi.grad)
        return {
            "LossPi": loss_pi_old,
            "DeltaLossPi": loss_pi - loss_pi_old,
            "Entropy": ent_old,
            "KL": kl,
            "ClipFrac": clip_frac,
            "StopIter": float(stop_iter),
            "seconds": clock() - t,
        }

    def _update_v(self, obs, ret) -> dict:
        cfg, coll = self.cfg, self.coll
        t = clock()
        for i in range(cfg.train_v_iters):
            loss_v = self.vf.loss(obs, ret)
            if i == 0:
                loss_v_old = loss_v
            average_gradient(coll, self.vf.grad, None, self._v_comm)
            self.vf_opt.step(self.vf.params, self.vf.grad)
        return {"LossV": loss_v_old, "DeltaLossV": loss_v - loss_v_old, "seconds": clock() - t}

    def update(self, timing: dict, epoch: int = 0) -> dict[str, float]:
        """The update of the epoch's batch at the epoch's learning rates (``lr_schedule``):
        minibatches (:mod:`synapto.ppo.minibatch`) or Spinning Up's full-batch steps."""
        factor = self.cfg.lr_factor(epoch)
        self.pi_opt.lr, self.vf_opt.lr = self.cfg.pi_lr * factor, self.cfg.vf_lr * factor
        if not self.cfg.minibatch_size:
            return self.full_batch_update(timing)

        t = clock()
        out = gathered_update(self, epoch) if self.gathered else minibatch_update(self, epoch)
        timing["update"] += clock() - t
        timing["update_pi"] += out.pop("seconds")
        return out

    def full_batch_update(self, timing: dict) -> dict[str, float]:
        """Policy steps, then value steps -- or both at once on two threads (:attr:`concurrent`).

        The two loops share no data but the (read-only) batch, so running the value loop
        on a second thread gives bit-identical parameters; numpy releases the GIL inside
        its array operations, so the loops overlap almost fully.  Only a single-rank
        run on a machine with a spare core does this: with several ranks, every core
        already has a rank, and both loops would need their own communicator.
        """
        buf = self.buf
        obs, act = buf.obs, buf.act
        adv = buf.adv.astype(self.dtype)
        ret = buf.ret.astype(self.dtype)
        t = clock()
        if self.concurrent:
            box: dict = {}

            def value_loop():
                try:
                    box["v"] = self._update_v(obs, ret)
                except BaseException as exc:  # re-raised on the main thread
                    box["error"] = exc

            thread = threading.Thread(target=value_loop, name="ppo-value-update")
            thread.start()
            try:
                pi = self._update_pi(obs, act, adv)
            finally:
                thread.join()
            if "error" in box:
                raise box["error"]
            v = box["v"]
        else:
            pi = self._update_pi(obs, act, adv)
            v = self._update_v(obs, ret)
        timing["update"] += clock() - t
        timing["update_pi"] += pi.pop("seconds")
        timing["update_v"] += v.pop("seconds")
        return {**pi, **v}

    # -- one epoch -----------------------------------------------------------------------
    def epoch(self, epoch: int) -> tuple[dict, dict]:
        timing = _zero_timing()
        t, cpu, comm = clock(), time.process_time(), self.coll.seconds
        ep_returns, ep_lengths = self.rollout(epoch, timing)
        self.advantages(timing)
        values = self.buf.val.copy()
        upd = self.update(timing, epoch)
        t_stats = clock()
        coll = self.coll
        names = ("LossPi", "LossV", "DeltaLossPi", "DeltaLossV", "Entropy", "KL", "ClipFrac", "StopIter")
        means = np.array([upd[k] for k in names], dtype=np.float64)
        if not self.gathered:  # gathered: rank 0 ran the whole update and holds its figures
            coll.mean_(means)
        stats: dict[str, float] = dict(zip(names, means.tolist()))
        r_mean, r_std, r_max, r_min = coll.statistics(np.array(ep_returns))
        len_mean = coll.statistics(np.array(ep_lengths, dtype=np.float64))[0]
        v_mean, v_std, v_max, v_min = coll.statistics(values)
        stats.update(
            Epoch=epoch,
            AverageEpRet=r_mean,
            StdEpRet=r_std,
            MaxEpRet=r_max,
            MinEpRet=r_min,
            EpLen=len_mean,
            AverageVVals=v_mean,
            StdVVals=v_std,
            MaxVVals=v_max,
            MinVVals=v_min,
            TotalEnvInteracts=(epoch + 1) * self.n_local * coll.size,
        )
        timing["stats"] = clock() - t_stats
        timing["epoch"] = clock() - t
        timing["cpu"] = time.process_time() - cpu
        timing["comm"] = self.coll.seconds - comm
        return stats, timing

    def obs_norm_now(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The observation normalisation ``(mean, std)`` the current policy is tested with."""
        return None if self.obs_norm is None else self.obs_norm.moments.mean_std()

    def checkpoint(self) -> dict[str, np.ndarray]:
        ck = {"pi": self.pi.params.copy(), "v": self.vf.params.copy()}
        if self.obs_norm is not None:
            ck["obs_moments"] = self.obs_norm.moments.state()
        if self.reward_scale is not None:
            ck["ret_moments"] = self.reward_scale.moments.state()
        for prefix, opt in (("pi", self.pi_opt), ("v", self.vf_opt)):
            for k, value in opt.state().items():
                ck[f"{prefix}_adam_{k}"] = value
        return ck


# --------------------------------------------------------------------------------- runs
def train(
    cfg: PPOConfig,
    out: Path,
    comm=None,
    resume: bool = False,
    force: bool = False,
    log: Callable[[str], None] = print,
    callbacks=(),
) -> Path | None:
    """Run (or, with ``resume``, continue) one PPO run writing ``out``, as checked by
    :mod:`synapto.ppo.command`; rank 0 writes and logs, and calls ``callbacks``
    (:mod:`synapto.tracking.callbacks`) once per epoch with a report whose ``generation`` is
    the epoch."""
    t_start = time.time()
    limit_blas_threads(1)
    coll = Collectives(comm)
    rank = 0 if comm is None else comm.Get_rank()
    size = coll.size
    handle, info = open_env(cfg)
    handle.env.close()

    opened, start, checkpoint = _open_on_every_rank(cfg, out, comm, size, info, resume, force)
    writer, progress, time_offset = opened.writer, opened.progress, opened.time_offset

    try:
        trainer = Trainer(cfg, coll, rank, info, checkpoint)
        setup = time.time() - t_start
        if rank == 0:
            log(
                f"ppo {cfg.env} seed {cfg.seed}: {size} rank(s), {trainer.n_local * size} steps per epoch, "
                f"epochs {start}..{cfg.epochs - 1} -> {out}"
            )

        if rank == 0 and resume:  # the tracking rows a kill or a failed write left out, from the run file
            catch_up(callbacks, start, lambda k: _stored_report(writer, k, out, cfg), Path(out), cfg)
        for k in range(start, cfg.epochs):
            if rank == 0:
                faults.point("epoch", k)
            stats, timing = trainer.epoch(k)
            if rank == 0:
                timing["setup"] = setup if k == start else 0.0
                timing["Time"] = time_offset + time.time() - t_start
                _record_epoch(k, stats, timing, trainer, writer, progress, out, log)
                notify(callbacks, _report_of(k, stats, timing, out, cfg, elapsed=time.time() - t_start))
        if rank == 0 and cfg.test_episodes:
            _final_test(cfg, trainer, writer, log)
    except Exception as exc:
        _abort_the_others(exc, comm, size, out)
        raise
    finally:
        _close(opened)
        if rank == 0 and callbacks:
            close_all(callbacks)
    return out if rank == 0 else None


def _open_on_every_rank(cfg: PPOConfig, out: Path, comm, size: int, info, resume: bool, force: bool):
    """``(opened, start, checkpoint)``: what rank 0 opened (:func:`open_run`; nothing on the
    other ranks), and where the run starts, on every rank; rank 0's error raised on all."""
    opened = open_run(cfg, out, size, info, resume, force) if comm is None or comm.Get_rank() == 0 else Opened()
    start, checkpoint = opened.start, opened.checkpoint
    broadcast_error(comm, opened.error)
    if comm is not None:
        start, checkpoint = comm.bcast((start, checkpoint), root=0)
    return opened, start, checkpoint


def _abort_the_others(exc: Exception, comm, size: int, out: Path) -> None:
    """A rank failed: the other ranks wait in a collective, so say why (a full disk in one
    line, with the command that resumes), then abort the job."""
    if isinstance(exc, DiskFullError):
        exc.resume = resume_command(out, size)
    if comm is not None and size > 1:
        if isinstance(exc, DiskFullError):
            sys.stderr.write(exc.report())
        else:
            traceback.print_exc()
        abort_job(comm, 1)


def _close(opened: Opened) -> None:
    """Rank 0's run file, progress.txt and lock, each that is open."""
    if opened.writer is not None:
        opened.writer.close()
    if opened.progress is not None:
        try:
            opened.progress.close()
        except OSError:
            pass
    if opened.lock is not None:
        opened.lock.release()


def _record_epoch(k: int, stats: dict, timing: dict, trainer, writer, progress, out: Path, log) -> None:
    """Rank 0: epoch ``k`` into the run file and progress.txt, and its log line."""
    t = clock()
    writer.append(k, stats, timing, trainer.checkpoint(), trainer.obs_norm_now())
    with writing(log_dir(out) / "progress.txt", f"writing epoch {k} to progress.txt"):
        progress.write({**stats, "Time": timing["Time"]})
    timing["write"] = clock() - t
    writer.set_timing(k, "write", timing["write"])
    log(
        f"epoch {k:4d}  return {stats['AverageEpRet']:9.2f} +- {stats['StdEpRet']:7.2f}  "
        f"len {stats['EpLen']:7.1f}  kl {stats['KL']:.4f}  stop {int(stats['StopIter']):3d}  "
        f"{timing['epoch']:.2f} s (env {timing['env']:.2f}, update "
        f"{timing['update']:.2f})"
    )


def _stored_report(writer, epoch: int, out, cfg):
    """Epoch ``epoch``'s report from the run file (a resumed run's tracking rows)."""
    assert writer is not None  # rank 0's
    stats, timing = writer.figures(epoch)
    return _report_of(epoch, stats, timing, out, cfg)


def _report_of(epoch, stats, timing, out, cfg, elapsed: float | None = None):
    """Epoch ``epoch``'s report to the callbacks; ``elapsed`` defaults to the run's ``Time``
    (a report from the run file, on resume)."""
    return GenerationReport(
        epoch,
        {k: float(v) for k, v in stats.items()},
        {k: float(v) for k, v in timing.items()},
        int(stats["TotalEnvInteracts"]),
        float(timing["Time"]) if elapsed is None else elapsed,
        Path(out),
        cfg,
    )


def _final_test(cfg: PPOConfig, trainer: Trainer, writer, log) -> None:
    """Rank 0: the final policy's test on ``test_episodes`` PPO_TEST episodes, into the run file."""
    t = clock()
    faults.point("test", cfg.epochs)
    result = test_policy(cfg, trainer.pi.params, cfg.test_episodes, trainer.obs_norm_now())
    writer.write_test(result["seeds"], result["returns"], result["lengths"], result["outcomes"], result["action_cost"])
    r = result["returns"]
    log(
        f"test of the final policy: {r.mean():.2f} +- {r.std():.2f} over {cfg.test_episodes} episodes "
        f"(mean length {result['lengths'].mean():.1f}, {clock() - t:.1f} s)"
    )
