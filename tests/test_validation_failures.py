"""A validation task that raises is never silent: under --on-error skip it warns in one
line, counts in /stats/failure_count and prints a `reproduce:` command that replays it;
under --on-error abort the printed command replays the unfinished generation's validation."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
from conftest import run_cli

#: seed 3: generation 0's training episodes pass, its validation episodes (shared seeds) raise
RUN = [
    "--env",
    "failing_env:FailingCartPole-v0",
    "--agent",
    "pruned-mlp",
    "--hidden",
    "2",
    "--population",
    "4",
    "--generations",
    "2",
    "--episodes",
    "1",
    "--validate-episodes",
    "2",
    "--test-episodes",
    "0",
    "--strategy",
    "openai-es",
    "--seed",
    "3",
    # the defaults the test was written for (evolve's are now the default experiment's): the
    # centre alone validated, no final selection (a selection or test that raises always aborts)
    "--validate-top",
    "0",
    "--select-episodes",
    "0",
    "--max-env-steps",
    "0",
]
pytestmark = pytest.mark.slow  # four synapto processes


def reproduce_command(text: str) -> list[str]:
    line = next(ln for ln in text.splitlines() if ln.startswith("reproduce: "))
    return line.split()[line.split().index("replay") + 1 :]


def test_failed_validation_under_skip_warns_counts_and_reproduces(tmp_path):
    out = tmp_path / "r.h5"
    proc = run_cli("evolve", *RUN, "--out", out, "--on-error", "skip", timeout=120)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout + proc.stderr
    assert "warning: generation 0 validation of individual -1 failed on rank 0" in text
    with h5py.File(out, "r") as f:
        assert list(f["stats/failure_count"][:2]) == [1.0, 0.0]
        assert np.isneginf(f["validation/fitness"][0]).all()
    replay = run_cli("replay", *reproduce_command(text), timeout=120)
    # the replay runs the failing validation again: it raises (exit 1), it is not refused (exit 2)
    assert replay.returncode == 1 and "simulated environment failure" in replay.stdout + replay.stderr


def test_failed_validation_under_abort_reproduces_from_the_checkpoint(tmp_path):
    out = tmp_path / "r.h5"
    proc = run_cli("evolve", *RUN, "--out", out, timeout=120)
    assert proc.returncode == 1 and "generation 0 validation of individual -1 failed" in proc.stderr
    replay = run_cli("replay", *reproduce_command(proc.stderr), timeout=120)
    assert replay.returncode == 1, replay.stderr
    assert "not completed: from the checkpoint" in replay.stdout and "simulated environment failure" in replay.stdout
