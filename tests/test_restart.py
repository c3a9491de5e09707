"""A lost rank is not a lost run: under ``--workers`` a rank killed in the middle of a
generation ends the MPI job, and the job starts again on its own from the last checkpoint
(``--restarts``, default 3), its run file bit-identical to an uninterrupted run's.  What
is not a lost rank -- a signal to the job, an evaluation that raises -- is never retried."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
import types

import h5py
import pytest
from conftest import assert_same_run, finish, kill_group, run_cli, start_cli, wait_for_line

from synapto.common.errors import UsageError
from synapto.common.shell import synapto_command
from synapto.parallel import restart, supervise

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
    assert (
        f"resuming {tmp_path / 'r.h5'} at generation {generation} ({generation} of {GENERATIONS} generations)" in stdout
    )
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


def fake_job(tmp_path, script: str) -> list[str]:
    """A stand-in for ``mpiexec ...``: a shell script that notes each start (and the
    restart it was told of) in ``starts``, then does ``script``."""
    starts = tmp_path / "starts"
    return ["bash", "-c", f'echo "${{{restart.RESTART}:-first}}" >> {starts}; {script}']


@pytest.fixture
def parent_signals():
    """supervise() installs its own SIGINT / SIGTERM handlers: restore pytest's after."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    for s, handler in saved.items():
        signal.signal(s, handler)


def test_a_job_that_keeps_losing_a_rank_starts_again_at_most_restarts_times(tmp_path, capsys, parent_signals):
    # ends without rank 0's exit code, nobody signalled it: a lost rank, every time
    code = supervise.supervise(fake_job(tmp_path, 'echo "run runs/x.h5" >> "$SYNAPTO_JOB_STATUS"; exit 9'), 2)
    assert code == 9
    starts = (tmp_path / "starts").read_text().splitlines()
    assert len(starts) == 3 and starts[0] == "first"
    told = [json.loads(line) for line in starts[1:]]
    assert told == [{"restart": k, "of": 2, "runs": ["runs/x.h5"]} for k in (1, 2)]
    err = capsys.readouterr().err.splitlines()
    assert [line.split("; ")[-1] for line in err[:2]] == [
        f"restart {k} of 2: the job starts again from the last checkpoint" for k in (1, 2)
    ]
    assert err[2].startswith("error: ") and "after 2 restart(s)" in err[2] and len(err) == 3
    assert err[2].endswith("python -m synapto evolve --resume runs/x.h5")


@pytest.mark.parametrize("line", ["exit 1", "exit 0", "signal 15", "crash 1"])
def test_a_job_that_ended_on_its_own_terms_is_not_started_again(tmp_path, capsys, parent_signals, line):
    code = supervise.supervise(fake_job(tmp_path, f'echo "{line}" >> "$SYNAPTO_JOB_STATUS"; exit 9'), 3)
    assert len((tmp_path / "starts").read_text().splitlines()) == 1
    assert "restart" not in capsys.readouterr().err
    assert code == {"exit 1": 1, "exit 0": 9, "signal 15": 143, "crash 1": 9}[line]


# -- the evolve command in a job started again (in this process) ---------------------------
def tiny(**changes):
    from synapto.evolution.config import EvolveConfig

    base = dict(env="CartPole-v1", population=6, generations=2, episodes=1, hidden=(4,), seed=1, test_episodes=2)
    return EvolveConfig(**{**base, **changes})


def test_a_restart_continues_its_own_runs_and_starts_again_those_without_a_checkpoint(tmp_path, monkeypatch):
    from synapto.api import evolve
    from synapto.evolution.command import check_runs
    from synapto.evolution.restarts import restarted_jobs
    from synapto.parallel.restart import restart_env

    finished, going, fresh, other = (tmp_path / f"{n}.h5" for n in ("finished", "going", "fresh", "other"))
    evolve(tiny(), finished, log=lambda s: None)
    evolve(tiny(), going, log=lambda s: None)
    fresh.write_bytes(b"begun, never checkpointed")  # the lost job died before its first checkpoint
    other.write_bytes(b"a file this job never began")
    monkeypatch.setenv(restart.RESTART, restart_env(1, 3, [str(p) for p in (finished, going, fresh)])[restart.RESTART])
    longer = tiny(generations=4)  # the job's run goes on past the 2 generations on disk
    lines: list[str] = []
    jobs = restarted_jobs([(tiny(), finished, False), (longer, going, False), (tiny(), fresh, False)], lines.append)
    assert [(cfg.generations, path, resuming) for cfg, path, resuming in jobs] == [(4, going, True), (2, fresh, False)]
    assert lines == [
        f"restart 1 of 3: {finished} was finished before the loss: nothing to redo",
        f"restart 1 of 3: {going} continues from its checkpoint at generation 2; generation 2 onwards is run again "
        "(the lost job had completed 2)",
        f"restart 1 of 3: {fresh} cannot be continued (no checkpoint yet): it starts again from generation 0",
    ]
    check_runs([tiny()], [fresh])  # its own file: replaced without --force
    with pytest.raises(UsageError, match=r"exists; pass force=True"):
        check_runs([tiny()], [other])  # not the job's: refused as ever


def test_the_line_names_the_rank_and_says_what_it_cannot_know():
    host = socket.gethostname()
    pids = {0: 100, 1: 101, 2: 102}
    assert restart.who_ended([2], pids, 9) == (
        f"worker rank 2 (pid 102) on {host} ended without a report (killed, by SIGKILL or the OOM killer say)"
    )
    assert restart.who_ended([0], pids, 9).startswith(f"the coordinator (rank 0, pid 100) on {host} ended")
    assert restart.who_ended([1, 2], pids, 9).startswith(f"ranks 1 (pid 101), 2 (pid 102) on {host} ended at once")
    # ranks on other hosts: this host's first is not necessarily the job's first
    assert restart.who_ended([1], pids, 9, elsewhere=61).endswith(
        "first of this host's ranks (61 rank(s) on other hosts are not watched: one of them may have died first)"
    )
    assert restart.who_ended([], {}, 9) == (
        "a rank was lost without a report (on another host, or mpiexec itself; mpiexec exit 9)"
    )
    assert restart.job_size(["/x/mpiexec", "-n", "64", "python"]) == 64 and restart.job_size(["bash", "-c"]) is None
