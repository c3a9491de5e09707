"""The built-in trackers: :class:`TensorBoardWriter` (``--tensorboard DIR``) and
:class:`LiveLog` (``--live-log FILE``), callbacks of :mod:`synapto.tracking.callbacks`."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any, TextIO

from synapto.common.errors import TrackingError, UsageError
from synapto.common.folders import check_out_dir
from synapto.common.logs import debug
from synapto.tracking.callbacks import GenerationReport, timing_debug
from synapto.tracking.event_files import EventFile, steps_held


def tracking_callbacks(tensorboard: Path | None, live_log: Path | None, runs: int = 1) -> list:
    """The callbacks of ``--tensorboard`` and ``--live-log`` (checked now), and ``-v``'s timing
    lines; ``runs`` > 1 (several seeds): one TensorBoard subfolder per run file."""
    found = [timing_debug(debug)]
    if tensorboard is not None:
        found.append(TensorBoardWriter.checked(tensorboard, per_run=runs > 1))
    if live_log is not None:
        found.append(LiveLog.checked(live_log))
    return found


class TensorBoardWriter:
    """Writes :meth:`GenerationReport.scalars` as TensorBoard scalars into ``logdir``
    (:mod:`synapto.tracking.event_files`).

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
        self.writer: Any = None  #: the open :class:`~synapto.tracking.event_files.EventFile`, once a report came
        self.out: Path | None = None  #: the run file the open writer belongs to

    @classmethod
    def checked(cls, logdir: str | Path, per_run: bool = False) -> TensorBoardWriter:
        """One whose package is there and whose folder can be written (one-line errors)."""
        _require_tensorboardx()
        check_out_dir(logdir, "--tensorboard")
        return cls(logdir, per_run)

    def folder(self, out: Path) -> Path:
        """The folder of the run file ``out``'s event files."""
        return self.logdir / Path(out).stem if self.per_run else self.logdir

    def held(self, out: Path, config) -> set[int]:
        """The generations the event files of ``out``'s folder hold (their ``run/generation``
        scalars; see :func:`catch_up`)."""
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
