"""``tune --report FILE.db``: the table of trials, what pruning saved, the tuning layer's
overhead, and the parameter-importance and history plots (matplotlib, the plot extra)."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import optuna
from optuna.trial import TrialState

from synapto.common.errors import UsageError
from synapto.common.shell import next_lines
from synapto.tune.best import study_stem

REMINDER = (
    "reminder: these scores are on tuning seeds; score the chosen setting on seeds never used in "
    "tuning (the space's benchmark_seeds) before quoting it"
)


def load(storage, name: str | None):
    names = [s.study_name for s in optuna.get_all_study_summaries(storage)]
    if not names:
        raise UsageError("--report: the database holds no study")
    if name is None and len(names) > 1:
        raise UsageError(f"--report: the database holds several studies ({', '.join(names)}): give --study-name")
    name = name or names[0]
    if name not in names:
        raise UsageError(f"--report: no study {name!r} in the database; it holds {', '.join(names)}")
    study = optuna.load_study(study_name=name, storage=storage)
    if len(study.directions) != 1:
        raise UsageError(
            f"--report: study {name!r} has {len(study.directions)} objectives; tune's studies (and its report) have one"
        )
    return study


def shown(study) -> list:
    """The trials of the table: all but surplus ones (started when --trials were already, never run)."""
    return [t for t in study.trials if "surplus" not in t.user_attrs]


def failed(t) -> bool:
    """A trial that could not be scored (counted as finished; see :mod:`.study`)."""
    return "failed" in t.user_attrs


def table(study) -> list[str]:
    names = sorted({k for t in study.trials for k in t.params})
    head = f"{'trial':>5}  {'state':<8} {'score':>9} {'env steps':>11} {'wall s':>8}  " + "  ".join(names)
    rows = [head]
    for t in shown(study):
        value = f"{t.value:9.2f}" if t.value is not None and not failed(t) else f"{'-':>9}"
        steps = t.user_attrs.get("env_steps")
        wall = (t.datetime_complete - t.datetime_start).total_seconds() if t.datetime_complete else math.nan
        params = "  ".join(_short(t.params.get(n)) for n in names)
        rows.append(
            f"{t.number:>5}  {'FAILED' if failed(t) else t.state.name:<8} {value} "
            f"{steps if steps is not None else '-':>11} {wall:8.1f}  {params}"
        )
    rows += [f"trial {t.number} failed: {t.user_attrs['failed']}" for t in shown(study) if failed(t)]
    return rows


def _short(v) -> str:
    return "-" if v is None else f"{v:.4g}" if isinstance(v, float) else str(v)


def savings(study) -> str | None:
    """Env steps spent against running every finished trial to the end."""
    done = [t for t in study.trials if t.state == TrialState.COMPLETE and "env_steps" in t.user_attrs]
    finished = [t for t in study.trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED) and not failed(t)]
    if not done:
        return None
    spent = sum(int(t.user_attrs.get("env_steps", 0)) for t in finished)
    full = float(np.mean([t.user_attrs["env_steps"] for t in done])) * len(finished)
    pruned = sum(t.state == TrialState.PRUNED for t in finished)
    return (
        f"env steps: {spent:,} spent on {len(finished)} finished trials ({pruned} pruned); running every one "
        f"to the end: about {full:,.0f} ({full / max(spent, 1):.2f}x what was spent)"
    )


def overhead(study) -> str | None:
    """The tuning layer's time per trial: trial wall time minus the runs and the scoring."""
    done = [t for t in study.trials if t.state == TrialState.COMPLETE and "run_wall" in t.user_attrs]
    done = [t for t in done if t.user_attrs["run_wall"] > 0]  # trials whose runs all ran
    if not done:
        return None
    walls = np.array([(t.datetime_complete - t.datetime_start).total_seconds() for t in done])
    layer = walls - np.array([t.user_attrs["run_wall"] + t.user_attrs["score_wall"] for t in done])
    return (
        f"tuning layer: {np.median(layer):.3f} s per trial (median of {len(done)}), "
        f"{100 * np.median(layer / walls):.2f} % of a trial's wall time"
    )


def plots(study, stem: Path) -> list[Path]:
    """The history and parameter-importance plots, ``<stem>.history.png`` and ``.importance.png``."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("--report's plots need matplotlib: pip install 'synapto-evo[plot]'") from None

    from optuna.visualization import matplotlib as ovm

    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    out = []
    out.append(_save(plt, ovm.plot_optimization_history(study), stem.with_name(stem.name + ".history.png")))
    complete = [t for t in study.trials if t.state == TrialState.COMPLETE]
    if len(complete) >= 2 and complete[0].params:
        from optuna.importance import PedAnovaImportanceEvaluator

        ax = ovm.plot_param_importances(study, evaluator=PedAnovaImportanceEvaluator())
        out.append(_save(plt, ax, stem.with_name(stem.name + ".importance.png")))
    return out


def _save(plt, ax, path: Path) -> Path:
    """The figure of ``ax`` written to ``path`` (PNG), then closed."""
    from matplotlib.figure import Figure

    fig = ax.figure
    if not isinstance(fig, Figure):  # a subfigure: the figure it lies in
        fig = fig.figure
    try:
        fig.savefig(path, dpi=100, bbox_inches="tight")
    except OSError as exc:
        raise UsageError(f"--report cannot write its plot {str(path)!r} ({exc.strerror or exc})") from None
    finally:
        plt.close(fig)
    return path


def report(storage, name: str | None, study_arg: str, log) -> None:
    """Print the table and figures of the study ``name`` in ``storage`` (``--report STUDY_ARG``)."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = load(storage, name)
    for row in table(study):
        log(row)
    complete = [t for t in study.trials if t.state == TrialState.COMPLETE]
    if complete:
        best = study.best_trial
        log(f"best: trial {best.number}, tuning score {best.value:.2f}, {best.params}")
    for line in (savings(study), overhead(study)):
        if line:
            log(line)
    written = []
    if complete:
        written = [(_plot_label(path), path) for path in plots(study, study_stem(study_arg, study.study_name))]
    else:
        log(f"no trial of study {study.study_name!r} completed: no best trial and nothing to plot")
    log(REMINDER)
    if written:
        log(next_lines(*written))


def _plot_label(path: Path) -> str:
    """``history plot`` of ``NAME.history.png``."""
    return f"{Path(path).suffixes[-2].lstrip('.')} plot" if len(Path(path).suffixes) >= 2 else "plot"
