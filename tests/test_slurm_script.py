"""``synapto slurm-script``: the Slurm job script ships with the package, asks for SIGTERM
ahead of the kill, lets Slurm requeue the job, and a requeued job resumes its run file to
the uninterrupted run's results (here without Slurm: a stand-in launcher runs one rank;
tests/cluster/test_slurm.py does it under sbatch)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
from conftest import MPIEXEC, ROOT, _env, assert_same_run, finish, kill_group, run_cli, wait_for_line

CONFIG = """\
env = "CartPole-v1"
agent = "hebbian-dag"
hidden = [4]
population = 10
generations = 5
episodes = 2
seed = 8
test-episodes = 3
"""


def script(capsys, *args) -> str:
    from synapto.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["slurm-script", *args])
    assert exc.value.code == 0
    return capsys.readouterr().out


def test_the_script_asks_for_sigterm_ahead_and_requeues(capsys):
    text = script(capsys)
    lines = text.splitlines()
    assert "#SBATCH --signal=B:TERM@120" in lines and "#SBATCH --requeue" in lines
    assert "#SBATCH --open-mode=append" in lines
    assert f"PY=${{PY:-{sys.executable}}}" in lines  # the Python that printed it, not a checkout's .venv
    resume = [line for line in lines if "--resume" in line and not line.startswith("#")]
    assert resume and all("--config" not in line and '"$@"' not in line for line in resume)  # --resume refuses both
    assert "RESTARTS=${RESTARTS:-3}" in lines  # a lost rank: the job starts again within the allocation
    assert lines[-1] == 'exec "$PY" -m synapto "${ARGS[@]}" --workers $((RANKS - 1)) --restarts "$RESTARTS"'
    subprocess.run(["bash", "-n"], input=text, text=True, check=True)


def test_the_checkout_copy_is_the_shipped_script(capsys):
    shipped = script(capsys, "--python", ".venv/bin/python")
    assert (ROOT / "scripts" / "slurm_evolve.sh").read_text() == shipped


def launcher(tmp_path):
    """A stand-in for mpiexec: drops ``-n N`` and runs the command as one process."""
    stub = tmp_path / "fake-mpiexec"
    stub.write_text('#!/bin/bash\nshift 2\nexec "$@"\n')
    stub.chmod(0o755)
    return stub


@pytest.mark.slow
def test_a_requeued_job_resumes_its_run_to_the_uninterrupted_results(tmp_path, capsys):
    # HoldCartPole: the SIGTERM lands while evaluations are held, not after a fast run ended
    (tmp_path / "c.toml").write_text(CONFIG.replace('"CartPole-v1"', '"failing_env:HoldCartPole-v0"'))
    hold = tmp_path / "hold"
    job = tmp_path / "job.sh"
    job.write_text(script(capsys))
    env = {
        **_env(),
        "OUT": str(tmp_path / "job.h5"),
        "CONFIG": str(tmp_path / "c.toml"),
        "PYTHONUNBUFFERED": "1",
        "SYNAPTO_MPIEXEC": str(launcher(tmp_path)),
        "SLURM_SUBMIT_DIR": str(tmp_path),
        "SYNAPTO_TEST_HOLD": str(hold),
    }
    first = subprocess.Popen(
        ["bash", job], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    )
    wait_for_line(first, "gen    1 ")
    hold.touch()
    held = hold.with_name(hold.name + ".held")
    for _ in range(6000):  # an evaluation is held (bounded: 60 s)
        if held.exists():
            break
        time.sleep(0.01)
    assert held.exists(), "no evaluation held"
    kill_group(first, signal.SIGTERM)  # Slurm's --signal=B:TERM ahead of the time limit
    hold.unlink()
    out, err = finish(first)
    assert first.returncode == 143, out + err
    again = subprocess.run(["bash", job], capture_output=True, text=True, env=env, timeout=300)  # the requeue
    assert again.returncode == 0 and "resuming" in again.stdout, again.stdout + again.stderr
    one = run_cli("evolve", "--config", tmp_path / "c.toml", "--out", tmp_path / "one.h5")
    assert one.returncode == 0, one.stderr
    assert_same_run(tmp_path / "one.h5", tmp_path / "job.h5")
    done = subprocess.run(["bash", job], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr  # a finished run: requeued once more, nothing to do


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.long  # an MPI job killed and restarted: make test-long
def test_a_job_that_loses_a_rank_continues_on_its_own(tmp_path, capsys):
    """The job script under a real mpiexec with 3 ranks: a worker killed in the middle of a
    generation, and the job ends on its own with the uninterrupted run's file."""
    from test_restart import stall_and_kill

    (tmp_path / "c.toml").write_text(CONFIG)
    job = tmp_path / "job.sh"
    job.write_text(script(capsys))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {
        **_env(),
        "OUT": str(tmp_path / "job.h5"),
        "CONFIG": str(tmp_path / "c.toml"),
        "PYTHONUNBUFFERED": "1",
        "SYNAPTO_MPIEXEC": MPIEXEC,
        "SLURM_NTASKS": "3",
        "SLURM_SUBMIT_DIR": str(tmp_path),
        "SYNAPTO_TEST_HOLD": str(tmp_path / "hold"),
        "TMPDIR": str(tmp),
    }
    hold = ["--env", "failing_env:HoldCartPole-v0", "--generations", "8"]
    proc = subprocess.Popen(
        ["bash", job, *hold], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    )
    stall_and_kill(proc, tmp_path / "hold", tmp)
    out, err = finish(proc, timeout=300)
    assert proc.returncode == 0, out + err
    assert "restart 1 of 3: the job starts again from the last checkpoint" in err, err
    one = run_cli("evolve", "--config", tmp_path / "c.toml", *hold, "--out", tmp_path / "one.h5")
    assert one.returncode == 0, one.stderr
    assert_same_run(tmp_path / "one.h5", tmp_path / "job.h5")
