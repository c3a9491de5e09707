"""``bench race`` on a tiny CartPole race: both methods run on the same cores, the
thresholds are found at the first tested point that passes, the report has every field;
the load check, the projection's model against figures worked out by hand (several
thresholds, a population per worker, the crossing points), race.json's projection,
``--max-minutes``, ``--project-only``, the SB3 race (its missing extra refused in one
line), and bad input refused in one line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import run_cli

from synapto.bench.race import load as race_load
from synapto.bench.race.model import EvolveInputs, crossing
from synapto.bench.race.projection import _until
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
select-episodes = 0
max-env-steps = 0
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
    assert (
        proj["task"] == "CartPole-v1"
        and proj["threshold"] == 20
        and proj["cores"] == [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
    )
    for method in ("evolve", "ppo"):
        seconds = proj["methods"][method]["seconds"]
        assert len(seconds) == 10 and all(x > 0 for x in seconds), seconds
    assert [x["method"] for x in proj["inputs"]] == ["evolve", "ppo"] and all(x["model_s"] > 0 for x in proj["inputs"])
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
    assert crossing([10.0, 6.0, 3.0], [5.0, 5.0, 5.0], (2, 4, 8)) == 8
    assert crossing([10.0], [5.0], (2,)) is None
    assert crossing([10.0, 4.0], [5.0, None], (2, 4)) is None


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
    from synapto.bench.race import runs as race_runs

    idle = {"busy_cores": 0.0, "loadavg_1min": 0.1, "cores": 2, "usable_cores": 2, "interval_s": 1.0}
    monkeypatch.setattr(race_load, "measure", lambda interval=1.0: dict(idle))
    ppo6 = PPO.replace("n_envs = 2", "n_envs = 6")  # 3 processes would split it too
    calls = []

    def fake_run(method, config, workers, processes, cores, seed, out_dir, task, log=print, max_minutes=None):
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
    assert [EvolveInputs(8, [], [], shared=True).workers(c) for c in (2, 8)] == [2, 8]
    assert [EvolveInputs(8, [], [], shared=False).workers(c) for c in (2, 8)] == [1, 7]


# ------------------------------------------------------------------ the projection's model
# Figures worked out by hand.  Evolution: per generation 1 s of coordinator and 8 tasks of
# 2 s; on W workers the tasks take ceil(8 / W) rounds of 2 s.  PPO: per epoch a rollout
# of 6 s measured on 2 processes and 2 s of the rest; 8 envs, so at most 8 processes.
CORES = [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
EVOLVE_2GEN = [34.0, 14.0, 10.0] + [6.0] * 7  # 2 x (1 + 2 ceil(8 / (C - 1)))
PPO_3EPOCHS = [24.0, 15.0, 10.5] + [10.5] * 7  # 3 x (6 x 2 / P + 2), P = min(C, 8)


def evolve_inputs(generations: int, tasks: int = 8, population: int = 8):
    import numpy as np

    return EvolveInputs(population, np.ones(generations), [np.full(tasks, 2.0)] * generations)


def ppo_inputs(epochs: int):
    import numpy as np

    from synapto.bench.race.model import PPOInputs

    return PPOInputs(np.full(epochs, 6.0), np.full(epochs, 2.0), processes=2, n_envs=8)


def test_the_projection_table_and_crossing_from_fixed_inputs():
    from synapto.bench.race.model import FlatInputs, evolve_lines, rival_line

    lines = evolve_lines([evolve_inputs(2)], CORES, 0.0, None)
    assert list(lines) == ["evolve"] and lines["evolve"]["seconds"] == EVOLVE_2GEN
    ppo = rival_line([ppo_inputs(3)], CORES)["seconds"]
    assert ppo == PPO_3EPOCHS
    assert crossing(EVOLVE_2GEN, ppo, CORES) == 4  # 34 > 24, then 14 <= 15
    assert crossing(EVOLVE_2GEN, rival_line([FlatInputs(12.0)], CORES)["seconds"], CORES) == 8  # 10 <= 12
    # the coordinator's 0.5 s per task: each task 2.5 s, and a map at least 8 x 0.5 s
    costly = evolve_lines([evolve_inputs(2)], CORES, 0.5, None)["evolve"]["seconds"]
    assert costly[1] == pytest.approx(2 * (1 + 3 * 2.5)) and costly[-1] == pytest.approx(2 * (1 + 4.0))
    # PPO's serial share: 2 s of rest against 6 s of rollout on each of 2 processes
    assert ppo_inputs(3).serial_share() == pytest.approx(2 / (2 + 12))


def test_a_population_that_grows_with_the_workers():
    """4 per worker: population 8 up to 15 workers (the smallest where none fits), 32 from
    15 workers on (60 >= 32): one generation of 32 tasks, ceil(32 / W) rounds."""
    from synapto.bench.race.model import choose_population, evolve_lines

    assert [choose_population([8, 32], 4, w) for w in (1, 3, 7, 15, 63)] == [8, 8, 8, 32, 32]
    runs = [evolve_inputs(2), evolve_inputs(1, tasks=32, population=32)]
    lines = evolve_lines(runs, CORES, 0.0, 4)
    assert list(lines) == ["evolve-p8", "evolve-p32", "evolve-4-per-worker"]
    grows = lines["evolve-4-per-worker"]
    assert grows["population"] == [8, 8, 8, 32, 32, 32, 32, 32, 32, 32]
    assert grows["seconds"] == [34.0, 14.0, 10.0, 7.0, 5.0, 3.0, 3.0, 3.0, 3.0, 3.0]
    assert lines["evolve-p32"]["seconds"][0] == 1 + 64.0  # one worker runs all 32 tasks


def synthetic_runs():
    """An evolution, a PPO and an SB3 run of a race capped at 0.5 minutes, with their tested curves."""

    def point(label, wall, mean, steps=1000):
        return {"label": label, "wall_s": wall, "test_mean": mean, "env_steps": steps}

    common = {"task": "T", "seed": 1, "cores": 2, "max_minutes": 0.5}
    return [
        {
            **common,
            "method": "evolve",
            "out": "e.h5",
            "workers": 1,
            "shared_coordinator": False,
            "curve": [point("generation 1", 15, 150), point("generation 2", 28, 250), point("final", 29.5, 320)],
        },
        {
            **common,
            "method": "ppo",
            "out": "p.h5",
            "processes": 2,
            "curve": [
                point("epoch 0", 8, 100),
                point("epoch 2", 20, 210),
                point("epoch 3", 28, 260),
                point("final", 40, 310),
            ],
        },
        {
            **common,
            "method": "sb3-tqc",
            "out": "sb3",
            "processes": 1,
            "curve": [point("steps 1000", 10, 180), point("steps 2000", 25, 230), point("steps 3000", 35, 310)],
        },
    ]


def fake_inputs(monkeypatch):
    """The run files' inputs: evolution 3 generations, PPO 5 epochs, as above."""
    from synapto.bench.race import projection

    full = {"evolve": (evolve_inputs(3), 3), "ppo": (ppo_inputs(5), 5)}
    monkeypatch.setattr(projection.Loaded, "full", lambda self, run: full[run["method"]])


def test_the_projection_at_several_thresholds(monkeypatch):
    """At 200: evolution's generation 2 (2 generations), PPO's epoch 2 (3 epochs), SB3's
    25 s held flat.  At 300: evolution's final point (3 generations: 51 s at 2 cores);
    PPO and SB3 only at 40 s and 35 s, past the 0.5-minute cap."""
    from synapto.bench.race.projection import project

    fake_inputs(monkeypatch)
    at200, at300 = project(synthetic_runs(), {"T": [200.0, 300.0]}, per_task=0.0)
    assert (at200["threshold"], at300["threshold"]) == (200.0, 300.0) and at200["cores"] == CORES
    assert at200["methods"]["evolve"]["seconds"] == EVOLVE_2GEN
    assert at200["methods"]["ppo"]["seconds"] == PPO_3EPOCHS
    assert at200["methods"]["sb3-tqc"]["seconds"] == [25.0] * 10
    assert at200["crossing"] == {"evolve": {"ppo": 4, "sb3-tqc": 4}}
    errors = {x["method"]: x["error"] for x in at200["inputs"]}
    assert errors["evolve"] == pytest.approx((34 - 28) / 28) and errors["ppo"] == pytest.approx((24 - 20) / 20)
    assert errors["sb3-tqc"] is None  # held at its measurement: no model to be wrong
    assert at300["methods"]["evolve"]["seconds"] == [51.0, 21.0, 15.0] + [9.0] * 7
    assert at300["methods"]["ppo"]["seconds"] == [None] * 10 and at300["methods"]["sb3-tqc"]["seconds"] == [None] * 10
    assert [x["reached"] for x in at300["inputs"]] == [True, False, False]
    assert at300["crossing"] == {"evolve": {"ppo": None, "sb3-tqc": None}}


def test_race_json_keeps_the_projection_and_max_minutes_reports_not_reached(tmp_path, monkeypatch):
    """The race through its command line, its runs and tests replaced by the synthetic
    ones: each run is capped at --max-minutes, race.md says "not reached within 0.5
    minutes" with the score of the last tested point within them, and race.json keeps,
    per threshold, the cores and each method's projected seconds."""
    from synapto.bench import compare
    from synapto.bench.compare import Curve, Point
    from synapto.bench.race import runs as race_runs

    idle = {"busy_cores": 0.0, "loadavg_1min": 0.1, "cores": 2, "usable_cores": 2, "interval_s": 1.0}
    monkeypatch.setattr(race_load, "measure", lambda interval=1.0: dict(idle))
    monkeypatch.setattr(compare, "plot", lambda *a: False)
    fake_inputs(monkeypatch)
    made = {r["method"]: r for r in synthetic_runs()[:2]}
    caps = []

    def fake_run(method, config, workers, processes, cores, seed, out_dir, task, log=print, max_minutes=None):
        caps.append(max_minutes)
        out = out_dir / f"{method}.h5"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(b"")
        load = {"busy_cores": 0.0}
        return {
            **made[method],
            "task": task,
            "out": str(out),
            "processes": processes,
            "max_minutes": max_minutes,
            "load_before": load,
            "cpu_s": 1.0,
            "process_wall_s": 40.0,
            "stopped_at_cap": method == "ppo",
        }

    def fake_curve(run, points, episodes, cache, log):
        c = Curve(run["out"], run["method"], run["task"], run["method"], run["seed"])
        c.points = [
            Point(p["env_steps"], p["wall_s"], p["label"], p["test_mean"], 1.0) for p in made[run["method"]]["curve"]
        ]
        return c

    monkeypatch.setattr(race_runs, "run_method", fake_run)
    monkeypatch.setattr(race_runs, "curve_of", fake_curve)
    out = tmp_path / "o"
    args = [
        "--threshold",
        "CartPole-v1=200,300",
        "--max-minutes",
        "0.5",
        "--coordinator-us",
        "0",
        "--out-dir",
        str(out),
    ]
    with pytest.raises(SystemExit) as exc:
        main(["bench", "race", *configs(tmp_path), *args])
    assert exc.value.code == 0
    assert caps == [0.5, 0.5]
    result = json.loads((out / "race.json").read_text())
    assert result["max_minutes"] == 0.5 and result["thresholds"]["CartPole-v1"] == [200.0, 300.0]
    runs = {r["method"]: r for r in result["runs"]}
    assert [x["wall_s"] for x in runs["evolve"]["reached"]] == [28, 29.5]
    # PPO passed 300 at 40 s, past the cap: not reached, with its score at 28 s
    assert runs["ppo"]["wall_to_threshold_s"] == 20 and runs["ppo"]["reached"][1]["wall_s"] is None
    assert runs["ppo"]["score_within_cap"] == 260 and runs["ppo"]["final_test"] == 310
    assert [(p["threshold"], p["cores"]) for p in result["projection"]] == [(200.0, CORES), (300.0, CORES)]
    assert result["projection"][0]["methods"]["evolve"]["seconds"] == EVOLVE_2GEN
    assert result["projection"][0]["methods"]["ppo"]["seconds"] == PPO_3EPOCHS
    md = (out / "race.md").read_text()
    assert "300: not reached within 0.5 minutes (score 260.0)" in md, md
    assert "evolution is at least as fast as PPO from **4 cores**" in md
    assert "3 epochs: rollout 6.00 s on 2 processes, rest 2.00 s (serial share 14 %)" in md

    # --project-only: the same runs projected again at another threshold, nothing run
    monkeypatch.setattr(race_runs, "run_method", lambda *a, **k: pytest.fail("--project-only ran a method"))
    again = tmp_path / "again"
    with pytest.raises(SystemExit) as exc:
        main(
            [
                "bench",
                "race",
                "--project-only",
                str(out),
                "--threshold",
                "CartPole-v1=100",
                "--coordinator-us",
                "0",
                "--out-dir",
                str(again),
            ]
        )
    assert exc.value.code == 0
    projected = json.loads((again / "projection.json").read_text())["projection"]
    assert [p["threshold"] for p in projected] == [100.0]
    assert projected[0]["methods"]["evolve"]["seconds"][0] == 17.0  # generation 1: 1 + 8 x 2
    assert projected[0]["methods"]["ppo"]["seconds"][0] == 8.0  # epoch 0: 6 + 2
    assert "Crossing point" in (again / "projection.md").read_text()


def test_several_thresholds_parse():
    from synapto.bench.race.runs import parse_thresholds

    got = parse_thresholds(["BipedalWalker-v3=280,300", "BipedalWalker-v3=320", "X-v0=1"])
    assert got["BipedalWalker-v3"] == [280.0, 300.0, 320.0] and got["X-v0"] == [1.0]
    assert got["LunarLander-v3"] == [200.0]  # bench compare's default


def test_project_only_runs_nothing_else(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["bench", "race", *configs(tmp_path), "--project-only", str(tmp_path), "--out-dir", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and "--project-only runs nothing" in err, err
    with pytest.raises(SystemExit) as exc:
        main(["bench", "race", "--project-only", str(tmp_path), "--out-dir", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and "no race.json there" in err, err


def test_a_capped_command_is_stopped_and_not_a_failure(tmp_path):
    import sys
    import time

    from synapto.bench.common import run_logged

    t0 = time.perf_counter()
    cmd = [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(120)"]
    done = run_logged(cmd, tmp_path / "log", timeout=2.0)
    assert done.timed_out and time.perf_counter() - t0 < 60 and [line for _, line in done.lines] == ["up"]
    assert not run_logged([sys.executable, "-c", "pass"], tmp_path / "log", timeout=60).timed_out


# ------------------------------------------------------------------------------ SB3
@pytest.mark.parametrize("missing", ["sb3_contrib", "torch"])
def test_the_sb3_race_refuses_in_one_line_without_its_extra(tmp_path, capsys, monkeypatch, missing):
    import sys

    monkeypatch.setitem(sys.modules, missing, None)  # import sb3_contrib (torch) now raises ImportError
    monkeypatch.setattr(race_load, "measure", lambda interval=1.0: pytest.fail("the race measured the load"))
    with pytest.raises(SystemExit) as exc:
        main(
            [
                "bench",
                "race",
                "--evolve-config",
                str(tmp_path / "x.toml"),
                "--sb3",
                "tqc",
                "--out-dir",
                str(tmp_path / "o"),
            ]
        )
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1, err
    assert "needs the sb3 extra (" in err and missing in err.split("(")[1] and "pip install 'synapto-evo[sb3]'" in err
    assert not (tmp_path / "o").exists()


def test_the_sb3_race_needs_rl_zoo_settings_for_the_task(tmp_path, capsys, monkeypatch):
    from synapto.bench.race import sb3

    monkeypatch.setattr(sb3, "require_extra", lambda algo: None)
    (tmp_path / "evo.toml").write_text(EVOLVE)
    with pytest.raises(SystemExit) as exc:
        main(
            [
                "bench",
                "race",
                "--evolve-config",
                str(tmp_path / "evo.toml"),
                "--sb3",
                "tqc",
                "--out-dir",
                str(tmp_path / "o"),
            ]
        )
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and "no rl-baselines3-zoo settings for CartPole-v1" in err
    assert sb3.ZOO["tqc"]["BipedalWalker-v3"]["train_freq"] == 64 and sb3.method("tqc") == "sb3-tqc"


def test_sb3_actors_are_tested_on_ppos_test_stream(tmp_path, monkeypatch):
    """A kept actor's episodes start from PPO's test seeds (int_seed(seed, PPO_TEST, e)) in a
    fresh env, to its time limit: here an actor that always pushes 0.5 on Pendulum-v1."""
    pytest.importorskip("torch")
    import gymnasium as gym
    import numpy as np

    from synapto.bench.race import sb3
    from synapto.common.seeding import Stream, int_seed

    class Actor:
        @staticmethod
        def load(path, device="cpu"):
            return Actor()

        def predict(self, obs, deterministic=False):
            assert deterministic
            return np.array([0.5], dtype=np.float32), None

    monkeypatch.setattr(sb3, "actor_class", lambda algo: Actor)
    expected = []
    for e in range(3):
        env = gym.make("Pendulum-v1")
        env.reset(seed=int_seed(7, Stream.PPO_TEST, e))
        total, done = 0.0, False
        while not done:
            _, r, terminated, truncated, _ = env.step(np.array([0.5], dtype=np.float32))
            total, done = total + r, terminated or truncated
        expected.append(total)
    assert sb3.test_actor("tqc", "Pendulum-v1", tmp_path / "a.pt", 7, 3) == pytest.approx(expected)


PENDULUM = """env = "Pendulum-v1"
agent = "pruned-mlp"
hidden = []
strategy = "ars"
population = 8
generations = 3
episodes = 1
validate-top = 1
validate-episodes = 1
test-episodes = 4
"""


@pytest.mark.long
@pytest.mark.mpi
def test_a_tiny_sb3_race_is_stopped_at_its_cap(tmp_path):
    """Evolution against TQC (rl-zoo's Pendulum-v1 settings) capped at 0.2 minutes: TQC
    stops itself, its kept actors are tested, and it is reported as not reached."""
    pytest.importorskip("sb3_contrib")  # the sb3 extra is not in make install
    (tmp_path / "evo.toml").write_text(PENDULUM)
    out = tmp_path / "out"
    r = run_cli(
        "bench",
        "race",
        "--evolve-config",
        tmp_path / "evo.toml",
        "--sb3",
        "tqc",
        "--max-minutes",
        "0.2",
        "--threshold",
        "Pendulum-v1=-150",
        "--points",
        "2",
        "--episodes",
        "2",
        "--out-dir",
        out,
        "--allow-load",
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads((out / "race.json").read_text())
    tqc = next(x for x in result["runs"] if x["method"] == "sb3-tqc")
    assert set(tqc) >= FIELDS and tqc["processes"] == 1 and tqc["cores"] == 2
    progress = json.loads((Path(tqc["out"]) / "progress.json").read_text())
    assert progress["stopped_at_cap"] and not progress["finished"] and progress["wall_s"] < 0.2 * 60 + 30
    assert tqc["wall_to_threshold_s"] is None and tqc["curve"][-1]["env_steps"] == progress["env_steps"]
    assert "not reached within 0.2 minutes (score" in (out / "race.md").read_text()
    assert list(result["projection"][0]["methods"]) == ["evolve", "sb3-tqc"]


def test_a_run_stopped_at_the_cap_before_it_kept_a_policy_is_not_reached(tmp_path):
    """A run killed at --max-minutes before writing its run file has no curve, not an
    error; the same missing file without the cap is one."""
    from synapto.bench.compare import Cache
    from synapto.bench.race.report import runs_table
    from synapto.bench.race.runs import score
    from synapto.common.errors import UsageError

    run = {"method": "evolve", "task": "T", "seed": 1, "out": str(tmp_path / "none.h5"), "max_minutes": 0.1}
    cache = Cache(tmp_path / "cache.json")
    with pytest.raises(UsageError):
        score(dict(run), 2, 2, {"T": [1.0]}, cache, log=lambda m: None)
    run["stopped_at_cap"] = True
    score(run, 2, 2, {"T": [1.0, 2.0]}, cache, log=lambda m: None)
    assert run["curve"] == [] and [x["wall_s"] for x in run["reached"]] == [None, None]
    assert math.isnan(run["final_test"]) and run["score_within_cap"] is None and not run["finished"]
    run.update(cores=2, processes=2, load_before={"busy_cores": 0.0}, process_wall_s=6.0, cpu_s=1.0)
    assert "| 1: not reached within 0.1 minutes; 2: not reached within 0.1 minutes | 1: -; 2: - | no policy kept" in (
        runs_table([run])
    )
