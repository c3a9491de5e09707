"""Input that cannot work is refused, and what goes non-finite is counted (each test
failed before its fix): absurd strategy values, non-finite observations, huge episode
counts, TOML values of the wrong type, an --out that is not a regular file, resume with
spelled-out defaults or another strategy, /timing/wall that covers writes and checkpoints,
unbounded action spaces said so."""

from __future__ import annotations

import json
import os
from pathlib import Path

import h5py
import numpy as np
import pytest
from conftest import assert_same_run, run_cli

from synapto.cli import main

SMALL = [
    "--env",
    "CartPole-v1",
    "--agent",
    "pruned-mlp",
    "--hidden",
    "3",
    "--population",
    "8",
    "--generations",
    "2",
    "--episodes",
    "1",
    "--validate-episodes",
    "2",
    "--test-episodes",
    "2",
]


def call(capsys, *argv) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def test_nonfinite_genomes_are_counted(tmp_path, monkeypatch):
    """A genome that is not finite gets fitness -inf and counts in /nonfinite and
    nonfinite_count, whichever evaluation path ran it (batched CartPole here)."""
    import synapto
    from synapto.evolution.strategies.openai_es import OpenAIES

    ask = OpenAIES.ask

    def poisoned(self):
        genomes = np.array(ask(self))
        genomes[3, 0] = np.nan
        genomes[5, 1] = np.inf
        return genomes

    monkeypatch.setattr(OpenAIES, "ask", poisoned)
    cfg = synapto.EvolveConfig(
        env="CartPole-v1",
        agent="pruned-mlp",
        hidden=(3,),
        population=8,
        generations=1,
        episodes=1,
        validate_episodes=0,
        test_episodes=0,
        strategy="openai-es",
    )
    synapto.evolve(cfg, tmp_path / "n.h5", log=lambda m: None)
    with h5py.File(tmp_path / "n.h5", "r") as f:
        fitness, flags = f["fitness"][0], f["nonfinite"][0]
        assert list(np.flatnonzero(flags)) == [3, 5] and np.all(fitness[[3, 5]] == -np.inf)
        assert np.isfinite(np.delete(fitness, [3, 5])).all() and f["stats/nonfinite_count"][0] == 2


def test_nan_observations_are_flagged_and_never_reach_the_statistics(tmp_path):
    out = tmp_path / "o.h5"
    proc = run_cli(
        "evolve",
        "--env",
        "failing_env:NaNObsCartPole-v0",
        "--agent",
        "pruned-mlp",
        "--hidden",
        "3",
        "--population",
        "6",
        "--generations",
        "2",
        "--episodes",
        "2",
        "--no-crn",
        "--obs-norm",
        "--validate-episodes",
        "0",
        "--test-episodes",
        "0",
        "--out",
        out,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    with h5py.File(out, "r") as f:
        seeds, flags, fitness = f["seeds"][:2], f["nonfinite"][:2], f["fitness"][:2]
        mean, std = f["obs_norm/mean"][:2], f["obs_norm/std"][:2]
    doomed = np.any(seeds % 3 == 0, axis=-1)  # individuals with an episode that observes NaN
    assert doomed.any() and not doomed.all()
    assert np.array_equal(flags, doomed) and np.all(fitness[doomed] == -np.inf)
    assert np.isfinite(mean).all() and np.isfinite(std).all()
    assert "non-finite" in proc.stdout


@pytest.mark.parametrize("option", ["--validate-episodes", "--select-episodes", "--test-episodes"])
def test_huge_episode_counts_are_refused_by_the_run_and_by_check(option, tmp_path, capsys):
    for extra in ([], ["--check"]):
        code, _, err = call(capsys, "evolve", *SMALL, option, "1000000000000", "--out", tmp_path / "h.h5", *extra)
        assert code == 2 and err.startswith("error: a run of ") and "of memory" in err, err
    assert list(tmp_path.iterdir()) == []


def test_a_run_file_larger_than_the_free_disk_is_refused(tmp_path, capsys, monkeypatch):
    import synapto.resources as resources

    monkeypatch.setattr(resources, "free_disk", lambda path: 10_000)
    code, _, err = call(capsys, "evolve", *SMALL, "--out", tmp_path / "d.h5")
    assert code == 2 and "its file system has 9.8 KB free" in err and not (tmp_path / "d.h5").exists()


@pytest.mark.parametrize(
    "line,needle",
    [
        ("seed = 1.5", "--seed must be one or more integers >= 0, got 1.5"),
        ("out = 5", "sets out = 5; out is a run file's path (a string)"),
        ("generations = true", "--generations must be an integer >= 1, got True"),
        ("hidden = [true, 3]", "--hidden must be positive integers (none: no hidden layer), got [True, 3]"),
        ("validate_top = true", "--validate-top must be an integer"),
        ("workers = true", "--workers must be an integer >= 0, got True"),
        ("agent_options = 3", "agent_options must be a table"),
    ],
)
def test_toml_values_of_the_wrong_type(line, needle, tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text('env = "CartPole-v1"\nagent = "pruned-mlp"\n' + line + "\n")
    out = [] if line.startswith("out") else ["--out", tmp_path / "x.h5"]
    code, _, err = call(capsys, "evolve", "--config", cfg, "--check", *out)
    assert code == 2 and err.startswith("error: ") and needle in err and "Traceback" not in err, err


def test_evolve_config_refuses_booleans_as_integers():
    import synapto
    from synapto.common.errors import UsageError

    for field in ("generations", "population", "episodes", "validate_top", "seed"):
        with pytest.raises(UsageError):
            synapto.EvolveConfig(env="CartPole-v1", **{field: True})
    with pytest.raises(UsageError):
        synapto.EvolveConfig(env="CartPole-v1", hidden=(True, 2))


def test_out_that_is_not_a_regular_file_is_refused_even_with_force(tmp_path, capsys):
    fifo = tmp_path / "fifo.h5"
    os.mkfifo(fifo)
    code, _, err = call(capsys, "evolve", *SMALL, "--out", fifo, "--force")
    assert code == 2 and "is not a regular file" in err and fifo.is_fifo()
    code, _, err = call(capsys, "evolve", *SMALL, "--out", "/dev/null", "--force", "--check")
    assert code == 2 and "'/dev/null' is not a regular file" in err and Path("/dev/null").is_char_device()


def test_resume_with_defaults_spelled_out_keeps_the_file_identical(tmp_path, capsys, monkeypatch):
    """Resuming with options that equal the run's (a default spelled out) changes nothing:
    the resumed file equals the uninterrupted one, config attribute included."""
    from synapto.common import faults

    class Stop(Exception):
        pass

    run = ["evolve", *SMALL, "--strategy", "openai-es", "--generations", "3"]
    whole, part = tmp_path / "whole.h5", tmp_path / "part.h5"
    assert call(capsys, *run, "--out", whole)[0] == 0

    def stop_before_generation_2(name, generation):
        if (name, generation) == ("generation", 2):
            raise Stop

    with monkeypatch.context() as m:
        m.setattr(faults, "point", stop_before_generation_2)
        with pytest.raises(Stop):
            main([str(a) for a in (*run, "--out", part)])
    code, _, err = call(capsys, "evolve", "--resume", part, "--strategy-option", "lr=0.03", "--sigma", "0.1")
    assert code == 0, err
    assert_same_run(whole, part)
    with h5py.File(whole, "r") as a, h5py.File(part, "r") as b:
        assert a.attrs["config"] == b.attrs["config"]
    code, _, err = call(capsys, "evolve", "--resume", part, "--generations", "4", "--strategy", "pgpe")
    assert code == 2 and "strategy: openai-es (run file) vs pgpe (command line)" in err, err


def test_timing_wall_covers_writes_and_checkpoints(tmp_path, monkeypatch):
    """The walls of the generations add up to the run's time up to its last row, the
    checkpoints' time included (a slow checkpoint writer here)."""
    import time

    import synapto
    import synapto.evolution.loop as loop

    slow = loop.write_checkpoint

    def write_slowly(*args, **kwargs):
        time.sleep(0.3)
        return slow(*args, **kwargs)

    monkeypatch.setattr(loop, "write_checkpoint", write_slowly)
    cfg = synapto.EvolveConfig(
        env="CartPole-v1",
        agent="pruned-mlp",
        hidden=(3,),
        population=8,
        generations=3,
        episodes=1,
        validate_episodes=0,
        test_episodes=0,
    )
    t0 = time.perf_counter()
    synapto.evolve(cfg, tmp_path / "t.h5", log=lambda m: None)
    total = time.perf_counter() - t0
    with h5py.File(tmp_path / "t.h5", "r") as f:
        wall = f["timing/wall"][:3]
    # 4 checkpoints of 0.3 s (at the start and after each generation), the last after the last row
    assert wall.sum() >= 0.3 * 3 and wall.sum() <= total


def test_unbounded_action_space_is_said_in_the_run_file(tmp_path, user_unbounded_env):
    out = tmp_path / "u.h5"
    proc = run_cli(
        "evolve",
        "--env",
        "unbounded_env:UnboundedPendulum-v0",
        "--agent",
        "pruned-mlp",
        "--hidden",
        "2",
        "--population",
        "4",
        "--generations",
        "1",
        "--episodes",
        "1",
        "--validate-episodes",
        "0",
        "--test-episodes",
        "0",
        "--out",
        out,
        timeout=120,
        extra_env={"PYTHONPATH": user_unbounded_env},
    )
    assert proc.returncode == 0, proc.stderr
    assert "action space is unbounded" in proc.stdout
    with h5py.File(out, "r") as f:
        assert f.attrs["action_range"].startswith("tanh in [-1, 1]")
    with h5py.File(tmp_path / "u.h5", "r") as f:
        assert json.loads(f.attrs["config"])["env"] == "unbounded_env:UnboundedPendulum-v0"


@pytest.fixture
def user_unbounded_env(tmp_path):

    (tmp_path / "unbounded_env.py").write_text(
        "import numpy as np, gymnasium as gym\n"
        "from gymnasium.envs.classic_control.pendulum import PendulumEnv\n"
        "class UnboundedPendulum(PendulumEnv):\n"
        "    def __init__(self, **kw):\n"
        "        super().__init__(**kw)\n"
        "        self.action_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)\n"
        "    def step(self, u):\n"
        "        return super().step(np.clip(u, -2, 2))\n"
        "gym.register('UnboundedPendulum-v0', entry_point=UnboundedPendulum, max_episode_steps=20)\n"
    )
    from conftest import _env

    return os.pathsep.join([str(tmp_path), _env()["PYTHONPATH"]])


def test_a_full_disk_while_the_run_file_grows_says_so(tmp_path, monkeypatch):
    import errno

    import synapto
    import synapto.store.evolve as store_evolve
    import synapto.store.files as files
    from synapto.common.errors import DiskFullError

    monkeypatch.setattr(store_evolve, "FIRST_ROWS", 2)  # the file outgrows its rows at generation 2
    reserve = files.reserve_space
    calls = []

    def full_after_creation(path, nbytes):
        calls.append(path)
        if len(calls) > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return reserve(path, nbytes)

    monkeypatch.setattr(files, "reserve_space", full_after_creation)
    cfg = synapto.EvolveConfig(
        env="CartPole-v1",
        agent="pruned-mlp",
        hidden=(3,),
        population=8,
        generations=4,
        episodes=1,
        validate_episodes=0,
        test_episodes=0,
    )
    with pytest.raises(DiskFullError, match=r"no space left on device \(growing it\)"):
        synapto.evolve(cfg, tmp_path / "g.h5", log=lambda m: None)
    with h5py.File(tmp_path / "g.h5", "r") as f:  # the file before the growth, whole
        assert int(f["completed"][0]) == 2
