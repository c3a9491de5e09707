"""Training-time shaping (synapto.shaping): what a shaped step is, that only training
episodes are shaped, and that shaped runs keep every promise (ranks, replay, kill -9)."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest
from conftest import assert_same_run, kill_group, run_cli, start_cli, wait_for_line

from synapto.common.errors import UsageError
from synapto.shaping import ShapedEnv, Shaping
from synapto.store import RunData


class Scripted:
    """An env whose steps give the scripted ``(reward, terminated)`` pairs in turn."""

    def __init__(self, script):
        self.script, self.i, self.closed = list(script), 0, False

    def reset(self, **kwargs):
        self.i = 0
        return np.zeros(1), {}

    def step(self, action):
        r, term = self.script[self.i]
        self.i += 1
        return np.zeros(1), r, term, False, {}

    def close(self):
        self.closed = True


def play(shaping, script, max_steps=0):
    env = ShapedEnv(Scripted(script), shaping, max_steps)
    env.reset(seed=0)
    out = []
    while True:
        _, r, term, trunc, _ = env.step(0)
        out.append(r)
        if term or trunc:
            return out, term, trunc


def test_fall_reward_replaces_only_a_terminating_minus_100():
    s = Shaping(fall_reward=0.0)
    assert play(s, [(-100.0, False), (2.0, False), (-100.0, True)]) == ([-100.0, 2.0, 0.0], True, False)
    # a terminating step of another reward is no fall: kept, plus the finish bonus
    s = Shaping(fall_reward=0.0, finish_bonus=100.0)
    assert play(s, [(1.5, False), (3.0, True)]) == ([1.5, 103.0], True, False)
    assert play(s, [(-100.0, True)]) == ([0.0], True, False)


def test_reward_floor_clips_every_step_after_the_fall_reward():
    s = Shaping(reward_floor=-1.0)
    assert play(s, [(-0.5, False), (-3.0, False), (-100.0, True)]) == ([-0.5, -1.0, -1.0], True, False)
    s = Shaping(fall_reward=-5.0, reward_floor=-1.0)
    assert play(s, [(-100.0, True)]) == ([-1.0], True, False)


def test_stall_stops_after_consecutive_negative_rewards_of_the_env():
    s = Shaping(stall_steps=3)
    # two negatives, a positive resets the count, then three negatives: truncated on the 6th step
    script = [(-1, False), (-1, False), (0.5, False), (-1, False), (-1, False), (-1, False), (-1, False)]
    rewards, term, trunc = play(s, script)
    assert (len(rewards), term, trunc) == (6, False, True)
    # the count is of the env's own rewards: a floor that lifts them above 0 does not hide a stall
    rewards, _, trunc = play(Shaping(stall_steps=2, reward_floor=1.0), [(-1, False)] * 5)
    assert (rewards, trunc) == ([1.0, 1.0], True)


def test_cap_truncates_and_reset_starts_the_counts_again():
    env = ShapedEnv(Scripted([(-1, False)] * 10), Shaping(stall_steps=4), max_steps=3)
    for _ in range(2):
        env.reset(seed=1)
        flags = [env.step(0)[3] for _ in range(3)]
        assert flags == [False, False, True]


def test_cap_is_the_factor_times_the_previous_mean_length_rounded_up():
    s = Shaping(cap_factor=2.0)
    assert s.cap(None, 2) == 0  # generation 0
    # individuals' total steps over 2 episodes each: mean episode length (100 + 51 + 60) / 3 / 2 = 35.17
    assert s.cap(np.array([100, 51, 60]), 2) == 71
    assert Shaping().cap(np.array([100]), 1) == 0


def test_cap_steps_holds_from_generation_0_and_the_lower_cap_wins():
    assert Shaping(cap_steps=50).cap(None, 2) == 50
    assert Shaping(cap_steps=50).cap(np.array([1000, 1000]), 2) == 50
    both = Shaping(cap_factor=2.0, cap_steps=80)
    assert both.cap(None, 2) == 80  # generation 0: only the fixed cap
    assert both.cap(np.array([100, 51, 60]), 2) == 71  # the relative cap is lower
    assert both.cap(np.array([1000, 1000]), 2) == 80


@pytest.mark.parametrize(
    "option, value",
    [
        ("fall_reward", "nan"),
        ("fall_reward", "true"),
        ("stall_steps", "-1"),
        ("stall_steps", "2.5"),
        ("cap_factor", "0.5"),
        ("cap_factor", "inf"),
        ("cap_steps", "-5"),
        ("cap_steps", "1.5"),
        ("reward_floor", '"low"'),
        ("finish_bonus", "inf"),
    ],
)
def test_bad_shaping_options_are_one_line_and_exit_2(tmp_path, option, value):
    out = tmp_path / "never.h5"
    r = run_cli("evolve", "--env", "LunarLander-v3", "--env-option", f"{option}={value}", "--out", out)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and option in lines[0], r.stderr
    assert not out.exists() and not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    "option",
    [
        "fall_reward=1e308",
        "finish_bonus=-1e308",
        "reward_floor=1000000.5",
        "reward_shift=-1e300",
        "stall_steps=99999999999999999999",
        "cap_steps=1000000001",
    ],
)
def test_huge_reward_and_step_options_are_refused_by_check(tmp_path, capsys, option):
    from synapto.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["evolve", "--env", "LunarLander-v3", "--env-option", option, "--out", str(tmp_path / "r.h5"), "--check"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith(f"error: env option {option.split('=')[0]} must be "), err


def test_shaping_parse_refuses_in_the_api_too():
    with pytest.raises(UsageError, match="cap_factor"):
        Shaping.pop({"cap_factor": 0.99})


def test_reward_and_step_options_are_bounded():
    """|reward| <= 1e6 (near 1e308 the fitness statistics overflow) and steps <= 1e9."""
    edge = {"fall_reward": -1e6, "finish_bonus": 1e6, "reward_floor": -1e6, "stall_steps": 10**9, "cap_steps": 10**9}
    assert Shaping.pop(dict(edge)) == Shaping(**edge)
    for key, value in [("fall_reward", 1e308), ("finish_bonus", -1e6 - 1), ("reward_floor", 2e6)]:
        with pytest.raises(UsageError, match=rf"^env option {key} must be a finite number in -1e6..1e6, got "):
            Shaping.pop({key: value})
    for key in ("stall_steps", "cap_steps"):
        with pytest.raises(UsageError, match=rf"^env option {key} must be an integer in 0..1,000,000,000, got "):
            Shaping.pop({key: 2**63})


SHAPING = [
    "--env-option",
    "fall_reward=0",
    "--env-option",
    "reward_floor=-1",
    "--env-option",
    "stall_steps=30",
    "--env-option",
    "cap_factor=1",
]
RUN = [
    "evolve",
    "--env",
    "LunarLander-v3",
    "--agent",
    "pruned-mlp",
    "--hidden",
    "4",
    "--strategy",
    "openai-es",
    "--population",
    "6",
    "--generations",
    "4",
    "--episodes",
    "2",
    "--validate-episodes",
    "2",
    "--validate-top",
    "2",
    "--test-episodes",
    "3",
    "--seed",
    "5",
    *SHAPING,
]


@pytest.fixture(scope="module")
def shaped_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("shaped") / "shaped.h5"
    r = run_cli(*RUN, "--out", out, timeout=300)
    assert r.returncode == 0, r.stderr
    return out


def test_options_are_recorded_and_training_episodes_obey_stall_and_cap(shaped_run):
    with RunData(shaped_run) as run:
        options = json.loads(run.config_json)["env_options"]
        assert options == {"fall_reward": 0, "reward_floor": -1, "stall_steps": 30, "cap_factor": 1}
        steps = np.asarray(run.steps())  # (G, P): each individual's steps over its 2 episodes
        returns = np.asarray(run.returns())
        for g in range(1, steps.shape[0]):
            cap = int(np.ceil(steps[g - 1].mean() / 2))
            assert steps[g].max() <= 2 * cap
        # every training step's reward is at least -1: an episode's return is at least minus its length
        assert (returns.sum(axis=2) >= -steps - 1e-9).all()


def test_validation_and_test_run_the_unmodified_task(shaped_run):
    from synapto.agents import build_agent
    from synapto.api import rollout
    from synapto.evolution.config import EvolveConfig

    with RunData(shaped_run) as run:
        cfg = EvolveConfig.from_json(run.config_json)
        agent = build_agent(cfg)
        g = run.completed - 1
        who = run.validation_individual(g)
        for slot in range(len(who)):
            genome = run.population(g, int(who[slot])) if who[slot] >= 0 else run.strategy("centre", g)
            r = rollout(agent, genome, cfg.env, run.validation_seeds(g), env_options=cfg.env_options)
            assert r.returns.tobytes() == np.asarray(run.validation_returns(g, slot)).tobytes()
        champ = run.champion()
        r = rollout(agent, champ.genome, cfg.env, champ.test_seeds, env_options=cfg.env_options)
        assert r.returns.tobytes() == np.asarray(champ.test_returns).tobytes()
        # the training episodes were shaped: the unmodified task gives other returns for the same episodes
        differ = 0
        for i in range(cfg.population):
            r = rollout(agent, run.population(g, i), cfg.env, run.seeds(g, i), env_options=cfg.env_options)
            differ += r.returns.tobytes() != np.asarray(run.returns(g, i)).tobytes()
        assert differ > 0


def test_replay_of_a_capped_shaped_generation_is_exact(shaped_run):
    with RunData(shaped_run) as run:
        steps = np.asarray(run.steps())
    cap = int(np.ceil(steps[2].mean() / 2))
    i = int(np.argmax(steps[3]))
    assert steps[3, i] > cap  # an episode of individual i ran into the cap: replay must apply it
    r = run_cli("replay", shaped_run, "--generation", "3", "--individual", i)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1/1 bit-identical" in r.stdout


def test_a_fixed_training_cap_stops_training_episodes_and_replays_exactly(tmp_path):
    """cap_steps: every training episode stops after that many steps, from generation 0;
    validation runs the unmodified task; replay finds the cap in the run file."""
    out = tmp_path / "capped.h5"
    run = [*RUN[: RUN.index("--generations") + 1], "2", *RUN[RUN.index("--generations") + 2 : -len(SHAPING)]]
    r = run_cli(*run, "--env-option", "cap_steps=40", "--test-episodes", "0", "--out", out, timeout=300)
    assert r.returncode == 0, r.stderr
    with RunData(out) as f:
        assert json.loads(f.config_json)["env_options"] == {"cap_steps": 40}
        steps = np.asarray(f.steps())  # each individual's steps over its 2 episodes
        assert steps.max() == 2 * 40  # LunarLander's episodes run far longer than 40 steps
        assert np.asarray(f.validation_steps()).max() > 2 * 40
    r = run_cli("replay", out, "--generation", "1", "--individual", "0")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1/1 bit-identical" in r.stdout


@pytest.mark.mpi
def test_shaped_run_identical_on_three_ranks(shaped_run, tmp_path):
    out = tmp_path / "three.h5"
    r = run_cli(*RUN, "--out", out, ranks=3, timeout=300)
    assert r.returncode == 0, r.stderr
    assert_same_run(shaped_run, out)


@pytest.mark.mpi
@pytest.mark.slow
def test_kill_9_then_resume_of_a_shaped_run_is_exact(shaped_run, tmp_path):
    out = tmp_path / "killed.h5"
    proc = start_cli(*RUN, "--out", out, ranks=3, extra_env={"SYNAPTO_FAULT": "generation:2"})
    wait_for_line(proc, "FAULT-POINT")
    kill_group(proc)
    proc.wait(timeout=30)
    with h5py.File(out, "r", swmr=True) as f:
        assert int(f["completed"][0]) == 2
    r = run_cli("evolve", "--resume", out, timeout=300)  # resumed in one process: the cap comes from the file
    assert r.returncode == 0, r.stdout + r.stderr
    assert_same_run(shaped_run, out)
