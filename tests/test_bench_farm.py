"""``bench farm``: its arithmetic, its bad input, and one small real probe."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli

from synapto.bench.farm import SIZES, saturation, speedup_rows


def test_speedups_are_against_one_worker_per_config():
    runs = [
        {"config": "a", "workers": 1, "loop_wall": 100.0, "wall": 104.0, "coordinator_cpu": 4.0, "env_steps": 10},
        {"config": "a", "workers": 2, "loop_wall": 50.0, "wall": 55.0, "coordinator_cpu": 3.0, "env_steps": 10},
        {"config": "a", "workers": 2, "loop_wall": 60.0, "wall": 65.0, "coordinator_cpu": 3.0, "env_steps": 10},
        {"config": "b", "workers": 1, "loop_wall": 30.0, "wall": 32.0, "coordinator_cpu": 0.3, "env_steps": 5},
        {"config": "b", "workers": 2, "loop_wall": 20.0, "wall": 24.0, "coordinator_cpu": 0.4, "env_steps": 5},
    ]
    rows = {(r["config"], r["workers"]): r for r in speedup_rows(runs)}
    assert rows["a", 1]["speedup"] == 1.0 and rows["a", 1]["coordinator_cpu_share"] == 0.04
    assert rows["a", 2]["wall"] == 55.0  # the median of 50 and 60
    assert rows["a", 2]["speedup"] == pytest.approx(100 / 55) and rows["a", 2]["efficiency"] == pytest.approx(50 / 55)
    assert rows["b", 2]["speedup"] == 1.5 and rows["b", 2]["coordinator_cpu_share"] == 0.02
    assert rows["a", 2]["process_wall"] == 60.0 and rows["a", 2]["process_speedup"] == pytest.approx(104 / 60)


def test_saturation_is_an_episode_over_the_coordinator_cpu_per_task():
    probes = [
        {"payload": "noise key", "workers": 2, "cpu_per_task_us": 40.0},
        {"payload": "noise key", "workers": 8, "cpu_per_task_us": 20.0},
        {"payload": "100 B", "workers": 8, "cpu_per_task_us": 5.0},
    ]
    runs = [
        {"config": "experiments/bipedal_solve.toml", "workers": 1, "worker_compute": 30.0, "tasks": 100},
        {"config": "experiments/bipedal_solve.toml", "workers": 2, "worker_compute": 99.0, "tasks": 100},
    ]
    sat = saturation(probes, runs)
    assert sat["episode_s"] == 0.3 and sat["measured_at_workers"] == 8
    assert sat["workers"] == pytest.approx(0.3 / 20e-6)
    assert saturation(probes, []) == {}


@pytest.mark.parametrize("args", [["--repeats", "0"], ["--workers-list", "0"], ["--tasks-per-worker", "0"]])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args):
    res = run_cli("bench", "farm", *args, "--no-configs", "--out-dir", tmp_path)
    assert res.returncode == 2 and res.stderr.startswith("error:") and len(res.stderr.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())


@pytest.mark.long
@pytest.mark.mpi
def test_a_probe_times_every_payload_at_each_worker_count(tmp_path):
    res = run_cli(
        "bench",
        "farm",
        "--workers-list",
        "1",
        "2",
        "--tasks-per-worker",
        "3",
        "--repeats",
        "1",
        "--no-configs",
        "--out-dir",
        tmp_path,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    data = json.loads((tmp_path / "farm.json").read_text())
    probes = data["probes"]
    assert sorted({p["workers"] for p in probes}) == [1, 2]
    assert [p["bytes"] for p in probes if p["workers"] == 2] == [*SIZES, 0]
    assert all(p["tasks"] == 64 or (p["bytes"] == 1_000_000 and p["tasks"] == 16) for p in probes)
    assert all(p["cpu_per_task_us"] > 0 and p["tasks_per_s"] > 0 for p in probes)
    md = (tmp_path / "farm.md").read_text()
    assert "| noise key |" in md and "| 1,000,000 B |" in md
