"""Helpers of the cluster checks in this folder (``make test-multinode``, ``make test-slurm``).

These tests set up hosts or a batch system on this machine and need root; ``make test``
does not collect them (tests/conftest.py).  Whatever ends them -- a failure, a timeout,
Ctrl-C, SIGTERM -- the fixtures take down what they set up.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, _env, kill_group

SCRIPTS = ROOT / "scripts" / "cluster"


def require_root() -> None:
    if os.geteuid() != 0:
        pytest.fail("the cluster checks create network namespaces and start daemons: run them as root")


@contextlib.contextmanager
def held_lock(name: str):
    """One run of a check at a time: it owns fixed names (namespaces, bridge, ports)."""
    path = Path("/run/lock") if Path("/run/lock").is_dir() else Path("/tmp")
    with open(path / f"synapto-{name}.lock", "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pytest.fail(f"another {name} check is running ({f.name} is locked)")
        yield


@contextlib.contextmanager
def signals_interrupt():
    """SIGTERM and SIGHUP interrupt like Ctrl-C, so that the fixtures' cleanup runs."""

    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    old = {s: signal.signal(s, interrupt) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def run(cmd, timeout: float, env=None, cwd=ROOT, check=True) -> subprocess.CompletedProcess:
    """``cmd`` in a session of its own, killed whole after ``timeout`` seconds (the test fails)."""
    cmd = [str(c) for c in cmd]
    full_env = {**_env(), **{k: str(v) for k, v in (env or {}).items()}}
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env, cwd=cwd, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, err = proc.communicate()
        pytest.fail(f"timed out after {timeout}s: {' '.join(cmd)}\n{out}\n{err}")
    except BaseException:  # Ctrl-C, SIGTERM (signals_interrupt)
        kill_group(proc)
        raise
    result = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    if check and proc.returncode != 0:
        pytest.fail(f"exit code {proc.returncode}: {' '.join(cmd)}\n{out}\n{err}")
    return result
