"""The relaunched job's parent (synapto.parallel.supervise) and the choice of mpiexec, in
this process; the signals themselves are tested end to end in test_crash.py."""

import signal
import socket

import pytest

from synapto.common.errors import UsageError
from synapto.parallel import launch, supervise

INT, TERM = signal.SIGINT, signal.SIGTERM


@pytest.mark.parametrize(
    "rc, received, recorded, rank0, code",
    [
        (0, [], [], 0, 0),  # a finished run
        (1, [], [], 1, 1),  # a failed run, as rank 0 says
        (130, [INT], [INT], 130, 130),  # Ctrl-C: the coordinator stopped
        (255, [INT], [INT], 130, 130),  # ... whatever mpiexec makes of the end
        (0, [TERM], [TERM], 143, 143),
        (255, [INT, INT], [INT, INT], None, 130),  # a second Ctrl-C: at once, whatever happened
        (0, [INT, INT], [], None, 130),
        (137, [TERM], [], None, 143),  # rank 0 died before it recorded anything
        (255, [], [INT], None, 130),  # mpiexec was signalled, not this process
        (0, [INT], [INT], 0, 0),  # the run finished before the signal stopped it
        (3, [], [], 0, 3),  # rank 0 done, another rank failed
        (-9, [], [], None, 137),
    ],
)
def test_exit_code(rc, received, recorded, rank0, code):
    assert supervise.exit_code(rc, received, recorded, rank0) == code


def test_status_file(tmp_path):
    path = tmp_path / "status"
    host = socket.gethostname()
    path.write_text(f"pid 0 {host} 100\npid 1 {host} 101\npid 2 elsewhere 102\nsignal 2\nexit 130\npid 3 {host}")
    assert supervise.read_status(str(path)) == ({0: 100, 1: 101}, [2], 130)  # a partial last line is skipped
    assert supervise.read_status(str(tmp_path / "none")) == ({}, [], None)


def test_status_lines_from_the_ranks(tmp_path, monkeypatch):
    path = tmp_path / "status"
    path.write_text("")
    monkeypatch.setenv(launch.JOB_STATUS, str(path))
    monkeypatch.setenv("PMI_RANK", "0")
    launch.announce()
    launch.record_signal(15)
    launch.record_exit(143)
    monkeypatch.setenv("PMI_RANK", "1")
    launch.record_exit(0)  # only rank 0's counts
    pids, signals, code = supervise.read_status(str(path))
    assert list(pids) == [0] and signals == [15] and code == 143


def test_mpiexec_choice(tmp_path, monkeypatch):
    exe = tmp_path / "mympiexec"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv("SYNAPTO_MPIEXEC", str(exe))
    assert launch.find_mpiexec() == str(exe)
    for wrong in (tmp_path / "missing", tmp_path):
        monkeypatch.setenv("SYNAPTO_MPIEXEC", str(wrong))
        with pytest.raises(UsageError, match="SYNAPTO_MPIEXEC"):
            launch.find_mpiexec()
    exe.chmod(0o644)  # not executable
    monkeypatch.setenv("SYNAPTO_MPIEXEC", str(exe))
    with pytest.raises(UsageError, match="not an executable"):
        launch.find_mpiexec()


def test_abort_job_flushes_and_lets_the_output_drain_before_mpi_abort(monkeypatch):
    """mpiexec forwards a rank's output asynchronously: the abort comes after a flush of
    both streams and a pause, not at once (an error line written just before was lost)."""
    from synapto.parallel import launch

    events = []

    class Stream:
        def __init__(self, name):
            self.name = name

        def flush(self):
            events.append(f"flush {self.name}")

    class Comm:
        def Abort(self, code):
            events.append(f"abort {code}")

    monkeypatch.setattr(launch.sys, "stdout", Stream("stdout"))
    monkeypatch.setattr(launch.sys, "stderr", Stream("stderr"))
    monkeypatch.setattr(launch.time, "sleep", lambda s: events.append(f"sleep {s}"))
    launch.abort_job(Comm(), 3)
    assert events == ["flush stdout", "flush stderr", f"sleep {launch.ABORT_DRAIN_S}", "abort 3"]
    assert launch.ABORT_DRAIN_S >= 0.5
