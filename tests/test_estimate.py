"""``evolve --check``'s time estimate agrees with the wall times the shipped configs took (README
Results, the configs' headers), by env and training backend, and says what it rests on."""

from __future__ import annotations

import pytest

from synapto.cli import main
from synapto.estimate import expected_seconds
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
