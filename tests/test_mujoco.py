"""MuJoCo tasks (the mujoco extra) through the whole run: the same run file for 1 and 3
ranks, exact replay, the env options (episode cap, ARS's survival-bonus shift) recorded
and applied where they should be, and render headless or one line naming what is missing."""

from __future__ import annotations

import os

import numpy as np
import pytest
from conftest import assert_same_run, run_cli

if os.environ.get("SYNAPTO_REQUIRE_EXTRAS"):  # `make test`: the mujoco extra is installed, its absence an error
    import mujoco  # noqa: F401
else:
    pytest.importorskip("mujoco")

from synapto.evolution.config import EvolveConfig
from synapto.evolution.loop import run_evolution
from synapto.parallel.farm import SerialFarm
from synapto.store import RunData

CAP = 10
#: ARS V2-t on a linear policy, Hopper-v5 capped at 10 steps, with the survival bonus shifted out
RUN = [
    "evolve",
    "--env",
    "Hopper-v5",
    "--agent",
    "pruned-mlp",
    "--hidden",
    "0",
    "--strategy",
    "ars",
    "--strategy-option",
    "top=2",
    "--strategy-option",
    "init_std=0.5",
    "--strategy-option",
    "prune_every=1",
    "--population",
    "6",
    "--generations",
    "3",
    "--episodes",
    "2",
    "--obs-norm",
    "--validate-episodes",
    "2",
    "--validate-top",
    "2",
    "--select-episodes",
    "2",
    "--test-episodes",
    "3",
    "--env-option",
    f"max_episode_steps={CAP}",
    "--env-option",
    "reward_shift=1",
    "--seed",
    "4",
]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("mujoco") / "ref.h5"
    r = run_cli(*RUN, "--out", out, timeout=300)
    assert r.returncode == 0, r.stderr
    return out


@pytest.mark.mpi
def test_same_run_file_for_one_and_three_ranks(reference, tmp_path):
    out = tmp_path / "mpi.h5"
    r = run_cli(*RUN, "--out", out, ranks=3, timeout=300)
    assert r.returncode == 0, r.stderr
    assert_same_run(reference, out)


def test_replay_is_exact(reference):
    r = run_cli("replay", reference, "--sample", "6", timeout=300)
    assert r.returncode == 0 and "6/6 bit-identical" in r.stdout, r.stdout + r.stderr
    with RunData(reference) as run:
        assert -1 in run.validation_individual(1)  # the centre is validated
    r = run_cli("replay", reference, "--validation", "--generation", "1", "--individual", "-1", timeout=300)
    assert r.returncode == 0 and "1/1 bit-identical" in r.stdout, r.stdout + r.stderr


def test_env_options_are_recorded_and_cap_every_episode(reference):
    with RunData(reference) as run:
        cfg = EvolveConfig.from_json(run.config_json)
        assert cfg.env_options == {"max_episode_steps": CAP, "reward_shift": 1}
        steps = run.steps()
        champion = run.champion()
    assert steps.max() <= 2 * CAP  # two episodes per fitness, each capped
    assert np.any(steps == 2 * CAP)  # some episodes last until the cap
    assert champion.tested and champion.test_steps.max() <= CAP


def test_reward_shift_changes_what_the_strategy_learns_not_the_stored_returns(tmp_path):
    """Generation 0 is the same with and without the shift (same genomes, same returns in
    the run file); the strategy, told returns less 1 per step, moves elsewhere when the
    episodes' lengths differ."""

    def run(shift):
        cfg = EvolveConfig(
            env="Hopper-v5",
            agent="pruned-mlp",
            hidden=(),
            population=8,
            generations=2,
            episodes=1,
            validate_episodes=0,
            test_episodes=0,
            seed=2,
            strategy="ars",
            strategy_options={"top": 2, "init_std": 0.5, "prune": False},
            env_options={"max_episode_steps": 60, "reward_shift": shift},
        )
        out = tmp_path / f"shift{shift}.h5"
        run_evolution(cfg, out, SerialFarm(), log=lambda s: None)
        with RunData(out) as r:
            return r.fitness(), r.steps(), r.population()

    f0, steps0, pop0 = run(0.0)
    f1, steps1, pop1 = run(1.0)
    assert len(set(steps0[0].tolist())) > 1  # episodes of different lengths: the shift matters
    assert np.array_equal(f0[0], f1[0]) and np.array_equal(steps0[0], steps1[0])
    assert np.array_equal(pop0[0], pop1[0]) and not np.array_equal(pop0[1], pop1[1])


def test_render_headless_or_one_line_naming_the_missing_library(reference, tmp_path):
    gif = tmp_path / "hopper.gif"
    r = run_cli("render", reference, "--out", gif, "--episodes", "1", timeout=300)
    if r.returncode == 0:
        assert gif.stat().st_size > 0 and "run file's test return" in r.stdout
        assert "DIFFERS" not in r.stdout  # the rendered episode is the stored test episode
    else:
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "MUJOCO_GL" in r.stderr, r.stderr
    bad = tmp_path / "bad.gif"
    r = run_cli("render", reference, "--out", bad, timeout=300, extra_env={"MUJOCO_GL": "no-such-backend"})
    assert r.returncode == 2 and r.stderr.startswith("error: ") and r.stderr.count("\n") == 1, r.stderr
    assert "MUJOCO_GL=no-such-backend" in r.stderr and "libEGL" in r.stderr and not bad.exists()
