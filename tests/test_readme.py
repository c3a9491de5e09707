"""The README's Python API example runs as written, and says what it promises."""

import re
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
from conftest import _env

ROOT = Path(__file__).resolve().parents[1]


def readme_example() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Python API", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1, "the Python API section has one example"
    return blocks[0]


def test_readme_api_example_runs(tmp_path):
    code = readme_example() + "\nprint('state keys', sorted(state))\n"
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[-1] == "state keys ['arrays', 'best', 'rng', 'scalars', 'search']"
    assert float(lines[-2]) > -10 * 0.5  # the sphere search got near its optimum (start: -10)
    lines = lines[:-1]
    with h5py.File(tmp_path / "runs" / "api_cartpole.h5", "r") as f:  # the run the example made
        test_mean = float(f["champion/test_returns"][()].mean())
        assert f["champion/test_returns"].shape == (10,) and int(f["completed"][0]) == 5
    assert float(lines[-3]) == test_mean  # print(summary.test_mean) is the file's test mean
    fitness, generation = lines[-2].split()
    assert np.isfinite(float(fitness)) and 0 <= int(generation) < 5


def test_docs_hold_every_strategys_options_table():
    from synapto.evolution.strategies import STRATEGIES, options_table

    doc = (ROOT / "docs" / "strategies.md").read_text()
    for name in STRATEGIES:
        assert f"## {name}\n" in doc and options_table(name) in doc, name
