"""Per-generation callbacks: experiment tracking while a run goes.

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

Built in (``evolve --tensorboard DIR``, ``--live-log FILE``):

- :class:`TensorBoardWriter`: every statistic and timing as a TensorBoard scalar
  (``stats/best_fitness``, ``timing/wall``...) at step = the env steps so far (training
  and validation, so that curves overlay those of other libraries stepped by env steps),
  with the generation as the scalar ``run/generation`` (tensorboardX, the ``tensorboard``
  extra);
- :class:`LiveLog`: one CSV row or one JSON line per generation, flushed at once, so a
  run can be followed with ``tail -f`` or read by pandas while it goes.

Any other tracker is a function of a report, e.g. Weights & Biases::

    synapto.evolve(cfg, "runs/a.h5", callbacks=[lambda r: wandb.log(r.scalars(), step=r.env_steps)])
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from synapto.errors import TrackingError, UsageError


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
    from synapto import faults

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
    from synapto import faults

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


class TensorBoardWriter:
    """Writes :meth:`GenerationReport.scalars` as TensorBoard scalars into ``logdir``
    (:mod:`synapto.evolution.event_files`).

    One event file per run: a run that starts at generation 0 (a new run, ``--force``
    included) first removes the event files an earlier run left in its folder, so
    TensorBoard never draws two runs as one; a resumed run appends a new event file.
    With ``per_run`` (several seeds into one folder) each run file gets its own
    subfolder, named after it, which TensorBoard shows as one run each.  A write that
    fails stops the run in one line and drops the file, without a word more."""

    EVENTS = "events.out.tfevents.*"

    def __init__(self, logdir: str | Path, per_run: bool = False):
        self.logdir = Path(logdir)
        self.per_run = per_run
        self.writer: Any = None  #: the open :class:`~synapto.evolution.event_files.EventFile`, once a report came
        self.out: Path | None = None  #: the run file the open writer belongs to

    @classmethod
    def checked(cls, logdir: str | Path, per_run: bool = False) -> TensorBoardWriter:
        """One whose package is there and whose folder can be written (one-line errors)."""
        from synapto.folders import check_out_dir

        _require_tensorboardx()
        check_out_dir(logdir, "--tensorboard")
        return cls(logdir, per_run)

    def folder(self, out: Path) -> Path:
        """The folder of the run file ``out``'s event files."""
        return self.logdir / Path(out).stem if self.per_run else self.logdir

    def held(self, out: Path, config) -> set[int]:
        """The generations the event files of ``out``'s folder hold (their ``run/generation``
        scalars; see :func:`catch_up`)."""
        from synapto.evolution.event_files import steps_held

        return steps_held(self.folder(out), "run/generation")

    def __call__(self, report: GenerationReport) -> None:
        try:
            self._write(report)
        except OSError as exc:
            if self.writer is not None:
                self.writer.discard()
                self.writer = None
            raise TrackingError(
                f"--tensorboard {str(self.logdir)!r} cannot be written ({exc.strerror or exc})"
            ) from None

    def _write(self, report: GenerationReport) -> None:
        from synapto.evolution.event_files import EventFile

        if self.writer is not None and self.out != report.out:
            self.close()
        if self.writer is None:
            folder = self.folder(report.out)
            if report.generation == 0:  # a new run: the earlier run's events go
                for old in folder.glob(self.EVENTS):
                    old.unlink()
            self.writer = EventFile(folder)
            self.out = report.out
        # TensorBoard draws no NaN or infinite points; stepped by env steps (run/generation beside)
        self.writer.scalars(report.env_steps, {k: v for k, v in report.scalars().items() if math.isfinite(v)})

    def close(self) -> None:
        if self.writer is not None:
            writer, self.writer = self.writer, None
            writer.close()


def _require_tensorboardx():
    """tensorboardX's event records (the ``tensorboard`` extra), or a one-line error."""
    try:
        from tensorboardX.proto import event_pb2
    except ImportError:
        raise UsageError("--tensorboard needs tensorboardX: pip install 'synapto-evo[tensorboard]'") from None
    return event_pb2


class LiveLog:
    """Appends one row per generation to a ``.csv`` or ``.jsonl`` file, flushed at once.

    The file is never truncated: a resumed run, a second ``--seed`` and a new run into
    the same file append to it, and every row names its ``seed``.  A CSV file that
    exists keeps its header (its columns, in its order); generations re-run after the
    last checkpoint of a resumed run appear again (the later row is the run file's).
    A last row cut short (a write that failed, a full disk) is dropped before the first
    append, so that no row is glued to it; a resumed run writes it again (:func:`catch_up`)."""

    SUFFIXES = (".csv", ".jsonl")

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.kind = self.path.suffix.lower()
        if self.kind not in self.SUFFIXES:
            raise UsageError(f"--live-log {str(self.path)!r} must end in .csv or .jsonl")
        self.file: TextIO | None = None
        self.csv: Any = None  #: the csv writer over :attr:`file` (.csv)
        self.columns: list[str] | None = None

    @classmethod
    def checked(cls, path: str | Path) -> LiveLog:
        from synapto.folders import check_out_dir

        log = cls(path)
        if log.path.is_dir():
            raise UsageError(f"--live-log {str(log.path)!r} is a directory")
        if log.path.exists() and not log.path.is_file():  # /dev/full, a pipe, a socket
            raise UsageError(f"--live-log {str(log.path)!r} is not a regular file")
        check_out_dir(log.path.parent if str(log.path.parent) else Path("."), f"--live-log {str(log.path)!r}: folder")
        return log

    def held(self, out: Path, config) -> set[int] | None:
        """The generations of this run's rows in the file: those of its seed since the last
        row of generation 0 (a run's first), whole lines only (see :func:`catch_up`); None
        when the file cannot be read."""
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return set()
        except OSError:
            return None
        lines = text.split("\n")[:-1]  # the text after the last newline is a cut row
        seed = getattr(config, "seed", None)
        held: set[int] = set()
        for who, generation in self._seeds_and_generations(lines):
            if who == seed and generation is not None:
                held = {0} if generation == 0 else held | {generation}
        return held

    def _seeds_and_generations(self, lines: list[str]):
        """``(seed, generation)`` of each row of ``lines`` (None where unreadable)."""
        if self.kind == ".csv":
            if not lines:
                return
            for row in csv.DictReader(lines):
                yield _int(row.get("seed")), _int(row.get("generation"))
            return
        for line in lines:
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict):
                yield _int(row.get("seed")), _int(row.get("generation"))

    def __call__(self, report: GenerationReport) -> None:
        row = {
            "seed": getattr(report.config, "seed", None),
            "generation": report.generation,
            **{k: v for k, v in report.stats.items() if k != "generation"},
            "total_env_steps": report.env_steps,
            "elapsed": report.elapsed,
            **{f"timing_{k}": v for k, v in report.timing.items()},
        }
        try:
            self._write(row)
        except OSError as exc:
            raise TrackingError(f"--live-log {str(self.path)!r} cannot be written ({exc.strerror or exc})") from None

    def _write(self, row: dict) -> None:
        if self.file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            _drop_cut_row(self.path)
            self.file = open(self.path, "a+", newline="")  # noqa: SIM115  (open for the run; close() closes it)
            self.file.seek(0)
            header = self.file.readline() if self.kind == ".csv" else ""
            self.file.seek(0, 2)
            if self.kind == ".csv":
                self.csv = csv.writer(self.file)
                self.columns = next(csv.reader([header])) if header.strip() else list(row)
                if not header.strip():
                    self.csv.writerow(self.columns)
        if self.kind == ".csv":
            assert self.columns is not None  # set when the file was opened
            self.csv.writerow([_cell(row.get(c)) for c in self.columns])
        else:
            self.file.write(json.dumps({k: _json(v) for k, v in row.items()}) + "\n")
        self.file.flush()

    def close(self) -> None:
        if self.file is not None:
            try:
                self.file.close()
            except OSError:
                pass  # the error was reported when the row was written
            self.file = None


def _drop_cut_row(path: Path) -> None:
    """Cut ``path`` back to its last newline: a row whose write failed part-way goes."""
    try:
        fh = open(path, "rb+")  # noqa: SIM115  (closed below)
    except FileNotFoundError:
        return
    with fh:
        end = fh.seek(0, 2)
        at = end
        while at > 0:
            start = max(0, at - 65536)
            fh.seek(start)
            chunk = fh.read(at - start)
            cut = chunk.rfind(b"\n")
            if cut >= 0:
                at = start + cut + 1
                break
            at = start
        if at != end:
            fh.truncate(at)


def _int(v) -> int | None:
    """A seed or generation as the file spells it (``3``, ``"3"``), else None."""
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


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
