"""A lost rank is not a lost run: under ``--workers`` a rank killed in the middle of a
generation ends the MPI job, and the job starts again on its own from the last checkpoint
(``--restarts``, default 3), its run file bit-identical to an uninterrupted run's.  What
is not a lost rank -- a signal to the job, an evaluation that raises -- is never retried."""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
import types

import h5py
import pytest
from conftest import assert_same_run, finish, kill_group, run_cli, start_cli, wait_for_line

from synapto.parallel import restart, supervise
from synapto.shell import synapto_command

# CartPole whose evaluations stall while a file exists (tests/failing_env.py): a worker is
# killed while it holds an evaluation of the generation in flight
RUN = [
    "--env",
    "failing_env:HoldCartPole-v0",
    "--population",
    "6",
    "--generations",
    "8",
    "--episodes",
    "1",
    "--hidden",
    "4",
    "--seed",
    "1",
    "--test-episodes",
    "2",
]
GENERATIONS = 8


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """RUN, uninterrupted, in one process."""
    out = tmp_path_factory.mktemp("reference") / "reference.h5"
    proc = run_cli("evolve", *RUN, "--out", out)
    assert proc.returncode == 0, proc.stderr
    return out


def rank_pid(tmp: os.PathLike, rank: int, wait: float = 60) -> int:
    """The pid rank ``rank`` announced in its job's status file (in the job's $TMPDIR)."""
    deadline = time.monotonic() + wait
    host = socket.gethostname()
    while time.monotonic() < deadline:
        for name in os.listdir(tmp):
            if name.startswith("synapto-job-") and name.endswith(".status"):
                pids, _, _ = supervise.read_status(os.path.join(tmp, name))
                if rank in pids:
                    return pids[rank]
        time.sleep(0.05)
    pytest.fail(f"rank {rank} never announced its pid on {host}")


def kill_worker_mid_generation(tmp_path, *extra):
    """Start RUN under ``--workers 2`` and kill worker rank 2 in the middle of a
    generation (:func:`stall_and_kill`).  ``(process, pid)``."""
    out, tmp = tmp_path / "r.h5", tmp_path / "tmp"
    tmp.mkdir()
    env = {"SYNAPTO_TEST_HOLD": tmp_path / "hold", "TMPDIR": tmp}
    proc = start_cli("evolve", *RUN, "--workers", "2", *extra, "--out", out, extra_env=env)
    return proc, stall_and_kill(proc, tmp_path / "hold", tmp)


def stall_and_kill(proc, hold, tmp, rank: int = 2) -> int:
    """Once ``proc`` (a run of ``failing_env:HoldCartPole-v0`` with ``$SYNAPTO_TEST_HOLD`` =
    ``hold``, ``$TMPDIR`` = ``tmp``) has done two generations, stall the evaluations in
    flight, SIGKILL rank ``rank``, and let the evaluations go on.  The pid killed."""
    wait_for_line(proc, "gen    2 ")
    pid = rank_pid(tmp, rank)
    hold.touch()
    held = hold.with_name(hold.name + ".held")
    for _ in range(6000):  # an evaluation is stalled (bounded: 60 s)
        if held.exists():
            break
        time.sleep(0.01)
    assert held.exists(), "no evaluation stalled"
    os.kill(pid, signal.SIGKILL)
    hold.unlink()
    return pid


def completed(out) -> int:
    with h5py.File(out, "r", swmr=True) as f:
        return int(f["completed"][0])


@pytest.mark.mpi
@pytest.mark.slow
def test_a_worker_killed_mid_generation_and_the_run_ends_on_its_own(tmp_path, reference):
    proc, pid = kill_worker_mid_generation(tmp_path)
    stdout, stderr = finish(proc, timeout=300)
    assert proc.returncode == 0, stdout + stderr
    lost = [line for line in stderr.splitlines() if line.startswith("warning: ")]
    assert len(lost) == 1, stderr
    assert f"{pid})" in lost[0] and "which ended the MPI job" in lost[0], lost  # what died
    assert lost[0].endswith("restart 1 of 3: the job starts again from the last checkpoint"), lost
    again = [line for line in stdout.splitlines() if line.startswith("restart 1 of 3: ")]
    assert len(again) == 1 and "continues from its checkpoint at generation" in again[0], stdout
    generation = int(again[0].split("at generation ")[1].split(";")[0])
    assert 3 <= generation < GENERATIONS, again  # what was redone: from there on
    assert f"resuming {tmp_path / 'r.h5'} at generation {generation} of {GENERATIONS}" in stdout
    assert completed(tmp_path / "r.h5") == GENERATIONS
    assert_same_run(reference, tmp_path / "r.h5")


@pytest.mark.mpi
@pytest.mark.slow
def test_restarts_0_stops_and_names_the_rank_as_before(tmp_path, reference):
    out = tmp_path / "r.h5"
    proc, pid = kill_worker_mid_generation(tmp_path, "--restarts", "0")
    stdout, stderr = finish(proc, timeout=300)
    assert proc.returncode not in (0, 2), stdout + stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and f"{pid})" in last and "which ended the MPI job" in last, last
    assert last.endswith(f"python -m synapto evolve --resume {out}"), last
    assert "restart 1 of" not in stdout + stderr
    assert completed(out) < GENERATIONS
    proc = run_cli("evolve", "--resume", out)  # what a person does then
    assert proc.returncode == 0, proc.stderr
    assert_same_run(reference, out)


@pytest.mark.mpi
def test_sigterm_to_the_job_is_not_retried(tmp_path):
    out = tmp_path / "r.h5"
    proc = start_cli("evolve", *RUN, "--generations", "100000", "--workers", "2", "--out", out)
    wait_for_line(proc, "gen    1 ")
    kill_group(proc, signal.SIGTERM)
    stdout, stderr = finish(proc)
    assert proc.returncode == 143, stdout + stderr
    assert f"resume with: {synapto_command('evolve', '--resume', out, '--workers', 2)}" in stderr
    assert "restart 1 of" not in stdout + stderr and "which ended the MPI job" not in stderr  # not a lost rank


@pytest.mark.mpi
def test_an_evaluation_that_raises_under_on_error_abort_is_not_retried(tmp_path):
    out = tmp_path / "r.h5"
    args = ["--env", "failing_env:FailingCartPole-v0", "--population", "12", "--episodes", "2", "--hidden", "4"]
    proc = run_cli("evolve", *args, "--seed", "3", "--generations", "3", "--workers", "2", "--out", out)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "simulated environment failure" in proc.stderr
    assert "restart 1 of" not in proc.stdout + proc.stderr and "which ended the MPI job" not in proc.stderr


INT, TERM = signal.SIGINT, signal.SIGTERM


@pytest.mark.parametrize(
    "received, recorded, rank0, crashed, lost",
    [
        ([], [], None, [], True),  # the job ended without rank 0's word, nobody signalled it
        ([], [], 0, [], False),  # a finished run
        ([], [], 1, [], False),  # an evaluation that raised (--on-error abort), a full disk
        ([], [], 2, [], False),  # bad input
        ([TERM], [TERM], 143, [], False),  # SIGTERM to the job
        ([INT], [], None, [], False),  # Ctrl-C before rank 0 could record it
        ([], [TERM], None, [], False),  # mpiexec was signalled and passed it on
        ([], [], None, [1], False),  # a rank's own traceback: a bug, met again by the same command
    ],
)
def test_what_counts_as_a_lost_rank(received, recorded, rank0, crashed, lost):
    assert restart.is_lost(received, recorded, rank0, crashed) is lost


def test_a_traceback_is_recorded_and_an_mpi_error_is_not(tmp_path, monkeypatch):
    from synapto.parallel import launch

    path = tmp_path / "status"
    path.write_text("")
    monkeypatch.setenv(launch.JOB_STATUS, str(path))
    monkeypatch.setenv("PMI_RANK", "2")
    launch.record_crash(ValueError("a bug"))
    assert supervise.read_crashes(str(path)) == [2]

    class MPIError(Exception):
        pass

    monkeypatch.setitem(sys.modules, "mpi4py.MPI", types.SimpleNamespace(Exception=MPIError))
    monkeypatch.setenv("PMI_RANK", "1")
    launch.record_crash(MPIError("a peer vanished"))  # the job ended because a rank was lost
    assert supervise.read_crashes(str(path)) == [2]
