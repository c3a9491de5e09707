"""GAE-lambda, reward-to-go, and bootstrapping: terminated -> 0, truncated -> V(s')."""

import gymnasium as gym
import numpy as np
import pytest

from synapto.parallel.collectives import Collectives
from synapto.ppo.buffer import EpochBuffer, discount_cumsum, gae_path
from synapto.ppo.config import PPOConfig
from synapto.ppo.env import open_env
from synapto.ppo.train import Trainer


def test_discount_cumsum():
    np.testing.assert_allclose(discount_cumsum(np.array([1.0, 2.0, 3.0]), 0.5), [1 + 1 + 0.75, 2 + 1.5, 3])
    np.testing.assert_allclose(discount_cumsum(np.array([1.0, 1.0]), 0.5, last=4.0), [1 + 0.5 + 1.0, 1 + 2.0])


def test_gae_path_against_the_definition():
    rng = np.random.default_rng(0)
    rew, val, last, gamma, lam = rng.standard_normal(9), rng.standard_normal(9), 0.7, 0.95, 0.9
    adv, ret = gae_path(rew, val, last, gamma, lam)
    v_next = np.append(val[1:], last)
    delta = rew + gamma * v_next - val
    for t in range(9):
        k = np.arange(9 - t)
        assert adv[t] == pytest.approx(np.sum((gamma * lam) ** k * delta[t:]), rel=1e-12)
        assert ret[t] == pytest.approx(np.sum(gamma**k * rew[t:]) + gamma ** (9 - t) * last, rel=1e-12)
    # lam = 1: advantage = reward-to-go - V
    adv1, ret1 = gae_path(rew, val, last, gamma, 1.0)
    np.testing.assert_allclose(adv1, ret1 - val, rtol=1e-12, atol=1e-12)


def test_buffer_bootstraps_truncated_paths_and_not_terminated_ones():
    buf = EpochBuffer(7, 1, 1, False, np.float64)
    buf.obs[:, 0] = np.arange(7)
    buf.rew[:] = 1.0
    buf.end_path(2, None)  # terminated after 2 steps
    buf.end_path(5, np.array([10.0]))  # truncated (time limit): s' = 10
    buf.end_path(7, np.array([20.0]))  # cut by the end of the epoch: s' = 20
    value = lambda obs: obs[:, 0] * 0.5  # noqa: E731  V(s) = s / 2
    buf.finish(value, gamma=0.9, lam=1.0)
    np.testing.assert_allclose(buf.ret[:2], [1 + 0.9, 1])
    np.testing.assert_allclose(buf.ret[2:5], [1 + 0.9 + 0.81 + 0.729 * 5, 1 + 0.9 + 0.81 * 5, 1 + 0.9 * 5])
    np.testing.assert_allclose(buf.ret[5:], [1 + 0.9 + 0.81 * 10, 1 + 0.9 * 10])
    np.testing.assert_allclose(buf.val, np.arange(7) * 0.5)
    np.testing.assert_allclose(buf.adv, buf.ret - buf.val)  # lam = 1


def test_buffer_refuses_open_paths():
    buf = EpochBuffer(4, 1, 1, False, np.float64)
    buf.end_path(3, None)
    with pytest.raises(ValueError):
        buf.finish(lambda o: o[:, 0], 0.9, 0.9)
    with pytest.raises(ValueError):
        buf.end_path(3, None)


# ------------------------------------------------------------- the rollout's bookkeeping
class ToyEnv(gym.Env):
    """Obs = [step in episode, episode number]; reward 1; even episodes terminate after 5 steps,
    odd ones run until the time limit (7, set at registration)."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    action_space = gym.spaces.Box(-1, 1, (1,), np.float32)

    def __init__(self, render_mode=None):
        self.episode = -1
        self.t = 0

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.episode += 1
        self.t = 0
        return np.array([0, self.episode], np.float32), {}

    def step(self, action):
        self.t += 1
        terminated = self.episode % 2 == 0 and self.t == 5
        return np.array([self.t, self.episode], np.float32), 1.0, terminated, False, {}


gym.register("SynaptoToy-v0", entry_point=ToyEnv, max_episode_steps=7)


@pytest.mark.parametrize(
    "max_ep_len, ends, logged",
    [
        # terminated at 5, truncated by the time limit at 7, terminated at 5, cut by the epoch end
        (None, [5, 12, 17, 20], [5, 7, 5]),
        (6, [5, 11, 16, 20], [5, 6, 5]),  # --max-ep-len 6 truncates first
    ],
)
def test_rollout_marks_terminations_and_truncations(max_ep_len, ends, logged):
    cfg = PPOConfig(env="SynaptoToy-v0", hid=(4,), steps_per_epoch=20, max_ep_len=max_ep_len, dtype="float64")
    handle, info = open_env(cfg)
    assert handle.limit == (7 if max_ep_len is None else 6)
    trainer = Trainer(cfg, Collectives(None), 0, info)
    timing = dict.fromkeys(("rollout", "env", "act"), 0.0)
    returns, lengths = trainer.rollout(0, timing)
    buf = trainer.buf
    assert buf.path_ends == ends
    assert [b is None for b in buf.boot_obs] == [True, False, True, False]
    # the bootstrap observation is the one after the path's last step
    last = ends[1] - ends[0]
    np.testing.assert_array_equal(buf.boot_obs[1], [last, 1])
    np.testing.assert_array_equal(buf.boot_obs[3], [ends[3] - ends[2], 3])
    assert lengths == logged and returns == [float(x) for x in logged]

    # and the value targets use V(s') exactly there
    value = lambda obs: 1.0 + obs[:, 0]  # noqa: E731
    buf.finish(value, gamma=0.5, lam=1.0)
    assert buf.ret[ends[0] - 1] == 1.0  # terminated: r + 0
    assert buf.ret[ends[1] - 1] == 1.0 + 0.5 * (1.0 + last)  # truncated: r + gamma V(s')


def test_rollout_is_a_function_of_seed_rank_and_epoch():
    cfg = PPOConfig(env="Pendulum-v1", hid=(8,), steps_per_epoch=300, seed=3)
    _, info = open_env(cfg)
    runs = []
    for rank, epoch in ((0, 0), (0, 0), (1, 0), (0, 1)):
        trainer = Trainer(cfg, Collectives(None), rank, info)
        trainer.rollout(epoch, dict.fromkeys(("rollout", "env", "act"), 0.0))
        runs.append((trainer.buf.obs.copy(), trainer.buf.act.copy()))
    assert runs[0][0].tobytes() == runs[1][0].tobytes() and runs[0][1].tobytes() == runs[1][1].tobytes()
    assert runs[0][0].tobytes() != runs[2][0].tobytes()
    assert runs[0][0].tobytes() != runs[3][0].tobytes()
