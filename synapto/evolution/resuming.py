"""Resuming a run file: which config it continues with, how far it got, and when there is
nothing left to do.  Shared by ``evolve --resume``, ``synapto.evolve(resume=True)`` and the
restart of a job that lost a rank (:mod:`synapto.evolution.restarts`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from synapto.common.errors import UsageError, on_command_line, option, option_value
from synapto.evolution.config import EvolveConfig
from synapto.evolution.loop import run_status
from synapto.evolution.progress import Budget
from synapto.store import RunData, read_checkpoint

#: what --resume may change: how far the run goes
EXTENDABLE = ("generations", "max_env_steps")


def resumed_config(stored, values: dict, path):
    """The config a resumed run continues with: ``stored`` (the run file's) with only the
    :data:`EXTENDABLE` fields taken from ``values``.  Any option in ``values`` that would
    change the run is refused, naming each difference; options that equal the run's
    (defaults spelled out included) are accepted and change nothing in the file."""
    values = dict(values)
    if values.get("strategy", stored.strategy) != stored.strategy:
        raise UsageError(
            f"{_resuming(path)} refuses options that would change the run: strategy: "
            f"{stored.strategy} (run file) vs {values['strategy']} ({_given()})"
        )
    if "strategy_options" in values:  # options given again: on top of the run's own
        values["strategy_options"] = {**stored.strategy_options, **values["strategy_options"]}
    try:
        wanted = dataclasses.replace(stored, **values)
    except TypeError as exc:
        raise UsageError(f"bad option value: {exc}") from None
    # the champion test is part of the run's promise: changing it on --resume is refused too
    diffs = stored.differences(wanted, names=(*stored.IDENTITY, "test_episodes"))
    if diffs:
        raise UsageError(f"{_resuming(path)} refuses options that would change the run: " + "; ".join(diffs))
    return dataclasses.replace(stored, **{k: getattr(wanted, k) for k in EXTENDABLE})


def _resuming(path) -> str:
    """The run being resumed: ``--resume 'a.h5'``; from Python ``out='a.h5' (resume=True)``."""
    return option_value("resume", str(path)) if on_command_line() else f"out={str(path)!r} (resume=True)"


def _given() -> str:
    """Where the values a resumed run is compared with come from."""
    return "command line" if on_command_line() else "config"


def resume_state(path, values: dict):
    """``(config, generations done, env steps done, finished)`` of resuming ``path`` with
    ``values``; one-line errors for a file that cannot be resumed or options that would
    change the run."""
    if not Path(path).exists():
        raise UsageError(f"{_resuming(path)}: no such file")
    with RunData(path, kind="evolve") as run:
        run.verify()  # damaged data is refused here, before anything is rewritten
        stored = EvolveConfig.from_json(run.config_json)
    completed, finished = run_status(path)
    checkpoint = read_checkpoint(path)
    if checkpoint is None and completed > 0:
        raise UsageError(f"{_resuming(path)}: its checkpoint {path!s}.ckpt is missing")
    wanted = resumed_config(stored, values, path)
    done_generations = int(checkpoint.scalars["generation"]) if checkpoint is not None else 0
    if wanted.generations < done_generations:
        raise UsageError(
            f"{option('generations')} {wanted.generations} is below the {done_generations} generations "
            f"{str(path)!r} already holds"
        )
    steps_done = (
        0 if checkpoint is None else int(checkpoint.scalars["env_steps"]) + int(checkpoint.scalars["validation_steps"])
    )
    return wanted, done_generations, steps_done, finished


def nothing_to_do(path, generations: int, steps: int) -> str:
    return (
        f"{path} is finished ({generations} generations, {steps:,} env steps); nothing to do "
        f"(raise --generations or --max-env-steps to extend it)"
    )


def resume_check(path, cfg, generations: int, steps: int) -> str:
    """``--resume --check``'s line: where the run resumes, against the budget that ends it."""
    budget = Budget(cfg.generations, cfg.max_env_steps)
    line = f"ok: {path} resumes from generation {generations} ({budget.status(generations, steps)} done)"
    if not cfg.goes_on(generations, steps):
        line += "; its budget is met: it goes straight to its final selection and test"
    return line
