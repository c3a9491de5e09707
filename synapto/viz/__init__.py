"""Looking at runs: learning curves, animations, network drawings, CSV export.

- :mod:`synapto.viz.plot`    ``synapto plot``   learning curves of evolution and PPO runs
- :mod:`synapto.viz.render`  ``synapto render`` an animation of the champion (or a PPO policy)
- :mod:`synapto.viz.draw`    ``synapto draw``   the champion's network as a graph
- :mod:`synapto.viz.export`  ``synapto export`` per-generation / per-epoch statistics as CSV
- :mod:`synapto.viz.cli`     the four commands

This module reads run files (through :class:`synapto.store.RunData`) into
:class:`RunSeries` (what plotting and export need) and picks genomes to look at.
matplotlib and imageio (the ``plot`` extra) are imported only inside the commands that
need them, through :func:`require`, so the rest of synapto works without them.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from synapto.errors import RunFileError, UsageError

if TYPE_CHECKING:
    from synapto.agents.base import Agent
    from synapto.evolution.config import EvolveConfig

#: the x axes of ``synapto plot``
AXES = ("generation", "env-steps", "wall-time")


def require(module: str, command: str, package: str | None = None):
    """Import ``module`` for ``command``, or stop with a one-line hint at the ``plot`` extra."""
    try:
        return importlib.import_module(module)
    except ImportError:
        package = package or module.split(".")[0]
        raise UsageError(
            f"{command} needs {package}: pip install 'synapto-evo[plot]' (in a checkout: make install)"
        ) from None


def matplotlib_figure(command: str):
    """matplotlib's ``Figure`` class, rendering with Agg (no display, no pyplot state)."""
    mpl = require("matplotlib", command)
    mpl.use("Agg", force=True)
    from matplotlib.figure import Figure

    return Figure


def check_image_out(out: Path, suffixes: tuple[str, ...], what: str = "--out") -> str:
    """The lower-case suffix of ``out`` (one of ``suffixes``); one-line errors otherwise, also
    for a folder that cannot be written (checked before any work).  Nothing is created: see
    :func:`make_parent`."""
    from synapto.folders import check_out_dir

    out = Path(out)
    suffix = out.suffix.lower()
    if suffix not in suffixes:
        raise UsageError(f"{what} {str(out)!r} must end in {' or '.join(suffixes)}")
    if out.is_dir():
        raise UsageError(f"{what} {str(out)!r} is a directory")
    check_out_dir(out.parent if str(out.parent) else Path("."), f"{what} {str(out)!r}: folder")
    return suffix


def make_parent(out: Path, what: str = "--out") -> None:
    """Create the folder of ``out`` (called once the picture is ready to be written)."""
    parent = Path(out).parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{what} {str(out)!r}: cannot create directory {str(parent)!r} ({exc.strerror})") from None


def write_output(out: Path, write, what: str = "--out") -> None:
    """``write(tmp)`` into a file beside ``out`` (of the same suffix: writers choose their
    format by it), then renamed over ``out``: a failure (a full disk) leaves a previous
    ``out`` whole and no partial file.  The folder is made first; a file system that
    refuses (read-only, no permission, full) is one line."""
    import os

    from synapto.store import writing
    from synapto.store.replace import fsync, fsync_dir

    out = Path(out)
    make_parent(out, what)
    tmp = out.with_name(f".{out.stem}.{os.getpid()}.partial{out.suffix}")
    try:
        with writing(out, "writing it"):
            write(tmp)
            fsync(tmp)
            os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(out.parent)


def check_not_input(out: Path, inputs, what: str) -> None:
    """Refuse an output ``out`` that is one of the ``inputs`` (the same file under any name:
    a link, ``../``): writing it would destroy the run file being read."""
    import os

    resolved = Path(out).resolve()  # sub/../run.h5 is run.h5 even before sub exists
    for p in inputs:
        try:
            same = os.path.samefile(resolved, p)
        except OSError:  # out does not exist yet (or cannot be read): not an input
            same = False
        if same:
            raise UsageError(f"{what} {str(out)!r} is the run file {str(p)!r} itself: choose another path")


# ----------------------------------------------------------------------------- reading
@dataclass
class RunSeries:
    """One run file's per-generation (evolution) or per-epoch (PPO) data."""

    path: Path
    kind: str  #: "evolve" or "ppo"
    config: dict  #: the run's configuration (defaults filled in)
    rows: int  #: completed generations / epochs
    columns: dict[str, np.ndarray]  #: statistics in export order (completed rows only)
    x: dict[str, np.ndarray | None]  #: per axis of :data:`AXES`; None when the file lacks it
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
    from synapto.store import PROGRESS_COLUMNS, STATS, TIMING, RunData

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


# ------------------------------------------------------------------------- genomes
@dataclass
class Pick:
    """A genome chosen from an evolution run, with the agent that runs it."""

    config: EvolveConfig
    agent: Agent
    genome: np.ndarray
    generation: int
    individual: int | None  #: None for the champion of a finished run
    fitness: float
    what: str  #: e.g. "champion of generation 12 (fitness 253.10)"
    test_returns: np.ndarray  #: the run's stored test returns of this genome (champion only)
    label: str = ""  #: short: "champion of gen 12", "best so far (gen 7)", "gen 3 individual 5"
    obs_norm: tuple | None = None  #: the observation normalisation the genome runs with

    def act(self, policy):
        """``policy``'s action for a raw observation (flattened, normalised as in the run)."""
        from synapto.evolution.worker.evaluate import acting

        return acting(self.agent, policy, self.obs_norm)


def fitness_words(fitness: float) -> str:
    """``fitness 12.30``, or what a NaN fitness means (a strategy's final centre, never evaluated)."""
    if np.isnan(fitness):
        return "not evaluated: a final centre"
    return f"fitness {fitness:.2f}"


def pick_genome(path: str | Path, generation: int | None = None, individual: int | None = None) -> Pick:
    """The champion of a finished run (else the best individual so far), or ``--generation G
    --individual I``; with the agent built from the run's config."""
    from synapto.agents import build_agent
    from synapto.evolution.config import EvolveConfig
    from synapto.store import RunData

    path = Path(path)
    if (generation is None) != (individual is None):
        raise UsageError("give both --generation G and --individual I, or neither (the champion)")
    with RunData(path, kind="evolve") as run:
        cfg = EvolveConfig.from_json(run.config_json)
        done = run.completed
        tested = run.tested
        test_returns = np.zeros(0)
        if generation is not None and individual is not None:  # both or neither (checked above)
            if not 0 <= generation < done:
                raise UsageError(
                    f"--generation {generation} is out of range: {str(path)!r} has "
                    f"{done} completed generation(s) (0..{done - 1})"
                )
            if not 0 <= individual < cfg.population:
                raise UsageError(
                    f"--individual {individual} is out of range: population {cfg.population} (0..{cfg.population - 1})"
                )
            genome = run.population(generation, individual)
            fitness = float(run.fitness(generation, individual))
            norm = run.obs_norm(generation)
            what = f"generation {generation} individual {individual} ({fitness_words(fitness)})"
            label = f"gen {generation} individual {individual}"
        elif tested:
            champion = run.champion()
            genome, fitness, generation = champion.genome, champion.fitness, champion.generation
            test_returns, norm = champion.test_returns, champion.obs_norm
            tested_on = (
                f", test {test_returns.mean():.1f} over {test_returns.size} episodes" if test_returns.size else ""
            )
            if generation >= done:  # a strategy's final centre: the run's last generation made it
                what = f"champion: the final centre after generation {done - 1} ({fitness_words(fitness)}{tested_on})"
                label = f"final centre after gen {done - 1}"
            else:
                what = f"champion of generation {generation} ({fitness_words(fitness)}{tested_on})"
                label = f"champion of gen {generation}"
        else:
            label = "best so far"
            if done < 1:
                raise RunFileError(f"{str(path)!r} has no completed generation yet")
            best = _checkpoint_best(path, cfg)
            if best is not None and best[2] >= done:  # an ES centre not evaluated yet: no normalisation to show
                best = None
            if best is not None:  # the run's own best-ever agent (chosen as the run chooses it)
                genome, fitness, generation = best
                what = (
                    f"best so far: from generation {generation} ({fitness_words(fitness)}; "
                    f"the run is unfinished, no tested champion)"
                )
                norm = run.obs_norm(generation)
            else:
                fit = np.asarray(run.fitness(), dtype=np.float64)
                fit = np.where(np.isnan(fit), -np.inf, fit)
                generation, individual = (int(v) for v in np.unravel_index(int(np.argmax(fit)), fit.shape))
                genome = run.population(generation, individual)
                fitness = float(fit[generation, individual])
                what = (
                    f"best so far: generation {generation} individual {individual} ({fitness_words(fitness)}; "
                    f"the run is unfinished, no tested champion)"
                )
                norm = run.obs_norm(generation)
    agent = build_agent(cfg)
    genome = np.asarray(genome, dtype=np.float64)
    if genome.shape != (agent.n_params,):
        raise RunFileError(
            f"{str(path)!r}: genome of length {genome.shape[0]} does not fit agent "
            f"{cfg.agent} {list(cfg.hidden)} on {cfg.env} ({agent.n_params} parameters)"
        )
    if label == "best so far":
        label = f"best so far (gen {generation})"
    return Pick(cfg, agent, genome, generation, individual, fitness, what, np.asarray(test_returns), label, norm)


def _checkpoint_best(path: Path, cfg):
    """``(genome, fitness, generation)`` of the strategy's champion in the run's checkpoint, or None."""
    try:
        from synapto.evolution.loop import restore_strategy
        from synapto.store import read_checkpoint

        found = read_checkpoint(path)
        if found is None:
            return None
        champion = restore_strategy(cfg, found).champion
        genome = np.asarray(champion.genome, dtype=np.float64)
        if genome.ndim != 1 or not np.isfinite(champion.fitness):
            return None
        return genome, float(champion.fitness), int(champion.generation)
    except Exception:  # no usable checkpoint: fall back to the best training fitness
        return None


def run_kind(path: str | Path) -> str:
    """``"evolve"`` or ``"ppo"`` (one-line errors for anything else)."""
    from synapto.store import RunData

    with RunData(path) as run:
        kind = run.kind
    if kind not in ("evolve", "ppo"):
        raise RunFileError(f"{str(path)!r} is a {kind!r} run; synapto reads 'evolve' and 'ppo' runs")
    return kind
