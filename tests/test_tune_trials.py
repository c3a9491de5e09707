"""synapto tune's trials when something goes wrong: a NaN score, a hung env under the base's
task-timeout, a sample whose config breaks a rule; several processes on one study; two
study names in one file; and a best config that TOML reads back."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest
from conftest import ROOT, _env, run_cli, start_cli
from tune_base import TINY, tune

if os.environ.get("SYNAPTO_REQUIRE_EXTRAS"):  # `make test`: the tune extra is installed, its absence an error
    import optuna
else:
    optuna = pytest.importorskip("optuna")

from optuna.trial import TrialState

from synapto.common.config import tomllib

LR = "[params]\nlr = { log_uniform = [0.001, 0.3] }\nsigma = { uniform = [0.02, 0.3] }\n"
QUICK = ["--seeds", 1000, "--score-episodes", 5, "--milestones", 2, "--pruner", "none"]


def files(tmp_path, base_text: str = TINY, space_text: str = LR):
    base, space = tmp_path / "base.toml", tmp_path / "space.toml"
    base.write_text(base_text, encoding="utf-8")
    space.write_text(space_text)
    return base, space


def trials(db, name: str | None = None) -> list:
    return optuna.load_study(study_name=name, storage=f"sqlite:///{db}").trials


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_trial_scored_nan_fails_and_the_study_goes_on_and_ends(capsys, tmp_path):
    base, space = files(tmp_path, TINY.replace('"CartPole-v1"', '"tune_envs:NanCartPole-v0"'))
    db = tmp_path / "nan.db"
    code, out, err = tune(capsys, "--config", base, "--space", space, *QUICK, "--trials", 2, "--study", db)
    assert code == 0, err
    done = trials(db)
    assert [t.state for t in done] == [TrialState.PRUNED] * 2, [(t.state, t.params) for t in done]
    assert all("tuning score is nan" in t.user_attrs["failed"] for t in done)
    assert done[0].params != done[1].params  # the next trial samples a new point
    warnings = [line for line in out.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 2 and "trial 0 failed: its tuning score is nan" in warnings[0], out
    assert "no trial of study 'nan' completed" in out and not (tmp_path / "nan.best.toml").exists()


@pytest.mark.slow
def test_the_base_task_timeout_bounds_every_trial_run(tmp_path):
    hung = TINY.replace('"CartPole-v1"', '"tune_envs:HangCartPole-v0"')
    base, space = files(tmp_path, "task-timeout = 2\n" + hung)
    db = tmp_path / "hang.db"
    t0 = time.monotonic()
    proc = run_cli("tune", "--config", base, "--space", space, *QUICK, "--trials", 1, "--study", db, timeout=120)
    assert proc.returncode == 1 and time.monotonic() - t0 < 100, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: trial 0, seed 1000: "), proc.stderr
    assert "task timeout of 2 s" in lines[0], proc.stderr
    assert [t.state for t in trials(db)] == [TrialState.FAIL]


def test_an_env_that_raises_while_scoring_stops_the_study_in_one_line(capsys, tmp_path):
    base, space = files(tmp_path, TINY.replace('"CartPole-v1"', '"tune_envs:ScoreFailCartPole-v0"'))
    db = tmp_path / "score.db"
    code, _, err = tune(capsys, "--config", base, "--space", space, *QUICK, "--trials", 1, "--study", db)
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert err.startswith("error: trial 0, seed 1000: scoring on the TUNE stream failed (RuntimeError: simulated"), err
    assert [t.state for t in trials(db)] == [TrialState.FAIL]


@pytest.mark.timeout(180)
def test_a_sample_whose_config_breaks_a_rule_fails_and_the_study_ends(capsys, tmp_path):
    space_text = (
        '[params]\n"strategy_options.prune_start" = { choices = [0, 10] }\n'
        '"strategy_options.prune_end" = { choices = [5, 20] }\n'
    )
    base, space = files(tmp_path, space_text=space_text)
    db = tmp_path / "rule.db"
    study = optuna.create_study(study_name="rule", storage=f"sqlite:///{db}", direction="maximize")
    # each value alone fits the base (checked up front); these two together do not
    study.enqueue_trial({"strategy_options.prune_start": 10, "strategy_options.prune_end": 5})
    # --sampler-seed 1: trial 1 samples prune_start 0, prune_end 5 (seed 0 would sample the bad pair again)
    args = ["--config", base, "--space", space, *QUICK, "--trials", 2, "--study", db, "--sampler-seed", 1]
    code, out, err = tune(capsys, *args)
    assert code == 0, err
    first, *rest = trials(db)
    assert first.state == TrialState.PRUNED, first
    assert "prune_end (5) must be after prune_start (10)" in first.user_attrs["failed"]
    assert [t.state for t in rest] == [TrialState.COMPLETE]
    warnings = [line for line in out.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and warnings[0].startswith("warning: trial 0 failed: its config is invalid"), out
    assert not (tmp_path / "rule.trials" / "0").exists()  # nothing ran


@pytest.mark.slow
def test_a_trial_started_while_another_runs_samples_another_point(capsys, tmp_path):
    """Another process's trial 0 is running (its parameters sampled as tune samples a first
    trial): the trial this process starts must not evaluate the same point."""
    from synapto.common.seeding import sampler_seed

    base, space = files(tmp_path)
    db = tmp_path / "shared.db"
    study = optuna.create_study(
        study_name="shared",
        storage=f"sqlite:///{db}",
        direction="maximize",
        sampler=optuna.samplers.TPESampler(seed=sampler_seed(0, 0)),
    )
    other = study.ask()
    other.suggest_float("lr", 0.001, 0.3, log=True)
    other.suggest_float("sigma", 0.02, 0.3)
    other.set_user_attr("host_pid", "elsewhere:1:1")  # a process on another host

    def finish_other():  # the other process ends its trial once this one has finished its own
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            if any(t.state == TrialState.COMPLETE for t in trials(db)):
                study.tell(other, 1.0)
                return
            time.sleep(0.2)

    thread = threading.Thread(target=finish_other, daemon=True)
    thread.start()
    code, _, err = tune(capsys, "--config", base, "--space", space, *QUICK, "--trials", 2, "--study", db)
    thread.join()
    assert code == 0, err
    done = trials(db)
    assert len(done) == 2 and done[0].params != done[1].params, [t.params for t in done]


@pytest.mark.long
@pytest.mark.slow
def test_processes_started_together_finish_trials_trials_at_distinct_points(tmp_path):
    base, space = files(tmp_path)
    db = tmp_path / "three.db"
    procs = [
        start_cli("tune", "--config", base, "--space", space, *QUICK, "--trials", 2, "--study", db) for _ in range(3)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [e for _, e in outs]
    done = [t for t in trials(db) if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    assert len(done) == 2 and done[0].params != done[1].params, [(t.number, t.params) for t in trials(db)]


OPEN_TOGETHER = """
import sys, time
from synapto.tune.storage import creating, open_storage
from synapto.tune.study import open_study, make_pruner
start = float(sys.argv[2])
while time.time() < start:
    time.sleep(0.001)
with creating(sys.argv[1]):
    study = open_study(open_storage(sys.argv[1]), "race", {"same": 1}, make_pruner("none", 1))
print(study.study_name)
"""


@pytest.mark.slow
@pytest.mark.long  # four processes at once: make test-long
def test_processes_opening_a_new_study_together_all_join_it(tmp_path):
    """The database's tables are made once; a process that finds them half made waits its turn."""
    db = tmp_path / "race.db"
    start = time.time() + 6  # after the imports of all four
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", OPEN_TOGETHER, str(db), str(start)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
            cwd=ROOT,
        )
        for _ in range(4)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [(p.returncode, o.strip()) for p, (o, _) in zip(procs, outs)] == [(0, "race")] * 4, [e for _, e in outs]
    assert [s.study_name for s in optuna.get_all_study_summaries(f"sqlite:///{db}")] == ["race"]


@pytest.mark.slow
def test_two_study_names_in_one_file_keep_their_own_trials_and_best_config(capsys, tmp_path):
    """Each study name its own best config and run files; a base path outside the BMP is
    written as TOML that reads back."""
    base, space = files(tmp_path, TINY.replace('"runs/base.h5"', '"runs/ü😀 \\"q\\".h5"'))
    db = tmp_path / "two.db"
    args = ["--config", base, "--space", space, *QUICK, "--trials", 1, "--study", db]
    assert tune(capsys, *args)[0] == 0  # the default name: two.best.toml, two.trials/
    default_run = tmp_path / "two.trials" / "0" / "s1000.h5"
    before = default_run.read_bytes()
    code, out, err = tune(capsys, *args, "--study-name", "B")
    assert code == 0, err
    assert "--report " + str(db) + " --study-name B" in out
    assert default_run.read_bytes() == before
    assert (tmp_path / "two.B.trials" / "0" / "s1000.h5").exists()
    for name, path in (("two", "two.best.toml"), ("B", "two.B.best.toml")):
        best = tomllib.loads((tmp_path / path).read_text(encoding="utf-8"))
        chosen = optuna.load_study(study_name=name, storage=f"sqlite:///{db}").best_trial.params
        assert best["out"] == 'runs/ü😀 "q".h5' and best["strategy_options"]["lr"] == chosen["lr"], best
    assert tune(capsys, "--report", db, "--study-name", "B")[0] == 0
    assert (tmp_path / "two.B.history.png").exists() and not (tmp_path / "two.history.png").exists()


def test_the_best_config_writes_strings_and_keys_that_toml_reads_back(tmp_path):
    from synapto.tune.best import write_best

    text = 'ü😀 "quoted" back\\slash\ttab\nnewline \x7f del \x01'
    values = {"env": text, "hidden": [4], "env_options": {"odd key": text, "k": 1.5}, "strategy_options": {}}
    path = tmp_path / "b.toml"
    write_best(path, values, {"out": text}, ["header with \x1b escape and ü😀"])
    read = tomllib.loads(path.read_text(encoding="utf-8"))
    assert read == {"env": text, "hidden": [4], "out": text, "env_options": {"odd key": text, "k": 1.5}}
