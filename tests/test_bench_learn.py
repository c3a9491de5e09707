"""`bench learn` end to end on a tiny budget; its table agrees with the run files."""

import json

import h5py
import numpy as np
import pytest

from conftest import run_cli


@pytest.mark.slow
def test_bench_learn_tiny_budget(tmp_path):
    proc = run_cli("bench", "learn", "--env", "CartPole-v1", "--population", "8", "--generations", "2",
                   "--episodes", "1", "--hidden", "4", "--seed", "1", "2", "--test-episodes", "3",
                   "--workers", "0", "--out-dir", tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads((tmp_path / "learn.json").read_text())
    assert set(data["runs"]) == {"reference", "default"}
    md = (tmp_path / "learn.md").read_text()
    assert "| reference |" in md and "| default |" in md
    for mode, items in data["runs"].items():
        assert [r["seed"] for r in items] == [1, 2]
        for r in items:
            path = tmp_path / "learn_runs" / f"CartPole-v1_hebbian-dag_{mode}_s{r['seed']}.h5"
            with h5py.File(path, "r") as f:
                test = f["champion/test_returns"][()]
                assert r["test_mean"] == float(test.mean())
                assert r["selection_fitness"] == float(f["champion/fitness"][0])
                assert (f["validation/fitness"].shape[1] > 0) == (mode == "default")
                seeds = f["seeds"][()]
                assert np.all(seeds == seeds[:, :1]) == (mode == "default")  # CRN only by default
        means = [r["test_mean"] for r in items]
        assert data["summary"][mode]["test_mean"][0] == float(np.mean(means))


def test_bench_learn_rejects_unknown_mode(tmp_path):
    proc = run_cli("bench", "learn", "--mode", "magic", "--out-dir", tmp_path, timeout=180)
    assert proc.returncode == 2 and "magic" in proc.stderr
