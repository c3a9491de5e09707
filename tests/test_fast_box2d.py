"""Training episodes on envpool (env option train_backend=envpool, synapto.evolution.worker.fast_box2d):
a row's result does not depend on its company or chunking, the option is recorded and
refused when bad, validation and test stay on gymnasium, and runs keep every promise
(ranks, replay, kill -9 + resume)."""

from __future__ import annotations

import json
import os
import sys

import h5py
import numpy as np
import pytest
from conftest import assert_same_run, kill_group, run_cli, start_cli, wait_for_line

from synapto.common.errors import UsageError
from synapto.store import RunData

if os.environ.get("SYNAPTO_REQUIRE_EXTRAS"):  # `make test`: the envpool extra is installed, its absence an error
    import envpool  # noqa: F401
else:
    pytest.importorskip("envpool")

from synapto.agents import build_agent
from synapto.agents.batched.rows import rows_product
from synapto.evolution.config import EvolveConfig
from synapto.evolution.worker.fast_box2d import _Rows, _shape, evaluate_tasks, require
from synapto.evolution.worker.tasks import Episodes, EvalTask
from synapto.shaping import ShapedEnv, Shaping


def same(a, b) -> bool:
    return np.asarray(a, np.float64).tobytes() == np.asarray(b, np.float64).tobytes()


def test_float64_rows_product_does_not_depend_on_the_batch():
    rng = np.random.default_rng(1)
    w, x = rng.standard_normal((24, 40, 65)), rng.standard_normal((24, 65))
    full = rows_product(w, x, np.zeros((40, 65)))
    for lo, hi in [(0, 1), (7, 8), (3, 6), (64, 65), (0, 33)]:
        part = rows_product(
            np.ascontiguousarray(w[:, :, lo:hi]), np.ascontiguousarray(x[:, lo:hi]), np.zeros((40, hi - lo))
        )
        assert part.tobytes() == np.ascontiguousarray(full[:, lo:hi]).tobytes()


def tasks_for(agent, n, episodes, rng, norm=True, count=True, cap=150):
    out = []
    for _ in range(n):
        g = agent.init_genome(rng) * 0.5 * rng.standard_normal(agent.n_params)
        mean, std = rng.standard_normal(agent.space.obs_dim) * 0.1, 0.5 + rng.random(agent.space.obs_dim)
        seeds = rng.integers(0, 2**62, episodes)
        out.append(EvalTask(g, Episodes(seeds, True, (mean, std) if norm else None, count, True, cap)))
    return out


def assert_same_results(a, b):
    for x, y in zip(a, b):
        assert same(x.fitness, y.fitness) and same(x.returns, y.returns)
        assert x.steps.tolist() == y.steps.tolist() and x.obs_count == y.obs_count
        for u, v in ((x.stats, y.stats), (x.obs_sum, y.obs_sum), (x.obs_sumsq, y.obs_sumsq)):
            assert (u is None) == (v is None) and (u is None or same(u, v))


@pytest.mark.parametrize(
    "env, agent_name, hidden",
    [
        ("BipedalWalker-v3", "pruned-mlp", [4]),
        ("BipedalWalker-v3", "pruned-mlp", []),  # linear: experiments/bipedal_sparse.toml
        ("BipedalWalker-v3", "hebbian-dag", [4]),
        ("LunarLander-v3", "pruned-mlp", [4]),
    ],
)
def test_a_row_does_not_depend_on_its_company_nor_on_chunking(env, agent_name, hidden):
    agent = build_agent(EvolveConfig(env=env, agent=agent_name, hidden=hidden))
    tasks = tasks_for(agent, 5, 2, np.random.default_rng(3))
    shaping = Shaping(fall_reward=0.0, reward_floor=-1.0, stall_steps=40)
    together = evaluate_tasks(agent, env, tasks, shaping)
    alone = [evaluate_tasks(agent, env, [t], shaping)[0] for t in tasks]
    mixed = evaluate_tasks(agent, env, tasks[3:] + tasks[:3], shaping)
    assert_same_results(together, alone)
    assert_same_results(together, mixed[2:] + mixed[:2])
    steps = np.array([r.steps for r in together])
    assert steps.max() <= 150 and steps.min() > 0 and len(set(steps.ravel().tolist())) > 2
    assert all(r.obs_count == r.steps.sum() for r in together)
    if agent_name == "hebbian-dag":
        assert all(r.stats is not None and np.abs(r.stats).sum() > 0 for r in together)


def test_shaping_is_that_of_shaped_env():
    class Scripted:
        def __init__(self, script):
            self.script, self.i = script, 0

        def reset(self, **kw):
            self.i = 0

        def step(self, a):
            r, term = self.script[self.i]
            self.i += 1
            return None, r, term, False, {}

    scripts = [
        [(-0.5, False), (-2.0, False), (-100.0, True)],
        [(1.0, False), (-1.0, False), (3.0, True)],
        [(-1.0, False)] * 2 + [(0.5, False)] + [(-1.0, False)] * 5,
        [(0.25, False)] * 8,
    ]
    for s in [Shaping(fall_reward=0.0, finish_bonus=10.0, reward_floor=-1.0, stall_steps=3), Shaping(stall_steps=2)]:
        st = _Rows(4, 1, [Episodes(np.zeros(1), max_steps=6)] * 4, 1, False)
        envs = [ShapedEnv(Scripted(sc), s, 6) for sc in scripts]
        totals, lengths = np.zeros(4), [0] * 4
        live = list(range(4))
        for t in range(1, 9):
            go = np.array(live)
            raw = np.array([scripts[i][t - 1][0] for i in go], np.float64)
            term = np.array([scripts[i][t - 1][1] for i in go])
            trunc = _shape(st, go, raw, term, np.zeros(len(go), bool), t, s)
            for j, i in enumerate(go):
                _, r, te, tr, _ = envs[i].step(0)
                totals[i] += r
                assert (te, tr) == (term[j], trunc[j])
                if te or tr:
                    lengths[i] = t
                    live.remove(i)
            if not live:
                break
        assert same(st.ret, totals) and not live


def test_missing_envpool_is_one_line_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "envpool", None)
    cfg = EvolveConfig(env="BipedalWalker-v3", env_options={"train_backend": "envpool"})
    with pytest.raises(UsageError, match=r"envpool extra: pip install -e \.\[envpool\]"):
        require(cfg)


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--env", "BipedalWalker-v3", "--env-option", "train_backend=fast"], "train_backend must be"),
        (["--env", "CartPole-v1", "--env-option", "train_backend=envpool"], "covers BipedalWalker-v3"),
        (
            ["--env", "LunarLander-v3", "--env-option", "train_backend=envpool", "--env-option", "continuous=true"],
            "no options of the env",
        ),
        (
            [
                "--env",
                "BipedalWalker-v3",
                "--env-option",
                "train_backend=envpool",
                "--agent",
                "hebbian-dag",
                "--agent-option",
                "neuromodulate=true",
            ],
            "no batched policy",
        ),
    ],
)
def test_bad_backend_is_one_line_and_exit_2(tmp_path, args, needle):
    out = tmp_path / "never.h5"
    r = run_cli("evolve", *args, "--out", out)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], r.stderr
    assert not out.exists()


RUN = [
    "evolve",
    "--env",
    "BipedalWalker-v3",
    "--agent",
    "pruned-mlp",
    "--hidden",
    "4",
    "--strategy",
    "openai-es",
    "--population",
    "4",
    "--generations",
    "3",
    "--episodes",
    "2",
    "--validate-episodes",
    "1",
    "--validate-top",
    "1",
    "--test-episodes",
    "1",
    "--seed",
    "7",
    "--obs-norm",
    "--env-option",
    "train_backend=envpool",
    "--env-option",
    "fall_reward=0",
    "--env-option",
    "stall_steps=40",
    "--env-option",
    "cap_factor=1.5",
]


@pytest.fixture(scope="module")
def fast_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("fast") / "fast.h5"
    r = run_cli(*RUN, "--out", out, timeout=600)
    assert r.returncode == 0, r.stderr
    return out


def test_backend_recorded_and_validation_and_test_on_gymnasium(fast_run):
    from synapto.api import rollout

    with RunData(fast_run) as run:
        cfg = EvolveConfig.from_json(run.config_json)
        assert json.loads(run.config_json)["env_options"]["train_backend"] == "envpool"
        agent = build_agent(cfg)
        g = run.completed - 1
        who = run.validation_individual(g)
        genome = run.population(g, int(who[0])) if who[0] >= 0 else run.strategy("centre", g)
        r = rollout(agent, genome, cfg.env, run.validation_seeds(g), obs_norm=run.obs_norm(g))
        assert same(r.returns, run.validation_returns(g, 0))
        champ = run.champion()
        r = rollout(agent, champ.genome, cfg.env, champ.test_seeds, obs_norm=champ.obs_norm)
        assert same(r.returns, champ.test_returns)


def test_replay_of_a_training_evaluation_is_exact(fast_run):
    r = run_cli("replay", fast_run, "--generation", "2", "--individual", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1/1 bit-identical" in r.stdout


@pytest.mark.long
@pytest.mark.mpi
def test_fast_run_identical_on_three_ranks(fast_run, tmp_path):
    out = tmp_path / "three.h5"
    r = run_cli(*RUN, "--out", out, ranks=3, timeout=600)
    assert r.returncode == 0, r.stderr
    assert_same_run(fast_run, out)


@pytest.mark.long
@pytest.mark.mpi
@pytest.mark.slow
def test_kill_9_then_resume_of_a_fast_run_is_exact(fast_run, tmp_path):
    out = tmp_path / "killed.h5"
    proc = start_cli(*RUN, "--out", out, ranks=3, extra_env={"SYNAPTO_FAULT": "generation:2"})
    wait_for_line(proc, "FAULT-POINT", timeout=600)
    kill_group(proc)
    proc.wait(timeout=30)
    with h5py.File(out, "r", swmr=True) as f:
        assert int(f["completed"][0]) == 2
    r = run_cli("evolve", "--resume", out, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert_same_run(fast_run, out)
