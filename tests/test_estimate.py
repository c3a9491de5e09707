"""``evolve --check``'s time estimate agrees with the wall times the shipped configs took (README
Results, the configs' headers), by env and training backend, and says what it rests on; every
BipedalWalker config names a smoke test of about two minutes, which runs end to end."""

from __future__ import annotations

import re
import shlex

import pytest
from conftest import ROOT, run_cli

from synapto.cli import main
from synapto.common.estimate import expected_seconds
from synapto.tune.base import load_base


def config(name: str, **change):
    from synapto.evolution.config import EvolveConfig

    return EvolveConfig(**{**load_base(name), **change})


@pytest.mark.parametrize(
    "name, workers, measured, within",
    [
        ("bipedal_fast", 2, 12 * 60 + 8, 0.15),  # seed 1 on 2 idle workers: 12:08
        ("bipedal_solve", 2, 2 * 3600 + 15 * 60, 0.2),  # 2 h 15 min on 2 workers
        ("halfcheetah", 2, 2.35 * 60, 0.25),  # 2.3-2.4 min each on 2 workers
    ],
)
def test_the_estimate_is_near_what_a_shipped_config_took(name, workers, measured, within):
    assert abs(expected_seconds(config(name), workers) / measured - 1) <= within


def test_envpool_training_steps_cost_less_than_gymnasium_s():
    fast = config("bipedal_fast")
    slow = config("bipedal_fast", env_options={**fast.env_options, "train_backend": "gymnasium"})
    assert expected_seconds(fast, 1) < 0.7 * expected_seconds(slow, 1)


def check(capsys, *args) -> str:
    with pytest.raises(SystemExit) as exc:
        main(["evolve", *map(str, args), "--check"])
    out = capsys.readouterr()
    assert exc.value.code in (0, None), out.err
    return out.out.splitlines()[-1]


def test_check_says_the_estimate_and_the_figures_it_rests_on(capsys, tmp_path):
    line = check(capsys, "--config", "bipedal_fast", "--workers", "2", "--out", tmp_path / "b.h5")
    assert line.endswith(
        "expect about 13 min with 2 core(s) to itself (BipedalWalker-v3: 98 us of CPU per training step on "
        "envpool, 179 per other step, measured on 2 cores)"
    ), line
    line = check(capsys, "--config", "cartpole", "--out", tmp_path / "c.h5")
    assert "expect under a minute with 1 core(s)" in line and "CartPole-v1: 7 us of CPU per env step" in line
    line = check(capsys, "--env", "Acrobot-v1", "--generations", "2", "--out", tmp_path / "a.h5")
    assert line.endswith("(no figure for Acrobot-v1: at LunarLander-v3's 54 us of CPU per env step)"), line


BIPEDAL = sorted(p.stem for p in (ROOT / "experiments").glob("bipedal_*.toml"))


def smoke_command(name: str) -> list[str]:
    """The smoke test a BipedalWalker config's header names: ``evolve`` and its options."""
    lines = (ROOT / "experiments" / f"{name}.toml").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("# Smoke test:"))
    command = next(line for line in lines[start:] if line.startswith("#   python -m synapto evolve"))
    args = shlex.split(command[1:])[3:]
    assert args[:2] == ["evolve", "--config"] and f"--out runs/{name}_smoke.h5" in command, command
    return args


@pytest.mark.parametrize("name", BIPEDAL)
def test_each_bipedal_config_names_a_smoke_test_of_about_two_minutes(name, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    args = smoke_command(name)
    assert "--max-env-steps" in args and "--test-episodes" in args
    line = check(capsys, *args[1:])
    assert re.search(r"; expect (under a minute|about [12] min) with 2 core\(s\)", line), line


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.long  # BipedalWalker end to end: make test-long
@pytest.mark.parametrize("name", ["bipedal_fast", "bipedal_hebbian_dag"])
def test_a_smoke_test_runs_end_to_end(name, tmp_path):
    """The smoke command as printed, on a smaller budget still (one generation) and one worker."""
    args = smoke_command(name)
    args[args.index("--max-env-steps") + 1] = "1"
    args[args.index("--workers") + 1] = "1"
    args[args.index("--config") + 1] = str(ROOT / args[args.index("--config") + 1])
    proc = run_cli(*args, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "testing the champion" in proc.stdout and "champion test: " in proc.stdout
    assert (tmp_path / "runs" / f"{name}_smoke.h5").is_file()
