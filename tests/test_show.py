"""``synapto show``: a run's summary and its test episodes by outcome, from the run file alone.

The outcomes and action magnitudes are recorded during the test episodes
(:mod:`synapto.outcomes`); ``tests/outcome_env.py`` ends each episode in a known way, so the
recorded figures are held against what the env did, not against the code that records them.
"""

from __future__ import annotations

import json
import shutil

import h5py
import numpy as np
import outcome_env
import pytest

from synapto import outcomes as oc
from synapto.cli import main
from synapto.evolution.config import EvolveConfig
from synapto.evolution.loop import run_evolution
from synapto.parallel.farm import SerialFarm

KNOWN = "outcome_env:Outcome-v0"
#: seed % 3 of an outcome_env episode -> the outcome code it must be recorded as
CODE = {0: oc.FELL, 1: oc.FINISHED, 2: oc.OUT_OF_TIME}


def _evolve(env: str, out, test_episodes: int, seed: int):
    cfg = EvolveConfig(
        env=env,
        agent="pruned-mlp",
        population=4,
        generations=1,
        hidden=(4,),
        episodes=1,
        seed=seed,
        test_episodes=test_episodes,
        validate_episodes=0,
        strategy="ga",
        select_episodes=0,
    )
    run_evolution(cfg, out, SerialFarm(), log=lambda m: None)
    return out


@pytest.fixture(scope="module")
def lander(tmp_path_factory):
    """A tiny LunarLander-v3 run: 4 individuals, 1 generation, 5 test episodes (a second)."""
    return _evolve("LunarLander-v3", tmp_path_factory.mktemp("show") / "lander.h5", 5, 3)


@pytest.fixture(scope="module")
def known(tmp_path_factory):
    """A run on outcome_env whose 6 test episodes end in all three ways (seed 1)."""
    return _evolve(KNOWN, tmp_path_factory.mktemp("show") / "known.h5", 6, 1)


@pytest.fixture(scope="module")
def ppo_run(tmp_path_factory):
    """A tiny PPO run on outcome_env with 6 test episodes (seed 1: all three ways)."""
    from synapto.ppo.config import PPOConfig
    from synapto.ppo.train import train

    cfg = PPOConfig(
        env=KNOWN, hid=(4,), epochs=1, steps_per_epoch=60, train_pi_iters=2, train_v_iters=2, test_episodes=6, seed=1
    )
    out = tmp_path_factory.mktemp("show") / "ppo.h5"
    train(cfg, out, log=lambda m: None)
    return out


def show(capsys, *args) -> tuple[int, str, str]:
    """``synapto show <args>`` in this process: ``(exit code, stdout, stderr)``."""
    with pytest.raises(SystemExit) as exc:
        main(["show", *map(str, args)])
    got = capsys.readouterr()
    return exc.value.code, got.out, got.err


def shown_json(capsys, path) -> dict:
    code, out, err = show(capsys, path, "--json")
    assert code == 0, err
    return json.loads(out)


def by_name(report: dict) -> dict[str, dict]:
    return {row["outcome"]: row for row in report["test"]["rows"]}


def stored(path, group: str = "champion", prefix: str = "test_") -> dict[str, np.ndarray]:
    with h5py.File(path, "r") as f:
        return {k: f[f"{group}/{prefix}{k}"][()] for k in ("seeds", "returns", "steps", "outcomes", "action_cost")}


# ----------------------------------------------------------------------------- evolution runs
def test_counts_by_outcome_sum_to_the_test_episodes(lander, capsys):
    report = shown_json(capsys, lander)
    rows = by_name(report)
    assert list(rows)[:3] == ["landed", "crashed", "out of time"] and list(rows)[-1] == "all"
    assert report["test"]["episodes"] == rows["all"]["count"] == 5
    assert sum(r["count"] for name, r in rows.items() if name != "all") == 5
    assert report["test"]["outcomes_recorded"] and report["kind"] == "evolve" and report["env"] == "LunarLander-v3"


def test_each_outcomes_figures_are_those_of_its_stored_episodes(lander, capsys):
    data = stored(lander)
    rows = by_name(shown_json(capsys, lander))
    names = {oc.FINISHED: "landed", oc.FELL: "crashed", oc.OUT_OF_TIME: "out of time"}
    assert set(np.unique(data["outcomes"]).tolist()) <= set(names)
    for code, name in names.items():
        mask = data["outcomes"] == code
        row = rows[name]
        assert row["count"] == int(mask.sum())
        if mask.any():
            assert row["mean_return"] == pytest.approx(data["returns"][mask].mean(), abs=1e-9)
            assert row["min_return"] == data["returns"][mask].min()
            assert row["std_return"] == pytest.approx(data["returns"][mask].std(), abs=1e-9)
            assert row["mean_length"] == pytest.approx(data["steps"][mask].mean())
        else:
            assert row["mean_return"] is None
    assert rows["all"]["mean_return"] == pytest.approx(data["returns"].mean(), abs=1e-9)
    # Discrete actions (LunarLander-v3's four engines): no action cost
    assert np.isnan(data["action_cost"]).all() and rows["all"]["mean_cost"] is None


def test_outcomes_and_action_magnitudes_are_what_the_episodes_did(known):
    """Each test episode's outcome, return, length and action magnitude as outcome_env ran it."""
    data = stored(known)
    kinds = data["seeds"] % 3
    assert set(kinds.tolist()) == {0, 1, 2}  # the fixture covers every outcome
    np.testing.assert_array_equal(data["outcomes"], [CODE[k] for k in kinds])
    np.testing.assert_array_equal(data["returns"], [outcome_env.KINDS[k][2] for k in kinds])
    np.testing.assert_array_equal(data["steps"], [outcome_env.KINDS[k][1] for k in kinds])
    np.testing.assert_allclose(data["action_cost"], [outcome_env.MAGNITUDE[int(s)] for s in data["seeds"]], rtol=1e-12)
    assert (data["action_cost"] > 0).all()


def test_a_fall_shows_as_one_and_the_table_reads_the_known_episodes(known, capsys):
    data = stored(known)
    kinds = data["seeds"] % 3
    rows = by_name(shown_json(capsys, known))
    for k, name in ((0, "terminated at -100"), (1, "terminated"), (2, "out of time")):
        row = rows[name]
        assert row["count"] == int((kinds == k).sum())
        assert row["mean_return"] == outcome_env.KINDS[k][2] and row["mean_length"] == outcome_env.KINDS[k][1]
        want = np.mean([outcome_env.MAGNITUDE[int(s)] for s in data["seeds"][kinds == k]])
        assert row["mean_cost"] == pytest.approx(want, rel=1e-12)
    code, out, err = show(capsys, known)
    assert code == 0 and err == ""
    fell = next(line for line in out.splitlines() if line.strip().startswith("terminated at -100 "))
    assert fell.split()[3] == str(int((kinds == 0).sum())) and fell.split()[4] == "-98.00"
    assert "sum |a|: per episode, the sum over its steps of the mean |action|" in out


def test_the_header_says_what_the_run_is(known, capsys):
    code, out, _ = show(capsys, known)
    assert code == 0
    lines = dict(line.split(None, 1) for line in out.splitlines()[:3])
    assert lines["task"] == KNOWN and lines["agent"] == "pruned-mlp, hidden 4"
    with h5py.File(known, "r") as f:
        genome, steps = f["champion/genome"][()], f["stats/env_steps"][-1] + f["champion/test_steps"][()].sum()
    report = shown_json(capsys, known)
    assert report["connections"] == np.count_nonzero(genome) and report["parameters"] == genome.size
    assert sum(report["env_steps"].values()) == steps
    assert "\nstrategy     ga, population 4, 1 generation, 1 episode per fitness\n" in out


def test_an_older_file_shows_its_returns(lander, tmp_path, capsys):
    old = tmp_path / "old.h5"
    shutil.copyfile(lander, old)
    with h5py.File(old, "r+") as f:
        returns, steps = f["champion/test_returns"][()], f["champion/test_steps"][()]
        del f["champion/test_outcomes"], f["champion/test_action_cost"]
    code, out, err = show(capsys, old)
    assert code == 0 and err == "" and "Traceback" not in out
    assert "outcomes and action cost not recorded" in out
    row = [line.split() for line in out.splitlines() if line.strip().startswith("all ")]
    assert len(row) == 1 and row[0][1] == "5" and row[0][2] == f"{returns.mean():.2f}"
    report = shown_json(capsys, old)
    assert not report["test"]["outcomes_recorded"]
    (only,) = report["test"]["rows"]
    assert only["outcome"] == "all" and only["count"] == 5 and only["mean_cost"] is None
    assert only["min_return"] == returns.min() and only["mean_length"] == pytest.approx(steps.mean())


def test_a_file_of_format_3_shows_its_returns(capsys):
    from conftest import ROOT

    path = ROOT / "tests" / "data" / "v3_openai_es.h5"
    with h5py.File(path, "r") as f:
        returns = f["champion/test_returns"][()]
    report = shown_json(capsys, path)
    (only,) = report["test"]["rows"]
    assert not report["test"]["outcomes_recorded"] and only["count"] == returns.size
    assert only["mean_return"] == pytest.approx(returns.mean()) and only["min_return"] == returns.min()


def test_a_run_without_test_episodes_says_so(tmp_path, capsys):
    from conftest import ROOT

    code, out, err = show(capsys, ROOT / "tests" / "data" / "ga_mlp.h5")  # --test-episodes 0
    assert code == 0 and err == ""
    assert out.splitlines()[-1].split() == ["test", "none", "(test_episodes", "=", "0)"]


def test_every_episode_of_an_evaluation_has_its_own_figures():
    """Several episodes in one task: each one's outcome and magnitude, none carried over."""
    from functools import partial

    from synapto.agents import build_agent
    from synapto.envs import make_env
    from synapto.evolution.worker.evaluate import evaluate

    cfg = EvolveConfig(env=KNOWN, agent="pruned-mlp", hidden=(4,))
    agent = build_agent(cfg)
    genome = agent.init_genome(np.random.default_rng(0))
    seeds = np.array([30, 31, 32, 33, 34])
    result = evaluate(agent, partial(make_env, KNOWN), genome, seeds, want_stats=False, diagnose=True)
    np.testing.assert_array_equal(result.outcomes, [CODE[k] for k in seeds % 3])
    np.testing.assert_allclose(result.action_cost, [outcome_env.MAGNITUDE[int(s)] for s in seeds], rtol=1e-12)
    plain = evaluate(agent, partial(make_env, KNOWN), genome, seeds, want_stats=False)
    assert plain.outcomes is None and plain.action_cost is None
    np.testing.assert_array_equal(plain.returns, result.returns)


def test_one_steps_magnitude_is_the_mean_of_the_clipped_sizes():
    low, high = np.array([-2.0, 0.0, -1.0]), np.array([2.0, 1.0, 1.0])
    assert oc.magnitude(np.array([3.0, -1.0, 0.5]), low, high) == pytest.approx((2.0 + 0.0 + 0.5) / 3, rel=1e-15)
    assert oc.magnitude(np.array([[-2.5], [0.25], [-0.75]]), low, high) == pytest.approx(
        (2.0 + 0.25 + 0.75) / 3, rel=1e-15
    )


# ----------------------------------------------------------------------------- PPO runs
def test_a_ppo_run_shows_its_final_test_by_outcome(ppo_run, capsys):
    data = stored(ppo_run, "test", "")
    kinds = data["seeds"] % 3
    assert set(kinds.tolist()) == {0, 1, 2}
    np.testing.assert_array_equal(data["outcomes"], [CODE[k] for k in kinds])
    np.testing.assert_allclose(data["action_cost"], [outcome_env.MAGNITUDE[int(s)] for s in data["seeds"]], rtol=1e-12)
    report = shown_json(capsys, ppo_run)
    assert report["kind"] == "ppo" and report["test"]["episodes"] == 6
    rows = by_name(report)
    for k, name in ((0, "terminated at -100"), (1, "terminated"), (2, "out of time")):
        assert rows[name]["count"] == int((kinds == k).sum())
        assert rows[name]["mean_return"] == outcome_env.KINDS[k][2]
    code, out, _ = show(capsys, ppo_run)
    assert code == 0 and "(PPO, finished)" in out.splitlines()[0]


# ----------------------------------------------------------------------------- bad input
def one_line_error(code: int, out: str, err: str, needle: str) -> None:
    assert code == 2 and out == "", (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], err


def test_bad_inputs_are_one_line_and_exit_2(tmp_path, capsys):
    from synapto.store.files import new_file

    text = tmp_path / "text.h5"
    text.write_text("not hdf5")
    plain = tmp_path / "plain.h5"
    with h5py.File(plain, "w") as f:
        f["x"] = np.zeros(2)
    empty = tmp_path / "empty.h5"  # a run file's root and counter, nothing else
    new_file(empty, "evolve", "{}").close()
    one_line_error(*show(capsys, tmp_path / "missing.h5"), "no such file")
    one_line_error(*show(capsys, tmp_path), "is a directory")
    one_line_error(*show(capsys, text), "not a readable HDF5 file")
    one_line_error(*show(capsys, plain), "not a synapto run")
    one_line_error(*show(capsys, empty, "--json"), "not a complete synapto run file")


def test_help_describes_the_command(capsys):
    code, out, _ = show(capsys, "--help")
    assert code == 0 and "by outcome" in out and "--json" in out


# ----------------------------------------------------------------------------- batched evaluation
@pytest.mark.parametrize("path", ["cartpole-step", "vector-env"])
def test_batched_outcomes_are_one_env_at_a_times(path, monkeypatch):
    """Test episodes evaluated in lockstep (refills and compaction included) record the
    outcomes one env at a time records; CartPole's time limit (500 steps) is out of time."""
    from synapto.common import seeding
    from synapto.evolution.worker import batched, vector_env
    from synapto.evolution.worker.batched import BatchedEvaluator
    from synapto.evolution.worker.spec import EvolveSpec
    from synapto.evolution.worker.tasks import Episodes, EvalTask

    if path == "vector-env":
        monkeypatch.setattr(vector_env.CartPoleStep, "applies", staticmethod(lambda u: False))
    monkeypatch.setattr(batched, "MIN_COMPACT", 4)
    ev = BatchedEvaluator(EvolveSpec("CartPole-v1", "pruned-mlp", (8,), {}))
    rng = np.random.default_rng(4)
    K, E = 24, 2
    genomes = np.stack([ev.agent.init_genome(rng) for _ in range(K)])
    genomes[:4] *= 0.05  # near-still policies: some episodes reach the time limit
    seeds = seeding.train_seeds(7, 0, K, E, common=False)
    serial = [ev(EvalTask(genomes[i], Episodes(seeds[i], False, diagnose=True))) for i in range(K)]
    batch = batched.evaluate_batch(ev.agent, ev.venv, genomes, seeds, False, slots=16, diagnose=True)
    outcomes = np.concatenate([b.outcomes for b in batch])
    steps = np.concatenate([b.steps for b in batch])
    np.testing.assert_array_equal(outcomes, np.concatenate([s.outcomes for s in serial]))
    np.testing.assert_array_equal(outcomes, np.where(steps == 500, oc.OUT_OF_TIME, oc.FINISHED))
    assert (steps == 500).any() and (steps < 500).any()
    assert all(np.isnan(b.action_cost).all() for b in batch)


def test_lockstep_magnitudes_and_outcomes_of_box_actions():
    """Box actions in lockstep: per episode the sum over its steps of the mean |a| clipped to
    the bounds, restarted when a sub-env takes a new episode and kept through compaction."""
    low, high = np.array([-2.0, 0.0]), np.array([2.0, 1.0])
    ends = oc.LockstepEnds(4, 3, (low, high))
    steps = [np.array([[3.0, -1.0], [0.5, 0.5], [-1.0, 2.0]]), np.array([[1.0, 1.0], [-3.0, 0.25], [0.0, 0.0]])]

    def size(a):  # plain Python: mean over components of |a| clipped to [low, high]
        return sum(abs(min(max(x, lo), hi)) for x, lo, hi in zip(a, low, high)) / len(a)

    for a in steps:
        ends.add(a)
    reward, term, trunc = np.array([-100.0, 5.0, 1.0]), np.array([True, True, False]), np.array([False, False, True])
    ends.ended(np.array([0, 1, 2]), np.array([0, 1, 2]), reward, term, trunc, None)
    assert ends.outcomes[:3].tolist() == [oc.FELL, oc.FINISHED, oc.OUT_OF_TIME]
    want = [size(steps[0][i]) + size(steps[1][i]) for i in range(3)]
    np.testing.assert_allclose(ends.cost[:3], want, rtol=1e-15)
    ends.restart(np.array([1]))  # sub-env 1 starts episode 3
    ends.keep(np.array([1]))  # compaction: sub-env 1 alone goes on, now at position 0
    last = np.array([[-0.5, 0.75]])
    ends.add(last)
    # its action was not finite: it did not step, whatever the env says of it
    ends.ended(np.array([3]), np.array([0]), np.array([1.0]), np.array([True]), np.array([False]), np.array([False]))
    assert ends.outcomes[3] == oc.STOPPED and ends.cost[3] == pytest.approx(size(last[0]), rel=1e-15)
