"""Outputs that cannot be written are one line and exit code 2 -- found before the work, not
as a traceback after it: bench --out-dir naming a file, pictures and CSVs into a read-only
file system, --resume of a run on a read-only file system or of a read-only run file."""

from __future__ import annotations

import os
import stat

import pytest
from conftest import run_cli
from private_fs import on_tmpfs

TINY = [
    "--env",
    "CartPole-v1",
    "--agent",
    "hebbian-dag",
    "--population",
    "6",
    "--generations",
    "2",
    "--episodes",
    "1",
    "--hidden",
    "3",
    "--test-episodes",
    "2",
    "--seed",
    "1",
]
PPO = ["--env", "CartPole-v1", "--hid", "4", "--steps-per-epoch", "200", "--epochs", "2"]


def one_line(proc, needle: str) -> None:
    lines = proc["stderr"].strip().splitlines() if isinstance(proc, dict) else proc.stderr.strip().splitlines()
    code = proc["returncode"] if isinstance(proc, dict) else proc.returncode
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0].lower(), (
        code,
        lines,
    )


@pytest.mark.parametrize("bench", ["evolve", "ppo", "envs", "nn"])
def test_bench_out_dir_that_is_a_file(tmp_path, bench):
    """Refused before measuring (envs and nn measure for minutes; evolve and ppo run for long)."""
    target = tmp_path / "results"
    target.write_text("not a folder")
    one_line(run_cli("bench", bench, "--out-dir", target, timeout=60), "is not a folder")
    one_line(run_cli("bench", bench, "--out-dir", target / "sub", timeout=60), "is a file")
    assert target.read_text() == "not a folder"


def test_writing_on_a_read_only_file_system(tmp_path):
    """Runs made on a tmpfs that is then remounted read-only: plot, render, draw and export into
    it, and --resume of its runs, stop with one line; nothing changes."""
    mnt = "{mnt}"
    steps = [
        ["run", ["evolve", *TINY, "--out", f"{mnt}/r.h5"], 120],
        ["run", ["ppo", *PPO, "--out", f"{mnt}/p.h5"], 120],
        ["remount", "ro"],
        ["snapshot", "before"],
        ["run", ["plot", f"{mnt}/r.h5", "--out", f"{mnt}/curves.png"], 120],
        ["run", ["render", f"{mnt}/r.h5", "--out", f"{mnt}/a.gif", "--max-steps", "3"], 120],
        ["run", ["draw", f"{mnt}/r.h5", "--out", f"{mnt}/net.png"], 120],
        ["run", ["export", f"{mnt}/r.h5", "--csv", f"{mnt}/csv"], 120],
        ["run", ["plot", f"{mnt}/r.h5", "--out", f"{mnt}/new/curves.png"], 120],
        ["run", ["evolve", "--resume", f"{mnt}/r.h5", "--generations", "3"], 120],
        ["run", ["ppo", "--resume", f"{mnt}/p.h5", "--epochs", "3"], 120],
        ["snapshot", "after"],
    ]
    _, results = on_tmpfs(tmp_path, 8 << 20, steps)
    assert results[0]["returncode"] == 0 and results[1]["returncode"] == 0, results[0]["stderr"] + results[1]["stderr"]
    for result in results[4:11]:
        one_line(result, "read-only file system" if "--resume" not in result["step"][1] else "read-only")
    assert results[3]["files"] == results[11]["files"]


def test_resume_of_a_read_only_run_file(tmp_path):
    out = tmp_path / "r.h5"
    assert run_cli("evolve", *TINY, "--out", out).returncode == 0
    os.chmod(out, stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    before = out.read_bytes(), (tmp_path / "r.h5.ckpt").read_bytes()
    one_line(run_cli("evolve", "--resume", out, "--generations", "3", timeout=120), "is read-only")
    assert (out.read_bytes(), (tmp_path / "r.h5.ckpt").read_bytes()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.h5", "r.h5.ckpt"]
