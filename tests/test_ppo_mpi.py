"""PPO under real MPI: averaged gradients, bit-identical reruns, resume, the output files."""

import json
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
from conftest import MPIEXEC, _env, assert_same_run, run_cli

# Pendulum: Gaussian policy, a 200-step time limit (truncation) and epoch-end cuts.
TINY = [
    "--env",
    "Pendulum-v1",
    "--hid",
    "8",
    "8",
    "--steps-per-epoch",
    "500",
    "--train-pi-iters",
    "5",
    "--train-v-iters",
    "5",
    "--seed",
    "3",
    "--save-freq",
    "2",
]


def _pooled_gradients(out: str) -> None:
    """Run under mpiexec: each rank takes its share of one batch; rank 0 also does the pooled batch."""
    from synapto.parallel.collectives import Collectives, average_gradient
    from synapto.parallel.launch import world
    from synapto.ppo.policy import Policy, ValueFunction

    comm, rank, size = world()
    coll = Collectives(comm)
    rng = np.random.default_rng(0)  # the same data on every rank
    n, obs_dim, act_dim, hid = 12 * size, 5, 3, (7, 6)
    results = {}
    for discrete in (False, True):
        params = Policy.init_params(obs_dim, act_dim, hid, discrete, rng, np.float64)
        pi = Policy(obs_dim, act_dim, hid, discrete, params.copy())
        obs = rng.standard_normal((n, obs_dim))
        act = rng.integers(0, act_dim, n) if discrete else rng.standard_normal((n, act_dim))
        adv = rng.standard_normal(n)
        old = Policy(obs_dim, act_dim, hid, discrete, params + 0.1 * rng.standard_normal(params.size))
        logp_old = old.logp(obs, act)
        mine = slice(rank * n // size, (rank + 1) * n // size)
        _, kl, _, _ = pi.surrogate(obs[mine], act[mine], adv[mine], logp_old[mine], 0.2)
        kl = average_gradient(coll, pi.grad, kl)
        results[f"pi{int(discrete)}_ranks"] = pi.grad.copy()
        results[f"kl{int(discrete)}_ranks"] = np.array([kl])
        _, kl_all, _, _ = pi.surrogate(obs, act, adv, logp_old, 0.2)
        results[f"pi{int(discrete)}_pooled"] = pi.grad.copy()
        results[f"kl{int(discrete)}_pooled"] = np.array([kl_all])
    vf = ValueFunction(obs_dim, hid, ValueFunction.init_params(obs_dim, hid, rng, np.float64))
    obs, ret = rng.standard_normal((n, obs_dim)), rng.standard_normal(n)
    mine = slice(rank * n // size, (rank + 1) * n // size)
    vf.loss(obs[mine], ret[mine])
    average_gradient(coll, vf.grad)
    results["v_ranks"] = vf.grad.copy()
    vf.loss(obs, ret)
    results["v_pooled"] = vf.grad.copy()
    everyone = comm.gather(results["pi0_ranks"], root=0)
    if rank == 0:
        results["same_on_all_ranks"] = np.array([all(g.tobytes() == everyone[0].tobytes() for g in everyone)])
        np.savez(out, **results)


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [2, 3])
def test_rank_averaged_gradient_is_the_pooled_batch_gradient(tmp_path, ranks):
    import subprocess

    out = tmp_path / "grads.npz"
    cmd = [MPIEXEC, "-n", str(ranks), sys.executable, __file__, "pooled", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=_env())
    assert proc.returncode == 0, proc.stderr
    r = np.load(out)
    assert r["same_on_all_ranks"][0]
    for key in ("pi0", "pi1", "v", "kl0", "kl1"):
        np.testing.assert_allclose(r[f"{key}_ranks"], r[f"{key}_pooled"], rtol=1e-12, atol=1e-15)
        assert np.abs(r[f"{key}_pooled"]).max() > 0


def _gathered_update(out: str) -> None:
    """Run under mpiexec: each rank fills its buffer with its own rows and runs one gathered
    minibatch update; rank 0 then runs the update of one process on all the rows."""
    from synapto.envs import SpaceInfo
    from synapto.parallel.collectives import Collectives
    from synapto.parallel.launch import world
    from synapto.ppo.config import PPOConfig
    from synapto.ppo.train import Trainer

    comm, rank, size = world()
    info = SpaceInfo(obs_dim=5, act_dim=2, discrete=False, low=None, high=None, max_episode_steps=None)
    cfg = PPOConfig(
        env="Pendulum-v1", hid=(7,), steps_per_epoch=24 * size, n_envs=size, minibatch_size=10, update_epochs=3,
        max_grad_norm=0.5, ent_coef=0.01, target_kl=0.0, seed=4, dtype="float64",
    )  # fmt: skip

    def rows_of(r: int, n: int):
        rng = np.random.default_rng(100 + r)
        return rng.standard_normal((n, 5)), rng.standard_normal((n, 2)), rng.standard_normal(n), rng.standard_normal(n)

    def fill(trainer, parts):
        for name, value in zip(("obs", "act", "adv", "val"), (np.concatenate(p) for p in zip(*parts))):
            getattr(trainer.buf, name)[...] = value

    ranks = Trainer(cfg, Collectives(comm), rank, info)
    assert ranks.gathered
    fill(ranks, [rows_of(rank, ranks.buf.n)])
    figures = ranks.update(dict.fromkeys(("update", "update_pi"), 0.0), epoch=2)
    params = comm.gather(np.concatenate([ranks.pi.params, ranks.vf.params]), root=0)
    if rank == 0:
        one = Trainer(cfg, Collectives(None), 0, info)  # the same initial parameters
        fill(one, [rows_of(r, ranks.buf.n) for r in range(size)])
        alone = one.update(dict.fromkeys(("update", "update_pi"), 0.0), epoch=2)
        np.savez(
            out,
            ranks=params[0],
            others_equal=np.array([all(p.tobytes() == params[0].tobytes() for p in params)]),
            one=np.concatenate([one.pi.params, one.vf.params]),
            start=np.concatenate([Trainer(cfg, Collectives(None), 0, info).pi.params]),
            figures=np.array([figures[k] for k in sorted(alone)]),
            figures_one=np.array([alone[k] for k in sorted(alone)]),
        )


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [2, 3])
def test_gathered_update_is_one_process_update_of_all_rows(tmp_path, ranks):
    """The default minibatch update with several ranks: rank 0 updates on every rank's rows,
    in rank order and shuffled as one process would, and every rank ends with its parameters."""
    import subprocess

    out = tmp_path / "gathered.npz"
    cmd = [MPIEXEC, "-n", str(ranks), sys.executable, __file__, "gathered", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=_env())
    assert proc.returncode == 0, proc.stderr
    r = np.load(out)
    assert r["others_equal"][0]
    np.testing.assert_array_equal(r["ranks"], r["one"])
    assert not np.array_equal(r["ranks"][: r["start"].size], r["start"])  # the update moved them
    np.testing.assert_array_equal(r["figures"], r["figures_one"])


def ppo(tmp_path, name, *extra, ranks=2, timeout=180):
    out = tmp_path / f"{name}.h5"
    proc = run_cli("ppo", *TINY, "--out", out, *extra, ranks=ranks, timeout=timeout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def progress_without_time(run: Path):
    lines = (run.with_suffix("") / "progress.txt").read_text().splitlines()
    return [line.rsplit("\t", 1)[0] for line in lines]


@pytest.mark.mpi
def test_same_command_same_ranks_is_bit_identical(tmp_path):
    a = ppo(tmp_path, "a", "--epochs", "3")
    b = ppo(tmp_path, "b", "--epochs", "3")
    assert_same_run(a, b)
    assert progress_without_time(a) == progress_without_time(b)
    with h5py.File(a, "r") as f:
        assert int(f["completed"][0]) == 3
        assert f.attrs["kind"] == "ppo" and f.attrs["format"] == "synapto-run" and f.attrs["ranks"] == 2
        assert json.loads(f.attrs["config"])["steps_per_epoch"] == 500
        assert {"numpy", "gymnasium", "h5py", "python"} <= set(json.loads(f.attrs["versions"]))
        assert sorted(f["params"]) == ["epoch_0", "epoch_2", "final"]
        np.testing.assert_array_equal(f["params/final/pi"][()], f["checkpoint/slot1/pi"][()])
        assert np.isfinite(f["params/epoch_2/pi"][()]).all()
        assert f["stats/TotalEnvInteracts"][()].tolist() == [500, 1000, 1500]
        assert np.all(f["stats/StopIter"][()] <= 4)
        # the episodes were truncated at Pendulum's 200-step limit and logged
        assert f["stats/EpLen"][()].tolist() == [200.0] * 3


@pytest.mark.mpi
def test_three_ranks_rerun_is_bit_identical(tmp_path):
    """Beyond 2 ranks: 3 ranks, each with its share of an epoch's steps (500 // 3), rerun
    gives the same run file.  (The run depends on the rank count by design: each rank
    runs its own episodes; a resume must keep the count.)"""
    a = ppo(tmp_path, "a", "--epochs", "2", ranks=3)
    b = ppo(tmp_path, "b", "--epochs", "2", ranks=3)
    assert_same_run(a, b)
    assert progress_without_time(a) == progress_without_time(b)
    with h5py.File(a, "r") as f:
        assert f.attrs["ranks"] == 3 and f["stats/TotalEnvInteracts"][()].tolist() == [498, 996]


def test_the_configs_envs_split_over_the_ranks():
    """n_envs is the run's number of envs: each rank steps its share, and env g starts the
    same episodes whichever rank steps it (one rank's seeds are those of before the split)."""
    from types import SimpleNamespace

    from synapto.common.errors import UsageError
    from synapto.common.seeding import Stream, int_seed
    from synapto.ppo.rollout import episode_seed
    from synapto.ppo.train import local_envs

    assert [local_envs(16, r) for r in (1, 2, 4, 16)] == [16, 8, 4, 1]
    assert local_envs(1, 3) == 1  # Spinning Up: one env per rank, the steps split instead
    with pytest.raises(UsageError, match="--n-envs 16 does not split evenly over 3 MPI ranks"):
        local_envs(16, 3)
    cfg = SimpleNamespace(seed=7, n_envs=4)
    one_rank = [episode_seed(cfg, 4, 0, 2, g, 5) for g in range(4)]
    two_ranks = [episode_seed(cfg, 2, r, 2, j, 5) for r in range(2) for j in range(2)]
    assert one_rank == two_ranks == [int_seed(7, Stream.PPO, 4, 0, 2, g, 5) for g in range(4)]
    assert len(set(one_rank)) == 4
    single = SimpleNamespace(seed=7, n_envs=1)
    assert episode_seed(single, 1, 1, 2, 0, 5) == int_seed(7, Stream.PPO, 1, 1, 2, 5)


@pytest.mark.mpi
def test_envs_that_do_not_split_over_the_ranks_are_refused(tmp_path):
    out = tmp_path / "r.h5"
    proc = run_cli("ppo", *TINY, "--n-envs", "3", "--epochs", "1", "--out", out, ranks=2, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "--n-envs 3 does not split evenly over 2 MPI ranks" in lines[0], proc.stderr
    assert not out.exists()


@pytest.fixture(scope="module")
def one_rank_run(tmp_path_factory):
    """A 2-epoch single-process run shared by the output-file tests."""
    return ppo(tmp_path_factory.mktemp("one"), "p", "--epochs", "2", ranks=None)


def test_progress_txt_is_spinning_up_compatible(one_rank_run):
    run = one_rank_run
    folder = run.with_suffix("")
    header, *rows = (folder / "progress.txt").read_text().splitlines()
    assert header.split("\t") == [
        "Epoch",
        "AverageEpRet",
        "StdEpRet",
        "MaxEpRet",
        "MinEpRet",
        "EpLen",
        "AverageVVals",
        "StdVVals",
        "MaxVVals",
        "MinVVals",
        "TotalEnvInteracts",
        "LossPi",
        "LossV",
        "DeltaLossPi",
        "DeltaLossV",
        "Entropy",
        "KL",
        "ClipFrac",
        "StopIter",
        "Time",
    ]
    assert len(rows) == 2
    values = [[float(x) for x in row.split("\t")] for row in rows]
    assert [v[0] for v in values] == [0, 1] and [v[10] for v in values] == [500, 1000]
    with h5py.File(run, "r") as f:  # the same numbers as the run file
        assert values[1][1] == f["stats/AverageEpRet"][1]
        assert values[1][12] == f["stats/LossV"][1]
    config = json.loads((folder / "config.json").read_text())
    assert config["exp_name"] == "ppo_Pendulum-v1" and config["ac_kwargs"]["hidden_sizes"] == [8, 8]
    assert config["steps_per_epoch"] == 500 and config["seed"] == 3


def test_progress_txt_reads_as_a_named_table(one_rank_run):
    # what pandas.read_table and Spinning Up's plotter do: a header row, then tab-separated numbers
    table = np.genfromtxt(one_rank_run.with_suffix("") / "progress.txt", delimiter="\t", names=True)
    assert list(table["Epoch"]) == [0, 1] and np.isfinite(table["AverageEpRet"]).all()


@pytest.mark.mpi
def test_resume_continues_bit_identically(tmp_path):
    whole = ppo(tmp_path, "whole", "--epochs", "4")
    part = ppo(tmp_path, "part", "--epochs", "3")
    # simulate a run killed while writing epoch 2: rows past /completed and a half-written slot
    with h5py.File(part, "r+") as f:
        f["completed"][0] = 2
        for name in f["stats"]:
            f[f"stats/{name}"][2] = 12345
        f["checkpoint/slot1/completed"][0] = -1
        f["checkpoint/slot1/pi"][:] = 7.0
        assert np.isfinite(f["params/final/pi"][()]).all()  # final of the 3-epoch run: dropped on resume
    proc = run_cli("ppo", "--resume", part, "--epochs", "4", ranks=2, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert_same_run(whole, part)
    assert progress_without_time(whole) == progress_without_time(part)

    # --cpu relaunches with the run's own number of processes; a different count is refused
    proc = run_cli("ppo", "--resume", part, "--epochs", "5", "--cpu", "1", timeout=60)
    assert proc.returncode == 2 and "--cpu 2" in proc.stderr


def test_ppo_eval_is_deterministic(one_rank_run):
    run = one_rank_run
    first = run_cli("ppo-eval", run, "--episodes", "3", timeout=60)
    again = run_cli("ppo-eval", run, "--episodes", "3", timeout=60)
    assert first.returncode == 0, first.stderr
    assert first.stdout == again.stdout
    assert "3 episodes" in first.stdout and "final" in first.stdout and "return" in first.stdout
    epoch0 = run_cli("ppo-eval", run, "--episodes", "3", "--params", "0", timeout=60)
    assert epoch0.returncode == 0 and "epoch 0" in epoch0.stdout


if __name__ == "__main__":
    if sys.argv[1] == "pooled":
        _pooled_gradients(sys.argv[2])
    elif sys.argv[1] == "gathered":
        _gathered_update(sys.argv[2])
