"""synapto tune: the search finds the known best region of the CartPole space, the pruner stops
a trailing trial, a study killed with -9 and continued equals an uninterrupted one, bad space
files are one line and exit 2, the best config runs, and a missing Optuna names its extra."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest
from conftest import ROOT, run_cli, start_cli

if os.environ.get("SYNAPTO_REQUIRE_EXTRAS"):  # `make test`: the tune extra is installed, its absence an error
    import optuna
else:
    optuna = pytest.importorskip("optuna")

from synapto.cli import main

#: the shipped CartPole base, cut down to seconds: 8,000 env steps a run
BASE = (ROOT / "experiments" / "cartpole.toml").read_text().replace("20_000", "8_000")
LR_SPACE = "benchmark_seeds = [1, 2]\n[params]\nlr = { log_uniform = [0.0001, 0.3] }\n"


def tune(capsys, *args) -> tuple[int, str, str]:
    """``python -m synapto tune ARGS`` in this process: (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as exit_:
        main(["tune", *map(str, args)])
    out, err = capsys.readouterr()
    return exit_.value.code, out, err


@pytest.fixture
def base(tmp_path):
    path = tmp_path / "base.toml"
    path.write_text(BASE)
    return path


def write(tmp_path, text: str, name: str = "space.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def finished(db: str) -> list[optuna.trial.FrozenTrial]:
    study = optuna.load_study(study_name=None, storage=f"sqlite:///{db}")
    return [t for t in study.trials if t.state.is_finished() and t.state != optuna.trial.TrialState.FAIL]


BAD_SPACES = {
    "nosuch = { uniform = [0, 1] }": "unknown option 'nosuch'",
    "'strategy_options.nosuch' = { uniform = [0.0, 1.0] }": "nosuch",
    "seed = { int = [0, 9] }": "never tuned",
    "lr = { uniform = [0.3, 0.1] }": "low < high",
    "lr = { log_uniform = [0.0, 0.1] }": "log scale needs low > 0",
    "population = { int = [8, 20], step = 8 }": "multiple of step",
    "population = { uniform = [8.0, 16.0] }": "--population must be an integer",
    "lr = { uniform = ['a', 1] }": "two numbers",
    "lr = { choices = [] }": "non-empty list",
    "lr = 0.1": "must be a table",
    "lr = { uniform = [0.1, 0.2], normal = 1 }": "exactly one of",
}


@pytest.mark.parametrize("line", sorted(BAD_SPACES))
def test_a_bad_space_file_is_one_line_and_exit_2(capsys, tmp_path, base, line):
    space = write(tmp_path, f"[params]\n{line}\n")
    code, _out, err = tune(capsys, "--config", base, "--space", space, "--seeds", 1000, "--study", tmp_path / "s.db")
    assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
    assert BAD_SPACES[line] in err, err
    assert not (tmp_path / "s.db").exists()  # nothing written


def test_benchmark_seeds_are_refused(capsys, tmp_path, base):
    code, _, err = tune(
        capsys, "--config", base, "--space", write(tmp_path, LR_SPACE), "--seeds", 1000, 2, "--study", tmp_path / "s.db"
    )
    assert code == 2 and "[2] are benchmark seeds" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "s.db").exists()


def test_without_optuna_tune_names_its_extra(capsys, tmp_path, base, monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)  # import optuna raises ImportError
    code, _, err = tune(capsys, "--config", base, "--space", "cartpole", "--seeds", 1000, "--study", tmp_path / "s.db")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "synapto-evo[tune]" in err, err


SPACES = sorted((ROOT / "experiments" / "spaces").glob("*.toml"))


@pytest.mark.parametrize("path", SPACES, ids=[p.stem for p in SPACES])
def test_each_shipped_space_is_found_by_name_fits_its_config_and_is_in_sync(path):
    """experiments/spaces/NAME.toml samples experiments/NAME.toml; both are reachable by name."""
    from synapto.tune.base import load_base
    from synapto.tune.space import check_space, load_space

    space = load_space(path.stem)
    check_space(space, load_base(path.stem))
    assert space.params and 1000 not in space.benchmark_seeds
    shipped = ROOT / "synapto" / "experiments" / "spaces" / path.name
    assert shipped.read_text() == path.read_text()


@pytest.mark.long
@pytest.mark.slow
def test_the_search_finds_the_known_best_region_and_its_config_runs(capsys, tmp_path, base):
    db = tmp_path / "lr.db"
    code, out, err = tune(
        capsys,
        "--config",
        base,
        "--space",
        write(tmp_path, LR_SPACE),
        "--seeds",
        1000,
        "--trials",
        6,
        "--study",
        db,
        "--pruner",
        "none",
        "--score-episodes",
        10,
        "--sampler-seed",
        2,
    )
    assert code == 0, err
    trials = finished(str(db))
    assert len(trials) == 6
    best = max(trials, key=lambda t: t.value)
    # the known best region: lr above 0.02 learns CartPole in these steps; below 0.001 it does not
    assert best.params["lr"] > 0.02 and best.value > 100, [(t.params, t.value) for t in trials]
    assert all(t.value < 60 for t in trials if t.params["lr"] < 1e-3)
    best_toml = tmp_path / "lr.best.toml"
    text = best_toml.read_text()
    assert f"lr = {best.params['lr']!r}" in text and "trial" in text.splitlines()[0]
    run = tmp_path / "best.h5"
    code, _, err = 0, None, None
    proc = run_cli("evolve", "--config", best_toml, "--max-env-steps", 1000, "--test-episodes", 2, "--out", run)
    assert proc.returncode == 0 and run.exists(), proc.stderr
    code, out, err = tune(capsys, "--report", db)
    assert code == 0 and "never used in tuning" in out and (tmp_path / "lr.history.png").exists(), err
    assert (tmp_path / "lr.importance.png").exists()


@pytest.mark.slow
def test_the_pruner_stops_a_trial_made_to_trail(capsys, tmp_path, base):
    db = tmp_path / "p.db"
    space = write(tmp_path, "[params]\nlr = { choices = [0.2, 0.0001] }\n")
    study = optuna.create_study(study_name="p", storage=f"sqlite:///{db}", direction="maximize")
    for lr in (0.2, 0.2, 0.2, 0.0001):  # three that learn, then one that cannot keep up
        study.enqueue_trial({"lr": lr})
    code, out, err = tune(
        capsys,
        "--config",
        base,
        "--space",
        space,
        "--seeds",
        1000,
        "--trials",
        4,
        "--study",
        db,
        "--pruner",
        "median",
        "--score-episodes",
        5,
    )
    assert code == 0, err
    states = [t.state.name for t in optuna.load_study(study_name="p", storage=f"sqlite:///{db}").trials]
    assert states == ["COMPLETE"] * 3 + ["PRUNED"], out
    trailing = finished(str(db))[3]
    assert trailing.user_attrs["env_steps"] < 8000  # its run stopped early


def _study_key(db) -> list:
    return sorted((tuple(sorted(t.params.items())), t.value, t.state.name) for t in finished(str(db)))


def _states(db) -> set[str]:
    """The trials' states, read-only (Optuna's own reader would create tables the child is creating)."""
    import sqlite3

    if not db.exists():
        return set()
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
            rows = con.execute(
                "SELECT t.state, (SELECT COUNT(*) FROM trial_params p WHERE p.trial_id = t.trial_id) FROM trials t"
            ).fetchall()
    except sqlite3.Error:  # no tables yet
        return set()
    return {state + (" with params" if state == "RUNNING" and n else "") for state, n in rows}


@pytest.mark.long
@pytest.mark.slow
def test_kill_9_then_the_same_command_equals_an_uninterrupted_study(capsys, tmp_path, base):
    space = write(tmp_path, LR_SPACE)
    common = [
        "--config",
        base,
        "--space",
        space,
        "--seeds",
        1000,
        "--trials",
        4,
        "--pruner",
        "none",
        "--score-episodes",
        5,
        "--sampler-seed",
        7,
    ]
    code, _, err = tune(capsys, *common, "--study", tmp_path / "a.db")
    assert code == 0, err
    db = tmp_path / "b.db"
    proc = start_cli("tune", *common, "--study", db)
    deadline = time.monotonic() + 240
    while True:  # kill it while a trial runs, after one has finished
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        if _states(db) >= {"COMPLETE", "RUNNING with params"}:
            break
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    rerun = run_cli("tune", *common, "--study", db)
    assert rerun.returncode == 0 and "queued to run again" in rerun.stdout + rerun.stderr, rerun.stderr
    assert len(finished(str(db))) == 4 and _study_key(db) == _study_key(tmp_path / "a.db")
    states = [t.state.name for t in optuna.load_study(study_name=None, storage=f"sqlite:///{db}").trials]
    assert states.count("FAIL") == 1 and "RUNNING" not in states


def test_a_ppo_config_is_refused_in_one_line(capsys, tmp_path):
    code, _, err = tune(
        capsys, "--config", "ppo_lunarlander", "--space", "cartpole", "--seeds", 1000, "--study", tmp_path / "s.db"
    )
    assert code == 2 and "is a PPO config" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "s.db").exists()
