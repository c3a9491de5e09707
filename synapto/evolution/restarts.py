"""The evolve command in a job started again after a lost rank (``--restarts K``,
:mod:`synapto.parallel.restart`): the run files the lost job had begun are its own, and
each continues from its checkpoint, as ``--resume`` continues a run.

A run is deterministic and its checkpoint holds all the state the next generation reads,
so the finished file is bit-identical to an uninterrupted run's (everything outside
``/timing``), whatever the lost job had written after its last checkpoint.  A run the lost
job had begun without a checkpoint yet (it died in its first moments), or whose file
holds another run (the job's ``--force`` had not yet replaced it), starts again from
generation 0: the file is the job's own, as the first job's ``--force`` or check for a new
file made it.  A run that was finished is left as it is; the runs the lost job had not
begun start as new runs.  Every rank runs the same command; only rank 0 reads the files.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path

from synapto.common.errors import UsageError
from synapto.evolution.loop import run_status
from synapto.evolution.resuming import resume_state
from synapto.parallel.restart import current
from synapto.store import read_checkpoint


def own_runs() -> set[str]:
    """The run files (absolute paths) the lost job had begun; empty outside a restart."""
    info = current()
    return {os.path.abspath(r) for r in info["runs"]} if info else set()


def is_own(path) -> bool:
    """``path`` was begun by the lost job: the restart may replace or continue it."""
    return os.path.abspath(path) in own_runs()


def restarted_jobs(jobs: list, log: Callable[[str], None]) -> list:
    """``jobs`` (``(config, out, resuming)``) as a restart runs them: the lost job's runs
    continued from their checkpoints, its finished runs left out."""
    info = current()
    if info is None:
        return list(jobs)
    mine = own_runs()
    head = f"restart {info['restart']} of {info['of']}: "
    out = []
    for cfg, path, resuming in jobs:
        if os.path.abspath(path) not in mine:
            out.append((cfg, path, resuming))
            continue
        job = _continued(cfg, Path(path), head, log)
        if job is not None:
            out.append(job)
    return out


def _continued(cfg, path: Path, head: str, log: Callable[[str], None]):
    """The job that continues ``path`` (None: it was finished); one log line says from where."""
    try:
        if not path.exists() or read_checkpoint(path) is None:
            raise UsageError("no checkpoint yet")
        values = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}
        wanted, done, steps, finished = resume_state(path, values)
        completed, _ = run_status(path)
    except UsageError as exc:
        log(f"{head}{path} cannot be continued ({exc}): it starts again from generation 0")
        return cfg, path, False
    if finished and not wanted.goes_on(done, steps):
        log(f"{head}{path} was finished before the loss: nothing to redo")
        return None
    log(
        f"{head}{path} continues from its checkpoint at generation {done}; generation {done} onwards is "
        f"run again (the lost job had completed {completed})"
    )
    return wanted, path, True
