"""synapto tune's bad inputs: spaces whose inside breaks a rule, one option under two names,
files that are not UTF-8, bounds that overflow, milestones above the budget, read-only
studies; and ``--report``, which never writes to the database it reads."""

from __future__ import annotations

import hashlib
import os
import sqlite3

import pytest
from conftest import run_cli

if os.environ.get("SYNAPTO_REQUIRE_EXTRAS"):  # `make test`: the tune extra is installed, its absence an error
    import optuna
else:
    optuna = pytest.importorskip("optuna")

from tune_base import TINY, one_line, tune


@pytest.fixture
def base(tmp_path):
    path = tmp_path / "base.toml"
    path.write_text(TINY)
    return path


def refused(capsys, tmp_path, base, space_text: str | bytes, *extra) -> str:
    """Run tune with the space ``space_text``: it must be refused in one line, with no study made."""
    space = tmp_path / "space.toml"
    space.write_bytes(space_text if isinstance(space_text, bytes) else space_text.encode())
    db = tmp_path / "s.db"
    code, _, err = tune(capsys, "--config", base, "--space", space, "--seeds", 1000, "--study", db, *extra)
    assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
    assert not db.exists()  # refused before anything was written
    return err


INSIDE = {
    # the bounds meet the rule, values inside do not: refused before the study starts
    "population = { int = [4, 10] }": "population = 5: strategy 'openai-es' needs an even population",
    "population = { uniform = [4, 16] }": "population = 4.0: --population must be an integer",
    "population = { int = [2, 1000000000000], step = 2 }": "needs at least",  # memory, as evolve checks it
}


@pytest.mark.parametrize("line", sorted(INSIDE))
def test_a_space_whose_inside_breaks_a_rule_is_refused_up_front(capsys, tmp_path, base, line):
    assert INSIDE[line] in refused(capsys, tmp_path, base, f"[params]\n{line}\n")


ALIASES = {
    "lr = { uniform = [0.01, 0.1] }\n[params.strategy_options]\nlr = { uniform = [0.01, 0.2] }\n": "lr and "
    "strategy_options.lr name one option",
    'sigma = { uniform = [0.05, 0.1] }\n"strategy_options.sigma" = { uniform = [0.05, 0.2] }\n': "sigma and "
    "strategy_options.sigma name one option",
    "max-env-steps = { choices = [1000] }\nmax_env_steps = { choices = [3000] }\n": "max_env_steps is named twice",
}


@pytest.mark.parametrize("text", sorted(ALIASES), ids=["lr", "max_env_steps", "sigma"])
def test_one_option_under_two_names_is_refused(capsys, tmp_path, base, text):
    assert ALIASES[text] in refused(capsys, tmp_path, base, f"[params]\n{text}")


def test_a_space_file_that_is_not_utf8_is_one_line(capsys, tmp_path, base):
    err = refused(capsys, tmp_path, base, b"\xff\xfe\x00[params]\nlr = { uniform = [0.01, 0.1] }\n")
    assert "is not UTF-8 text (byte 0)" in err


def test_uniform_bounds_whose_range_overflows_are_one_line(capsys, tmp_path, base):
    err = refused(capsys, tmp_path, base, '[params]\n"env_options.fall_reward" = { uniform = [-1e308, 1e308] }\n')
    assert "too far apart" in err


def test_milestones_above_the_env_step_budget_are_refused(capsys, tmp_path, base):
    space = "[params]\nlr = { uniform = [0.01, 0.1] }\n"
    assert "--milestones 2001 is more than the env-step budget" in refused(
        capsys, tmp_path, base, space, "--milestones", 2001
    )
    sampled = "[params]\nmax-env-steps = { int = [1000, 5000], step = 1000 }\n"
    err = refused(capsys, tmp_path, base, sampled, "--milestones", 1500, "--pruner", "none")
    assert "max-env-steps 1,000" in err  # the smallest budget the space samples


def _study_with_trials(db, *, values=(1.0, 2.0), states=None, directions=("maximize",)) -> None:
    """A study in ``db`` with finished trials of one parameter, made without running anything."""
    from optuna.distributions import FloatDistribution
    from optuna.trial import TrialState, create_trial

    study = optuna.create_study(study_name=db.stem, storage=f"sqlite:///{db}", directions=list(directions))
    for i, v in enumerate(values):
        state = (states or {}).get(i, TrialState.COMPLETE)
        done = state == TrialState.COMPLETE
        study.add_trial(
            create_trial(
                params={"lr": 0.01 * (i + 1)},
                distributions={"lr": FloatDistribution(0.001, 0.3)},
                **({"values": [v] * len(directions)} if done else {}),
                state=state,
            )
        )


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_report_on_an_empty_or_foreign_file_refuses_and_leaves_it_as_it_was(capsys, tmp_path):
    empty, foreign, text = tmp_path / "empty.db", tmp_path / "foreign.db", tmp_path / "text.db"
    empty.write_bytes(b"")
    with sqlite3.connect(foreign) as con:
        con.execute("create table customers (id integer primary key, name text)")
        con.execute("insert into customers (name) values ('a')")
    text.write_text("not a database\n" * 100)
    for path in (empty, foreign, text):
        before = digest(path)
        code, _, err = tune(capsys, "--report", path)
        one_line(code, err, "is not a study database")
        assert digest(path) == before, path  # not one byte written
    assert "customers" in tune(capsys, "--report", foreign)[2]


def test_report_on_a_multi_objective_study_is_one_line(capsys, tmp_path):
    db = tmp_path / "multi.db"
    _study_with_trials(db, directions=("maximize", "minimize"))
    code, _, err = tune(capsys, "--report", db)
    one_line(code, err, "has 2 objectives")


@pytest.mark.slow
def test_report_on_only_failed_trials_says_so_in_one_line_of_its_own(tmp_path):
    from optuna.trial import TrialState

    db = tmp_path / "failed.db"
    _study_with_trials(db, states={0: TrialState.FAIL, 1: TrialState.FAIL})
    proc = run_cli("tune", "--report", db, timeout=120)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr  # no Optuna or matplotlib warning
    assert "no trial of study 'failed' completed: no best trial and nothing to plot" in proc.stdout
    assert not (tmp_path / "failed.history.png").exists()


@pytest.mark.slow
def test_a_read_only_study_is_one_line_for_tune_and_report(tmp_path, base):
    from private_fs import on_tmpfs

    db = tmp_path / "ro.db"
    _study_with_trials(db)
    space = tmp_path / "space.toml"
    space.write_text("[params]\nlr = { uniform = [0.001, 0.3] }\n")
    study = ["--config", str(base), "--space", str(space), "--seeds", "1000", "--study", "{mnt}/ro.db"]
    _, results = on_tmpfs(
        tmp_path,
        4 << 20,
        [
            ["copy", str(db), "{mnt}/ro.db"],
            ["remount", "ro"],
            ["run", ["tune", *study, "--trials", "4"], 120],
            ["run", ["tune", *study, "--trials", "2"], 120],  # already reached: still nothing to write
            ["run", ["tune", "--report", "{mnt}/ro.db"], 120],
            ["snapshot", "after"],
        ],
    )
    for r in results[2:4]:
        assert r["returncode"] == 2 and r["stderr"].startswith("error: "), r["stderr"]
        assert len(r["stderr"].strip().splitlines()) == 1 and "is read-only" in r["stderr"], r["stderr"]
    report = results[4]
    assert report["returncode"] == 2 and "COMPLETE" in report["stdout"], report  # the table, then the one line
    assert report["stderr"].startswith("error: --report cannot write its plot"), report["stderr"]
    assert "Read-only file system" in report["stderr"] and len(report["stderr"].strip().splitlines()) == 1
    assert results[5]["files"] == {"ro.db": digest(db)}
