"""The Python API keeps its word: summaries, ask/tell's champion and state, plain-vector
ask/tell, load_policy, and resume's refusals."""

from __future__ import annotations

import dataclasses
import json

import gymnasium
import h5py
import numpy as np
import pytest

import synapto
from synapto.common.errors import UsageError

CFG = synapto.EvolveConfig(
    env="CartPole-v1",
    agent="pruned-mlp",
    hidden=(4,),
    population=8,
    generations=2,
    episodes=1,
    validate_episodes=2,
    test_episodes=3,
    strategy="openai-es",
    seed=3,
)


def file_summary(path):
    with h5py.File(path, "r") as f:
        test = f["champion/test_returns"][()]
        done = int(f["completed"][0])
        return done, float(test.mean()), float(test.std()), float(f["champion/fitness"][0])


def test_evolve_returns_the_summary_of_its_run_file(tmp_path):
    lines = []
    summary = synapto.evolve(CFG, tmp_path / "a.h5", log=lines.append)
    done, mean, std, fitness = file_summary(tmp_path / "a.h5")
    assert (summary.generations, summary.test_mean, summary.test_std) == (done, mean, std) == (2, mean, std)
    assert summary.best_fitness == fitness and summary.out == tmp_path / "a.h5"
    assert any(line.startswith("gen    1 ") for line in lines)


@pytest.mark.mpi
def test_evolve_with_workers_returns_the_summary_and_logs_through_log(tmp_path, capfd):
    lines, reports = [], []
    summary = synapto.evolve(CFG, tmp_path / "w.h5", workers=2, log=lines.append, callbacks=[reports.append])
    done, mean, std, fitness = file_summary(tmp_path / "w.h5")
    assert summary is not None and (summary.generations, summary.test_mean, summary.test_std) == (done, mean, std)
    assert summary.best_fitness == fitness
    assert any(line.startswith("gen    1 ") for line in lines)  # the child's lines reached log=
    assert "gen    1 " not in capfd.readouterr().out  # and not this process's stdout
    assert [r.generation for r in reports] == [0, 1]
    with h5py.File(tmp_path / "w.h5", "r") as f:
        assert reports[-1].stats["best_fitness"] == f["stats/best_fitness"][1]


def champion_of(path):
    with h5py.File(path, "r") as f:
        return {k: f[f"champion/{k}"][()] for k in ("genome", "fitness", "generation", "test_returns", "test_seeds")}


def stop_after(generation: int, seen: list):
    def callback(report):
        if report.generation == generation:
            raise synapto.StopRun(f"enough after {generation}")

    return [callback, seen.append]  # the second still sees the generation that stopped the run


@pytest.mark.parametrize("workers", [0, pytest.param(1, marks=pytest.mark.mpi)])
def test_a_callback_stops_the_run_as_its_budget_would(tmp_path, workers):
    """StopRun after generation 1 of 6 gives the run that a budget of 2 generations gives:
    the same champion, chosen by the final selection and tested; the checkpoint is of
    generation 2 and the file is finished (--resume would extend it)."""
    from synapto.store import RunData, read_checkpoint

    cfg = dataclasses.replace(CFG, generations=6, select_episodes=2)
    lines, seen = [], []
    summary = synapto.evolve(cfg, tmp_path / "s.h5", workers=workers, log=lines.append, callbacks=stop_after(1, seen))
    synapto.evolve(dataclasses.replace(cfg, generations=2), tmp_path / "b.h5", log=lambda m: None)
    assert "stopped by a callback after generation 1: enough after 1" in lines
    assert [r.generation for r in seen] == [0, 1] and summary.generations == 2
    stopped, budget = champion_of(tmp_path / "s.h5"), champion_of(tmp_path / "b.h5")
    for key in budget:  # the final centre's fitness is NaN in both
        np.testing.assert_array_equal(stopped[key], budget[key], err_msg=key)
    assert stopped["test_returns"].size == 3 and summary.test_mean == stopped["test_returns"].mean()
    with RunData(tmp_path / "s.h5", kind="evolve") as run:
        run.verify()
        assert run.completed == 2 and run.tested and run.selection().chosen >= 0
    assert int(read_checkpoint(tmp_path / "s.h5").scalars["generation"]) == 2


def test_python_errors_name_the_field_and_a_bad_env_id_is_refused_when_the_config_is_built(tmp_path, capsys):
    """From Python a setting is its field (``env=``, ``population``), on the command line its
    flag; the env id is looked up when the config is built, not when evolve() starts."""
    from synapto.cli import main

    with pytest.raises(UsageError) as exc:
        synapto.EvolveConfig(env="Nope-v0")
    assert str(exc.value).startswith("env='Nope-v0' is not a registered gymnasium environment (")
    with pytest.raises(UsageError, match=r"^population must be an integer >= 2, got 1$"):
        dataclasses.replace(CFG, population=1)
    with pytest.raises(UsageError, match=r"^strategy='nope' is unknown: expected one of ga, "):
        dataclasses.replace(CFG, strategy="nope")
    with pytest.raises(UsageError, match=r"^agent='nope' is unknown: expected one of pruned-mlp, hebbian-dag"):
        synapto.evolve(dataclasses.replace(CFG, agent="nope"), tmp_path / "a.h5")
    (tmp_path / "b.h5").write_text("")
    with pytest.raises(UsageError, match=r"^out='.*b\.h5' exists; pass force=True to overwrite it$"):
        synapto.evolve(CFG, tmp_path / "b.h5")
    assert synapto.EvolveConfig(env="failing_env:NaNObsCartPole-v0").env  # registered by importing its module
    assert synapto.EvolveConfig.from_json(json.dumps({"env": "gone:Env-v0"})).env == "gone:Env-v0"  # a stored run
    for argv, line in (
        (["--env", "Nope-v0"], "error: --env 'Nope-v0' is not a registered gymnasium environment ("),
        (["--env", "CartPole-v1", "--population", "1"], "error: --population must be an integer >= 2, got 1"),
    ):
        with pytest.raises(SystemExit) as stop:
            main(["evolve", *argv, "--out", str(tmp_path / "c.h5"), "--check"])
        assert stop.value.code == 2 and capsys.readouterr().err.startswith(line)


def test_resume_refuses_a_missing_file_and_a_changed_config(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        synapto.evolve(CFG, tmp_path / "missing.h5", resume=True)
    assert not (tmp_path / "missing.h5").exists()
    synapto.evolve(CFG, tmp_path / "r.h5", log=lambda m: None)
    with pytest.raises(UsageError, match=r"population: 8 \(run file\) vs 10"):
        synapto.evolve(dataclasses.replace(CFG, population=10), tmp_path / "r.h5", resume=True)
    longer = synapto.evolve(dataclasses.replace(CFG, generations=3), tmp_path / "r.h5", resume=True, log=lambda m: None)
    assert longer.generations == 3


def test_asktell_champion_is_the_best_fitness_told():
    agent = synapto.build_agent(CFG)
    search = synapto.AskTell(agent, "openai-es", population=8, seed=0)
    told = []
    rng = np.random.default_rng(5)
    for g in range(4):
        genomes = search.ask()
        fitness = rng.normal(-100 * g, 10, size=8)  # later generations worse: the best is in the first
        search.tell(fitness)
        told.append((fitness, genomes))
    best_g = max(range(4), key=lambda g: told[g][0].max())
    i = int(np.argmax(told[best_g][0]))
    assert search.champion.fitness == told[best_g][0][i] and search.champion.generation == best_g == 0
    assert np.array_equal(search.champion.genome, told[best_g][1][i])


@pytest.mark.parametrize("strategy", ["openai-es", "cmaes", "ga"])
def test_vector_asktell_round_trip(strategy):
    target = np.array([0.0, 3.0, -2.0, 0.5])
    search = (
        synapto.AskTell.vector(np.zeros(4), strategy, population=12, seed=1, sigma=0.5)
        if strategy != "ga"
        else synapto.AskTell.vector(np.zeros(4), strategy, population=12, seed=1)
    )
    for _ in range(3):
        xs = search.ask()
        search.tell([-np.sum((x - target) ** 2) for x in xs])
    assert xs.shape == (12, 4) and np.all(np.any(search.ask() != 0, axis=0))  # zeros of x0 are not pruned
    state = search.state()
    again = synapto.AskTell.from_state(state)  # no strategy, population or options given
    for _ in range(3):
        a, b = search.ask(), again.ask()
        assert np.array_equal(a, b)
        f = [-np.sum((x - target) ** 2) for x in a]
        search.tell(f)
        again.tell(f)
    assert again.champion.fitness == search.champion.fitness > -np.sum(target**2)


def test_asktell_state_holds_its_options():
    agent = synapto.build_agent(CFG)
    search = synapto.AskTell(agent, "openai-es", population=8, seed=0, sigma=0.3, lr=0.1)
    search.tell(np.arange(8.0))
    again = synapto.AskTell.from_state(search.state(), agent)
    assert again.strategy.options["sigma"] == 0.3 and again.strategy.options["lr"] == 0.1
    search.tell(np.arange(8.0)[::-1])
    again.tell(np.arange(8.0)[::-1])
    assert np.array_equal(search.ask(), again.ask())


def test_load_policy_plays_the_champion_to_its_stored_test_returns(tmp_path):
    synapto.evolve(dataclasses.replace(CFG, obs_norm=True), tmp_path / "p.h5", log=lambda m: None)
    policy = synapto.load_policy(tmp_path / "p.h5")
    with h5py.File(tmp_path / "p.h5", "r") as f:
        stored = f["champion/test_returns"][()]
        assert np.array_equal(policy.test_seeds, f["champion/test_seeds"][()])
    returns = []
    for seed in policy.test_seeds:
        env = policy.make_env()
        obs, _ = env.reset(seed=int(seed))
        policy.reset()
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(policy.act(obs))
            total += float(reward)
            done = terminated or truncated
        policy.end_episode()
        returns.append(total)
    assert isinstance(policy.make_env(), gymnasium.Env) and np.array_equal(returns, stored)
