"""Observation normalisation: what the worker counts, what the policy sees, what the
coordinator freezes."""

from functools import partial

import numpy as np
import pytest

from synapto.agents.base import Agent, Policy
from synapto.envs import SpaceInfo, make_env
from synapto.evolution.obs_norm import CLIP, MIN_VAR, ObsStats
from synapto.evolution.worker.evaluate import evaluate
from synapto.evolution.worker.tasks import EvalResult

LUNAR = "LunarLander-v3"


class Recorder(Agent):
    """A fixed policy (action 0 ... cycling) that records every observation it is given."""

    name = "recorder"

    def __init__(self, space, hidden=(1,), options=None):
        super().__init__(space, hidden, options)
        self.seen = []

    @property
    def n_params(self):
        return 1

    def init_genome(self, rng):
        return np.ones(1)

    def policy(self, genome):
        agent = self

        class P(Policy):
            t = 0

            def reset(self):
                self.t = 0

            def act(self, obs):
                agent.seen.append(np.array(obs, dtype=np.float64))
                self.t += 1
                return self.t % 4

        return P()

    def groups(self):
        return []

    def mutate(self, genome, stats, rate, rng):
        return genome


def raw_observations(seeds):
    """Every observation of the same episodes, read straight off the env (actions cycling
    1, 2, 3, 0, ... as the Recorder's), without synapto's evaluation."""
    out = []
    for seed in seeds:
        env = make_env(LUNAR)
        obs, _ = env.reset(seed=int(seed))
        t = 0
        while True:
            out.append(np.array(obs, dtype=np.float64))
            t += 1
            obs, _, term, trunc, _ = env.step(t % 4)
            if term or trunc:
                break
        env.close()
    return np.array(out)


def test_counted_observations_are_the_ones_the_policy_saw():
    env = make_env(LUNAR)
    agent = Recorder(SpaceInfo.of(env))
    env.close()
    seeds = [3, 11]
    r = evaluate(agent, partial(make_env, LUNAR), np.ones(1), seeds, count_obs=True)
    raw = raw_observations(seeds)
    assert r.obs_count == len(raw) == int(r.steps.sum())
    np.testing.assert_allclose(r.obs_sum, raw.sum(axis=0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(r.obs_sumsq, (raw**2).sum(axis=0), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(np.array(agent.seen), raw)  # not normalised: no obs_norm given


def test_the_policy_sees_clipped_normalised_observations_and_counting_stays_raw():
    env = make_env(LUNAR)
    agent = Recorder(SpaceInfo.of(env))
    env.close()
    mean = np.linspace(-0.5, 0.5, 8)
    std = np.full(8, 0.05)  # small: some components clip
    r = evaluate(agent, partial(make_env, LUNAR), np.ones(1), [5], obs_norm=(mean, std), count_obs=True)
    raw = raw_observations([5])
    want = np.clip((raw - mean) / std, -CLIP, CLIP)
    np.testing.assert_array_equal(np.array(agent.seen), want)
    assert np.any(np.abs(want) == CLIP)
    np.testing.assert_allclose(r.obs_sum, raw.sum(axis=0), rtol=1e-12, atol=1e-12)


def test_uncounted_evaluations_return_no_statistics():
    env = make_env(LUNAR)
    agent = Recorder(SpaceInfo.of(env))
    env.close()
    r = evaluate(agent, partial(make_env, LUNAR), np.ones(1), [5])
    assert r.obs_count == 0 and r.obs_sum is None


def _result(obs: np.ndarray) -> EvalResult:
    return EvalResult(
        0.0, np.zeros(1), np.zeros(1, np.int64), None, False, 0.0, 0.0, len(obs), obs.sum(axis=0), (obs**2).sum(axis=0)
    )


def test_frozen_statistics_are_the_pooled_mean_and_floored_std():
    rng = np.random.default_rng(0)
    chunks = [rng.normal([1.0, -2.0, 0.0], [3.0, 0.5, 0.001], size=(n, 3)) for n in (5, 17, 40)]
    stats = ObsStats(3)
    mean0, std0 = stats.frozen()
    np.testing.assert_array_equal(mean0, 0.0)
    np.testing.assert_array_equal(std0, 1.0)
    stats.add([_result(c) for c in chunks] + [None])  # a failed task's None is skipped
    pooled = np.concatenate(chunks)
    mean, std = stats.frozen()
    np.testing.assert_allclose(mean, pooled.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(std[:2], pooled.std(axis=0)[:2], rtol=1e-9)
    assert std[2] == pytest.approx(np.sqrt(MIN_VAR))  # the near-constant component is floored


def test_state_round_trip_is_exact():
    rng = np.random.default_rng(1)
    stats = ObsStats(4)
    stats.add([_result(rng.normal(size=(9, 4)))])
    other = ObsStats(4)
    other.restore(stats.state())
    for a, b in zip(stats.frozen(), other.frozen()):
        assert a.tobytes() == b.tobytes()
    assert other.count == 9


def test_one_running_moments_class_serves_evolution_and_ppo_and_keeps_both_orders():
    import ast
    from pathlib import Path

    import synapto.common.moments as moments_module
    from synapto.common.moments import RunningMoments
    from synapto.ppo.normalise import Moments

    tree = ast.parse(Path(moments_module.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
    }
    assert not any(m and m.startswith(("synapto.evolution", "synapto.ppo")) for m in imported)
    assert issubclass(ObsStats, RunningMoments)
    assert isinstance(Moments(2)._local, RunningMoments)
    x = np.random.default_rng(2).normal(size=(37, 3))
    for squares, expected in (("einsum", np.einsum("ij,ij->j", x, x)), ("square", np.square(x).sum(axis=0))):
        m = RunningMoments(3, squares=squares)
        m.add_rows(x)
        assert m.count == 37 and m.sum.tobytes() == x.sum(axis=0).tobytes()
        assert m.sumsq.tobytes() == expected.tobytes()
    with pytest.raises(ValueError):
        RunningMoments(3, squares="pairwise")
