"""Rank 0's opening of a PPO run, and the verdict every rank shares.

Rank 0 takes the run file's lock, creates the run file (or reads where a resumed run
stopped) and opens progress.txt (:func:`open_run`); a usage error or a full disk met
there is not raised on rank 0 alone but handed to :func:`broadcast_error`, so that every
rank raises the same one-line error together.  :func:`resume_command` is the command
line that continues a run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from synapto.common.errors import DiskFullError, UsageError
from synapto.common.shell import synapto_command
from synapto.ppo.config import PPOConfig
from synapto.ppo.policy import Policy, ValueFunction
from synapto.ppo.progress import ProgressWriter, log_dir
from synapto.store import PPORun, PPORunWriter, RunLock, prepare_resume, writing

if TYPE_CHECKING:
    from synapto.store import PPORunWriter, RunLock


def broadcast_error(comm, error: Exception | None) -> None:
    """Rank 0's verdict, shared: every rank raises the same UsageError or DiskFullError
    (printed once by main)."""
    verdict = None
    if comm is not None:
        verdict = comm.bcast(
            None
            if error is None
            else (type(error).__name__, str(error), getattr(error, "path", ""), getattr(error, "resume", None)),
            root=0,
        )
    elif error is not None:
        raise error
    if verdict is not None:
        kind, message, path, resume = verdict
        if kind == "DiskFullError":
            exc = DiskFullError(path)
            exc.args, exc.resume = (message,), resume
            raise exc
        raise UsageError(message)


@dataclass
class Opened:
    """What rank 0 opened for a run (or the error that stopped it): the run file's writer,
    progress.txt, the lock, and where the run starts."""

    writer: PPORunWriter | None = None
    progress: ProgressWriter | None = None
    lock: RunLock | None = None
    checkpoint: dict | None = None
    start: int = 0
    time_offset: float = 0.0
    error: Exception | None = None


def open_run(cfg: PPOConfig, out: Path, size: int, info, resume: bool, force: bool) -> Opened:
    """Rank 0: lock ``out``, then create it or read where it stopped, and open progress.txt;
    a usage error or a full disk is returned (with everything opened closed again), for
    every rank to raise together."""
    o = Opened()
    try:
        # one writer per run file, for the whole run: taken before anything is read or written
        o.lock = RunLock(out).acquire()
        if resume:  # synapto.ppo.command checked the run, its ranks and epochs
            o.writer, o.checkpoint, o.start = prepare_resume(out, cfg, size)
            with PPORun(out) as run:
                rows = run.progress_rows()
            o.time_offset = float(rows[-1]["Time"]) if rows else 0.0
        else:
            n_pi = Policy.init_params(info.obs_dim, info.act_dim, cfg.hid, info.discrete, np.random.default_rng(0)).size
            n_v = ValueFunction.init_params(info.obs_dim, cfg.hid, np.random.default_rng(0)).size
            o.writer = PPORunWriter.create(out, cfg, size, info, n_pi, n_v, overwrite=force)
            rows = []
        with writing(log_dir(out) / "progress.txt", "writing progress.txt and config.json"):
            o.progress = ProgressWriter(log_dir(out), cfg, size, rows)
    except (UsageError, DiskFullError) as exc:
        if isinstance(exc, DiskFullError) and resume:
            exc.resume = resume_command(out, size)
        for opened in (o.writer, o.progress):
            if opened is not None:
                opened.close()
        if o.lock is not None:
            o.lock.release()
        return Opened(error=exc)
    return o


def resume_command(out: Path, size: int) -> str:
    return synapto_command("ppo", "--resume", out, *(["--cpu", size] if size > 1 else []))
