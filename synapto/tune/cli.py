"""``python -m synapto tune``: the command (registered by :mod:`synapto.cli`)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import typer

from synapto.common.declare import Request, command, multi_value_flags, opt
from synapto.common.errors import UsageError
from synapto.common.logs import say
from synapto.common.shell import next_lines, synapto_command

PRUNERS = ("median", "halving", "hyperband", "none")

TUNE_HELP = (
    "Search a base config's options with Optuna: each trial runs the base with sampled values on the "
    "tuning seeds, is scored on the TUNE stream (never the test stream) and may be pruned at env-step "
    "milestones. The study lives in a database; the same command continues a killed study. The best "
    "trial is written beside the study as FILE.best.toml. Needs the tune extra."
)


def _require_optuna() -> None:
    try:
        import optuna  # noqa: F401
    except ImportError:
        raise UsageError("tune needs Optuna, the tune extra: pip install 'synapto-evo[tune]'") from None


@dataclass(frozen=True)
class TuneOptions:
    """``tune``'s options (:mod:`synapto.common.declare`)."""

    config: Path | None = opt(
        None,
        help="Base evolve config: a TOML file or a shipped config's name (cartpole, lunarlander_learn, ...).",
        show_default=False,
    )
    space: Path | None = opt(
        None, help="Search space TOML (docs/tuning.md), or a shipped one's name (cartpole).", show_default=False
    )
    seeds: list[int] | None = opt(
        None,
        help="Tuning seeds each trial runs, e.g. --seeds 1000 1001 1002; none of the space's benchmark_seeds.",
        show_default=False,
        multi=True,
    )
    trials: int = opt(20, help="Finished trials the study reaches (complete, pruned, or failed to score).")
    study: str | None = opt(
        None,
        help="The study: FILE.db (SQLite) or a database URL Optuna accepts; several processes may share it.",
        show_default=False,
    )
    study_name: str | None = opt(
        None,
        help="The study's name in the database; another name than the file's stem writes FILE.NAME.best.toml.",
        show_default="the study file's stem, or 'synapto'",
    )
    pruner: str = opt("median", help="median, halving (successive halving), hyperband, or none.")
    milestones: int = opt(
        10, help="Env-step milestones per run at which a trial reports its validation mean to the pruner."
    )
    score_episodes: int = opt(100, help="TUNE-stream episodes that score each seed's champion.")
    workers: int = opt(0, help="Worker processes of each run (mpiexec -n W+1); 0 runs in this process.")
    sampler_seed: int = opt(0, help="Seed of the TPE sampler (reseeded per trial from it).")
    heartbeat: int = opt(
        60,
        help="Seconds between a running trial's heartbeats; a trial silent "
        "for twice as long is rerun by another process.",
    )
    report: str | None = opt(
        None, help="Print the study FILE.db's trials and write its plots, instead of tuning.", show_default=False
    )


#: the flags of tune's options that take several space-separated values
MULTI_VALUE_OPTIONS = tuple(multi_value_flags(TuneOptions))


def tune(request: Request) -> None:
    o: TuneOptions = request.build(TuneOptions)
    _require_optuna()
    if o.report is not None:
        return _report(o.report, o.study_name, say)
    for name, value in (("--config", o.config), ("--space", o.space), ("--seeds", o.seeds), ("--study", o.study)):
        if not value:
            raise UsageError(f"tune needs {name} (or --report FILE.db)")
    _run(_plan(o), o.sampler_seed, say)


def _plan(o: TuneOptions) -> dict:
    """Everything checked before anything is written (one line, exit 2)."""
    from synapto.evolution.config import file_values
    from synapto.evolution.run_options import check_task_timeout
    from synapto.tune.base import load_base
    from synapto.tune.space import check_space, load_space
    from synapto.tune.storage import check_writable

    assert o.space is not None and o.study is not None  # (tune() refuses a study without them)

    for name, value, low in (
        ("--trials", o.trials, 1),
        ("--milestones", o.milestones, 1),
        ("--score-episodes", o.score_episodes, 1),
        ("--workers", o.workers, 0),
        ("--heartbeat", o.heartbeat, 1),
    ):
        if value < low:
            raise UsageError(f"{name} must be an integer >= {low}, got {value}")
    if o.pruner not in PRUNERS:
        raise UsageError(f"--pruner must be one of {', '.join(PRUNERS)}, got {o.pruner!r}")
    seeds = list(o.seeds or ())
    if len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise UsageError(f"--seeds must be distinct integers >= 0, got {seeds}")
    base, raw = load_base(o.config), file_values(o.config)
    space = load_space(o.space)
    banned = sorted(set(seeds) & set(space.benchmark_seeds))
    if banned:
        raise UsageError(
            f"--seeds {banned} are benchmark seeds of {space.path!r}: tune on other seeds, so that "
            f"the chosen setting can be scored on seeds it never saw"
        )
    check_space(space, base)
    _check_milestones(o.config, base, space, o.pruner, o.milestones)
    check_writable(o.study)
    name = o.study_name or _default_name(str(o.study))
    if not name.strip():
        raise UsageError("--study-name must not be empty")
    return dict(
        base=base,
        raw=raw,
        space=space,
        seeds=seeds,
        trials=o.trials,
        study=o.study,
        name=name,
        pruner=o.pruner,
        milestones=o.milestones,
        score_episodes=o.score_episodes,
        workers=o.workers,
        heartbeat=o.heartbeat,
        config=str(o.config),
        task_timeout=check_task_timeout(raw.get("task_timeout")),
    )


def _default_name(study: str) -> str:
    """A study's name when --study-name is not given: the SQLite file's stem, or 'synapto'."""
    return Path(study).stem if "://" not in study else "synapto"


def _check_milestones(config, base: dict, space, pruner: str, milestones: int) -> None:
    """Milestones need an env-step budget, and at most one milestone per env step of it."""
    steps = [p for p in space.params if p.name == "max_env_steps"]
    budgets = [v for v in (steps[0].corners() if steps else [base.get("max_env_steps", 0)]) if v]
    if pruner != "none" and not budgets:
        raise UsageError(
            f"--pruner {pruner} reports at env-step milestones: --config {str(config)!r} needs "
            f"max-env-steps > 0 (or use --pruner none)"
        )
    if budgets and milestones > min(budgets):
        raise UsageError(
            f"--milestones {milestones} is more than the env-step budget of a run (max-env-steps "
            f"{min(budgets):,}): at most one milestone per env step"
        )


def _run(plan: dict, sampler_seed: int, log) -> None:
    import optuna
    import typer

    from synapto.tune.best import best_path, trials_dir
    from synapto.tune.storage import creating, open_storage
    from synapto.tune.study import identity, make_pruner, open_study, requeue, run_trials
    from synapto.tune.trial import Objective, TrialStopped

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    ident = identity(plan["base"], plan["space"], plan["seeds"], plan["milestones"], plan["score_episodes"])
    with creating(plan["study"]):  # processes started together on a new file take turns making it
        storage = open_storage(plan["study"], plan["heartbeat"], callback=requeue)
        study = open_study(storage, plan["name"], ident, make_pruner(plan["pruner"], plan["milestones"]))
    objective = Objective(
        plan["space"],
        plan["base"],
        plan["seeds"],
        trials_dir(plan["study"], plan["name"]),
        plan["workers"],
        plan["milestones"],
        plan["score_episodes"],
        log,
        n_trials=plan["trials"],
        sampler_seed=sampler_seed,
        task_timeout=plan["task_timeout"],
    )
    try:
        run_trials(study, objective, plan["trials"], log)
    except TrialStopped as exc:  # as evolve reports a run that stopped: one line, exit code 1
        sys.stderr.write(f"error: {exc}; the trial is marked failed (the same command goes on with a new one)\n")
        raise typer.Exit(1) from None
    path = best_path(plan["study"], plan["name"])
    if _write_best(study, plan, path):
        log(next_steps(plan, path))
    else:
        log(f"no trial of study {plan['name']!r} completed: no best config")


def next_steps(plan: dict, best: Path) -> str:
    """What a study wrote and the commands that follow it, as they run from a fresh shell: its
    report, and the best config on seeds never used in tuning (the space's benchmark seeds,
    else the first seeds above the tuning seeds)."""
    from synapto.tune.best import trials_dir

    named = [] if plan["name"] == _default_name(plan["study"]) else ["--study-name", plan["name"]]
    seeds = list(plan["space"].benchmark_seeds) or [max(plan["seeds"]) + 1 + i for i in range(3)]
    return next_lines(
        ("best config", best),
        ("trials' runs", f"{trials_dir(plan['study'], plan['name'])}/"),
        ("table and plots", synapto_command("tune", "--report", plan["study"], *named)),
        ("score it", synapto_command("evolve", "--config", best, "--seed", *seeds)),
    )


def _write_best(study, plan: dict, path: Path) -> bool:
    from optuna.trial import TrialState

    from synapto.tune.base import with_params
    from synapto.tune.best import write_best

    if not study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        return False
    best = study.best_trial
    by_name = {p.name: p for p in plan["space"].params}
    params = {k: by_name[k].decode(v) for k, v in best.params.items()}
    header = [
        f"Chosen by `synapto tune`: study {plan['name']!r} in {plan['study']}, trial {best.number}, "
        f"tuning score {best.value:.2f}",
        f"(mean over tuning seeds {plan['seeds']}; base config {plan['config']}, space {plan['space'].path}).",
        "Score it on seeds never used in tuning"
        + (f" (benchmark seeds {list(plan['space'].benchmark_seeds)})" if plan["space"].benchmark_seeds else "")
        + " before quoting it.",
    ]
    write_best(path, with_params(plan["base"], params), plan["raw"], header)
    return True


def _report(study: str, name: str | None, log) -> None:
    from synapto.tune.report import report
    from synapto.tune.storage import open_reader

    if "://" not in study and not Path(study).is_file():
        raise UsageError(f"--report {study!r}: no such study file")
    report(open_reader(study), name, study, log)


def register(app: typer.Typer) -> None:
    """Add ``tune`` to ``app``."""
    app.command("tune", help=TUNE_HELP)(command(tune, TuneOptions))
