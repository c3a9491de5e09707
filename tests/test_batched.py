"""Batched evaluation (synapto.evolution.worker.batched): same results as one env at a time,
bit-identical run files across rank counts."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest
from conftest import assert_same_run, datasets, run_cli

from synapto.common import seeding
from synapto.evolution.worker import batched, vector_env
from synapto.evolution.worker.batched import BatchedEvaluator, BatchingFarm, Chunk, batch_unsupported, chunks_of
from synapto.evolution.worker.spec import EvolveSpec
from synapto.evolution.worker.tasks import Episodes, EvalTask
from synapto.parallel.farm import SerialFarm


def _population(agent, k, seed=3):
    rng = np.random.default_rng(seed)
    g = np.stack([agent.init_genome(rng) for _ in range(k)])
    return g * (1.0 + 0.5 * rng.standard_normal(g.shape))  # varied weights: varied episode lengths


def _assert_stats_close(batch, serial):
    """The documented tolerance of batched Hebbian statistics (float32 activities)."""
    np.testing.assert_allclose(batch, serial, rtol=1e-4, atol=1e-6 * np.abs(serial).max())


@pytest.mark.parametrize("agent", ["pruned-mlp", "hebbian-dag"])
@pytest.mark.parametrize("crn", [True, False])
@pytest.mark.parametrize("slots", [None, 16])
def test_batched_matches_serial(agent, crn, slots, monkeypatch):
    monkeypatch.setattr(batched, "MIN_COMPACT", 4)  # compaction at this small width too
    ev = BatchedEvaluator(EvolveSpec("CartPole-v1", agent, (8, 8), {}))
    K, E = 64, 3
    genomes = _population(ev.agent, K)
    seeds = seeding.train_seeds(7, 0, K, E, common=crn)
    serial = [ev(EvalTask(genomes[i], Episodes(seeds[i]))) for i in range(K)]
    # slots=16: 192 rows through 16 sub-envs, refilled as episodes end
    batch = batched.evaluate_batch(ev.agent, ev.venv, genomes, seeds, True, slots=slots)
    lengths = np.array([r.steps for r in serial])
    assert lengths.min() < 20 and lengths.max() >= 300  # early and late ends (truncation in the run test)
    for s, b in zip(serial, batch):
        # CartPole's dynamics are bit for bit the single env's, and every action is the
        # one-row policy's (certified float32 or recomputed): returns and fitness are exact
        assert b.fitness == s.fitness
        assert np.array_equal(b.returns, s.returns) and np.array_equal(b.steps, s.steps)
        assert b.nonfinite == s.nonfinite
        if s.stats is None:
            assert b.stats is None
        else:
            _assert_stats_close(b.stats, s.stats)


@pytest.mark.parametrize("agent", ["pruned-mlp", "hebbian-dag"])
def test_row_results_do_not_depend_on_company(agent):
    """What makes merged (one process) and chunked (worker ranks) evaluation agree bit for
    bit: a row's fitness, returns and statistics do not depend on the slot it runs in,
    the rows beside it or the refills around it."""
    ev = BatchedEvaluator(EvolveSpec("CartPole-v1", agent, (8, 8), {}))
    K, E = 48, 2
    genomes = _population(ev.agent, K, seed=11)
    seeds = seeding.train_seeds(3, 1, K, E, common=False)
    whole = batched.evaluate_batch(ev.agent, ev.venv, genomes, seeds, True)
    variants = [
        batched.evaluate_batch(ev.agent, ev.venv, genomes, seeds, True, slots=7),
        batched.evaluate_batch(ev.agent, ev.venv, genomes[:20], seeds[:20], True)
        + batched.evaluate_batch(ev.agent, ev.venv, genomes[20:], seeds[20:], True, slots=5),
    ]
    perm = np.random.default_rng(0).permutation(K)
    shuffled = batched.evaluate_batch(ev.agent, ev.venv, genomes[perm], seeds[perm], True, slots=13)
    variants.append([shuffled[int(np.flatnonzero(perm == k)[0])] for k in range(K)])
    for other in variants:
        for a, b in zip(whole, other):
            assert a.fitness == b.fitness and np.array_equal(a.returns, b.returns)
            assert np.array_equal(a.steps, b.steps)
            assert (a.stats is None and b.stats is None) or np.array_equal(a.stats, b.stats)


@pytest.mark.parametrize("agent", ["pruned-mlp", "hebbian-dag"])
def test_uncertified_rows_take_the_one_row_action(agent, monkeypatch):
    """With an absurdly large error bound nothing is certified: every action comes from
    the float64 refinement or the one-row policy, and results are still exact; with
    exact ties (generation-0 pruned-mlp genomes are 0/1) the one-row policy decides."""
    import synapto.agents.batched.certify as base

    ev = BatchedEvaluator(EvolveSpec("CartPole-v1", agent, (4,), {}))
    K, E = 24, 2
    rng = np.random.default_rng(5)
    genomes = np.stack([ev.agent.init_genome(rng) for _ in range(K)])
    if agent == "pruned-mlp":
        last = genomes[:4, -8:].reshape(4, 4, 2)  # the (4, 2) output layer
        last[..., 1] = last[..., 0]  # identical output columns: an exact tie every step
    seeds = seeding.train_seeds(9, 0, K, E, common=False)
    serial = [ev(EvalTask(genomes[i], Episodes(seeds[i]))) for i in range(K)]
    calls = []
    act = base.ExactRows.act
    monkeypatch.setattr(base.ExactRows, "act", lambda self, row, obs: calls.append(row) or act(self, row, obs))
    batch = ev(Chunk(tuple(EvalTask(g, Episodes(s)) for g, s in zip(genomes, seeds))))
    assert [b.fitness for b in batch] == [s.fitness for s in serial]
    if agent == "pruned-mlp":
        assert set(range(8)) <= set(calls)  # the tied rows (2 episodes each) went one row at a time
    monkeypatch.setattr(base, "BOUND_SAFETY", 1e12)
    calls.clear()
    batch = ev(Chunk(tuple(EvalTask(g, Episodes(s)) for g, s in zip(genomes, seeds))))
    assert [b.fitness for b in batch] == [s.fitness for s in serial]
    for s, b in zip(serial, batch):
        assert np.array_equal(b.returns, s.returns)


def test_tanh32_error_bound():
    """The float32 tanh of the batched policies stays within TANH32_ERR of float64 tanh
    (the certified decisions rely on it) and within [-1, 1]."""
    from synapto.agents.batched.certify import TANH32_ERR
    from synapto.common.fastmath import tanh_

    rng = np.random.default_rng(0)
    x = np.concatenate(
        [
            np.linspace(-30, 30, 2_000_001),
            3 * rng.standard_normal(1_000_000),
            1e-3 * rng.standard_normal(100_000),
            [0.0, -0.0, 1e-30, 1e30, -1e30],
        ]
    ).astype(np.float32)
    y = tanh_(x.copy()).astype(np.float64)
    assert np.abs(y - np.tanh(x.astype(np.float64))).max() <= TANH32_ERR
    assert y.min() >= -1.0 and y.max() <= 1.0


def test_decision_bound_covers_float32_error():
    """The per-row bound on |float32 margin - float64 margin| holds on random networks
    and inputs (it is a worst case: observed errors are far below it)."""
    from synapto.agents.batched.certify import TANH32_ERR, TANH64_ERR, U32, U64, decision_bound
    from synapto.common.fastmath import tanh_

    rng = np.random.default_rng(1)
    n, sizes = 2000, [4, 8, 8, 2]
    ws = [rng.standard_normal((n, a, b)) * (rng.random((n, a, b)) > 0.3) for a, b in itertools.pairwise(sizes)]
    a, b = decision_bound([(w.shape[1], [(i, w)]) for i, w in enumerate(ws)], out_tanh=False)
    for _ in range(5):
        x0 = (rng.standard_normal((n, 4)) * 3).astype(np.float32)
        x32, x64 = x0, x0.astype(np.float64)
        for i, w in enumerate(ws):
            x32 = np.einsum("ri,rio->ro", x32, w.astype(np.float32))
            x64 = np.einsum("ri,rio->ro", x64, w)
            if i < len(ws) - 1:
                x32, x64 = tanh_(x32), np.tanh(x64)
        err = np.abs((x32[:, 1] - x32[:, 0]) - (x64[:, 1] - x64[:, 0]))
        bound = a * np.abs(x0).max(axis=1) + b
        assert (err <= bound).all()
        assert np.median(err / bound) < 0.1
    assert U32 > U64 and TANH32_ERR > TANH64_ERR


@pytest.mark.parametrize("agent", ["pruned-mlp", "hebbian-dag"])
def test_batch_penalty_is_penalty(agent):
    ev = BatchedEvaluator(EvolveSpec("CartPole-v1", agent, (8, 8), {}))
    genomes = _population(ev.agent, 200, seed=4)
    want = np.array([ev.agent.penalty(g) for g in genomes])
    assert np.array_equal(ev.agent.batch_penalty(genomes), want)


def test_quick_initial_states_are_single_env_resets():
    """The initial states the batched CartPole takes without resetting an env are the
    single env's, bit for bit, and are used only after that check passed."""
    venv = vector_env.SeededVectorEnv("CartPole-v1")
    venv.start(np.arange(3))
    assert venv._quick is not None
    rng = np.random.default_rng(0)
    for seed in [0, 5, *rng.integers(0, 2**63, 200).tolist()]:
        state, obs = venv._cartpole_initial(seed)
        obs1, _ = venv.single.reset(seed=seed)
        assert np.array_equal(state, venv.single.unwrapped.state) and np.array_equal(obs, obs1)
        assert obs.dtype == obs1.dtype
    venv.close()


def test_cartpole_step_is_the_vector_envs():
    """synapto's CartPole step on its own buffers gives gymnasium's vector env states,
    bit for bit, on whole random trajectories."""
    import gymnasium as gym

    n = 64
    vec = gym.make_vec("CartPole-v1", num_envs=n, vectorization_mode="vector_entry_point")
    vec.reset(seed=1)
    u = vec.unwrapped
    assert vector_env.CartPoleStep.applies(u)
    fast = vector_env.CartPoleStep(u)
    fast.start(u.state.copy())
    rng = np.random.default_rng(2)
    for _ in range(30):
        action = rng.integers(0, 2, n)
        live = ~u.prev_done  # gymnasium autoresets the others at random: not compared
        obs, _, term, trunc, _ = vec.step(action)
        fobs, _, fterm, ftrunc = fast.step(action)
        assert live.sum() > n // 2
        assert np.array_equal(fast.state[:, live], u.state[:, live])
        assert np.array_equal(fobs[live], obs[live]) and np.array_equal(fterm[live], term[live])
        assert np.array_equal(ftrunc[live], trunc[live])
        fast.state[:, ~live] = u.state[:, ~live]
        fast.steps[~live] = u.steps[~live]
        fast.obs_t[:, ~live] = u.state[:, ~live]
    vec.close()


def test_batching_farm_chunks_and_failures_bookkeeping():
    tasks = [(2, True)] * 5 + [(3, False)] * 2  # (episodes, want_stats) of each task
    assert chunks_of(tasks, 4) == [[0, 3], [1, 4], [2], [5], [6]]  # tasks dealt out, <= 4 rows each
    assert chunks_of(tasks, 100) == [[0, 1, 2, 3, 4], [5, 6]]
    assert chunks_of(tasks, 100, workers=2) == [[0, 2, 4], [1, 3], [5], [6]]
    assert chunks_of(tasks[:1], 1) == [[0]]

    spec = EvolveSpec("CartPole-v1", "pruned-mlp", (4,), {})
    farm = SerialFarm()
    farm.setup(replace(spec, evaluator="batched"))
    bfarm = BatchingFarm(farm, chunk_rows=6)
    agent = BatchedEvaluator(spec).agent
    genomes = _population(agent, 7)
    seeds = seeding.train_seeds(1, 0, 7, 2, common=False)
    out = bfarm.map([EvalTask(genomes[i], Episodes(seeds[i])) for i in range(7)])
    ref = SerialFarm()
    ref.setup(spec)
    want = ref.map([EvalTask(genomes[i], Episodes(seeds[i])) for i in range(7)])
    assert [r.fitness for r in out] == [r.fitness for r in want]
    assert farm.last_stats.tasks == 3  # 7 individuals x 2 episodes in chunks of <= 6 rows
    merged = BatchingFarm(farm, chunk_rows=6, local=True)  # one process: one lockstep evaluation
    out = merged.map([EvalTask(genomes[i], Episodes(seeds[i])) for i in range(7)])
    assert [r.fitness for r in out] == [r.fitness for r in want]
    assert farm.last_stats.tasks == 1


def test_chunks_follow_the_number_of_workers():
    """Every worker gets a share of a generation, however small; chunks stay within
    CHUNK_ROWS rows, and the elites (first slots) are spread over all chunks."""

    def tasks(n, E):
        return [(E, True)] * n

    for n, E, workers, count in [
        (64, 4, 2, 2),
        (512, 4, 2, 2),
        (512, 4, 7, 7),
        (3, 4, 7, 3),
        (64, 4, 1, 1),
        (4096, 4, 2, 4),
        (4096, 4, 1, 4),
        (2000, 16, 3, 9),
    ]:
        chunks = chunks_of(tasks(n, E), batched.CHUNK_ROWS, workers)
        assert len(chunks) == count, (n, E, workers, [len(c) for c in chunks])
        assert sorted(i for c in chunks for i in c) == list(range(n))
        assert max(len(c) for c in chunks) * E <= batched.CHUNK_ROWS
        assert max(len(c) for c in chunks) - min(len(c) for c in chunks) <= 1
        assert sorted(c[0] for c in chunks) == list(range(count))  # slot j opens chunk j


class _Flaky:
    """A handler that raises for genomes starting with 13 (one at a time or in a chunk)."""

    def build(self):
        return self

    def __call__(self, task):
        if isinstance(task, Chunk):
            genomes = [t.genome for t in task.tasks(None)]
            if any(g[0] == 13 for g in genomes):
                raise ValueError("a row of this chunk raises")
            return [float(g[0]) for g in genomes]
        if task.genome[0] == 13:
            raise ValueError("this individual raises")
        return float(task.genome[0])


def test_a_failing_chunk_fails_exactly_its_failing_tasks():
    from synapto.parallel.results import TaskFailed

    farm = SerialFarm()
    farm.setup(_Flaky())
    genomes = [7.0, 13.0, 2.0, 13.0, 5.0, 1.0, 4.0]
    tasks = [EvalTask(np.array([g]), Episodes(np.arange(2))) for g in genomes]
    for bfarm in (BatchingFarm(farm, chunk_rows=4), BatchingFarm(farm, local=True)):
        out = bfarm.map(tasks, on_error="skip")
        assert sorted(out.failures) == [1, 3] and all(out.failures[i].index == i for i in (1, 3))
        assert [v for i, v in enumerate(out) if i not in out.failures] == [7.0, 2.0, 5.0, 1.0, 4.0]
        assert "this individual raises" in out.failures[1].message
        with pytest.raises(TaskFailed) as exc:
            bfarm.map(tasks, on_error="raise")
        assert exc.value.failure.index == 1


_SPREAD = ["CartPole-v1", "pruned-mlp", (8, 8), {}]


def _spread_over_workers(out: str) -> None:
    """Run under mpiexec: rank 0 maps one small batched generation over the workers."""
    from synapto.parallel.farm import make_farm

    farm, coordinator = make_farm()
    if not coordinator:
        return
    spec = EvolveSpec(*_SPREAD)
    ev = BatchedEvaluator(spec)
    genomes = _population(ev.agent, 64, seed=2)
    seeds = seeding.train_seeds(1, 0, 64, 4, common=True)
    tasks = [EvalTask(genomes[i], Episodes(seeds[i])) for i in range(64)]
    farm.setup(replace(spec, evaluator="batched"))
    got = BatchingFarm(farm).map(tasks)
    want = [ev(t) for t in tasks]
    farm.close()
    np.savez(
        out,
        workers=np.array(sorted(farm.last_stats.per_worker_compute)),
        same=np.array(
            [all(a.fitness == b.fitness and np.array_equal(a.returns, b.returns) for a, b in zip(got, want))]
        ),
    )


@pytest.mark.mpi
def test_a_small_batched_generation_uses_every_worker(tmp_path):
    """64 x 4 rows (far below CHUNK_ROWS) under 3 ranks: both workers evaluate a chunk."""
    import subprocess
    import sys

    from conftest import MPIEXEC, _env

    out = tmp_path / "spread.npz"
    proc = subprocess.run(
        [MPIEXEC, "-n", "3", sys.executable, __file__, "spread", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
    )
    assert proc.returncode == 0, proc.stderr
    r = np.load(out)
    assert r["workers"].tolist() == [1, 2] and r["same"][0]


def test_unsupported_falls_back():
    from synapto.agents import build_agent
    from synapto.evolution.config import EvolveConfig

    lunar = EvolveConfig(env="LunarLander-v3", agent="pruned-mlp", hidden=[4])
    assert "vector" in batch_unsupported(EvolveSpec("LunarLander-v3", "pruned-mlp", (4,), {}), build_agent(lunar))
    neuro = EvolveConfig(env="CartPole-v1", agent="hebbian-dag", hidden=[4], agent_options={"neuromodulate": True})
    assert "batched policy" in batch_unsupported(
        EvolveSpec("CartPole-v1", "hebbian-dag", (4,), {"neuromodulate": True}), build_agent(neuro)
    )
    farm = SerialFarm()
    assert (
        batched.batching_farm(
            farm,
            EvolveSpec("CartPole-v1", "pruned-mlp", (4,), {}),
            build_agent(EvolveConfig(env="CartPole-v1", agent="pruned-mlp", hidden=[4])),
            "off",
        )
        is farm
    )


ARGS = [
    "evolve",
    "--env",
    "CartPole-v1",
    "--population",
    "24",
    "--generations",
    "2",
    "--episodes",
    "2",
    "--hidden",
    "4",
    "--test-episodes",
    "6",
    "--validate-episodes",
    "3",
    "--seed",
    "5",
    "--force",
]


@pytest.mark.mpi
@pytest.mark.slow
def test_batched_runs_identical_across_ranks_and_to_unbatched(tmp_path, monkeypatch):
    monkeypatch.setenv("SYNAPTO_BATCH_ROWS", "16")  # several chunks per generation
    outs = {}
    for name, ranks, extra in [("r1", None, []), ("r2", 2, []), ("r4", 4, []), ("off", None, ["--batch", "off"])]:
        out = tmp_path / f"{name}.h5"
        res = run_cli(*ARGS, "--agent", "hebbian-dag", "--out", out, *extra, ranks=ranks, timeout=240)
        assert res.returncode == 0, res.stderr
        outs[name] = out
    assert_same_run(outs["r1"], outs["r2"])
    assert_same_run(outs["r1"], outs["r4"])
    # the same run as one env at a time, everything outside /timing: fitness, returns, steps,
    # seeds, population, validation, statistics, champion (actions and returns are exact;
    # Hebbian statistics agree to ~1e-5, so a pruning draw could in principle land
    # differently -- not on this run)
    assert_same_run(outs["r1"], outs["off"])
    assert {"fitness", "returns", "steps", "seeds", "population", "champion/test_returns"} <= set(datasets(outs["off"]))


def test_batch_option_rejected(tmp_path, capsys):
    from synapto.cli import main

    with pytest.raises(SystemExit) as exc:
        main([*ARGS, "--out", str(tmp_path / "r.h5"), "--batch", "sometimes"])
    assert exc.value.code == 2 and "--batch" in capsys.readouterr().err


@pytest.mark.parametrize("agent", ["pruned-mlp", "hebbian-dag"])
@pytest.mark.parametrize("space", ["discrete3", "box"])
def test_batch_policy_acts_as_one_row_policies(agent, space):
    """Beyond CartPole: three discrete choices (certified argmax, refills, compaction)
    give exactly the one-row actions; Box actions (float64) agree to rounding."""
    from synapto.agents import load_agent_class
    from synapto.envs import SpaceInfo

    info = (
        SpaceInfo(6, 3, True, None, None, 100)
        if space == "discrete3"
        else SpaceInfo(6, 2, False, np.array([-2.0, 0.0]), np.array([2.0, 1.0]), 100)
    )
    ag = load_agent_class(agent)(info, (5, 4), {})
    rng = np.random.default_rng(8)
    K, E = 40, 2
    genomes = np.stack([ag.init_genome(rng) for _ in range(K)]) * (1 + 0.5 * rng.standard_normal((K, ag.n_params)))
    genomes[0] = 0.0  # all outputs tied: the one-row policy decides
    policy = ag.batch_policy(genomes, want_stats=False, episodes=E)
    rows = np.arange(K * E)
    width = 50
    policy.keep(np.arange(width))
    cur = rows[:width].copy()
    nxt = width
    for step in range(30):
        obs = rng.standard_normal((len(cur), 6)) * 2  # float64: rounded in the float32 pass only
        got = policy.act(obs)
        want = [ag.policy(genomes[r // E]).act(obs[i]) for i, r in enumerate(cur)]
        if space == "discrete3":
            assert got.tolist() == [int(w) for w in want]
        else:
            np.testing.assert_allclose(got, np.stack(want), rtol=1e-12, atol=1e-12)
        if step % 5 == 4 and nxt < len(rows):  # refill three sub-envs
            slots = np.array([1, 7, 20])[: len(rows) - nxt]
            policy.end_episodes(slots)
            policy.load(slots, rows[nxt : nxt + len(slots)])
            cur[slots] = rows[nxt : nxt + len(slots)]
            nxt += len(slots)
        if step == 20:  # compaction
            keep = np.arange(0, len(cur), 2)
            policy.keep(keep)
            cur = cur[keep]


def test_argmax_margin():
    from synapto.agents.batched.certify import argmax_margin

    out = np.array(
        [[1.0, 3.0, 2.0, 0.5, np.nan], [2.0, 3.0, 1.0, 0.5, 0.0], [0.0, 1.0, 2.5, 0.7, 1.0]], dtype=np.float32
    )
    action, margin = np.zeros(5, np.int64), np.zeros(5, np.float32)
    argmax_margin(out, action, margin, np.zeros((2, 5), np.float32))
    assert action[:4].tolist() == np.argmax(out[:, :4], axis=0).tolist() == [1, 0, 2, 2]
    assert margin[0] == 1.0 and margin[1] == 0.0 and margin[2] == np.float32(0.5)
    assert not np.isfinite(margin[4])  # NaN: never certified
    two = out[:2, :4]
    argmax_margin(two, action[:4], margin[:4], np.zeros((2, 4), np.float32))
    assert action[:4].tolist() == np.argmax(two, axis=0).tolist() and margin[1] == 0.0


def test_generic_vector_env_step_matches_serial(monkeypatch):
    """The path for vector envs other than gymnasium's CartPole (their own unwrapped
    step, gymnasium's autoreset of ended sub-envs, refills, compaction) gives the one-env
    results too."""
    monkeypatch.setattr(vector_env.CartPoleStep, "applies", staticmethod(lambda u: False))
    monkeypatch.setattr(batched, "MIN_COMPACT", 4)
    ev = BatchedEvaluator(EvolveSpec("CartPole-v1", "pruned-mlp", (8, 8), {}))
    K, E = 32, 2
    genomes = _population(ev.agent, K, seed=6)
    seeds = seeding.train_seeds(2, 0, K, E, common=False)
    serial = [ev(EvalTask(genomes[i], Episodes(seeds[i]))) for i in range(K)]
    batch = batched.evaluate_batch(ev.agent, ev.venv, genomes, seeds, True, slots=24)
    assert ev.venv.fast is None and not ev.venv.unit_reward
    for s, b in zip(serial, batch):
        assert b.fitness == s.fitness and np.array_equal(b.returns, s.returns)


if __name__ == "__main__":
    import sys

    if sys.argv[1] == "spread":
        _spread_over_workers(sys.argv[2])
