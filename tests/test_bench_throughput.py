"""`bench envs` and `bench nn` on tiny sizes: table bookkeeping, not timings."""

import json

import pytest
from conftest import run_cli


@pytest.mark.long
@pytest.mark.mpi  # its mpi backends
@pytest.mark.slow
def test_bench_envs_tiny(tmp_path):
    proc = run_cli(
        "bench",
        "envs",
        "--max-envs",
        "16",
        "--steps",
        "200",
        "--max-async",
        "2",
        "--max-serial",
        "4",
        "--workers",
        "1",
        "--bipedal-rows",
        "2",
        "--bipedal-seconds",
        "0.1",
        "--out-dir",
        tmp_path,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads((tmp_path / "envs.json").read_text())
    got = {(r["backend"], r["agent"], r["envs"]) for r in data["results"]}
    for agent in (False, True):
        assert {n for b, a, n in got if b == "vector" and a == agent} == {1, 4, 16}
        assert {n for b, a, n in got if b == "sync" and a == agent} == {1, 4}
        assert {n for b, a, n in got if b == "async" and a == agent} == {1}
        assert {n for b, a, n in got if b == "mpi" and a == agent} == {1, 4}
    assert {n for b, a, n in got if b == "mpi-batched"} == {1, 4, 16}
    assert all(r["steps_per_s"] > 0 and r["per_core"] <= r["steps_per_s"] for r in data["results"])
    md = (tmp_path / "envs.md").read_text()
    assert "| vector | agent |" in md and "n=16" in md and "| async | random | " in md


def test_bench_nn_tiny(tmp_path):
    proc = run_cli(
        "bench", "nn", "--repeats", "1", "--scale", "0.01", "--torch", "off", "--out-dir", tmp_path, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads((tmp_path / "nn.json").read_text())
    assert [(r["library"], r["network"]) for r in data["rows"]] == [
        ("numpy", "MLP 32 32"),
        ("numpy", "MLP 64 64"),
        ("numpy", "Hebbian DAG 8 8"),
    ]
    for r in data["rows"]:
        assert all(r[f"forward_{b}"] > 0 for b in (1, 16, 128))
        assert (r["train_4000"] is None) == (r["network"].startswith("Hebbian"))
    assert "| numpy | Hebbian DAG 8 8 |" in (tmp_path / "nn.md").read_text()


def test_bench_envs_rejects_unknown_backend(tmp_path):
    proc = run_cli("bench", "envs", "--backend", "gpu", "--out-dir", tmp_path, timeout=60)
    assert proc.returncode == 2 and "gpu" in proc.stderr


def test_bench_envs_bipedal_row_tiny(tmp_path):
    pytest.importorskip("envpool")
    proc = run_cli(
        "bench",
        "envs",
        "--backend",
        "bipedal",
        "--bipedal-rows",
        "2",
        "--bipedal-seconds",
        "0.1",
        "--out-dir",
        tmp_path,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads((tmp_path / "envs.json").read_text())["bipedal"]
    assert data["rounds"] >= 2 and set(data["paths"]) == {"gymnasium", "envpool"}
    for p in data["paths"].values():
        assert p["steps"] > 0 and p["per_core"] > 0
    assert data["ratio"] == data["paths"]["envpool"]["per_core"] / data["paths"]["gymnasium"]["per_core"]
    md = (tmp_path / "envs.md").read_text()
    assert "| envpool, 2 envs in lockstep |" in md and "| gymnasium, one env at a time |" in md
