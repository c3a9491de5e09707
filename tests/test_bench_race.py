"""``bench race`` on a tiny CartPole race: both methods run on the same cores, the
thresholds are found at the first tested point that passes, the report has every field;
the load check, the projection's arithmetic, and bad input refused in one line."""

from __future__ import annotations

import json
import math

import pytest
from conftest import run_cli

from synapto.bench.race import load as race_load
from synapto.bench.race.projection import _until, crossing
from synapto.bench.race.runs import ppo_processes
from synapto.cli import main
from synapto.store import PPORun, RunData

EVOLVE = """env = "CartPole-v1"
agent = "pruned-mlp"
hidden = []
strategy = "ars"
population = 8
generations = 4
episodes = 1
validate-top = 1
validate-episodes = 1
test-episodes = 4
obs-norm = true
"""
PPO = """env = "CartPole-v1"
hid = [8]
epochs = 3
steps_per_epoch = 400
n_envs = 2
save_freq = 1
test_episodes = 4
obs_norm = true
"""
FIELDS = {
    "method",
    "task",
    "seed",
    "cores",
    "processes",
    "wall_to_threshold_s",
    "steps_to_threshold",
    "final_test",
    "cpu_s",
    "process_wall_s",
    "load_before",
    "wall_s",
    "env_steps",
    "curve",
}


def configs(d, ppo_text=PPO):
    (d / "evo.toml").write_text(EVOLVE)
    (d / "ppo.toml").write_text(ppo_text)
    return ["--evolve-config", str(d / "evo.toml"), "--ppo-config", str(d / "ppo.toml")]


@pytest.fixture(scope="module")
def race(tmp_path_factory):
    d = tmp_path_factory.mktemp("race")
    out = d / "out"
    r = run_cli(
        "bench",
        "race",
        *configs(d),
        "--workers",
        "1",
        "--seeds",
        "3",
        "--points",
        "3",
        "--episodes",
        "4",
        "--threshold",
        "CartPole-v1=20",
        "--out-dir",
        out,
        "--allow-load",
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return out, json.loads((out / "race.json").read_text())


@pytest.mark.long
@pytest.mark.mpi
@pytest.mark.slow
def test_both_methods_race_on_the_same_cores_and_reach_the_threshold(race):
    out, result = race
    runs = {r["method"]: r for r in result["runs"]}
    assert sorted(runs) == ["evolve", "ppo"] and len(result["runs"]) == 2
    for r in runs.values():
        assert set(r) >= FIELDS, FIELDS - set(r)
        assert r["task"] == "CartPole-v1" and r["seed"] == 3 and r["cores"] == 2 and r["processes"] == 2
        assert r["cpu_s"] > 0 and r["process_wall_s"] > 0 and math.isfinite(r["load_before"]["busy_cores"])
        # the threshold figures are those of the first tested point that passes it
        first = next(p for p in r["curve"] if p["test_mean"] >= 20)
        assert (r["steps_to_threshold"], r["wall_to_threshold_s"]) == (first["env_steps"], first["wall_s"])
        assert all(p["test_mean"] < 20 for p in r["curve"][: r["curve"].index(first)])
    with RunData(runs["evolve"]["out"]) as run:
        assert run.config.get("workers", True)
        assert runs["evolve"]["final_test"] == pytest.approx(run.champion().test_returns.mean())
    with PPORun(runs["ppo"]["out"]) as run:
        assert run.ranks == 2  # PPO on as many processes as evolution's workers + coordinator
        assert runs["ppo"]["final_test"] == pytest.approx(run.policy_test()["returns"].mean())
    assert result["loaded"] in (True, False) and "busy_cores" in result["load"]
    proj = result["projection"][0]
    assert proj["task"] == "CartPole-v1" and set(proj["evolve"]) >= {"4", "64"} and set(proj["ppo"]) >= {"4", "64"}
    md = (out / "race.md").read_text()
    for needle in (
        "wall to threshold",
        "env steps to it",
        "CPU s",
        "final test",
        "Projection (not a measurement)",
        "Crossing point",
        "busy cores",
        "python -m synapto bench race",
    ):
        assert needle in md, needle
    assert (out / "race.png").stat().st_size > 0


def test_a_busy_machine_is_refused_unless_allowed(tmp_path, capsys, monkeypatch):
    seen = {"busy_cores": 1.7, "loadavg_1min": 3.2, "cores": 2, "usable_cores": 2, "interval_s": 1.0}
    monkeypatch.setattr(race_load, "measure", lambda interval=1.0: dict(seen))
    with pytest.raises(SystemExit) as exc:
        main(["bench", "race", *configs(tmp_path), "--out-dir", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and "1.70 cores" in err and "--allow-load" in err, err
    assert not (tmp_path / "o").exists()
    assert race_load.verdict({**seen, "busy_cores": 0.1}, 2, 0.5) is None
    assert "needs 3 cores" in race_load.verdict({**seen, "busy_cores": 0.1}, 3, 0.5)


def test_busy_cores_reads_proc_stat(tmp_path, monkeypatch):
    stat = tmp_path / "stat"
    lines = iter(["cpu  100 0 100 800 0 0 0 0 0 0\n", "cpu  250 0 150 900 100 0 0 0 0 0\n"])
    monkeypatch.setattr(race_load.time, "sleep", lambda s: stat.write_text(next(lines)))
    stat.write_text(next(lines))
    monkeypatch.setattr(race_load, "cpu_count_all", lambda: 4)
    # 400 jiffies passed, 200 idle or waiting: half of 4 cores busy
    assert race_load.busy_cores(1.0, stat) == pytest.approx(2.0)


def test_projection_arithmetic():
    assert [ppo_processes(16, c) for c in (2, 3, 5, 9, 16, 64)] == [2, 2, 4, 8, 16, 16]
    assert [ppo_processes(1, c) for c in (3, 64)] == [3, 64]
    assert _until("generation 7", 20) == 7 and _until("epoch 7", 20) == 8 and _until("final", 20) == 20
    assert _until(None, 20) is None
    assert crossing({2: 10.0, 4: 6.0, 8: 3.0}, {2: 5.0, 4: 5.0, 8: 5.0}) == 8
    assert crossing({2: 10.0}, {2: 5.0}) is None


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--workers", "0"], "--workers must be an integer >= 1, got 0"),
        (["--seeds", "1", "1"], "--seeds has repeated values"),
        (["--points", "0"], "--points and --episodes must be integers >= 1"),
        (["--threshold", "CartPole-v1"], "--threshold expects ENV=NUMBER"),
        (["--ppo-config", "nope.toml"], "pair up, one of each per task"),
    ],
)
def test_bad_input_is_one_line(tmp_path, capsys, args, needle):
    with pytest.raises(SystemExit) as exc:
        main(["bench", "race", *configs(tmp_path), *args, "--out-dir", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and needle in err, err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--max-busy", "nan"], "--max-busy must be a finite number >= 0, got nan"),
        (["--coordinator-us", "nan"], "--coordinator-us must be a finite number >= 0, got nan"),
        (["--coordinator-us", "inf"], "--coordinator-us must be a finite number >= 0, got inf"),
        (["--threshold", "CartPole-v1=nan"], "--threshold 'CartPole-v1=nan': the threshold must be a finite number"),
        (["--seeds", "-1"], "--seeds must be integers >= 0, got [-1]"),
        (["--seeds", "2", "-1"], "--seeds must be integers >= 0, got [2, -1]"),
        (["--evolve-config", "ga.toml"], "runs ga: the race tests checkpointed centres"),
        (["--evolve-config", "bad.toml"], "--population must be an integer >= 2, got 1"),
    ],
)
def test_everything_is_checked_before_the_first_run(tmp_path, capsys, monkeypatch, args, needle):
    """NaN options, negative seeds and an evolve config the race cannot test are refused
    before a method runs (they used to race, or fail after both methods ran)."""
    from synapto.bench.race import runs as race_runs

    idle = {"busy_cores": 0.0, "loadavg_1min": 0.1, "cores": 2, "usable_cores": 2, "interval_s": 1.0}
    monkeypatch.setattr(race_load, "measure", lambda interval=1.0: dict(idle))
    started = []
    monkeypatch.setattr(race_runs, "run_method", lambda *a, **k: started.append(a) or pytest.fail("a run started"))
    (tmp_path / "ga.toml").write_text(EVOLVE.replace('"ars"', '"ga"'))
    (tmp_path / "bad.toml").write_text(EVOLVE.replace("population = 8", "population = 1"))
    pair = configs(tmp_path)
    if args[0] == "--evolve-config":  # this evolve config instead of evo.toml
        pair[1], args = str(tmp_path / args[1]), []
    with pytest.raises(SystemExit) as exc:
        main(["bench", "race", *pair, "--threshold", "CartPole-v1=20", *args, "--out-dir", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and needle in err, err
    assert not started and not (tmp_path / "o").exists()


def test_configs_of_different_envs_are_refused(tmp_path, capsys):
    args = configs(tmp_path, PPO.replace("CartPole-v1", "Pendulum-v1"))
    with pytest.raises(SystemExit) as exc:
        main(["bench", "race", *args, "--out-dir", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and "must run the same env" in err, err


class Stop(Exception):
    pass


def test_a_shared_coordinator_gives_both_methods_w_cores(tmp_path, capsys, monkeypatch):
    """--shared-coordinator: evolution's W workers and its coordinator on W cores, PPO on W
    processes; the race is not refused on a W-core machine, and without the flag it is."""
    from synapto.bench.race import projection, runs as race_runs

    idle = {"busy_cores": 0.0, "loadavg_1min": 0.1, "cores": 2, "usable_cores": 2, "interval_s": 1.0}
    monkeypatch.setattr(race_load, "measure", lambda interval=1.0: dict(idle))
    ppo6 = PPO.replace("n_envs = 2", "n_envs = 6")  # 3 processes would split it too
    calls = []

    def fake_run(method, config, workers, processes, cores, seed, out_dir, task, log=print):
        calls.append((method, workers, processes, cores))
        if len(calls) == 2:
            raise Stop

    monkeypatch.setattr(race_runs, "run_method", fake_run)
    args = ["bench", "race", *configs(tmp_path, ppo6), "--workers", "2", "--out-dir", str(tmp_path / "o")]
    with pytest.raises(Stop):
        main([*args, "--threshold", "CartPole-v1=20", "--shared-coordinator"])
    assert calls == [("evolve", 2, 3, 2), ("ppo", 2, 2, 2)]

    with pytest.raises(SystemExit) as exc:
        main([*args, "--threshold", "CartPole-v1=20"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "needs 3 cores" in err, err

    # the projection keeps the race's layout: C workers at C cores when the coordinator shared them
    seen = []
    monkeypatch.setattr(
        projection, "evolve_time", lambda path, measured, workers, n, c: seen.append((measured, workers))
    )
    monkeypatch.setattr(projection, "_until", lambda label, total: 3)

    class Run:
        completed, config = 5, {}

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr("synapto.store.RunData", lambda path: Run())
    run = {"method": "evolve", "out": "x.h5", "cores": 2, "workers": 2, "shared_coordinator": True}
    projection.project_run(run, cores=(2, 8))
    projection.project_run({**run, "cores": 3, "shared_coordinator": False}, cores=(2, 8))
    assert seen == [(2, 2), (2, 8), (2, 1), (2, 7)]
