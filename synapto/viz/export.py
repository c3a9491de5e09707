"""``synapto export``: a run's per-generation (or per-epoch) statistics as CSV, and
(``--onnx``, ``--npz``) its policy as files other tools read (:func:`export_policy`).

One file ``DIR/<run name>.csv`` per run, one row per completed generation (epoch),
comma-separated with a header:

- evolution runs: every ``/stats/<name>`` column (see :data:`synapto.store.evolve_rows.STATS`),
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
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

from synapto.common.errors import UsageError
from synapto.common.folders import check_out_dir
from synapto.policies import load_policy
from synapto.policy_export import OBS_DTYPES, require_onnx, write_npz, write_onnx
from synapto.store import RunData
from synapto.store.series import RunSeries, read_run
from synapto.viz import check_image_out, check_not_input, write_output

INTEGER_COLUMNS = {
    "generation",
    "env_steps",
    "champion_connections",
    "nonfinite_count",
    "failure_count",
    "Epoch",
    "TotalEnvInteracts",
    "StopIter",
}


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
    """The CSV file ``path``, written beside it and renamed over it (a failure leaves a
    previous file whole)."""

    def write(tmp: Path) -> None:
        names = list(columns)
        with open(tmp, "w", newline="") as fh:
            w = csv.writer(fh, lineterminator="\n")
            w.writerow(names)
            for i in range(rows):
                w.writerow([_cell(n, columns[n][i]) for n in names])

    write_output(path, write, "--csv")


def export_runs(paths: list[Path], folder: Path, log=print) -> list[Path]:
    """Write the CSV files of every run in ``paths`` into ``folder``; return their paths."""
    return csv_export(paths, folder, log)()


def csv_export(paths: list[Path], folder: Path, log=print) -> Callable[[], list[Path]]:
    """Every check of :func:`export_runs` (the files read, the outputs), and then the
    function that writes the CSV files: ``export`` checks all its outputs before it writes any."""
    if not paths:
        raise UsageError("export needs at least one run file")
    folder = check_out_dir(folder, "--csv")  # a file, under a file, or not writable: refused now
    runs = [read_run(p) for p in paths]  # every file is checked before anything is written
    stems = [r.path.stem for r in runs]
    if len(set(stems)) != len(stems):
        raise UsageError(
            f"run files with the same name would overwrite each other's CSV: "
            f"{sorted({s for s in stems if stems.count(s) > 1})}"
        )
    for stem in stems:
        for name in (f"{stem}.csv", f"{stem}_champion.csv"):
            check_not_input(folder / name, paths, "--csv")
    return partial(_write_csv_files, runs, folder, log)


def _write_csv_files(runs: list[RunSeries], folder: Path, log) -> list[Path]:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--csv {str(folder)!r}: cannot create it ({exc.strerror})") from None
    written = []
    for run in runs:
        files = _export(run, folder)
        written += files
        unit = "generation" if run.kind == "evolve" else "epoch"
        log(
            f"export: {run.path} ({run.kind}, {run.rows} {unit}{'s' if run.rows != 1 else ''}) -> "
            + ", ".join(str(p) for p in files)
        )
    return written


def _export(run: RunSeries, folder: Path) -> list[Path]:
    out = folder / f"{run.path.stem}.csv"
    write_csv(out, run.columns, run.rows)
    written = [out]
    if run.kind == "evolve" and run.finished:
        with RunData(run.path, kind="evolve") as stored:
            c = stored.champion()
        n = len(c.test_seeds)
        cols = {
            "episode": np.arange(n),
            "seed": c.test_seeds,
            "return": c.test_returns,
            "steps": c.test_steps,
            "champion_generation": np.full(n, c.generation),
            "champion_fitness": np.full(n, c.fitness),
        }
        champ = folder / f"{run.path.stem}_champion.csv"
        write_csv(champ, cols, n)
        written.append(champ)
    return written


def export_policy(
    paths: list[Path], onnx: Path | None, npz: Path | None, log=print, onnx_obs_dtype: str = "float32"
) -> list[Path]:
    """``--onnx FILE`` / ``--npz FILE``: the policy of one run file (:func:`synapto.load_policy`)
    in the formats of :mod:`synapto.policy_export`; everything is checked before a file is written."""
    return policy_export(paths, onnx, npz, log, onnx_obs_dtype)()


def policy_export(
    paths: list[Path], onnx: Path | None, npz: Path | None, log=print, onnx_obs_dtype: str = "float32"
) -> Callable[[], list[Path]]:
    """Every check of :func:`export_policy` (the outputs, the policy), and then the function
    that writes its files."""
    if len(paths) != 1:
        raise UsageError(f"--onnx/--npz export the policy of one run file, got {len(paths)}")
    if onnx_obs_dtype not in OBS_DTYPES:
        raise UsageError(f"--onnx-obs-dtype must be one of {', '.join(OBS_DTYPES)}, got {onnx_obs_dtype!r}")
    targets = [
        (p, flag, write)
        for p, flag, write in (
            (onnx, "--onnx", partial(write_onnx, obs_dtype=onnx_obs_dtype)),
            (npz, "--npz", write_npz),
        )
        if p is not None
    ]
    for out, flag, _ in targets:
        check_image_out(out, (f".{flag[2:]}",), flag)
        check_not_input(out, paths, flag)
    if onnx is not None:
        require_onnx()
    policy = load_policy(paths[0])
    net = policy.network()  # a policy that cannot be exported is refused here

    def write_all() -> list[Path]:
        for out, flag, write in targets:
            write_output(out, partial(write, net), flag)
        written = [Path(out) for out, _, _ in targets]
        log(f"export: {paths[0]} ({policy.description}) -> " + ", ".join(map(str, written)))
        return written

    return write_all
