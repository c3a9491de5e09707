"""``bench compare`` on tiny finished runs: where each tested policy stands (env steps and
wall time before it existed), that its figure is that policy's test, the threshold rule,
the cache, and bad input refused in one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import kill_group, run_cli, start_cli, wait_for_line

from synapto.bench.compare import Curve, Point, spread, summarise
from synapto.cli import main
from synapto.store import PPORun, RunData


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("compare")
    ars = [
        "evolve",
        "--env",
        "CartPole-v1",
        "--agent",
        "pruned-mlp",
        "--hidden",
        "0",
        "--strategy",
        "ars",
        "--population",
        "8",
        "--generations",
        "6",
        "--episodes",
        "1",
        "--validate-top",
        "1",
        "--validate-episodes",
        "1",
        "--test-episodes",
        "4",
        "--obs-norm",
        "--seed",
        "1",
        "--out",
        d / "ars.h5",
    ]
    ppo = [
        "ppo",
        "--env",
        "CartPole-v1",
        "--epochs",
        "4",
        "--steps-per-epoch",
        "300",
        "--hid",
        "8",
        "--save-freq",
        "1",
        "--test-episodes",
        "4",
        "--obs-norm",
        "--seed",
        "1",
        "--out",
        d / "ppo.h5",
    ]
    for args in (ars, ppo):
        r = run_cli(*args, timeout=300)
        assert r.returncode == 0, r.stderr
    out = d / "out"
    r = run_cli(
        "bench",
        "compare",
        d / "ars.h5",
        d / "ppo.h5",
        "--points",
        "2",
        "--episodes",
        "4",
        "--out-dir",
        out,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    return d, out, json.loads((out / "compare.json").read_text())


def test_points_stand_where_their_policy_was_made(runs):
    d, _, result = runs
    evo, ppo = result["runs"]
    with RunData(d / "ars.h5") as run:
        steps = run.steps()  # per generation and individual
        val = run.validation_steps()
        champion = run.champion()
    for p in evo["points"][:-1]:
        g = int(p["label"].split()[1])
        assert p["env_steps"] == int(steps[:g].sum() + val[:g].sum())  # training + validation before g
    assert evo["points"][-1]["label"] == "final" and evo["points"][-1]["test_mean"] == champion.test_returns.mean()
    with PPORun(d / "ppo.h5") as run:
        test = run.policy_test()["returns"]
    assert [p["env_steps"] for p in ppo["points"]] == [
        300 * (int(p["label"].split()[1]) + 1) for p in ppo["points"][:-1]
    ] + [1200]
    assert ppo["points"][-1]["test_mean"] == test.mean()
    walls = [p["wall"] for c in (evo, ppo) for p in c["points"]]
    assert all(w >= 0 for w in walls)


def test_a_points_figure_is_its_policys_test_and_the_cache_is_used(runs, capsys):
    """ppo-eval of a kept epoch (its parameters and normalisation from the run file) gives the
    figure bench compare reports for it; a second compare reads the cache."""
    d, out, result = runs
    ppo = result["runs"][1]
    first = ppo["points"][0]
    k = int(first["label"].split()[1])
    r = run_cli("ppo-eval", d / "ppo.h5", "--params", str(k), "--episodes", "4", timeout=120)
    assert r.returncode == 0 and f"return {first['test_mean']:.2f} +- {first['test_std']:.2f}" in r.stdout, r.stdout
    cache = json.loads((out / "compare_cache.json").read_text())
    key = next(key for key in cache if key.endswith(f":epoch{k}:4"))
    cache[key] = [12345.0, 0.0]
    (out / "compare_cache.json").write_text(json.dumps(cache))
    with pytest.raises(SystemExit) as exc:
        main(
            [
                "bench",
                "compare",
                str(d / "ppo.h5"),
                "--points",
                "2",
                "--episodes",
                "4",
                "--out-dir",
                str(out),
                "--name",
                "again",
            ]
        )
    assert exc.value.code == 0
    again = json.loads((out / "again.json").read_text())
    assert again["runs"][0]["points"][0]["test_mean"] == 12345.0
    assert (out / "compare.md").read_text().count("CartPole-v1 (475)") == 2 and (out / "compare.png").stat().st_size


def test_the_threshold_is_reached_at_the_first_passing_point():
    def curve(seed, means):
        return Curve(
            "x",
            "ppo",
            "Task-v0",
            "m",
            seed,
            [Point(100 * (i + 1), 10.0 * (i + 1), f"epoch {i}", m, 0.0) for i, m in enumerate(means)],
        )

    rows = summarise(
        [curve(1, [0, 50, 40, 90]), curve(2, [60, 10, 20, 30]), curve(3, [0, 0, 0, 10])], {"Task-v0": 50.0}
    )
    (row,) = rows
    assert row["reached"] == 2 and row["runs"] == 3
    assert row["steps_to_threshold"] == np.median([200, 100]) and row["wall_to_threshold"] == np.median([20.0, 10.0])
    assert row["final_means"] == [90, 30, 10] and row["final_min"] == 10
    assert spread(list(range(10)), 3) == [0, 4, 9] and spread([1, 2], 5) == [1, 2] and spread([1, 2], 0) == []


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--threshold", "CartPole-v1"], "--threshold expects ENV=NUMBER, got 'CartPole-v1'"),
        (["--threshold", "CartPole-v1=lots"], "--threshold expects ENV=NUMBER"),
        (["--threshold", "CartPole-v1=nan"], "--threshold 'CartPole-v1=nan': the threshold must be a finite number"),
        (["--threshold", "CartPole-v1=-inf"], "--threshold 'CartPole-v1=-inf': the threshold must be a finite number"),
        (["--episodes", "0"], "--episodes must be an integer >= 1, got 0"),
        (["--points", "-1"], "--points must be an integer >= 0, got -1"),
    ],
)
def test_bad_input_is_one_line(runs, tmp_path, capsys, args, needle):
    d, _, _ = runs
    with pytest.raises(SystemExit) as exc:
        main(["bench", "compare", str(d / "ppo.h5"), *args, "--out-dir", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and needle in err, err
    assert not (tmp_path / "o").exists()


def test_runs_it_cannot_compare_are_refused(tmp_path, capsys):
    ga = tmp_path / "ga.h5"
    r = run_cli(
        "evolve",
        "--env",
        "CartPole-v1",
        "--agent",
        "pruned-mlp",
        "--hidden",
        "2",
        "--population",
        "4",
        "--generations",
        "1",
        "--episodes",
        "1",
        "--test-episodes",
        "1",
        "--strategy",
        "ga",
        "--out",
        ga,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    for path, needle in ((ga, "needs a centre strategy"), (tmp_path / "none.h5", "is not a run file")):
        with pytest.raises(SystemExit) as exc:
            main(["bench", "compare", str(path), "--out-dir", str(tmp_path / "o")])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and err.count("\n") == 1 and needle in err, err


def test_an_unfinished_run_ends_at_its_latest_policy(tmp_path):
    """A PPO run killed before epoch 2: its curve ends at the checkpoint after epoch 1,
    tested with that epoch's normalisation, and the table says it is unfinished."""
    out = tmp_path / "cut.h5"
    proc = start_cli(
        "ppo",
        "--env",
        "CartPole-v1",
        "--epochs",
        "5",
        "--steps-per-epoch",
        "300",
        "--hid",
        "8",
        "--obs-norm",
        "--seed",
        "4",
        "--out",
        out,
        extra_env={"SYNAPTO_FAULT": "epoch:2"},
    )
    wait_for_line(proc, "FAULT-POINT epoch 2", timeout=120)
    kill_group(proc)
    proc.wait(timeout=60)
    r = run_cli("bench", "compare", out, "--points", "1", "--episodes", "3", "--out-dir", tmp_path / "o", timeout=120)
    assert r.returncode == 0, r.stderr
    (curve,) = json.loads((tmp_path / "o" / "compare.json").read_text())["runs"]
    assert curve["finished"] is False
    assert [(p["label"], p["env_steps"]) for p in curve["points"]] == [("epoch 0", 300), ("epoch 1", 600)]
    e = run_cli("ppo-eval", out, "--episodes", "3", timeout=60)  # the checkpoint, as ppo-eval tests it
    assert f"return {curve['points'][-1]['test_mean']:.2f}" in e.stdout, e.stdout
    assert "1 unfinished" in (tmp_path / "o" / "compare.md").read_text()
