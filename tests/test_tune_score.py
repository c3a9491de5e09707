"""scripts/tune_score.py: scores finished tuning runs only, against the threshold it is given."""

import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import pytest
from conftest import run_cli

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "tune_score.py"


def score(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def tuning_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("tune") / "cp_s1000.h5"
    proc = run_cli(
        "evolve",
        "--env",
        "CartPole-v1",
        "--agent",
        "pruned-mlp",
        "--hidden",
        "4",
        "--population",
        "8",
        "--generations",
        "2",
        "--episodes",
        "1",
        "--seed",
        "1000",
        "--test-episodes",
        "0",
        "--out",
        out,
    )
    assert proc.returncode == 0, proc.stderr
    return out


def test_an_unfinished_run_is_refused_in_one_line(tuning_run, tmp_path):
    unfinished = tmp_path / "cp_s1000.h5"
    shutil.copy(tuning_run, unfinished)
    with h5py.File(unfinished, "r+") as f:
        f["champion/tested"][0] = False  # as in a run still going: no champion chosen yet
    proc = score(unfinished, "--episodes", "2")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "is not finished" in lines[0], proc.stderr
    assert proc.stdout == ""


def test_the_threshold_decides_what_counts_as_solved(tuning_run):
    # CartPole's returns are at least 1: every run passes 0, none passes a million
    low, high = (
        score(tuning_run, "--episodes", "2", "--threshold", "0"),
        score(tuning_run, "--episodes", "2", "--threshold", "1e6"),
    )
    assert low.returncode == 0 and high.returncode == 0, low.stderr + high.stderr
    assert "(>= 0: 1/1)" in low.stdout and "(>= 1e+06: 0/1)" in high.stdout
