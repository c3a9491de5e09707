"""Replay of stored evaluations: bit-identical recomputation, mismatch detection."""

import h5py
import pytest
from conftest import run_cli


@pytest.fixture(scope="module")
def run_file(tmp_path_factory):
    out = tmp_path_factory.mktemp("replay") / "run.h5"
    proc = run_cli(
        "evolve",
        "--env",
        "BipedalWalker-v3",
        "--agent",
        "hebbian-dag",
        "--population",
        "6",
        "--generations",
        "2",
        "--episodes",
        "2",
        "--hidden",
        "4",
        "--seed",
        "4",
        "--test-episodes",
        "0",
        "--validate-episodes",
        "2",
        "--strategy",
        "ga",
        "--validate-top",
        "0",
        "--select-episodes",
        "0",
        "--max-env-steps",
        "0",
        "--out",
        out,
    )
    assert proc.returncode == 0, proc.stderr
    return out


def test_replay_one_individual_is_bit_identical(run_file):
    with h5py.File(run_file, "r") as f:
        stored = repr(float(f["fitness"][1, 3]))
    proc = run_cli("replay", run_file, "--generation", "1", "--individual", "3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"stored {stored}" in proc.stdout and f"recomputed {stored}" in proc.stdout
    assert "1/1 bit-identical" in proc.stdout


@pytest.mark.mpi
def test_replay_sample_under_mpi(run_file):
    proc = run_cli("replay", run_file, "--sample", "5", "--sample-seed", "9", ranks=3)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "--sample-seed 9" in proc.stdout and "5/5 bit-identical" in proc.stdout


def test_replay_detects_a_changed_result(run_file, tmp_path):
    bad = tmp_path / "tampered.h5"
    bad.write_bytes(run_file.read_bytes())
    with h5py.File(bad, "r+") as f:
        f["fitness"][0, 2] = f["fitness"][0, 2] + 1e-9
    proc = run_cli("replay", bad, "--generation", "0", "--individual", "2")
    assert proc.returncode == 1
    assert "MISMATCH" in proc.stdout and "0/1 bit-identical" in proc.stdout
