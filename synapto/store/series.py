"""A run file's per-generation (evolution) or per-epoch (PPO) series, as ``synapto plot``
and ``synapto export`` read them: :func:`read_run` gives a :class:`RunSeries`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from synapto.common.errors import RunFileError
from synapto.store.evolve_rows import STATS, TIMING
from synapto.store.ppo import PROGRESS_COLUMNS
from synapto.store.reader import RunData


@dataclass
class RunSeries:
    """One run file's per-generation (evolution) or per-epoch (PPO) data."""

    path: Path
    kind: str  #: "evolve" or "ppo"
    config: dict  #: the run's configuration (defaults filled in)
    rows: int  #: completed generations / epochs
    columns: dict[str, np.ndarray]  #: statistics in export order (completed rows only)
    x: dict[str, np.ndarray | None]  #: per x axis of ``synapto plot``; None when the file lacks it
    curves: dict[str, np.ndarray]  #: what ``plot`` draws in the upper panel
    connections: dict[str, np.ndarray] = field(default_factory=dict)  #: the lower panel (evolution)
    finished: bool = False

    @property
    def seed(self) -> int:
        return int(self.config.get("seed", 0))

    @property
    def env(self) -> str:
        return str(self.config.get("env", "?"))

    @property
    def group_key(self) -> str:
        """Runs with equal keys differ only in their seed: one line with a band."""
        rest = {k: v for k, v in self.config.items() if k != "seed"}
        return json.dumps({"kind": self.kind, **rest}, sort_keys=True, default=str)

    @property
    def short_label(self) -> str:
        c = self.config
        if self.kind == "ppo":
            return f"PPO {list(c.get('hid', []))}"
        return f"{c.get('agent', '?')} {list(c.get('hidden', []))}"


def _ordered(known, columns: dict[str, np.ndarray]) -> list[str]:
    """The names of ``columns``: the ``known`` ones first, in their order, then the rest."""
    return [s for s in known if s in columns] + [s for s in columns if s not in known]


def read_run(path: str | Path) -> RunSeries:
    """Read an evolution or PPO run file (completed rows only); one-line errors otherwise.

    The configuration is kept as the run file stores it (JSON): grouping uses what was
    written, not a re-parse with today's defaults, so a file written before a field
    existed differs from one that has it."""
    path = Path(path)
    with RunData(path) as run:
        kind = run.kind
        if kind not in ("evolve", "ppo"):
            raise RunFileError(f"{str(path)!r} is a {kind!r} run; synapto reads 'evolve' and 'ppo' runs")
        config = run.config
        n = run.completed
        if n < 1:
            raise RunFileError(f"{str(path)!r} has no completed {'generation' if kind == 'evolve' else 'epoch'} yet")
        stats, timing = run.stats_columns(), run.timing_columns()
        finished = run.finished
    columns: dict[str, np.ndarray] = {}
    if kind == "evolve":
        columns.update((s, stats[s]) for s in _ordered(STATS, stats))
        if "wall" in timing:
            columns["wall_time"] = np.cumsum(np.nan_to_num(timing["wall"]))
        columns.update((f"timing_{t}", timing[t]) for t in _ordered(TIMING, timing))
    else:
        columns.update((s, stats[s]) for s in _ordered(PROGRESS_COLUMNS, stats))
        cum = timing.get("Time")
        if cum is None and "epoch" in timing:
            cum = np.cumsum(np.nan_to_num(timing["epoch"]))
        if cum is not None:
            columns["Time"] = cum
        columns.update((f"timing_{t}", timing[t]) for t in timing if t != "Time")
    return _shape_run(path, kind, config, n, columns, finished)


def _need(columns: dict, name: str, path: Path) -> np.ndarray:
    if name not in columns:
        raise RunFileError(f"{str(path)!r} has no /stats/{name}: not a complete synapto run file")
    return columns[name].astype(np.float64)


def _finite(y: np.ndarray) -> np.ndarray:
    y = np.asarray(y, dtype=np.float64)
    return np.where(np.isfinite(y), y, np.nan)


def _shape_run(path, kind, config, n, columns, finished) -> RunSeries:
    if kind == "evolve":
        gen = columns.get("generation", np.arange(n, dtype=np.float64))
        steps = _need(columns, "env_steps", path)
        if "validation_env_steps" in columns:  # validation episodes are environment steps too
            steps = steps + np.nan_to_num(columns["validation_env_steps"].astype(np.float64))
        x = {"generation": gen.astype(np.float64), "env-steps": steps, "wall-time": columns.get("wall_time")}
        curves = {
            "best": _finite(_need(columns, "best_fitness", path)),
            "elite-mean": _finite(_need(columns, "elite_mean", path)),
            "pop-mean": _finite(_need(columns, "pop_mean", path)),
        }
        if "validation_best" in columns and np.isfinite(columns["validation_best"]).any():
            curves["validation"] = _finite(columns["validation_best"])
        conns = {
            k: columns[c].astype(np.float64)
            for k, c in (("mean", "connections_mean"), ("champion", "champion_connections"))
            if c in columns
        }
    else:
        x = {
            "generation": columns.get("Epoch", np.arange(n)).astype(np.float64),
            "env-steps": _need(columns, "TotalEnvInteracts", path),
            "wall-time": columns.get("Time"),
        }
        curves = {"return": _finite(_need(columns, "AverageEpRet", path))}
        conns = {}
    if x["wall-time"] is not None:
        x["wall-time"] = x["wall-time"].astype(np.float64)
    return RunSeries(Path(path), kind, config, n, columns, x, curves, conns, finished)


def run_kind(path: str | Path) -> str:
    """``"evolve"`` or ``"ppo"`` (one-line errors for anything else)."""
    with RunData(path) as run:
        kind = run.kind
    if kind not in ("evolve", "ppo"):
        raise RunFileError(f"{str(path)!r} is a {kind!r} run; synapto reads 'evolve' and 'ppo' runs")
    return kind
