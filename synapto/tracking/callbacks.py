"""Per-generation callbacks: experiment tracking while a run goes (evolution's generations,
PPO's epochs).

``run_evolution(..., callbacks=[...])`` (and ``synapto.evolve(..., callbacks=[...])``)
calls every callback once per completed generation, on the coordinator, after the
generation's rows are in the run file, with a :class:`GenerationReport`; a callback
with a ``close()`` method has it called when the run ends (finished, stopped or
failed).  Callbacks only read: nothing they do changes the run or its file, except
stopping it early.

**Stopping early**: a callback that raises :class:`StopRun` ends the run after this
generation as its budget would have ended it: the generation's checkpoint is written,
the final selection chooses the champion and the champion test runs, the run file is
whole and finished (the other callbacks still get the report first).  The same holds
under ``workers=N``, where the callbacks run in the calling process (the MPI job waits
for their verdict after each generation).  ``--resume`` of such a run continues it
towards its budget, as it extends a finished run::

    def solved(report):
        if report.stats["validation_best"] >= 200:
            raise synapto.StopRun("validation reached 200")

A resumed run first makes its tracking whole (:func:`catch_up`): a callback with a
``held(out, config)`` method, which says which generations its file already holds of
the run, is given the run file's reports of the completed generations after those (a
kill between a generation's checkpoint and its tracking row, or a row whose write
failed, would otherwise lose that row for good: the run file is the truth).

Built in (``--tensorboard DIR``, ``--live-log FILE``; :mod:`synapto.tracking.writers`):

- :class:`~synapto.tracking.writers.TensorBoardWriter`: every statistic and timing as a TensorBoard scalar
  (``stats/best_fitness``, ``timing/wall``...) at step = the env steps so far (training
  and validation, so that curves overlay those of other libraries stepped by env steps),
  with the generation as the scalar ``run/generation`` (tensorboardX, the ``tensorboard``
  extra);
- :class:`~synapto.tracking.writers.LiveLog`: one CSV row or one JSON line per generation, flushed at once, so a
  run can be followed with ``tail -f`` or read by pandas while it goes.

Any other tracker is a function of a report, e.g. Weights & Biases::

    synapto.evolve(cfg, "runs/a.h5", callbacks=[lambda r: wandb.log(r.scalars(), step=r.env_steps)])
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from synapto.common import faults


@dataclass(frozen=True)
class GenerationReport:
    """One completed generation, as its callbacks see it."""

    generation: int  #: index of the generation (0-based, as in the run file and replay)
    stats: Mapping[str, float]  #: the ``/stats`` row (best_fitness, pop_mean, env_steps, ...)
    timing: Mapping[str, float]  #: the ``/timing`` row (seconds)
    env_steps: int  #: training + validation env steps so far
    elapsed: float  #: seconds since the run (or this resumption) started
    out: Path  #: the run file
    config: object = field(repr=False, default=None)  #: the run's EvolveConfig

    def scalars(self) -> dict[str, float]:
        """Every figure of the report, named ``stats/<name>`` and ``timing/<name>``."""
        return {
            **{f"stats/{k}": float(v) for k, v in self.stats.items()},
            **{f"timing/{k}": float(v) for k, v in self.timing.items()},
            "run/generation": float(self.generation),
            "run/env_steps": float(self.env_steps),
            "run/elapsed": float(self.elapsed),
        }


Callback = Callable[[GenerationReport], None]


class StopRun(Exception):
    """Raised by a callback to end the run after the reported generation, as the end of its
    budget does (checkpoint, final selection, champion test); the message says why."""


def report_to(callbacks, report: GenerationReport) -> str | None:
    """Call every callback with ``report``; the reason of the first :class:`StopRun` raised
    (every callback is called all the same), else None."""
    faults.point("tracking", report.generation)  # after the checkpoint, before the tracking rows
    reason = None
    for callback in callbacks:
        try:
            callback(report)
        except StopRun as exc:
            if reason is None:
                reason = str(exc) or type(exc).__name__
    return reason


def notify(callbacks, report: GenerationReport) -> None:
    """Call every callback with ``report`` where a run has no early stop (PPO's epochs): a
    :class:`StopRun` raised there is not caught, so it cannot pass unnoticed."""
    faults.point("tracking", report.generation)  # after the epoch's rows, before the tracking rows
    for callback in callbacks:
        callback(report)


def catch_up(callbacks, completed: int, report_of: Callable[[int], GenerationReport], out: Path, config) -> None:
    """Before a resumed run goes on: every callback with a ``held(out, config)`` method (the
    generations its file holds of this run, or None: unknown) is called with
    ``report_of(g)`` for each of the ``completed`` generations after the last it holds, in
    order (all of them when it holds none).  Such a report's ``elapsed`` is the run's wall
    time up to that generation, from the run file."""
    for cb in callbacks:
        held = getattr(cb, "held", None)
        have = held(out, config) if held is not None else None
        if have is None:
            continue
        for g in range(max(have, default=-1) + 1, completed):
            cb(report_of(g))


def close_all(callbacks) -> None:
    """Close every callback that has a ``close()``; a write that fails on closing was the
    generation's to report (or the run's own error is on its way)."""
    for cb in callbacks:
        close = getattr(cb, "close", None)
        if close is not None:
            try:
                close()
            except OSError:
                pass


def timing_debug(log: Callable[[str], None]) -> Callback:
    """A callback that logs each generation's timing breakdown (``-v``)."""

    def report_timing(report: GenerationReport) -> None:
        parts = "  ".join(f"{k} {v:.3f}s" for k, v in report.timing.items())
        log(f"gen {report.generation} timing: {parts}")

    return report_timing
