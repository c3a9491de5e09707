"""Crash safety: kill -9 anywhere, signals, worker failures, bad run files."""

import shutil
import signal
import time

import h5py
import numpy as np
import pytest
from conftest import assert_same_run, finish, kill_group, run_cli, start_cli, wait_for_line

from synapto.common.shell import synapto_command

RUN = [
    "--env",
    "CartPole-v1",
    "--agent",
    "hebbian-dag",
    "--population",
    "10",
    "--generations",
    "6",
    "--episodes",
    "2",
    "--hidden",
    "4",
    "--seed",
    "8",
    "--test-episodes",
    "4",
]


def killed_at(out, fault, ranks=None, args=None, resume=False):
    """Start a run (or a resume) and SIGKILL its whole process group at ``fault``."""
    cmd = ["evolve", "--resume", out] if resume else ["evolve", *RUN, "--out", out, "--force"]
    proc = start_cli(*cmd, *(args or []), ranks=ranks, extra_env={"SYNAPTO_FAULT": fault})
    wait_for_line(proc, "FAULT-POINT")
    kill_group(proc)
    proc.wait(timeout=30)
    with h5py.File(out, "r", swmr=True) as f:  # the run file stays readable
        return int(f["completed"][0])


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """RUN, uninterrupted, in one process: the reference of the kill tests (read only)."""
    out = tmp_path_factory.mktemp("finished") / "reference.h5"
    proc = run_cli("evolve", *RUN, "--out", out)
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.mpi
@pytest.mark.slow
def test_sigkill_at_several_moments_then_resume_equals_uninterrupted(tmp_path, finished_run):
    out = tmp_path / "crashed.h5"
    # 1. between generation 1's rows and its counter: the counter still says 1
    assert killed_at(out, "runfile:1") == 1
    # 2. while the checkpoint after generation 3 is being written (resumed serially)
    assert killed_at(out, "checkpoint:3", resume=True) == 3
    # 3. at the start of generation 4, resumed under MPI with 3 ranks
    assert killed_at(out, "generation:4", ranks=3, resume=True) == 4
    # finish under yet another rank count
    proc = run_cli("evolve", "--resume", out, ranks=2)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "resuming" in proc.stdout
    assert_same_run(finished_run, out)


def _tested(out) -> int:
    with h5py.File(out, "r", swmr=True) as f:
        return int(f["champion/tested"][0])


@pytest.mark.mpi
@pytest.mark.slow
def test_sigkill_in_the_champion_test_the_resume_rebuild_and_write_champion(tmp_path, finished_run):
    out = tmp_path / "crashed.h5"
    # 1. while the champion's test episodes are evaluated (3 ranks: some in flight)
    assert killed_at(out, "test:6", ranks=3, args=["--batch", "off"]) == 6 and not _tested(out)
    # 2. while --resume rebuilds the run file: the new one is written beside, not yet in place
    before = out.read_bytes()
    assert killed_at(out, "rebuild:6", resume=True) == 6
    assert out.read_bytes() == before and (tmp_path / "crashed.h5.resume.tmp").exists()
    # 3. while the champion is written: its datasets are, its tested flag is not
    assert killed_at(out, "champion:6", resume=True) == 6 and not _tested(out)
    proc = run_cli("evolve", "--resume", out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _tested(out) == 1
    assert_same_run(finished_run, out)


def test_checkpoint_every_resumes_from_the_last_checkpoint(tmp_path, finished_run):
    out = tmp_path / "r.h5"

    def checkpoint_generation():
        with h5py.File(str(out) + ".ckpt", "r") as f:
            return int(f.attrs["generation"])

    # checkpoints at the start and after generations 3 and 6 (the last) only
    assert killed_at(out, "generation:2", args=["--checkpoint-every", "3"]) == 2
    assert checkpoint_generation() == 0
    assert killed_at(out, "generation:5", args=["--checkpoint-every", "3"], resume=True) == 5
    assert checkpoint_generation() == 3
    proc = run_cli("evolve", "--resume", out, "--checkpoint-every", "3")
    assert proc.returncode == 0, proc.stderr
    assert "at generation 3 (3 of 6 generations)" in proc.stdout  # generations 4 and 5 were dropped and redone
    assert checkpoint_generation() == 6
    assert_same_run(finished_run, out)


def test_checkpoint_write_is_atomic(tmp_path):
    out = tmp_path / "r.h5"
    killed_at(out, "checkpoint:2")
    ckpt = tmp_path / "r.h5.ckpt"
    with h5py.File(ckpt, "r") as f:  # the previous checkpoint, whole
        assert int(f.attrs["generation"]) == 1
    assert (tmp_path / "r.h5.ckpt.tmp").exists()  # the half-written one never replaced it
    proc = run_cli("evolve", "--resume", out)
    assert proc.returncode == 0, proc.stderr
    assert "resuming" in proc.stdout and "at generation 1" in proc.stdout


# CartPole: generations of milliseconds, so a signal lands in the middle of the run whichever
# generation it is; the reference of each stopping point is built once, in one process
SIGNAL_RUN = [
    "--env",
    "CartPole-v1",
    "--population",
    "6",
    "--generations",
    "100000",
    "--episodes",
    "1",
    "--hidden",
    "4",
    "--seed",
    "1",
    "--test-episodes",
    "2",
]
HOLD_RUN = ["--env", "failing_env:HoldCartPole-v0", *SIGNAL_RUN[2:]]


@pytest.fixture(scope="module")
def signal_reference(tmp_path_factory):
    made = {}

    def reference(generations: int, run=SIGNAL_RUN):
        key = (generations, tuple(run))
        if key not in made:
            out = tmp_path_factory.mktemp("signal_reference") / "reference.h5"
            args = [str(generations) if a == "100000" else a for a in run]
            proc = run_cli("evolve", *args, "--out", out)
            assert proc.returncode == 0, proc.stderr
            made[key] = out
        return made[key]

    return reference


def assert_stopped_and_resumable(proc, out, code, reference, resume_hint=True, quiet=True):
    """``proc`` exits ``code`` with a whole checkpoint of the last completed generation, from
    which the run continues exactly as an uninterrupted one."""
    stdout, stderr = finish(proc)
    assert proc.returncode == code, stdout + stderr
    assert "Traceback" not in stderr, stderr
    if quiet:
        assert "HYD" not in stderr, stderr  # none of mpiexec's complaints of a job torn down
    if resume_hint:
        assert f"resume with: {synapto_command('evolve', '--resume', out)}" in stderr
    with h5py.File(out, "r", swmr=True) as f:
        done = int(f["completed"][0])
    with h5py.File(str(out) + ".ckpt", "r") as f:
        assert int(f.attrs["generation"]) == done >= 2
    proc = run_cli("evolve", "--resume", out, "--generations", str(done + 1))
    assert proc.returncode == 0, proc.stderr
    assert_same_run(reference(done + 1), out)
    return stderr


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
@pytest.mark.parametrize("ranks", [None, pytest.param(3, marks=pytest.mark.mpi)], ids=["serial", "mpi"])
def test_signal_checkpoints_and_prints_resume_command(tmp_path, sig, code, ranks, signal_reference):
    out = tmp_path / "r.h5"
    proc = start_cli("evolve", *SIGNAL_RUN, "--out", out, ranks=ranks)
    wait_for_line(proc, "gen    1 ")
    if ranks is None:
        proc.send_signal(sig)
    else:
        kill_group(proc, sig)  # mpiexec started by hand: it forwards the signal to the ranks
    assert_stopped_and_resumable(proc, out, code, signal_reference, quiet=ranks is None)


@pytest.mark.mpi
@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_under_workers_gives_the_documented_exit_code(tmp_path, sig, code, signal_reference):
    """``--workers``: a terminal's Ctrl-C (or a job script's SIGTERM) reaches the process group
    of the command the user started, not ``mpiexec``: 130 / 143 hold all the same."""
    out = tmp_path / "r.h5"
    proc = start_cli("evolve", *SIGNAL_RUN, "--workers", "2", "--out", out)
    wait_for_line(proc, "gen    1 ")
    kill_group(proc, sig)
    stderr = assert_stopped_and_resumable(proc, out, code, signal_reference)
    assert "--resume" in stderr and "--workers 2" in stderr


@pytest.mark.parametrize("workers", [None, pytest.param(2, marks=pytest.mark.mpi)], ids=["serial", "workers"])
def test_second_ctrl_c_exits_at_once_with_130(tmp_path, workers, signal_reference):
    """The first Ctrl-C waits for the evaluations in flight -- here they stall (HoldCartPole)
    -- and the second exits at once, the checkpoint on disk whole."""
    out, hold = tmp_path / "r.h5", tmp_path / "hold"
    extra = ["--workers", str(workers)] if workers else []
    proc = start_cli("evolve", *HOLD_RUN, *extra, "--out", out, extra_env={"SYNAPTO_TEST_HOLD": hold})
    wait_for_line(proc, "gen    1 ")
    hold.touch()  # the evaluations in flight stall until the file goes
    held = tmp_path / "hold.held"
    for _ in range(6000):  # an evaluation is stalled (bounded: 60 s)
        if held.exists():
            break
        time.sleep(0.01)
    assert held.exists(), "no evaluation stalled"
    kill_group(proc, signal.SIGINT)
    wait_for_line(proc, "SIGINT received", stream="stderr")
    kill_group(proc, signal.SIGINT)
    stdout, stderr = finish(proc)
    hold.unlink()
    assert proc.returncode == 130, stdout + stderr
    assert "second interrupt: exiting now" in stderr and "Traceback" not in stderr and "HYD" not in stderr
    with h5py.File(out, "r", swmr=True) as f:
        done = int(f["completed"][0])
    with h5py.File(str(out) + ".ckpt", "r") as f:
        assert int(f.attrs["generation"]) == done >= 2
    proc = run_cli("evolve", "--resume", out, "--generations", str(done + 1))
    assert proc.returncode == 0, proc.stderr
    assert_same_run(signal_reference(done + 1, HOLD_RUN), out)


FAILING = [
    "--env",
    "failing_env:FailingCartPole-v0",
    "--agent",
    "pruned-mlp",
    "--population",
    "12",
    "--generations",
    "3",
    "--episodes",
    "2",
    "--hidden",
    "4",
    "--seed",
    "3",
    "--test-episodes",
    "0",
    # the defaults the tests were written for (evolve's are now the default experiment's); no
    # final selection: a selection or test evaluation that raises aborts even under --on-error skip
    "--strategy",
    "ga",
    "--validate-top",
    "0",
    "--validate-episodes",
    "16",
    "--select-episodes",
    "0",
    "--max-env-steps",
    "0",
]


@pytest.mark.mpi
def test_on_error_abort_reports_where_and_how_to_replay(tmp_path):
    out = tmp_path / "r.h5"
    proc = run_cli("evolve", *FAILING, "--out", out, ranks=3)
    assert proc.returncode == 1
    err = proc.stderr
    assert "simulated environment failure" in err and "Traceback" in err
    assert "generation 0 individual" in err and "on rank" in err and "episode seeds [" in err
    assert f"{synapto_command('replay', out)} --generation 0 --individual" in err
    assert synapto_command("evolve", "--resume", out) in err
    with h5py.File(str(out) + ".ckpt", "r") as f:
        assert int(f.attrs["generation"]) == 0
    # the printed replay command reproduces the failure
    replay = err.split(f"{synapto_command('replay')} ", 1)[1].split("\n")[0].split()
    proc = run_cli("replay", *replay)
    assert proc.returncode == 1 and "simulated environment failure" in proc.stdout + proc.stderr


STALL = [
    "--env",
    "failing_env:StallCartPole-v0",
    "--agent",
    "pruned-mlp",
    "--population",
    "8",
    "--generations",
    "3",
    "--episodes",
    "1",
    "--hidden",
    "4",
    "--seed",
    "2",
    "--test-episodes",
    "2",
    "--task-timeout",
    "1",
]


def _ended(pid: int, wait: float = 30) -> bool:
    """The process is gone (or a zombie nobody reaps), within ``wait`` seconds (mpiexec
    may return before the kernel has finished a rank it killed)."""
    import time

    deadline = time.monotonic() + wait
    while True:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


@pytest.mark.parametrize(
    "how, on_error, ranks",
    [
        # a rank that no longer answers (SIGSTOP): retired after the timeout and its grace
        pytest.param("stop", "abort", 3, marks=[pytest.mark.mpi, pytest.mark.slow]),
        pytest.param("stop", "skip", 3, marks=[pytest.mark.mpi, pytest.mark.slow]),
        pytest.param("sleep", "skip", 3, marks=pytest.mark.mpi),  # an evaluation that never ends
        ("sleep", "abort", None),
    ],
)
def test_task_timeout_fails_the_evaluation_that_overruns(tmp_path, how, on_error, ranks):
    out, marker = tmp_path / "r.h5", tmp_path / "stalled"
    proc = start_cli(
        "evolve",
        *STALL,
        "--on-error",
        on_error,
        "--out",
        out,
        ranks=ranks,
        extra_env={"SYNAPTO_TEST_STALL": f"{marker}:{how}"},
    )
    stdout, stderr = finish(proc, timeout=180)
    rank, pid = map(int, marker.read_text().split())  # the rank whose evaluation stalled
    assert "Traceback" not in stderr.split("error:")[0], stderr
    if on_error == "abort":
        assert proc.returncode == 1, stdout + stderr
        assert "error: generation 0 individual" in stderr and f"failed on rank {rank} " in stderr
        assert "TaskTimeout" in stderr and synapto_command("evolve", "--resume", out) in stderr
        with h5py.File(str(out) + ".ckpt", "r") as f:
            assert int(f.attrs["generation"]) == 0
    else:
        assert proc.returncode == 0, stdout + stderr
        assert f"failed on rank {rank} " in stdout and "TaskTimeout" in stdout
        with h5py.File(out, "r") as f:
            failed = f["failed"][()]
            assert failed.sum() == 1 and failed[0].sum() == 1  # the one stalled evaluation
            assert f["fitness"][0][failed[0]][0] == -np.inf
            assert f["stats/failure_count"][()].tolist() == [1, 0, 0]
            assert f["champion/tested"][0] == 1
    if how == "stop":
        # the retired rank: ended with the MPI job (MPI_Abort), which says so
        assert f"rank {rank} " in stderr and "MPI_Abort" in stderr
        assert _ended(pid)
    else:
        assert "MPI_Abort" not in stderr  # a rank whose own timer fired stays in service


@pytest.mark.mpi
def test_on_error_skip_records_failures_and_goes_on(tmp_path):
    outs = []
    for ranks in (None, 3):
        out = tmp_path / f"r{ranks}.h5"
        proc = run_cli("evolve", *FAILING, "--out", out, "--on-error", "skip", ranks=ranks)
        assert proc.returncode == 0, proc.stderr
        assert "failed on rank" in proc.stdout and "fitness set to -inf" in proc.stdout
        with h5py.File(out, "r") as f:
            failed = f["failed"][()]
            assert failed.any() and not failed.all()
            assert np.all(f["fitness"][()][failed] == -np.inf)
            # training failures and the validation candidates whose episodes raised (-inf)
            failed_validation = np.isneginf(f["validation/fitness"][()]).sum(axis=1)
            assert failed_validation.any()
            np.testing.assert_array_equal(f["stats/failure_count"][()], failed.sum(axis=1) + failed_validation)
            seeds = f["seeds"][()]
            # exactly the individuals with a doomed episode failed
            np.testing.assert_array_equal(failed, (seeds % 5 == 0).any(axis=2))
        outs.append(out)
    assert "failed on rank 0 " not in proc.stdout  # under MPI the workers met them
    assert_same_run(*outs)  # failures and all, whichever rank met them


def call(capsys, *args):
    """``python -m synapto <args>`` in this process (input refused, or nothing to do):
    ``(exit code, stdout, stderr)``."""
    from synapto.cli import main

    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def test_resume_refuses_changes_and_handles_finished_runs(tmp_path, finished_run, capsys):
    out = tmp_path / "r.h5"
    shutil.copy(finished_run, out)
    shutil.copy(str(finished_run) + ".ckpt", str(out) + ".ckpt")
    before = out.read_bytes()
    code, _, err = call(
        capsys,
        "evolve",
        "--resume",
        out,
        "--population",
        "12",
        "--episodes",
        "3",
        "--env",
        "Acrobot-v1",
        "--hidden",
        "4",
        "4",
        "--seed",
        "9",
        "--agent",
        "pruned-mlp",
    )
    assert code == 2
    for name in ("population", "episodes", "env", "hidden", "seed", "agent"):
        assert f"{name}:" in err
    assert len(err.strip().splitlines()) == 1
    code, stdout, _ = call(capsys, "evolve", "--resume", out)
    assert code == 0 and "finished" in stdout
    assert out.read_bytes() == before
    # --generations may be raised to extend a finished run
    reference = tmp_path / "reference.h5"
    longer = [a if a != "6" else "7" for a in RUN]
    assert run_cli("evolve", *longer, "--out", reference).returncode == 0
    assert run_cli("evolve", "--resume", out, "--generations", "7").returncode == 0
    assert_same_run(reference, out)


def test_bad_run_files_for_resume_and_replay(tmp_path, finished_run, capsys):
    good = finished_run
    truncated = tmp_path / "truncated.h5"
    truncated.write_bytes(good.read_bytes()[:2000])
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as f:
        f["data"] = np.arange(3)
    future = tmp_path / "future.h5"
    future.write_bytes(good.read_bytes())
    with h5py.File(future, "r+") as f:
        f.attrs["format_version"] = 99
    cases = {
        tmp_path / "missing.h5": "no such file",
        truncated: "truncated or corrupted",
        other: "not a synapto run",
        future: "format version 99",
    }
    for path, needle in cases.items():
        before = path.read_bytes() if path.exists() else None
        for cmd in (["evolve", "--resume", path], ["replay", path, "--sample", "1"]):
            if path == truncated:  # one case per command as a process of its own
                proc = run_cli(*cmd, timeout=180)
                code, err = proc.returncode, proc.stderr
            else:
                code, _, err = call(capsys, *cmd)
            assert code == 2, (cmd, err)
            lines = err.strip().splitlines()
            assert len(lines) == 1 and needle in lines[0], lines
        assert (path.read_bytes() if path.exists() else None) == before


def test_resume_with_a_config_that_sets_out_names_the_config(tmp_path, finished_run, capsys):
    out = tmp_path / "r.h5"
    shutil.copy(finished_run, out)
    before = out.read_bytes()
    config = tmp_path / "exp.toml"
    config.write_text('env = "CartPole-v1"\nout = "runs/elsewhere.h5"\n')
    code, _, err = call(capsys, "evolve", "--resume", out, "--config", config)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and str(config) in lines[0] and "runs/elsewhere.h5" in lines[0]
    assert "resume without --config" in lines[0]
    code, _, err = call(capsys, "evolve", "--resume", out, "--out", tmp_path / "x.h5")
    assert code == 2 and "--out/--force cannot be used with it" in err
    assert out.read_bytes() == before
