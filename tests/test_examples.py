"""The scripts of examples/ run as a user runs them (``python examples/X.py --tiny``, from a
folder of their own) and do what they say: every figure they print is the run file's."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import re
import subprocess
import sys

import h5py
import numpy as np
import pytest
from conftest import ROOT, _env

from synapto.common.config import tomllib

EXAMPLES = ROOT / "examples"


def run_example(name: str, tmp_path, *args: str) -> list[str]:
    """``python examples/<name>.py --tiny ARGS`` in ``tmp_path``: its lines (it must exit 0)."""
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py"), "--tiny", *args],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout.splitlines()


def need_extra(module: str):
    """``module``, or a skip (an error under ``make test``, which installs every extra)."""
    if os.environ.get("SYNAPTO_REQUIRE_EXTRAS") or importlib.util.find_spec(module) is not None:
        return __import__(module)
    pytest.skip(f"{module} is not installed")


def test_every_example_is_run_here():
    tested = set(re.findall(r'run_example\("(\w+)"', (ROOT / "tests" / "test_examples.py").read_text()))
    assert {p.stem for p in EXAMPLES.glob("*.py")} == tested
    listed = (ROOT / "docs" / "examples.md").read_text()
    for name in tested:
        assert f"examples/{name}.py" in listed, f"docs/examples.md does not list {name}"


def test_evolve_callback_sees_every_generation_as_the_run_file_has_it(tmp_path):
    lines = run_example("evolve_callback", tmp_path)
    out = tmp_path / "runs" / "examples"
    with h5py.File(out / "callback.h5", "r") as f:
        done = int(f["completed"][0])
        best = f["stats/best_fitness"][:done]
        test_mean = float(f["champion/test_returns"][()].mean())
    with open(out / "callback_best.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert done == 2 and [int(r["generation"]) for r in rows] == [0, 1]
    assert [float(r["best_fitness"]) for r in rows] == best.tolist()  # the callback's table is the run file's
    with open(out / "callback_live.csv") as fh:
        live = list(csv.DictReader(fh))
    assert [float(r["best_fitness"]) for r in live] == best.tolist() and {r["seed"] for r in live} == {"1"}
    assert [ln for ln in lines if ln.startswith("  callback:")][-1].startswith("  callback: generation 1, best ")
    assert "2 generations, " in lines[-2] and lines[-2].endswith(f"champion test {test_mean:.1f}")


def test_custom_agent_is_the_runs_agent(tmp_path):
    lines = run_example("custom_agent", tmp_path)
    with h5py.File(tmp_path / "runs" / "examples" / "custom_agent.h5", "r") as f:
        config = json.loads(f.attrs["config"])
        n_params = int(f.attrs["n_params"])
        genome = f["champion/genome"][()]
        test_mean = float(f["champion/test_returns"][()].mean())
    assert config["agent"] == "custom_agent:LinearAgent" and config["hidden"] == []
    assert n_params == 4 * 2 + 2  # CartPole: 4 observations x 2 actions, and a bias per action
    assert lines[-1] == (
        f"agent LinearAgent: 10 parameters, {np.count_nonzero(genome)} connections left; champion test {test_mean:.1f}"
    )


def test_custom_strategy_searches_a_vector_and_runs_an_env(tmp_path):
    lines = run_example("custom_strategy", tmp_path)
    start, end = map(
        float, re.fullmatch(r"quadratic: fitness (\S+) at the start, (\S+) after 5 generations", lines[-2]).groups()
    )
    assert start == pytest.approx(-sum(x * x for x in np.linspace(-1, 1, 10)), abs=0.005) and start < end <= 0
    with h5py.File(tmp_path / "runs" / "examples" / "custom_strategy.h5", "r") as f:
        assert json.loads(f.attrs["config"])["strategy"] == "hill-climber" and int(f["completed"][0]) == 2
        test_mean = float(f["champion/test_returns"][()].mean())
    assert lines[-1] == f"cartpole: 2 generations of hill-climber, champion test {test_mean:.1f}"


def test_load_and_export_replays_the_champion_and_exports_it(tmp_path):
    need_extra("onnxruntime")
    lines = run_example("load_and_export", tmp_path)
    replay = next(ln for ln in lines if ln.startswith("replayed test episode 0"))
    assert replay.endswith("equal: True")
    with h5py.File(tmp_path / "runs" / "examples" / "export.h5", "r") as f:
        assert f"stored {f['champion/test_returns'][0]}," in replay
    with np.load(tmp_path / "runs" / "examples" / "champion.npz") as f:
        assert {"layer0_weight", "layer1_weight", "layout"} <= set(f.files)
    same, total = map(int, re.search(r"onnx: \S+, (\d+) of (\d+) actions equal", lines[-1]).groups())
    assert same == total > 0


@pytest.mark.slow
def test_tune_study_writes_the_best_trial_and_scores_it_on_a_benchmark_seed(tmp_path):
    need_extra("optuna")
    lines = run_example("tune_study", tmp_path)
    out = tmp_path / "runs" / "examples" / "tune"
    best_toml = (out / "study.best.toml").read_text()
    assert best_toml.startswith("# Chosen by `synapto tune`: study 'study'")
    options = tomllib.loads(best_toml)["strategy_options"]
    assert 0.001 <= options["lr"] <= 0.3 and 0.02 <= options["sigma"] <= 0.3  # within the space
    with h5py.File(out / "best_s1.h5", "r") as f:
        assert json.loads(f.attrs["config"])["seed"] == 1
        test_mean = float(f["champion/test_returns"][()].mean())
    assert (
        lines[-2]
        == f"best: lr {options['lr']:.4g}, sigma {options['sigma']:.4g}; benchmark seed 1: test {test_mean:.1f}"
    )
