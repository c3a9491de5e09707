"""Bad input: one line on stderr, exit code 2, nothing overwritten."""

import h5py
import pytest

from conftest import run_cli

SMALL = ["--env", "CartPole-v1", "--population", "4", "--generations", "1", "--episodes", "1",
         "--test-episodes", "0", "--hidden", "2"]


def assert_usage_error(proc, *needles):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    for n in needles:
        assert n in lines[0], lines[0]


@pytest.mark.parametrize("args, needles", [
    (["--env", "NoSuchEnv-v9"], ["NoSuchEnv-v9"]),
    (["--agent", "nope"], ["nope", "pruned-mlp"]),
    (["--agent", "no_such_pkg.mod:Cls"], ["no_such_pkg.mod"]),
    (["--agent", "synapto.agents.pruned_mlp:Missing"], ["Missing"]),
    (["--population", "1"], ["--population", "1"]),
    (["--hidden", "8", "0"], ["--hidden", "0"]),
    (["--hidden", "-3"], ["--hidden"]),
    (["--episodes", "0"], ["--episodes", "0"]),
    (["--generations", "0"], ["--generations"]),
    (["--population", "abc"], ["--population"]),
    (["--seed", "-1"], ["--seed"]),
    (["--workers", "-2"], ["--workers"]),
])
def test_bad_options(tmp_path, args, needles):
    proc = run_cli("evolve", *SMALL, "--out", tmp_path / "r.h5", *args, timeout=180)
    assert_usage_error(proc, *needles)
    assert not (tmp_path / "r.h5").exists()


def test_config_that_does_not_parse(tmp_path):
    cfg = tmp_path / "bad.toml"
    cfg.write_text("population = = 3\n")
    assert_usage_error(run_cli("evolve", "--config", cfg, timeout=180), "bad.toml", "TOML")


def test_config_with_unknown_key(tmp_path):
    cfg = tmp_path / "bad.toml"
    cfg.write_text("population = 8\npopulaton = 3\n")
    assert_usage_error(run_cli("evolve", "--config", cfg, timeout=180), "populaton")


def test_missing_config(tmp_path):
    assert_usage_error(run_cli("evolve", "--config", tmp_path / "none.toml", timeout=180), "none.toml")


def test_existing_out_without_force_is_left_untouched(tmp_path):
    out = tmp_path / "r.h5"
    out.write_bytes(b"precious")
    assert_usage_error(run_cli("evolve", *SMALL, "--out", out, timeout=180), "--force")
    assert out.read_bytes() == b"precious"
    proc = run_cli("evolve", *SMALL, "--out", out, "--force", timeout=120)
    assert proc.returncode == 0, proc.stderr
    with h5py.File(out, "r") as f:
        assert f["completed"][0] == 1


def test_unwritable_output_directory(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert_usage_error(run_cli("evolve", *SMALL, "--out", blocker / "r.h5", timeout=180), "--out")


def test_replay_bad_inputs(tmp_path):
    assert_usage_error(run_cli("replay", tmp_path / "missing.h5", "--sample", "1", timeout=180), "no such file")
    junk = tmp_path / "junk.h5"
    junk.write_bytes(b"\x00" * 100)
    assert_usage_error(run_cli("replay", junk, "--sample", "1", timeout=180), "not a readable HDF5")
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as f:
        f["x"] = 1
    assert_usage_error(run_cli("replay", other, "--sample", "1", timeout=180), "not a synapto run")
    out = tmp_path / "r.h5"
    assert run_cli("evolve", *SMALL, "--out", out, timeout=120).returncode == 0
    assert_usage_error(run_cli("replay", out, "--generation", "1", "--individual", "0", timeout=180),
                       "--generation 1", "0..0")
    assert_usage_error(run_cli("replay", out, "--generation", "0", "--individual", "4", timeout=180),
                       "--individual 4", "0..3")
    assert_usage_error(run_cli("replay", out, timeout=180), "--sample")
