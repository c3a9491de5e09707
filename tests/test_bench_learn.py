"""`bench learn` end to end on a tiny budget: its table agrees with the run files, and a
mode's bad options are refused before anything runs."""

import json

import h5py
import numpy as np
import pytest
from conftest import run_cli


@pytest.mark.long
@pytest.mark.slow
def test_bench_learn_tiny_budget(tmp_path):
    proc = run_cli(
        "bench",
        "learn",
        "--env",
        "CartPole-v1",
        "--mode",
        "reference",
        "--mode",
        "openai-es",
        "--seed",
        "1",
        "2",
        "--max-env-steps",
        "1500",
        "--test-episodes",
        "3",
        "--workers",
        "0",
        "--out-dir",
        tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads((tmp_path / "learn.json").read_text())
    assert list(data["runs"]) == ["reference", "openai-es"]
    md = (tmp_path / "learn.md").read_text()
    assert "| reference |" in md and "| openai-es |" in md
    for mode, items in data["runs"].items():
        assert [r["seed"] for r in items] == [1, 2]
        for r in items:
            path = tmp_path / "learn_runs" / f"CartPole-v1_{mode}_s{r['seed']}.h5"
            with h5py.File(path, "r") as f:
                config = json.loads(f.attrs["config"])
                assert config["strategy"] == ("ga" if mode == "reference" else "openai-es")
                test = f["champion/test_returns"][()]
                assert test.size == 3 and r["test_mean"] == float(test.mean())
                assert r["chosen_on"] == float(f["champion/fitness"][0])
                done = int(f["completed"][0])
                train = int(f["stats/env_steps"][done - 1])
                validation = int(f["stats/validation_env_steps"][done - 1])
                assert train == int(f["steps"][:done].sum()) and train + validation >= 1500
                selection = int(f["selection/steps"][()].sum()) if "selection" in f else 0
                assert r["env_steps"] == train + validation + selection
                seeds = f["seeds"][:done]
                if mode == "reference":  # own episodes per individual, champion on training fitness
                    assert "selection" not in f and f["validation/fitness"].shape[1] == 0
                    assert not np.all(seeds == seeds[:, :1])
                    assert r["selection_fitness"] is None
                else:  # chosen on 30 fresh selection episodes
                    assert f["selection/returns"].shape[1] == 30 and selection > 0
                    assert r["selection_fitness"] == float(f["champion/selection_fitness"][0])
        means = [r["test_mean"] for r in items]
        assert data["summary"][mode]["test_mean"][0] == float(np.mean(means))


def test_bench_learn_refuses_a_bad_extra_option_before_running(tmp_path):
    proc = run_cli(
        "bench", "learn", "--mode", "openai-es", "--extra", "--mutation-std 0.3", "--out-dir", tmp_path, timeout=180
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "mutation_std" in lines[0], proc.stderr
    assert not (tmp_path / "learn_runs").exists() and "seed" not in proc.stdout


def test_bench_learn_rejects_unknown_mode(tmp_path):
    proc = run_cli("bench", "learn", "--mode", "magic", "--out-dir", tmp_path, timeout=180)
    assert proc.returncode == 2 and "magic" in proc.stderr
