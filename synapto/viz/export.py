"""``synapto export``: a run's per-generation (or per-epoch) statistics as CSV.

One file ``DIR/<run name>.csv`` per run, one row per completed generation (epoch),
comma-separated with a header:

- evolution runs: every ``/stats/<name>`` column (see :data:`synapto.store.evolve.STATS`),
  ``wall_time`` (cumulative seconds), then every ``/timing/<name>`` as ``timing_<name>``;
  a finished run also gets ``DIR/<run name>_champion.csv`` with the champion's test
  episodes (seed, return, steps).
- PPO runs: Spinning Up's progress.txt columns in its order (``Time`` is the
  cumulative wall time), then the other ``/timing`` figures as ``timing_<name>``.

Integer columns are written as integers, floats with ``repr`` (they read back
bit-identically), non-finite values as ``nan``, ``inf``, ``-inf``.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from synapto.errors import UsageError
from synapto.viz import RunSeries, read_run

INTEGER_COLUMNS = {"generation", "env_steps", "champion_connections", "nonfinite_count", "failure_count",
                   "Epoch", "TotalEnvInteracts", "StopIter"}


def _cell(name: str, value) -> str:
    v = value.item() if isinstance(value, np.generic) else value
    if isinstance(v, (bool, np.bool_)):
        return str(int(v))
    if isinstance(v, int):
        return str(v)
    v = float(v)
    if not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if name in INTEGER_COLUMNS and v.is_integer():
        return str(int(v))
    return repr(v)


def write_csv(path: Path, columns: dict[str, np.ndarray], rows: int) -> None:
    names = list(columns)
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(names)
        for i in range(rows):
            w.writerow([_cell(n, columns[n][i]) for n in names])


def export_runs(paths: list[Path], folder: Path, log=print) -> list[Path]:
    """Write the CSV files of every run in ``paths`` into ``folder``; return their paths."""
    if not paths:
        raise UsageError("export needs at least one run file")
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--csv {str(folder)!r} exists and is not a folder")
    runs = [read_run(p) for p in paths]  # every file is checked before anything is written
    stems = [r.path.stem for r in runs]
    if len(set(stems)) != len(stems):
        raise UsageError(f"run files with the same name would overwrite each other's CSV: "
                         f"{sorted({s for s in stems if stems.count(s) > 1})}")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--csv {str(folder)!r}: cannot create it ({exc.strerror})") from None
    from synapto.store import writing

    written = []
    for run in runs:
        with writing(folder, f"writing the CSV of {run.path}"):
            files = _export(run, folder)
        written += files
        unit = "generation" if run.kind == "evolve" else "epoch"
        log(f"export: {run.path} ({run.kind}, {run.rows} {unit}{'s' if run.rows != 1 else ''}) -> "
            + ", ".join(str(p) for p in files))
    return written


def _export(run: RunSeries, folder: Path) -> list[Path]:
    out = folder / f"{run.path.stem}.csv"
    write_csv(out, run.columns, run.rows)
    written = [out]
    if run.kind == "evolve" and run.finished:
        from synapto.store import RunData

        with RunData(run.path, kind="evolve") as stored:
            c = stored.champion()
        n = len(c.test_seeds)
        cols = {"episode": np.arange(n), "seed": c.test_seeds, "return": c.test_returns, "steps": c.test_steps,
                "champion_generation": np.full(n, c.generation), "champion_fitness": np.full(n, c.fitness)}
        champ = folder / f"{run.path.stem}_champion.csv"
        write_csv(champ, cols, n)
        written.append(champ)
    return written
