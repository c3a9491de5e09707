"""`bench sparsity` on a tiny budget: its table agrees with the run files, pruned modes
stay within their level, the Pareto front is the non-dominated modes, bad input is
refused before anything runs."""

import json
import time

import h5py
import numpy as np
import pytest
from conftest import ROOT, assert_same_run, kill_group, run_cli, start_cli

from synapto.bench.sparsity import identity, resumable
from synapto.bench.sparsity_report import pareto


def test_pareto_front_by_hand():
    # (connections, return): B dominates A (fewer, higher); C and D trade off; E ties D's connections lower
    points = [(300, 100.0), (200, 150.0), (50, 120.0), (100, 240.0), (100, 200.0)]
    assert pareto(points) == [2, 3]


@pytest.mark.long
@pytest.mark.slow
def test_bench_sparsity_tiny_budget(tmp_path):
    proc = run_cli(
        "bench",
        "sparsity",
        "--envs",
        "LunarLander-v3",
        "--agents",
        "pruned-mlp",
        "--levels",
        "10",
        "--seed",
        "1",
        "--max-env-steps",
        "2000",
        "--test-episodes",
        "2",
        "--workers",
        "0",
        "--out-dir",
        tmp_path,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads((tmp_path / "sparsity.json").read_text())
    assert [r["mode"] for r in data["runs"]] == ["pruned-mlp 10 %", "reference"]
    for r in data["runs"]:
        path = tmp_path / "sparsity_runs" / f"LunarLander-v3_{r['agent']}_{r['level'] or 'ref'}_s1.h5"
        with h5py.File(path, "r") as f:
            cfg = json.loads(f.attrs["config"])
            genome = f["champion/genome"][()]
            assert r["test_mean"] == float(f["champion/test_returns"][()].mean())
            assert r["connections"] == np.count_nonzero(genome) and r["dense"] == genome.size
            done = int(f["completed"][0])
            assert int(f["stats/env_steps"][done - 1]) + int(f["stats/validation_env_steps"][done - 1]) >= 2000
        options = cfg["strategy_options"]
        if r["level"] == "10":  # pruned: the run's budget ends at 10 % of the dense connections
            assert options["prune_to"] == 0.1 and cfg["agent"] == "pruned-mlp"
        else:
            assert cfg["strategy"] == "ga" and cfg["validate_episodes"] == 0 and not cfg["crn"]
    md = (tmp_path / "sparsity.md").read_text()
    assert "| pruned-mlp 10 % |" in md and "| reference |" in md and (tmp_path / "sparsity.png").exists()
    # an interrupted benchmark goes on: finished runs are reused, not run again
    again = run_cli(
        "bench",
        "sparsity",
        "--envs",
        "LunarLander-v3",
        "--agents",
        "pruned-mlp",
        "--levels",
        "10",
        "--no-reference",
        "--seed",
        "1",
        "--max-env-steps",
        "2000",
        "--test-episodes",
        "2",
        "--workers",
        "0",
        "--keep-finished",
        "--out-dir",
        tmp_path,
        timeout=600,
    )
    assert again.returncode == 0 and again.stdout.count("reusing") == 1, again.stdout + again.stderr


@pytest.mark.parametrize("env", ["LunarLander-v3", "BipedalWalker-v3"])
def test_every_mode_is_a_run_evolve_accepts(env, capsys, tmp_path):
    """Each level of each agent, and the reference, through `evolve --check` (in this process):
    pruning off is a dense run, a level is its fraction of the dense connections."""
    from synapto.bench.sparsity import AGENTS, LEVELS, SETTINGS, mode_args
    from synapto.cli import main

    for agent in (*AGENTS, "reference"):
        for level in LEVELS if agent != "reference" else [""]:
            args = mode_args(SETTINGS[env], agent, level, ROOT)
            with pytest.raises(SystemExit) as exc:
                main(["evolve", "--env", env, *args, "--out", str(tmp_path / "x.h5"), "--check"])
            assert exc.value.code == 0, capsys.readouterr().err
            *_, line, budget = capsys.readouterr().out.strip().splitlines()
            assert budget.startswith("budget: up to "), budget
            assert line.startswith("ok: 1 run(s)") and (agent in line or "hebbian-dag" in line), line
            if level == "off":
                assert args[-3:] == ["off", "--strategy-option", "prune_to=0"]
            elif level:
                assert args[-1] == f"prune_to={LEVELS[level]}"


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--levels", "5"], "--levels '5'"),
        (["--agents", "mlp"], "--agents"),
        (["--envs", "Pong-v5"], "--envs"),
        (["--workers", "-1"], "--workers"),
    ],
)
def test_bench_sparsity_refuses_bad_input_before_running(tmp_path, args, needle):
    proc = run_cli("bench", "sparsity", *args, "--out-dir", tmp_path, timeout=180)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], proc.stderr
    assert not (tmp_path / "sparsity_runs").exists()


def test_only_a_stopped_run_of_the_same_command_is_resumed(tmp_path):
    run = tmp_path / "LunarLander-v3_pruned-mlp_10_s1.h5"
    cmd = ["python", "-m", "synapto", "evolve", "--seed", "1", "--out", str(run), "--force", "--workers", "2"]
    assert not resumable(run, cmd)
    run.write_bytes(b"")
    run.with_suffix(".cmd").write_text(identity(cmd))
    assert not resumable(run, cmd)  # no checkpoint
    (tmp_path / f"{run.name}.ckpt").write_bytes(b"")
    assert resumable(run, cmd)
    assert resumable(run, [*cmd[:-1], "7"])  # other workers: the same run
    assert not resumable(run, [*cmd[:5], "2", *cmd[6:]])  # another seed
    run.with_suffix(".cmd").unlink()
    assert not resumable(run, cmd)  # a run file the benchmark did not start


@pytest.mark.long
@pytest.mark.slow
def test_a_killed_benchmark_resumes_its_run_and_ends_as_if_never_stopped(tmp_path):
    """kill -9 of the benchmark in its run's generation 1; with --keep-finished it goes on
    from the run's checkpoint, and the run file equals an uninterrupted run's."""
    args = [
        "bench",
        "sparsity",
        "--envs",
        "LunarLander-v3",
        "--agents",
        "pruned-mlp",
        "--levels",
        "10",
        "--no-reference",
        "--seed",
        "1",
        "--max-env-steps",
        "10000",
        "--test-episodes",
        "2",
        "--workers",
        "0",
    ]
    whole = run_cli(*args, "--out-dir", tmp_path / "whole", timeout=600)
    assert whole.returncode == 0, whole.stdout + whole.stderr
    proc = start_cli(*args, "--out-dir", tmp_path / "cut", extra_env={"SYNAPTO_FAULT": "generation:1"})
    name = "LunarLander-v3_pruned-mlp_10_s1"
    log = tmp_path / "cut" / "sparsity_runs" / f"{name}.log"
    deadline = time.monotonic() + 300
    while not (log.exists() and "FAULT-POINT generation 1" in log.read_text()):
        assert proc.poll() is None and time.monotonic() < deadline, "the run never reached generation 1"
        time.sleep(0.2)
    kill_group(proc)
    proc.wait(timeout=60)
    again = run_cli(*args, "--keep-finished", "--out-dir", tmp_path / "cut", timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.count("resuming") == 1 and "reusing" not in again.stdout, again.stdout
    assert_same_run(
        tmp_path / "whole" / "sparsity_runs" / f"{name}.h5", tmp_path / "cut" / "sparsity_runs" / f"{name}.h5"
    )
