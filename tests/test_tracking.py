"""Tracking a run while it goes: --tensorboard writes event files that TensorBoard's own
reader reads, --live-log a CSV or JSONL row per generation, callbacks see every generation;
-q and -v set what is printed; the run file records the code's git commit."""

from __future__ import annotations

import csv
import json

import h5py
import numpy as np
import pytest
from conftest import ROOT, run_cli

RUN = [
    "--env",
    "CartPole-v1",
    "--agent",
    "pruned-mlp",
    "--hidden",
    "4",
    "--population",
    "8",
    "--generations",
    "3",
    "--episodes",
    "1",
    "--validate-episodes",
    "2",
    "--test-episodes",
    "2",
    "--seed",
    "7",
    "--max-env-steps",
    "0",
]  # no env-step budget (the default experiment's): the generations end the run


def test_tensorboard_and_live_logs_hold_every_generation(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "t.h5"
    proc = run_cli(
        "evolve",
        *RUN,
        "--out",
        out,
        "--tensorboard",
        tmp_path / "tb",
        "--live-log",
        tmp_path / "live.jsonl",
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    with h5py.File(out, "r") as f:
        best = f["stats/best_fitness"][:3]
        wall = f["timing/wall"][:3]
        steps = f["stats/env_steps"][:3] + f["stats/validation_env_steps"][:3]
    acc = EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    assert "stats/best_fitness" in acc.Tags()["scalars"] and "timing/wall" in acc.Tags()["scalars"]
    events = acc.Scalars("stats/best_fitness")
    # stepped by env steps (training and validation), as other libraries' curves are
    assert [e.step for e in events] == list(steps) and steps[0] > 0
    assert [(e.step, e.value) for e in acc.Scalars("run/generation")] == [(s, g) for s, g in zip(steps, (0, 1, 2))]
    assert np.allclose([e.value for e in events], best, rtol=1e-6)  # float32 in the event file
    rows = [json.loads(line) for line in (tmp_path / "live.jsonl").read_text().splitlines()]
    assert [r["generation"] for r in rows] == [0, 1, 2]
    assert [r["best_fitness"] for r in rows] == list(best) and [r["timing_wall"] for r in rows] == list(wall)


def test_tensorboard_folder_that_cannot_be_written_is_refused_before_the_run(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    proc = run_cli("evolve", *RUN, "--out", tmp_path / "x.h5", "--tensorboard", blocker / "tb", timeout=60)
    assert proc.returncode == 2 and proc.stderr.startswith("error: --tensorboard") and not (tmp_path / "x.h5").exists()
    proc = run_cli("evolve", *RUN, "--out", tmp_path / "x.h5", "--live-log", tmp_path / "live.txt", timeout=60)
    assert proc.returncode == 2 and "must end in .csv or .jsonl" in proc.stderr


def test_verbose_run_counts_generations_as_its_file_and_records_the_commit(tmp_path):
    """-v adds timing lines; the console's generations are the run file's and the CSV export's
    (from 0); the start line counts honestly; the live CSV log holds the rows; the run file
    names the checkout's git commit."""
    import subprocess

    out = tmp_path / "n.h5"
    proc = run_cli("-v", "evolve", *RUN, "--out", out, "--live-log", tmp_path / "live.csv", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "gen 2 timing: wall" in proc.stdout
    assert "3 generations, 1 episode per fitness" in proc.stdout
    printed = [int(line.split()[1]) for line in proc.stdout.splitlines() if line.startswith("gen ") and "%" in line]
    assert run_cli("export", out, "--csv", tmp_path / "csv").returncode == 0
    with open(tmp_path / "csv" / "n.csv") as fh:
        exported = [int(float(r["generation"])) for r in csv.DictReader(fh)]
    assert printed == exported == [0, 1, 2]
    with open(tmp_path / "live.csv") as fh:
        table = list(csv.DictReader(fh))
    with h5py.File(out, "r") as f:
        assert [float(r["best_fitness"]) for r in table] == list(f["stats/best_fitness"][:3])
        versions = json.loads(f.attrs["versions"])
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    assert head.returncode == 0, "the tests run in a git checkout"
    assert versions["git_commit"].split("+")[0] == head.stdout.strip()


def test_quiet_prints_nothing_but_warnings(tmp_path):
    quiet = run_cli("evolve", *RUN, "--out", tmp_path / "q.h5", "-q", timeout=120)
    assert quiet.returncode == 0 and quiet.stdout == "", quiet.stdout


def test_budget_progress_and_time_left():
    from synapto.evolution.progress import Budget

    gens = Budget(generations=100)
    assert gens.fraction(25, 10**9) == 0.25 and gens.eta(25, 0, elapsed=50.0) == pytest.approx(150.0)
    steps = Budget(generations=100_000, max_env_steps=3_000_000)  # a step budget ends the run, not 100000 gens
    assert steps.unit == "env steps" and steps.total == 3_000_000
    assert steps.fraction(121, 2_999_000) == pytest.approx(2_999_000 / 3_000_000)
    assert steps.eta(60, 1_500_000, elapsed=30.0) == pytest.approx(30.0)
    assert steps.eta(10, 1_500_000, elapsed=30.0, start_fraction=0.25) == pytest.approx(60.0)  # resumed at 25 %
    assert gens.eta(0, 0, elapsed=1.0) is None


def test_a_step_budget_is_the_progress_of_the_run(tmp_path):
    proc = run_cli(
        "evolve", *RUN, "--generations", "100000", "--max-env-steps", "300", "--out", tmp_path / "s.h5", timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("gen ")]
    assert "up to 300 env steps (at most 100,000 generations)" in proc.stdout
    assert lines and lines[-1].split()[2] == "100.0%" and "/100000" not in proc.stdout
    assert all(" eta " not in line for line in lines[:2])  # the pace after start-up needs a few generations
