"""``bench race --project-only RACE...``: the projection again, from earlier races, running
and testing nothing.

Each RACE is a race's ``--out-dir`` or its ``race.json``.  Its runs carry their layout
(cores, workers, processes), their tested curves and the run files they name (read again
for the timings; a run file moved with its race folder is found in its ``runs/``).  The
races' runs are projected together (a run named by two races counts once), at each
task's ``--threshold`` values, or else at the thresholds its first race had; with
``--population-per-worker``, evolution runs of several populations (several races)
make one line whose population grows with the workers.  Writes ``projection.md`` and
``projection.json`` (``projection``: as in race.json) into ``--out-dir``.
"""

from __future__ import annotations

import json
from pathlib import Path

from synapto.bench.race.projection import project
from synapto.bench.race.report import PROJECTION_INTRO, projection_lines
from synapto.bench.race.runs import given_thresholds
from synapto.common.errors import UsageError


def race_json(path: Path) -> Path:
    p = Path(path)
    p = p / "race.json" if p.is_dir() else p
    if not p.is_file():
        raise UsageError(f"--project-only {str(path)!r}: no race.json there (give a race's --out-dir or its race.json)")
    return p


def _run_file(run: dict, folder: Path) -> str:
    """The run's file (or SB3 folder) as race.json names it, else in the race folder's runs/."""
    if Path(run["out"]).exists():
        return run["out"]
    moved = folder / "runs" / Path(run["out"]).name
    if moved.exists():
        return str(moved)
    raise UsageError(f"{str(folder / 'race.json')!r} names {run['out']!r}, which is not there")


def load_races(paths: list[Path]) -> tuple[list[dict], dict[str, list[float]]]:
    """The runs of every race (each once), and each task's thresholds in its first race."""
    runs: dict[str, dict] = {}
    thresholds: dict[str, list[float]] = {}
    for path in paths:
        p = race_json(path)
        try:
            result = json.loads(p.read_text())
            race_runs = list(result["runs"])
        except (ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"{str(p)!r} is not a race.json ({exc})") from None
        for task, xs in result.get("thresholds", {}).items():
            thresholds.setdefault(task, xs if isinstance(xs, list) else [xs])
        for run in race_runs:
            run = {**run, "out": _run_file(run, p.parent)}
            runs.setdefault(str(Path(run["out"]).resolve()), run)
    return list(runs.values()), thresholds


def reproject(paths, threshold_items, out_dir: Path, per_task: float, per_worker, command: str, log=print) -> dict:
    runs, earlier = load_races(paths)
    thresholds = {**earlier, **given_thresholds(threshold_items)}
    for task in dict.fromkeys(r["task"] for r in runs):
        if task not in thresholds:
            raise UsageError(f"{task} has no threshold; pass --threshold {task}=X")
    result = {
        "command": command,
        "sources": [str(race_json(p)) for p in paths],
        "thresholds": thresholds,
        "population_per_worker": per_worker,
        "projection": project(runs, thresholds, per_task=per_task, per_worker=per_worker),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "projection.json").write_text(json.dumps(result, indent=1))
    head = ["# bench race: projection (not a measurement)", "", "```", command, "```", "", PROJECTION_INTRO, ""]
    md = "\n".join([*head, *projection_lines(result["projection"])])
    (out_dir / "projection.md").write_text(md + "\n")
    log(md)
    log(f"-> {out_dir / 'projection.md'}, projection.json")
    return result
