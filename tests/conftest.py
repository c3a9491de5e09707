"""Shared test helpers: run the CLI in a subprocess, compare run files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from synapto.store import compare

ROOT = Path(__file__).resolve().parents[1]
MPIEXEC = os.path.join(os.path.dirname(sys.executable), "mpiexec")


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests"), env.get("PYTHONPATH", "")])
    for v in ("PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "SYNAPTO_LAUNCHED",
              "MPI_LOCALNRANKS", "MPI_LOCALRANKID", "HYDRA_CONTROL_FD"):
        env.pop(v, None)
    return env


def start_cli(*args, ranks: int | None = None, extra_env=None) -> subprocess.Popen:
    """Start ``python -m synapto <args>`` in its own process group (to signal or kill it whole)."""
    cmd = [sys.executable, "-m", "synapto", *map(str, args)]
    if ranks is not None:
        cmd = [MPIEXEC, "-n", str(ranks), *cmd]
    env = {**_env(), **(extra_env or {}), "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)


def wait_for_line(proc: subprocess.Popen, needle: str, timeout: float = 300) -> str:
    """Read ``proc``'s stdout until a line containing ``needle``; fail on timeout or exit."""
    import selectors
    import time

    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
            break
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        if needle in line:
            return line
    kill_group(proc)
    pytest.fail(f"never saw {needle!r}; output:\n{''.join(seen)}\n{proc.stderr.read()}")


def kill_group(proc: subprocess.Popen, sig=None) -> None:
    import signal

    try:
        os.killpg(proc.pid, sig or signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_cli(*args, ranks: int | None = None, timeout: float = 300, cwd=None) -> subprocess.CompletedProcess:
    """``python -m synapto <args>``, under ``mpiexec -n ranks`` when given; bounded by ``timeout``."""
    cmd = [sys.executable, "-m", "synapto", *map(str, args)]
    if ranks is not None:
        cmd = [MPIEXEC, "-n", str(ranks), *cmd]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_env(), cwd=cwd)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"timed out after {timeout}s: {' '.join(cmd)}\n{exc.stdout}\n{exc.stderr}")


def datasets(path, skip=("timing",)) -> dict[str, np.ndarray]:
    """Every dataset of an HDF5 file except those under the ``skip`` groups."""
    return compare.datasets(path, skip)


def assert_same_run(a, b) -> None:
    """Bit-identical datasets (timings under /timing excepted)."""
    differ = compare.differences(a, b)
    assert not differ, f"datasets differ: {differ}"
