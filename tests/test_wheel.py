"""Installing outside a checkout: the wheel ``make wheel`` builds carries the shipped configs
and the Slurm script, and the README says how to get it (synapto is on no package index)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from conftest import ROOT


def test_readme_installs_from_a_wheel_or_the_checkout_not_from_an_index():
    readme = (ROOT / "README.md").read_text()
    assert "make wheel" in readme and "not on a package index" in readme
    assert not re.search(r"Outside a checkout,\s*`pip install 'synapto-evo", readme)
    assert re.search(r"^wheel:", (ROOT / "Makefile").read_text(), re.M)


@pytest.mark.slow
def test_the_wheel_runs_outside_the_checkout(tmp_path):
    pip = [sys.executable, "-m", "pip"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "--wheel-dir", tmp_path / "dist", ROOT],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = (tmp_path / "dist").glob("synapto_evo-*-py3-none-any.whl")
    subprocess.run(
        [*pip, "install", "--no-deps", "--no-index", "--target", tmp_path / "site", wheel],
        check=True,
        capture_output=True,
        timeout=300,
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    code = (
        "import synapto, sys; assert synapto.__file__.startswith(sys.argv[1]), synapto.__file__\n"
        "print(synapto.EvolveConfig.from_toml('quickstart').env)\n"
        "from synapto.cli import main\nmain(['slurm-script'])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "site")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "#SBATCH --signal=B:TERM@120" in out.stdout and "LunarLander" in out.stdout
