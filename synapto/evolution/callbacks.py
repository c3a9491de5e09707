"""Per-generation callbacks: experiment tracking while a run goes.

``run_evolution(..., callbacks=[...])`` (and ``synapto.evolve(..., callbacks=[...])``)
calls every callback once per completed generation, on the coordinator, after the
generation's rows are in the run file, with a :class:`GenerationReport`; a callback
with a ``close()`` method has it called when the run ends (finished, stopped or
failed).  Callbacks only read: nothing they do changes the run or its file.

Built in (``evolve --tensorboard DIR``, ``--live-log FILE``):

- :class:`TensorBoardWriter`: every statistic and timing as a TensorBoard scalar
  (``stats/best_fitness``, ``timing/wall``...) at step = generation (tensorboardX, the
  ``tensorboard`` extra);
- :class:`LiveLog`: one CSV row or one JSON line per generation, flushed at once, so a
  run can be followed with ``tail -f`` or read by pandas while it goes.

Any other tracker is a function of a report, e.g. Weights & Biases::

    synapto.evolve(cfg, "runs/a.h5", callbacks=[lambda r: wandb.log(r.scalars(), step=r.generation)])
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from synapto.errors import UsageError


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
        return {**{f"stats/{k}": float(v) for k, v in self.stats.items()},
                **{f"timing/{k}": float(v) for k, v in self.timing.items()},
                "run/env_steps": float(self.env_steps), "run/elapsed": float(self.elapsed)}


Callback = Callable[[GenerationReport], None]


def close_all(callbacks) -> None:
    for cb in callbacks:
        close = getattr(cb, "close", None)
        if close is not None:
            close()


class TensorBoardWriter:
    """Writes :meth:`GenerationReport.scalars` as TensorBoard scalars into ``logdir``."""

    def __init__(self, logdir: str | Path):
        self.logdir = Path(logdir)
        self.writer = None

    @classmethod
    def checked(cls, logdir: str | Path) -> "TensorBoardWriter":
        """One whose package is there and whose folder can be written (one-line errors)."""
        from synapto.resources import check_out_dir

        _summary_writer()
        check_out_dir(logdir, "--tensorboard")
        return cls(logdir)

    def __call__(self, report: GenerationReport) -> None:
        if self.writer is None:
            self.writer = _summary_writer()(logdir=str(self.logdir), flush_secs=10)
        for name, value in report.scalars().items():
            if math.isfinite(value):  # TensorBoard draws no NaN or infinite points
                self.writer.add_scalar(name, value, global_step=report.generation)
        self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def _summary_writer():
    try:
        from tensorboardX import SummaryWriter
    except ImportError:
        raise UsageError("--tensorboard needs tensorboardX: pip install 'synapto-evo[tensorboard]'") from None
    return SummaryWriter


class LiveLog:
    """Appends one row per generation to a ``.csv`` or ``.jsonl`` file, flushed at once."""

    SUFFIXES = (".csv", ".jsonl")

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.kind = self.path.suffix.lower()
        if self.kind not in self.SUFFIXES:
            raise UsageError(f"--live-log {str(self.path)!r} must end in .csv or .jsonl")
        self.file = None
        self.columns: list[str] | None = None

    @classmethod
    def checked(cls, path: str | Path) -> "LiveLog":
        from synapto.resources import check_out_dir

        log = cls(path)
        if log.path.is_dir():
            raise UsageError(f"--live-log {str(log.path)!r} is a directory")
        check_out_dir(log.path.parent if str(log.path.parent) else Path("."), f"--live-log {str(log.path)!r}: folder")
        return log

    def __call__(self, report: GenerationReport) -> None:
        row = {"generation": report.generation, **{k: v for k, v in report.stats.items() if k != "generation"},
               "total_env_steps": report.env_steps, "elapsed": report.elapsed,
               **{f"timing_{k}": v for k, v in report.timing.items()}}
        if self.file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.file = open(self.path, "w", newline="")
            self.columns = list(row)
            if self.kind == ".csv":
                self.csv = csv.writer(self.file)
                self.csv.writerow(self.columns)
        if self.kind == ".csv":
            self.csv.writerow([_cell(row.get(c)) for c in self.columns])
        else:
            self.file.write(json.dumps({k: _json(v) for k, v in row.items()}) + "\n")
        self.file.flush()

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None


def _cell(v) -> str:
    return "" if v is None else repr(float(v)) if isinstance(v, float) else str(v)


def _json(v):
    """JSON has no NaN or infinity: they become null."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def timing_debug(log: Callable[[str], None]) -> Callback:
    """A callback that logs each generation's timing breakdown (``-v``)."""

    def report_timing(report: GenerationReport) -> None:
        parts = "  ".join(f"{k} {v:.3f}s" for k, v in report.timing.items())
        log(f"gen {report.generation} timing: {parts}")

    return report_timing
