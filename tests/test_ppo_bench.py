"""`synapto bench ppo` (what `make bench-ppo` runs) writes its table; figures are not asserted."""

import json

import pytest
from conftest import run_cli


@pytest.mark.long
@pytest.mark.mpi
@pytest.mark.slow
def test_bench_ppo_writes_markdown_and_json(tmp_path):
    proc = run_cli(
        "bench",
        "ppo",
        "--epochs",
        "2",
        "--steps",
        "200",
        "--procs",
        "1",
        "2",
        "--seed",
        "5",
        "7",
        "--env",
        "Pendulum-v1",
        "--hid",
        "4",
        "--max-ep-len",
        "100",
        "--out-dir",
        tmp_path,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads((tmp_path / "ppo.json").read_text())
    assert sorted(result["runs"]) == ["1", "2"]
    for p in ("1", "2"):
        assert sorted(result["runs"][p]) == ["5", "7"]
        run = result["runs"][p]["5"]
        assert run["env_steps"] == 400 and run["epochs"] == 2 and run["wall"] > 0
        assert set(run["split"]) >= {"env", "act", "values", "update", "update_pi", "update_v", "comm", "epoch"}
    table = (tmp_path / "ppo.md").read_text()
    assert "| seed 5 (s) | seed 7 (s) | mean ± std (s) |" in table
    assert "\n| 1 | " in table and "\n| 2 | " in table
    assert "env stepping" in table and "policy loop" in table and "value loop" in table
    assert (tmp_path / "runs" / "ppo_Pendulum-v1_p2_s7.h5").exists()


def test_bench_ppo_bad_input():
    proc = run_cli("bench", "ppo", "--procs", "0", timeout=60)
    assert proc.returncode == 2 and proc.stderr.startswith("error: ") and "--procs" in proc.stderr
