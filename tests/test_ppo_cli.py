"""Bad input to ``ppo`` / ``ppo-eval``: one line on stderr, exit code 2, nothing written."""

import h5py
import numpy as np
import pytest
from conftest import run_cli

from synapto.cli import main
from synapto.common.errors import UsageError
from synapto.ppo.config import PPOConfig, parse_hid

SMALL = [
    "--env",
    "Pendulum-v1",
    "--hid",
    "4",
    "--epochs",
    "1",
    "--steps-per-epoch",
    "50",
    "--train-pi-iters",
    "1",
    "--train-v-iters",
    "1",
]


def call(capsys, *args):
    """``python -m synapto <args>`` in this process: (exit code, stderr)."""
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    return exc.value.code, capsys.readouterr().err


def assert_one_line_error(code, err, *needles):
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.parametrize(
    "args, needles",
    [
        (["--hid", "abc"], ["--hid", "abc"]),
        (["--hid", "[32,x]"], ["--hid", "[32,x]"]),
        (["--hid", "32", "0"], ["--hid", "positive"]),
        (["--hid", "-3"], ["--hid"]),
        (["--gamma", "1.5"], ["--gamma", "1.5"]),
        (["--lam", "-0.1"], ["--lam"]),
        (["--epochs", "0"], ["--epochs", "0"]),
        (["--steps-per-epoch", "0"], ["--steps-per-epoch"]),
        (["--steps-per-epoch", "abc"], ["--steps-per-epoch", "integer"]),
        (["--clip-ratio", "0"], ["--clip-ratio"]),
        (["--target-kl", "-1"], ["--target-kl"]),
        (["--pi-lr", "0"], ["--pi-lr"]),
        (["--max-ep-len", "0"], ["--max-ep-len"]),
        (["--train-pi-iters", "0"], ["--train-pi-iters"]),
        (["--save-freq", "0"], ["--save-freq"]),
        (["--env", "NoSuchEnv-v0"], ["NoSuchEnv-v0"]),
        (["--dtype", "float16"], ["--dtype", "float16"]),
        (["--seed", "-1"], ["--seed"]),
        (["--seed", "4", "4"], ["--seed", "repeated"]),
        (["--cpu", "0"], ["--cpu"]),
    ],
)
def test_bad_options(tmp_path, capsys, args, needles):
    out = tmp_path / "r.h5"
    code, err = call(capsys, "ppo", *SMALL, "--out", out, *args)
    assert_one_line_error(code, err, *needles)
    assert not out.exists() and not (tmp_path / "r").exists()


def test_bad_thread_setting_stops_before_anything_is_written(tmp_path, monkeypatch):
    # --cpu 2: the check must come before the relaunch (ranks of a 2-process run never
    # read the setting), so it runs in a subprocess
    monkeypatch.setenv("SYNAPTO_PPO_THREADS", "4")
    out = tmp_path / "r.h5"
    r = run_cli("ppo", *SMALL, "--out", out, "--cpu", "2", timeout=120)
    assert_one_line_error(r.returncode, r.stderr, "SYNAPTO_PPO_THREADS")
    assert not out.exists() and not (tmp_path / "r").exists()


def test_out_must_be_h5(tmp_path, capsys):
    assert_one_line_error(*call(capsys, "ppo", *SMALL, "--out", tmp_path / "r.txt"), ".h5")


def test_hid_accepts_spinning_up_spellings():
    assert parse_hid(["[32,32]"]) == (32, 32)
    assert parse_hid(["(64, 64)"]) == (64, 64)
    assert parse_hid(["32", "16"]) == (32, 16)
    assert parse_hid(["[]"]) == ()
    with pytest.raises(UsageError):
        parse_hid(["32.5"])


def test_steps_per_epoch_smaller_than_processes_fails_before_launching(tmp_path):
    out = tmp_path / "r.h5"
    proc = run_cli("ppo", *SMALL, "--steps-per-epoch", "1", "--cpu", "2", "--out", out, timeout=60)
    assert_one_line_error(proc.returncode, proc.stderr, "--steps-per-epoch 1", "2")
    assert not out.exists()


@pytest.mark.mpi
def test_steps_per_epoch_smaller_than_ranks_under_mpiexec(tmp_path):
    out = tmp_path / "r.h5"
    proc = run_cli("ppo", *SMALL, "--steps-per-epoch", "2", "--out", out, ranks=3, timeout=60)
    assert_one_line_error(proc.returncode, proc.stderr, "--steps-per-epoch 2", "3")
    assert not out.exists()


@pytest.mark.mpi
def test_cpu_must_match_an_existing_mpi_world(tmp_path):
    proc = run_cli("ppo", *SMALL, "--cpu", "3", "--out", tmp_path / "r.h5", ranks=2, timeout=60)
    assert_one_line_error(proc.returncode, proc.stderr, "--cpu 3", "2")


def test_existing_outputs_are_left_untouched(tmp_path, capsys):
    out = tmp_path / "r.h5"
    out.write_bytes(b"precious")
    assert_one_line_error(*call(capsys, "ppo", *SMALL, "--out", out), "--force")
    assert out.read_bytes() == b"precious"
    other = tmp_path / "s.h5"
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "progress.txt").write_text("precious")
    assert_one_line_error(*call(capsys, "ppo", *SMALL, "--out", other), "progress.txt", "--force")
    assert (tmp_path / "s" / "progress.txt").read_text() == "precious" and not other.exists()


def test_bad_config_files(tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text("gamma = 0.9\ngama = 0.5\n")
    assert_one_line_error(*call(capsys, "ppo", "--config", cfg), "gama")
    cfg.write_text("gamma = = 0.9\n")
    assert_one_line_error(*call(capsys, "ppo", "--config", cfg), "TOML")
    cfg.write_text("hid = [32, 'x']\n")
    assert_one_line_error(*call(capsys, "ppo", "--config", cfg), "hid")
    assert_one_line_error(*call(capsys, "ppo", "--config", tmp_path / "none.toml"), "none.toml")


def test_config_file_is_read_and_overridden(tmp_path):
    from synapto.ppo.config import build_config, load_ppo_toml

    cfg = tmp_path / "c.toml"
    cfg.write_text('env = "CartPole-v1"\nhid = [16, 16]\nsteps-per-epoch = 100\nseed = [1, 2]\ncpu = 2\n')
    values = load_ppo_toml(cfg)
    assert values["hid"] == (16, 16) and values["seed"] == [1, 2] and values["cpu"] == 2
    values.pop("seed"), values.pop("cpu")
    assert build_config({**values, "gamma": 0.5}) == PPOConfig(
        env="CartPole-v1", hid=(16, 16), steps_per_epoch=100, gamma=0.5
    )


def test_experiment_config_parses():
    from pathlib import Path

    from synapto.ppo.config import load_ppo_toml

    values = load_ppo_toml(Path(__file__).resolve().parents[1] / "experiments" / "ppo_bipedal_origin.toml")
    assert values["env"] == "BipedalWalker-v3" and values["hid"] == (32, 32)


# --------------------------------------------------------------------------- run files
def make_files(tmp_path):
    from synapto.store.files import new_file

    text = tmp_path / "text.h5"
    text.write_text("not hdf5")
    plain = tmp_path / "plain.h5"
    with h5py.File(plain, "w") as f:
        f["x"] = np.zeros(2)
    evolve = tmp_path / "evolve.h5"
    new_file(evolve, "evolve", "{}").close()
    future = tmp_path / "future.h5"
    new_file(future, "ppo", PPOConfig().to_json()).close()
    with h5py.File(future, "r+") as f:
        f.attrs["format_version"] = 99
    return {"missing": tmp_path / "none.h5", "text": text, "plain": plain, "evolve": evolve, "future": future}


@pytest.mark.parametrize(
    "which, needle",
    [
        ("missing", "no such file"),
        ("text", "HDF5"),
        ("plain", "not a synapto run"),
        ("evolve", "'evolve' run"),
        ("future", "version 99"),
    ],
)
def test_bad_run_files(tmp_path, capsys, which, needle):
    path = make_files(tmp_path)[which]
    before = path.read_bytes() if path.exists() else None
    assert_one_line_error(*call(capsys, "ppo", "--resume", path, "--epochs", "3"), needle)
    assert_one_line_error(*call(capsys, "ppo-eval", path, "--episodes", "2"), needle)
    assert (path.read_bytes() if path.exists() else None) == before


def test_resume_refuses_other_options_and_finished_runs(tmp_path, capsys):
    run = tmp_path / "r.h5"
    code, err = call(capsys, "ppo", *SMALL, "--out", run)
    assert code == 0, err
    before = run.read_bytes()
    assert_one_line_error(*call(capsys, "ppo", "--resume", run, "--gamma", "0.5", "--epochs", "3"), "--gamma")
    assert_one_line_error(*call(capsys, "ppo", "--resume", run), "completed all 1 epochs", "--epochs")
    assert_one_line_error(*call(capsys, "ppo-eval", run, "--params", "7"), "epoch 7")
    assert_one_line_error(*call(capsys, "ppo-eval", run, "--episodes", "0"), "--episodes")
    assert run.read_bytes() == before
