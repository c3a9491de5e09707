"""``synapto show RUN.h5``: what a run is, and how its test episodes ended.

A short header (task, agent, strategy, connections, env steps, wall time) and a table of
the test episodes the run stored -- the champion's test of an evolution run, the final
policy's test of a PPO run -- by outcome (:mod:`synapto.outcomes`): count, mean return,
its spread, mean action cost and mean length.  Nothing is run: everything comes from the
run file.  Files written before the outcomes were recorded show their returns alone.

:func:`read_report` reads a file into a :class:`Report`; :func:`render` and
:func:`as_json` write it for people and for programs.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from synapto import outcomes as oc
from synapto.common.errors import RunFileError
from synapto.store import RunData

#: BipedalWalker's torque cost of one step is 0.00035 * MOTORS_TORQUE (80) * sum_i min(|a_i|, 1)
#: over its 4 motors: 0.112 times the step's action magnitude (the mean of min(|a_i|, 1))
BIPEDAL_TORQUE = 0.00035 * 80 * 4


@dataclass
class Cost:
    """What the cost column shows: ``name``, its ``meaning`` (one line) and ``factor`` times
    the stored action magnitude (NaN: the actions are choices, no cost)."""

    name: str
    meaning: str
    factor: float = 1.0


@dataclass
class Report:
    """One run file, read: ``header`` lines (label, text), the test episodes, and what they mean."""

    path: Path
    kind: str  #: "evolve" or "ppo"
    env: str
    header: list[tuple[str, str]]
    figures: dict  #: the header's numbers, for ``--json``
    returns: np.ndarray = field(default_factory=lambda: np.zeros(0))
    lengths: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    outcomes: np.ndarray | None = None  #: None: not recorded (an older file)
    cost: np.ndarray | None = None
    no_test: str = ""  #: why there are no test episodes ("" when there are)
    discrete: bool = False  #: the actions are choices (no action cost)


def labels(env: str) -> dict[int, tuple[str, str]]:
    """Each outcome's name and meaning for ``env``: the Box2D tasks' own words where the
    -100 rule is theirs, plain ones elsewhere."""
    if env.startswith("BipedalWalker"):
        named = {
            oc.FINISHED: ("finished", "the walker reached the end of the course"),
            oc.FELL: ("fell", "a step of reward -100 ended the episode (a fall, or walking off the left edge)"),
        }
    elif env.startswith("LunarLander"):
        named = {
            oc.FINISHED: ("landed", "the lander came to rest"),
            oc.FELL: ("crashed", "a step of reward -100 ended the episode (a crash, or flying off the screen)"),
        }
    else:
        named = {
            oc.FINISHED: ("terminated", "the task ended the episode"),
            oc.FELL: ("terminated at -100", "the task ended the episode on a step of reward -100"),
        }
    return {
        **named,
        oc.OUT_OF_TIME: ("out of time", "the time limit ended the episode"),
        oc.STOPPED: ("non-finite", "stopped by a non-finite observation or action"),
        oc.NOT_RUN: ("not run", "not run: an earlier episode of its evaluation was stopped"),
    }


def cost_of(env: str, discrete: bool) -> Cost:
    """The cost column of ``env``: BipedalWalker's torque cost, else the action magnitude."""
    if discrete:
        return Cost("action cost", "none (the actions are choices)", math.nan)
    if env.startswith("BipedalWalker"):
        return Cost(
            "torque cost",
            "what the task takes off an episode's return for its motors' torque: "
            "0.00035 x 80 x the sum over steps and motors of min(|a|, 1)",
            BIPEDAL_TORQUE,
        )
    return Cost("sum |a|", "per episode, the sum over its steps of the mean |action| (clipped to the action space)")


def column(report: Report) -> Cost:
    """The cost column of ``report`` (:func:`cost_of`; "not recorded" in an older file)."""
    if report.cost is None:
        return Cost("action cost", "not recorded in this run file", math.nan)
    return cost_of(report.env, report.discrete)


# ------------------------------------------------------------------------------ reading
def read_report(path: str | Path) -> Report:
    """The :class:`Report` of the run file ``path``; a one-line :class:`RunFileError` for
    anything that is not a readable run file."""
    path = Path(path)
    with RunData(path) as run:
        try:
            return _read_evolve(run) if run.kind == "evolve" else _read_ppo(run)
        except RunFileError:
            raise
        except (KeyError, ValueError, TypeError, IndexError) as exc:
            raise RunFileError(f"{str(path)!r} is not a complete synapto run file ({exc})") from None


def _last(run, name: str) -> int:
    """The last completed row of ``/stats/<name>`` (0: none, or a file without it)."""
    try:
        rows = run.stats(name)
    except RunFileError:
        return 0
    return int(rows[-1]) if len(rows) else 0


def _task(cfg: dict) -> str:
    options = cfg.get("env_options") or {}
    extra = ", ".join(f"{k}={v}" for k, v in sorted(options.items()))
    return str(cfg.get("env", "?")) + (f" ({extra})" if extra else "")


def _read_evolve(run) -> Report:
    cfg, champion, selection = run.config, run.champion(), run.selection()
    generations = int(cfg.get("generations", run.completed))
    tested = run.tested
    steps = {
        "training": _last(run, "env_steps"),
        "validation": _last(run, "validation_env_steps"),
        "selection": int(selection.steps.sum()) if selection is not None and selection.chosen >= 0 else 0,
        "test": int(np.sum(champion.test_steps)) if tested else 0,
    }
    n_params = int(champion.genome.size)
    connections = int(np.count_nonzero(champion.genome)) if tested else None
    wall = float(np.nansum(run.timing("wall"))) if run.completed else 0.0
    hidden = " ".join(str(h) for h in cfg.get("hidden", ()))
    state = "finished" if tested else f"unfinished ({run.completed} of {generations} generations)"
    header = [
        ("run", f"{run.path} (evolution, {state})"),
        ("task", _task(cfg)),
        ("agent", f"{cfg.get('agent', '?')}" + (f", hidden {hidden}" if hidden else "")),
        ("connections", f"{connections:,} of {n_params:,} (the champion's non-zero weights)" if tested else "-"),
        (
            "strategy",
            f"{cfg.get('strategy', 'ga')}, population {cfg.get('population', '?')}, "
            f"{_plural(run.completed, 'generation')}, {_plural(int(cfg.get('episodes', 1)), 'episode')} per fitness",
        ),
        _steps_line(steps),
        ("wall time", f"{_clock(wall)} (the generations; the final selection and test are not timed)"),
    ]
    figures = {"connections": connections, "parameters": n_params, "env_steps": steps, "wall_seconds": wall}
    report = Report(run.path, "evolve", str(cfg.get("env", "?")), header, figures)
    if not tested or not champion.test_returns.size:
        report.no_test = "none yet: the run has not finished" if not tested else "none (test_episodes = 0)"
        return report
    header.append(("champion", _champion_line(champion)))
    report.returns, report.lengths = champion.test_returns, champion.test_steps
    report.outcomes, report.cost = champion.test_outcomes, champion.test_action_cost
    # the writer stores NaN as the magnitude of a choice (an evolution file keeps no space)
    report.discrete = report.cost is not None and bool(np.all(np.isnan(report.cost)))
    return report


def _champion_line(champion) -> str:
    """Where the champion comes from and what chose it."""
    on = f"fitness {champion.fitness:.2f}" if math.isfinite(champion.fitness) else "the final centre"
    sel = champion.selection_fitness
    chosen = f", selection fitness {sel:.2f}" if sel is not None and math.isfinite(sel) else ""
    return f"generation {champion.generation}, {on}{chosen}"


def _read_ppo(run) -> Report:
    cfg = run.config
    epochs = int(cfg.get("epochs", run.completed))
    test = run.policy_test()
    steps = {"training": _last(run, "TotalEnvInteracts"), "test": int(np.sum(test["steps"])) if test else 0}
    n_pi = run.n_pi
    times = run.timing("Time")
    wall = float(times[-1]) if len(times) and np.isfinite(times[-1]) else 0.0
    hidden = " ".join(str(h) for h in cfg.get("hid", ()))
    state = "finished" if run.completed >= epochs else f"unfinished ({run.completed} of {epochs} epochs)"
    header = [
        ("run", f"{run.path} (PPO, {state})"),
        ("task", _task(cfg)),
        ("agent", f"PPO's {'categorical' if run.discrete else 'Gaussian'} MLP policy, hidden {hidden}"),
        ("connections", f"{n_pi:,} (the policy's parameters, dense)"),
        (
            "strategy",
            f"PPO, {_plural(run.completed, 'epoch')} x {cfg.get('steps_per_epoch', '?')} steps, "
            f"{_plural(run.ranks, 'rank')}",
        ),
        _steps_line(steps),
        ("wall time", f"{_clock(wall)} (the epochs; the final test is not timed)"),
    ]
    figures = {"connections": n_pi, "parameters": n_pi, "env_steps": steps, "wall_seconds": wall}
    report = Report(run.path, "ppo", str(cfg.get("env", "?")), header, figures, discrete=run.discrete)
    if test is None:
        tests = int(cfg.get("test_episodes", 0))
        report.no_test = "none yet: the run has not finished" if tests else "none (test_episodes = 0)"
        return report
    header.append(("test", "the final policy's mean action (most likely choice)"))
    report.returns, report.lengths = test["returns"], test["steps"]
    report.outcomes, report.cost = test.get("outcomes"), test.get("action_cost")
    return report


def _steps_line(steps: dict[str, int]) -> tuple[str, str]:
    parts = ", ".join(f"{v:,} {k}" for k, v in steps.items())
    return "env steps", f"{sum(steps.values()):,} ({parts})"


def _clock(seconds: float) -> str:
    if seconds < 60:
        return f"{max(seconds, 0):.1f} s"
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


# ------------------------------------------------------------------------------ the table
def rows(report: Report) -> list[dict]:
    """The table: one row per outcome (finished, fell and out of time always; the others
    where they occur), then ``all``; without recorded outcomes, ``all`` alone."""
    cost = column(report)
    if report.outcomes is None:
        return [_row("all", report, np.ones(report.returns.size, bool), cost, recorded=False)]
    names = labels(report.env)
    out = [_row(names[c][0], report, report.outcomes == c, cost) for c in shown(report)]
    return [*out, _row("all", report, np.ones(report.returns.size, bool), cost)]


def shown(report: Report) -> list[int]:
    """The outcomes the table has a row for: finished and out of time always, fell too in
    the tasks where -100 is a fall, the others where they occur."""
    always = [oc.FINISHED, oc.FELL, oc.OUT_OF_TIME] if _box2d(report.env) else [oc.FINISHED, oc.OUT_OF_TIME]
    found = set() if report.outcomes is None else set(np.unique(report.outcomes).tolist())
    return [c for c in (oc.FINISHED, oc.FELL, oc.OUT_OF_TIME, oc.STOPPED, oc.NOT_RUN) if c in always or c in found]


def _box2d(env: str) -> bool:
    return env.startswith(("BipedalWalker", "LunarLander"))


def _row(name: str, report: Report, mask: np.ndarray, cost: Cost, recorded: bool = True) -> dict:
    n = int(mask.sum())
    r = np.asarray(report.returns, dtype=np.float64)[mask]
    costs = None if report.cost is None or not recorded else np.asarray(report.cost)[mask] * cost.factor
    return {
        "outcome": name,
        "count": n,
        "mean_return": float(r.mean()) if n else None,
        "std_return": float(r.std()) if n else None,
        "min_return": float(r.min()) if n else None,
        "mean_cost": float(costs.mean()) if n and costs is not None and not np.isnan(costs).all() else None,
        "mean_length": float(np.mean(np.asarray(report.lengths)[mask])) if n else None,
    }


COLUMNS = (
    ("outcome", "outcome", "{}"),
    ("count", "episodes", "{:,}"),
    ("mean_return", "mean return", "{:.2f}"),
    ("std_return", "std", "{:.2f}"),
    ("min_return", "min return", "{:.2f}"),
    ("mean_cost", "mean {cost}", "{:.2f}"),
    ("mean_length", "mean length", "{:.1f}"),
)


def table(report: Report) -> list[str]:
    """The rows as aligned text (names left, numbers right; ``-`` where there is none)."""
    cost = column(report)
    head = [title.format(cost=cost.name) for _, title, _ in COLUMNS]
    body = [[("-" if row[key] is None else fmt.format(row[key])) for key, _, fmt in COLUMNS] for row in rows(report)]
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    lines = []
    for cells in (head, *body):
        first = cells[0].ljust(widths[0])
        lines.append("  " + "  ".join([first, *(c.rjust(w) for c, w in zip(cells[1:], widths[1:]))]))
    return lines


def render(report: Report) -> str:
    """The report for people: the header, then the test episodes' table and what it means."""
    width = max(len(label) for label, _ in report.header)
    lines = [f"{label.ljust(width)}  {text}" for label, text in report.header]
    if report.no_test:
        return "\n".join([*lines, f"{'test'.ljust(width)}  {report.no_test}"]) + "\n"
    cost = column(report)
    lines.append("")
    if report.outcomes is None:
        lines.append(
            f"test episodes ({report.returns.size}): outcomes and action cost not recorded "
            "(a run file written before synapto kept them); all episodes together:"
        )
    else:
        lines.append(f"test episodes ({report.returns.size}) by outcome:")
    lines += table(report)
    if report.outcomes is not None:
        names = labels(report.env)
        lines += [f"  {names[c][0]}: {names[c][1]}" for c in shown(report)]
        lines.append(f"  {cost.name}: {cost.meaning}")
    return "\n".join(lines) + "\n"


def as_json(report: Report) -> str:
    """The report for programs (one JSON object; ``null`` where a figure does not exist)."""
    cost = column(report)
    test = None
    if not report.no_test:
        test = {
            "episodes": int(report.returns.size),
            "outcomes_recorded": report.outcomes is not None,
            "cost": {"name": cost.name, "meaning": cost.meaning},
            "rows": rows(report),
        }
    out = {
        "path": str(report.path),
        "kind": report.kind,
        "env": report.env,
        "header": dict(report.header),
        **report.figures,
        "test": test,
        "no_test": report.no_test or None,
    }
    return json.dumps(out, indent=2) + "\n"
