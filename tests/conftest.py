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

# tests/cluster/ sets up hosts (network namespaces) or a Slurm on this machine and needs root:
# it runs only when named (make test-multinode, make test-slurm), never within `pytest tests`.
collect_ignore = ["cluster"]
MPIEXEC = os.path.join(os.path.dirname(sys.executable), "mpiexec")


def _env():
    from synapto.parallel.launch import without_mpi_env

    env = without_mpi_env()  # a test's commands start MPI jobs of their own
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests"), env.get("PYTHONPATH", "")])
    return env


_mpi_allowed = True


@pytest.fixture(autouse=True)
def _mpiexec_only_in_tests_marked_mpi(request, monkeypatch, tmp_path_factory):
    """Keeps the ``mpi`` marker honest: in a test without it, ``ranks=`` fails and an
    mpiexec started through synapto (``--workers``, ``--cpu``, benchmarks) refuses to run."""
    global _mpi_allowed
    _mpi_allowed = request.node.get_closest_marker("mpi") is not None
    if not _mpi_allowed:
        refuse = tmp_path_factory.getbasetemp() / "mpiexec-not-marked-mpi"
        if not refuse.exists():
            refuse.write_text("#!/bin/sh\necho 'error: a test not marked mpi started mpiexec' >&2\nexit 97\n")
            refuse.chmod(0o755)
        monkeypatch.setenv("SYNAPTO_MPIEXEC", str(refuse))
    yield
    _mpi_allowed = True


def _mpi_cmd(ranks, cmd):
    if ranks is None:
        return cmd
    if not _mpi_allowed:
        pytest.fail("this test runs mpiexec: mark it @pytest.mark.mpi")
    return [MPIEXEC, "-n", str(ranks), *cmd]


def start_cli(*args, ranks: int | None = None, extra_env=None) -> subprocess.Popen:
    """Start ``python -m synapto <args>`` in its own process group (to signal or kill it whole)."""
    cmd = _mpi_cmd(ranks, [sys.executable, "-m", "synapto", *map(str, args)])
    env = {**_env(), **{k: str(v) for k, v in (extra_env or {}).items()}, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    )


def wait_for_line(proc: subprocess.Popen, needle: str, timeout: float = 300, stream: str = "stdout") -> str:
    """Read ``proc``'s stdout (or ``stream="stderr"``) until a line containing ``needle``;
    fail on timeout or exit.

    Reads the pipe unbuffered (``os.read``) and splits lines itself: a line that arrives
    in the same read as the one before it is seen at once, not at the next output.  What
    was read past that line is kept for the next call."""
    import selectors
    import time

    fd = getattr(proc, stream).fileno()
    if not hasattr(proc, "_lines"):
        proc._lines = {}
    buf, seen = proc._lines.setdefault(stream, [b"", []])
    sel = selectors.DefaultSelector()
    sel.register(fd, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    try:
        while True:
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                text = line.decode(errors="replace") + "\n"
                seen.append(text)
                if needle in text:
                    proc._lines[stream][0] = buf
                    return text
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(timeout=left):
                break
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            buf += chunk
    finally:
        sel.close()
    kill_group(proc)
    pytest.fail(f"never saw {needle!r} on {stream}; it said:\n{''.join(seen)}{buf.decode(errors='replace')}")


def finish(proc: subprocess.Popen, timeout: float = 120) -> tuple[str, str]:
    """Wait for ``proc`` (bounded; killed on timeout): its whole stdout and stderr, also
    what :func:`wait_for_line` read."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, err = proc.communicate()
        pytest.fail(f"still running after {timeout}s:\n{out}\n{err}")
    lines = getattr(proc, "_lines", {})
    before = {k: "".join(seen) + buf.decode(errors="replace") for k, (buf, seen) in lines.items()}
    return before.get("stdout", "") + out, before.get("stderr", "") + err


def kill_group(proc: subprocess.Popen, sig=None) -> None:
    import signal

    try:
        os.killpg(proc.pid, sig or signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_cli(
    *args, ranks: int | None = None, timeout: float = 300, cwd=None, extra_env=None
) -> subprocess.CompletedProcess:
    """``python -m synapto <args>``, under ``mpiexec -n ranks`` when given; bounded by ``timeout``."""
    cmd = _mpi_cmd(ranks, [sys.executable, "-m", "synapto", *map(str, args)])
    env = {**_env(), **{k: str(v) for k, v in (extra_env or {}).items()}}
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"timed out after {timeout}s: {' '.join(cmd)}\n{exc.stdout}\n{exc.stderr}")


def datasets(path, skip=("timing",)) -> dict[str, np.ndarray]:
    """Every dataset of an HDF5 file except those under the ``skip`` groups."""
    return compare.datasets(path, skip)


def assert_same_run(a, b) -> None:
    """Bit-identical datasets (timings under /timing excepted)."""
    differ = compare.differences(a, b)
    assert not differ, f"datasets differ: {differ}"
