"""PPO's options beyond Spinning Up (vectorised envs, observation and reward normalisation,
minibatches, a learning-rate schedule, entropy bonus, gradient clipping, orthogonal
initialisation, the final test): bit-identical reruns and resumes after kill -9, the
moments they keep, the test the run file holds, and bad values refused in one line."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from conftest import assert_same_run, kill_group, run_cli, start_cli, wait_for_line

from synapto.cli import main
from synapto.ppo.config import PPOConfig
from synapto.ppo.normalise import PRIOR, Moments, ObsNormaliser, RewardScaler
from synapto.store import PPORun

# Pendulum: a Gaussian policy, a 200-step time limit and epoch-end cuts; 4 envs, split over the ranks
PARITY = [
    "ppo",
    "--env",
    "Pendulum-v1",
    "--hid",
    "8",
    "8",
    "--steps-per-epoch",
    "480",
    "--n-envs",
    "4",
    "--obs-norm",
    "--reward-scale",
    "--minibatch-size",
    "40",
    "--update-epochs",
    "2",
    "--lr-schedule",
    "linear",
    "--ent-coef",
    "0.01",
    "--max-grad-norm",
    "0.5",
    "--ortho-init",
    "--log-std-init",
    "0",
    "--adam-eps",
    "1e-5",
    "--target-kl",
    "0",
    "--test-episodes",
    "3",
    "--seed",
    "5",
    "--save-freq",
    "2",
]


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("update", ["gathered", pytest.param("allreduce", marks=pytest.mark.long)])
def test_rerun_and_resume_after_kill_are_bit_identical(tmp_path, update):
    a, b, killed = tmp_path / "a.h5", tmp_path / "b.h5", tmp_path / "killed.h5"
    parity = [*PARITY, "--minibatch-update", update]
    for out in (a, b):
        r = run_cli(*parity, "--epochs", "5", "--out", out, ranks=2, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
    assert_same_run(a, b)
    with PPORun(a) as run:
        test = run.policy_test()
        assert test is not None and test["returns"].size == 3
        assert not np.array_equal(run.policy_norm(0)[0], run.policy_norm(4)[0])

    proc = start_cli(*parity, "--epochs", "5", "--out", killed, ranks=2, extra_env={"SYNAPTO_FAULT": "epoch:3"})
    wait_for_line(proc, "FAULT-POINT epoch 3", timeout=240)
    kill_group(proc)
    proc.wait(timeout=60)
    with PPORun(killed) as run:
        assert run.completed == 3 and run.policy_test() is None
        assert run.config["minibatch_update"] == update
    r = run_cli("ppo", "--resume", killed, ranks=2, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert_same_run(a, killed)


def test_a_run_file_from_before_gathered_updates_resumes_with_allreduce():
    """Run files written before ``minibatch_update`` existed updated with one Allreduce per
    minibatch; reading their config must give that back, not today's default."""
    cfg = PPOConfig(env="Pendulum-v1", minibatch_size=40)
    assert cfg.minibatch_update == "gathered"
    old = json.loads(cfg.to_json())
    del old["minibatch_update"]
    assert PPOConfig.from_json(json.dumps(old)).minibatch_update == "allreduce"
    assert PPOConfig.from_json(cfg.to_json()) == cfg


@pytest.mark.mpi
@pytest.mark.slow
def test_killed_during_the_final_test_resumes_into_the_test(tmp_path):
    whole, killed = tmp_path / "whole.h5", tmp_path / "killed.h5"
    args = [*PARITY, "--epochs", "2", "--cpu", "1"]
    assert run_cli(*args, "--out", whole, timeout=300).returncode == 0
    proc = start_cli(*args, "--out", killed, extra_env={"SYNAPTO_FAULT": "test:2"})
    wait_for_line(proc, "FAULT-POINT test 2", timeout=240)
    kill_group(proc)
    proc.wait(timeout=60)
    r = run_cli("ppo", "--resume", killed, timeout=300)
    assert r.returncode == 0 and "test of the final policy" in r.stdout, r.stdout + r.stderr
    assert_same_run(whole, killed)
    r = run_cli("ppo", "--resume", killed, timeout=60)  # finished and tested: nothing left
    assert r.returncode == 2 and "completed all 2 epochs" in r.stderr


@pytest.fixture(scope="module")
def cart(tmp_path_factory):
    out = tmp_path_factory.mktemp("cart") / "cart.h5"
    args = [
        "ppo",
        "--env",
        "CartPole-v1",
        "--hid",
        "16",
        "--steps-per-epoch",
        "600",
        "--n-envs",
        "2",
        "--epochs",
        "3",
        "--obs-norm",
        "--minibatch-size",
        "100",
        "--update-epochs",
        "3",
        "--test-episodes",
        "4",
        "--seed",
        "2",
    ]
    r = run_cli(*args, "--out", out, timeout=300)
    assert r.returncode == 0, r.stderr
    return out


def test_the_stored_test_is_ppo_eval_of_the_final_policy(cart):
    """ppo-eval reads the policy and its normalisation back from the run file and gets the
    test returns the run stored (so /obs_norm holds what the policy acted through)."""
    out = cart
    with PPORun(out) as run:
        stored = run.policy_test()["returns"]
        mean, std = run.policy_norm(2)
    assert np.all(std > 0) and np.any(mean != 0)
    r = run_cli("ppo-eval", out, "--episodes", "4", timeout=120)
    assert r.returncode == 0, r.stderr
    assert f"return {stored.mean():.2f} +- {stored.std():.2f}" in r.stdout


def test_render_plays_the_stored_test_episodes(cart, tmp_path):
    if not os.environ.get("SYNAPTO_REQUIRE_EXTRAS"):  # `make test` has the plot extra: its absence fails
        pytest.importorskip("imageio")
    r = run_cli("render", cart, "--episodes", "2", "--out", tmp_path / "cart.gif", timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("run file's test return") == 2 and "DIFFERS" not in r.stdout, r.stdout


def test_linear_schedule_refuses_other_epochs_on_resume(tmp_path):
    out = tmp_path / "lin.h5"
    args = [
        "ppo",
        "--env",
        "CartPole-v1",
        "--hid",
        "4",
        "--steps-per-epoch",
        "100",
        "--epochs",
        "1",
        "--lr-schedule",
        "linear",
        "--out",
        out,
    ]
    assert run_cli(*args, timeout=120).returncode == 0
    r = run_cli("ppo", "--resume", out, "--epochs", "3", timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "linear learning-rate schedule" in r.stderr


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--n-envs", "0"], "--n-envs must be an integer >= 1, got 0"),
        (["--n-envs", "30"], "--steps-per-epoch 20 is below --n-envs 30"),
        (["--minibatch-size", "-1"], "--minibatch-size must be an integer >= 0, got -1"),
        (["--minibatch-size", "21"], "--minibatch-size 21 is above --steps-per-epoch 20"),
        (["--update-epochs", "0"], "--update-epochs must be an integer >= 1, got 0"),
        (["--lr-schedule", "cosine"], "--lr-schedule must be constant or linear, got 'cosine'"),
        (["--ent-coef", "-0.1"], "--ent-coef must be a number in [0.0, inf]"),
        (["--max-grad-norm", "nan"], "--max-grad-norm must be a number"),
        (["--adam-eps", "0"], "--adam-eps must be a number in (0.0, 1.0]"),
        (["--test-episodes", "-2"], "--test-episodes must be an integer >= 0, got -2"),
        (["--minibatch-update", "sideways"], "--minibatch-update must be gathered or allreduce, got 'sideways'"),
    ],
)
def test_bad_values_are_one_line_and_exit_2(tmp_path, capsys, args, needle):
    out = tmp_path / "bad.h5"
    with pytest.raises(SystemExit) as exc:
        main(["ppo", "--env", "CartPole-v1", "--steps-per-epoch", "20", *args, "--out", str(out)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and needle in err, err
    assert not out.exists() and not list(tmp_path.iterdir())


# ------------------------------------------------------------------------ the moments
class Sum:
    """Collectives over two simulated ranks: ``sum_`` adds the other rank's array."""

    def __init__(self):
        self.other = None

    def sum_(self, array):
        return array + self.other


def test_moments_merged_over_ranks_are_the_pooled_moments():
    rng = np.random.default_rng(0)
    x0, x1, x2 = rng.normal(3, 2, (50, 4)), rng.normal(-1, 0.5, (30, 4)), rng.normal(0, 1, (20, 4))
    a, b = Moments(4), Moments(4)
    a.add(x0)
    b.add(x1)
    coll = Sum()
    coll.other = b.local.copy()
    a_local = a.local.copy()
    a.merge(coll)
    coll.other = a_local
    b.merge(coll)
    assert np.array_equal(a.state(), b.state())
    a.add(x2)
    pooled = np.concatenate([x0, x1, x2])
    n = pooled.shape[0] + PRIOR
    mean = pooled.sum(axis=0) / n
    var = (np.square(pooled).sum(axis=0) + PRIOR) / n - mean**2
    got_mean, got_std = a.mean_std()
    np.testing.assert_allclose(got_mean, mean, rtol=1e-12)
    np.testing.assert_allclose(got_std, np.sqrt(var + 1e-8), rtol=1e-12)
    np.testing.assert_allclose(got_mean, pooled.mean(axis=0), rtol=1e-5)  # the prior weighs 1e-4 of a step


def test_observations_join_the_moments_before_they_are_normalised():
    def expected(seen, x):
        n = len(seen) + PRIOR
        mean = seen.sum(axis=0) / n
        std = np.sqrt((np.square(seen).sum(axis=0) + PRIOR) / n - mean**2 + 1e-8)
        return np.clip((x - mean) / std, -10, 10)

    norm = ObsNormaliser(2)
    first = np.array([[1.0, 5.0]])
    np.testing.assert_allclose(norm(first, np.empty((1, 2))), expected(first, first), rtol=1e-12)
    batch = np.array([[0.0, 100.0], [2.0, -100.0]])
    out = norm(batch, np.empty((2, 2)))
    np.testing.assert_allclose(out, expected(np.concatenate([first, batch]), batch), rtol=1e-12)
    assert np.abs(out).max() <= 10


def test_rewards_are_divided_by_the_std_of_the_discounted_return():
    scaler = RewardScaler(2, gamma=0.5)
    r1 = np.array([1.0, 4.0])
    out1 = scaler(r1, np.array([False, True]))  # env 1's episode ends here: its return restarts
    ret1 = r1
    r2 = np.array([2.0, 3.0])
    out2 = scaler(r2, np.array([False, False]))
    ret2 = np.array([0.5 * 1.0 + 2.0, 3.0])
    seen = np.concatenate([ret1, ret2])
    n = 4 + PRIOR
    var = (np.square(seen).sum() + PRIOR) / n - (seen.sum() / n) ** 2
    np.testing.assert_allclose(out2, np.clip(r2 / np.sqrt(var + 1e-8), -10, 10), rtol=1e-12)
    n1 = 2 + PRIOR
    var1 = (np.square(ret1).sum() + PRIOR) / n1 - (ret1.sum() / n1) ** 2
    np.testing.assert_allclose(out1, np.clip(r1 / np.sqrt(var1 + 1e-8), -10, 10), rtol=1e-12)
