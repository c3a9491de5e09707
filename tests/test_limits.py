"""Absurd sizes are refused before anything is allocated or written: one line, exit code 2.

Each command runs with its address space capped (RLIMIT_AS), so that a synapto that did
allocate would fail here quickly instead of taking the machine's memory.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest
from conftest import ROOT, _env

CAP = 6 << 30


def run_capped(*args, cwd, timeout: float = 120) -> subprocess.CompletedProcess:
    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))

    try:
        return subprocess.run(
            [sys.executable, "-m", "synapto", *map(str, args)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**_env(), "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'tests'}"},
            cwd=cwd,
            preexec_fn=cap,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"timed out: {args}\n{exc.stderr}")


def assert_refused(proc, tmp_path, keep=()) -> None:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
    assert len(lines) == 1 and lines[0].startswith("error: ") and "memory" in lines[0], lines
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(keep)  # nothing written


def test_huge_population_from_a_config_file(tmp_path):
    (tmp_path / "big.toml").write_text(
        'env = "CartPole-v1"\nagent = "pruned-mlp"\npopulation = 1000000000000\ngenerations = 2\n'
    )
    proc = run_capped("evolve", "--config", "big.toml", "--out", "out/r.h5", cwd=tmp_path)
    assert_refused(proc, tmp_path, keep=["big.toml"])


def test_huge_hidden_layer(tmp_path):
    proc = run_capped("evolve", "--env", "CartPole-v1", "--hidden", "100000000", "--out", "out/r.h5", cwd=tmp_path)
    assert_refused(proc, tmp_path)


@pytest.mark.parametrize("option", [["--steps-per-epoch", "100000000000000"], ["--hid", "100000000"]])
def test_huge_ppo_epoch_or_network(tmp_path, option):
    proc = run_capped("ppo", "--env", "CartPole-v1", "--epochs", "1", *option, "--out", "out/p.h5", cwd=tmp_path)
    assert_refused(proc, tmp_path)


def test_a_sensible_run_is_not_refused(tmp_path):
    proc = run_capped(
        "evolve",
        "--env",
        "CartPole-v1",
        "--population",
        "4096",
        "--hidden",
        "8",
        "8",
        "--generations",
        "1",
        "--episodes",
        "1",
        "--test-episodes",
        "0",
        "--validate-episodes",
        "0",
        "--out",
        "r.h5",
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
