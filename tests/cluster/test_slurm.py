"""scripts/slurm_evolve.sh (what ``synapto slurm-script`` prints), submitted with a real
``sbatch`` to a one-node Slurm on this machine (scripts/cluster/slurm.sh), writes the run
file of the one-process run, and a job requeued in the middle of its run resumes it to the
same file (``make test-slurm``, root; installs Debian's slurm-wlm and munge when missing)."""

from __future__ import annotations

import os
import time

import pytest
from cluster import SCRIPTS, held_lock, require_root, run, signals_interrupt
from conftest import ROOT, assert_same_run, run_cli

pytestmark = [pytest.mark.mpi, pytest.mark.slow]

TASKS = 4
CONFIG = """\
env = "CartPole-v1"
agent = "pruned-mlp"
hidden = [8, 8]
population = 16
generations = 3
episodes = 2
seed = 7
test-episodes = 10
"""
ENDED = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
}


@pytest.fixture(scope="module")
def slurm():
    require_root()
    with held_lock("slurm"), signals_interrupt():
        run([SCRIPTS / "slurm.sh", "install"], timeout=900)
        run([SCRIPTS / "slurm.sh", "up"], timeout=120)
        try:
            yield
        finally:
            run([SCRIPTS / "slurm.sh", "down"], timeout=60)
    assert not os.path.exists("/run/netns/synapto-slurm"), "the Slurm namespace was left behind"


def in_slurm(*cmd, env=None, check=True):
    return run([SCRIPTS / "slurm.sh", "exec", *cmd], timeout=30, env=env, check=check)


def submit(*args, env, output) -> str:
    return in_slurm(
        "sbatch",
        "--parsable",
        "--nodes=1",
        f"--ntasks-per-node={TASKS}",
        "--time=10",
        f"--output={output}",
        ROOT / "scripts" / "slurm_evolve.sh",
        *args,
        env=env,
    ).stdout.strip()


def job_fields(job: str) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in in_slurm("scontrol", "show", "job", "-o", job).stdout.split() if "=" in kv)


def sbatch(*args, env, output, timeout=300) -> dict[str, str]:
    """Submit scripts/slurm_evolve.sh on 1 node x TASKS tasks, wait for the job to end
    (cancelled and failed after ``timeout`` s); its fields as ``scontrol show job`` gives them."""
    job = in_slurm(
        "sbatch",
        "--parsable",
        "--nodes=1",
        f"--ntasks-per-node={TASKS}",
        "--time=10",
        f"--output={output}",
        ROOT / "scripts" / "slurm_evolve.sh",
        *args,
        env=env,
    ).stdout.strip()
    deadline = time.monotonic() + timeout
    while True:
        fields = dict(
            kv.split("=", 1) for kv in in_slurm("scontrol", "show", "job", "-o", job).stdout.split() if "=" in kv
        )
        if fields["JobState"] in ENDED:
            return fields
        if time.monotonic() > deadline:
            in_slurm("scancel", job, check=False)
            pytest.fail(
                f"job {job} still {fields['JobState']} after {timeout}s; its output:\n"
                f"{output.read_text() if output.exists() else '(none)'}"
            )
        time.sleep(0.5)


@pytest.mark.parametrize("launcher", ["mpirun", "srun"])
def test_sbatch_writes_the_one_process_run_file(slurm, tmp_path, launcher):
    config = tmp_path / "cartpole.toml"
    config.write_text(CONFIG)
    one, job_file, log = tmp_path / "one.h5", tmp_path / "job.h5", tmp_path / "job.out"
    proc = run_cli("evolve", "--config", config, "--out", one, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    job = sbatch(env={"CONFIG": config, "LAUNCHER": launcher, "OUT": job_file}, output=log)
    out = log.read_text()
    assert (job["JobState"], job["ExitCode"]) == ("COMPLETED", "0:0"), out
    assert f"{TASKS} ranks" in out and f"{TASKS - 1} workers" in out, out
    assert_same_run(one, job_file)


def test_a_requeued_job_resumes_to_the_one_process_run_file(slurm, tmp_path):
    """``scontrol requeue`` in the middle of the run: Slurm sends SIGTERM, the coordinator
    leaves its checkpoint and exits, the job starts again and its script resumes OUT."""
    config = tmp_path / "cartpole.toml"
    config.write_text(CONFIG.replace("generations = 3", "generations = 40"))
    one, job_file, log = tmp_path / "one.h5", tmp_path / "job.h5", tmp_path / "job.out"
    proc = run_cli("evolve", "--config", config, "--out", one, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    job = submit(env={"CONFIG": config, "OUT": job_file}, output=log)
    deadline = time.monotonic() + 120
    while "gen    2 " not in (log.read_text() if log.exists() else ""):
        assert time.monotonic() < deadline, log.read_text() if log.exists() else "(no output)"
        time.sleep(0.2)
    in_slurm("scontrol", "requeue", job)
    deadline = time.monotonic() + 300
    while (fields := job_fields(job))["JobState"] not in ENDED or int(fields.get("Restarts", 0)) < 1:
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.5)
    out = log.read_text()
    assert (fields["JobState"], fields["ExitCode"]) == ("COMPLETED", "0:0"), out
    assert "resuming" in out, out
    assert_same_run(one, job_file)
