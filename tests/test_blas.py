"""One BLAS thread per process (synapto/common/blas.py), and why results depend on it.

Full-covariance CMA-ES draws every sample through an eigendecomposition of its
covariance. With a genome of a few hundred weights, OpenBLAS splits that work over its
threads, and the thread count changes the rounding. So a run whose BLAS thread count
synapto did not pin gives other samples from generation 1 on. These tests check that
synapto pins it: a run without any thread setting writes the same file as a run whose
user asked for one thread.
"""

import os
import subprocess
import sys

import pytest
from conftest import ROOT, _env, datasets

THREAD_SETTINGS = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS", "BLIS_NUM_THREADS")

# 4 x 40 + 40 x 2 = 240 weights: large enough for OpenBLAS to thread the decomposition
RUN = [
    "evolve",
    "--env",
    "CartPole-v1",
    "--agent",
    "pruned-mlp",
    "--hidden",
    "40",
    "--strategy",
    "cmaes",
    "--strategy-option",
    "separable=false",
    "--population",
    "64",
    "--generations",
    "3",
    "--episodes",
    "1",
    "--select-episodes",
    "0",
    "--test-episodes",
    "0",
    "--seed",
    "1",
    "--workers",
    "0",
    "--force",
]


def _run(out, threads: str | None):
    env = {k: v for k, v in _env().items() if k not in THREAD_SETTINGS}
    if threads is not None:
        env["OPENBLAS_NUM_THREADS"] = threads
    proc = subprocess.run(
        [sys.executable, "-m", "synapto", *RUN, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="OpenBLAS runs one thread on one core: nothing to pin")
def test_a_run_uses_one_blas_thread_whatever_the_machine_offers(tmp_path):
    pinned, one = tmp_path / "pinned.h5", tmp_path / "one.h5"
    _run(pinned, None)  # synapto limits BLAS to one thread itself
    _run(one, "1")  # the user asked for one thread (synapto leaves it alone)
    a, b = datasets(pinned), datasets(one)
    assert a.keys() == b.keys()
    different = [k for k in a if a[k].shape != b[k].shape or not (a[k] == b[k]).all()]
    assert different == []
