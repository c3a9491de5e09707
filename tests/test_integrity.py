"""Run files and checkpoints against concurrency, crashes and damage.

- one writer per run file: a second run (or resume) on a file in use is refused, touching nothing;
- a checkpoint belongs to its run: another run's checkpoint, or a damaged one, is refused;
- after ``kill -9`` at any moment the run file opens with a plain ``h5py.File(path, "r")``;
- truncated or damaged files are refused at once by every command that reads them.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest
from conftest import ROOT, _env, assert_same_run, kill_group, run_cli, start_cli, wait_for_line

CARTPOLE = [
    "--env",
    "CartPole-v1",
    "--agent",
    "hebbian-dag",
    "--population",
    "8",
    "--episodes",
    "2",
    "--hidden",
    "4",
    "--test-episodes",
    "4",
]


def evolve_args(seed: int, generations: int = 6) -> list[str]:
    return [*CARTPOLE, "--generations", str(generations), "--seed", str(seed)]


PPO = ["--env", "CartPole-v1", "--hid", "4", "--steps-per-epoch", "200", "--seed", "3"]


def snapshot(folder) -> dict[str, bytes]:
    """Every file under ``folder`` with its bytes."""
    out = {}
    for root, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as fh:
                out[os.path.relpath(path, folder)] = fh.read()
    return out


def assert_one_line_error(proc, needle: str, code: int = 2) -> None:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == code, (proc.returncode, proc.stdout[-2000:], proc.stderr[-4000:])
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], lines


def read_all_completed(path) -> int:
    """Open ``path`` as any user would and read every completed row (checksums verified)."""
    with h5py.File(path, "r") as f:
        done = int(f["completed"][0])
        rows = int(f["stats/best_fitness"].shape[0]) if "stats/best_fitness" in f else None

        def visit(name, obj):
            if isinstance(obj, h5py.Dataset) and obj.shape and obj.shape[0] == rows:
                obj[:done]

        f.visititems(visit)
        return done


# ------------------------------------------------------------------ 1. one writer per file
def test_a_second_run_on_a_file_in_use_is_refused_and_touches_nothing(tmp_path):
    """While a run writes r.h5, `evolve --out r.h5 --force` and `evolve --resume r.h5` stop with
    exit 2 and change nothing; the first run then finishes as if alone."""
    out = tmp_path / "r.h5"
    first = start_cli("evolve", *evolve_args(1, generations=8), "--out", out)
    try:
        wait_for_line(first, "gen    1 ")
        os.killpg(first.pid, signal.SIGSTOP)  # it holds the file now, paused mid-run
        before = snapshot(tmp_path)
        for cmd in (["evolve", *evolve_args(2, generations=8), "--out", out, "--force"], ["evolve", "--resume", out]):
            proc = run_cli(*cmd, timeout=120)
            assert_one_line_error(proc, "in use by another synapto run")
            assert snapshot(tmp_path) == before, cmd
    finally:
        os.killpg(first.pid, signal.SIGCONT)
    _stdout, stderr = first.communicate(timeout=300)
    assert first.returncode == 0, stderr
    reference = tmp_path / "reference.h5"
    assert run_cli("evolve", *evolve_args(1, generations=8), "--out", reference).returncode == 0
    assert_same_run(reference, out)
    assert not (tmp_path / "r.h5.lock").exists()  # released (and removed) when the run ended


def test_two_runs_started_together_on_one_out(tmp_path):
    """Seeds 1 and 2 started at once on one --out: exactly one is refused (exit 2); the file
    is the other's clean run."""
    references = {}
    for seed in (1, 2):
        references[seed] = tmp_path / f"reference_{seed}.h5"
        assert run_cli("evolve", *evolve_args(seed, 4), "--out", references[seed]).returncode == 0
    for trial in range(3):
        out = tmp_path / f"trial{trial}" / "r.h5"
        procs = {seed: start_cli("evolve", *evolve_args(seed, 4), "--out", out) for seed in (1, 2)}
        codes = {}
        for seed, proc in procs.items():
            _stdout, stderr = proc.communicate(timeout=300)
            codes[seed] = (proc.returncode, stderr)
        assert sorted(c for c, _ in codes.values()) == [0, 2], codes
        winner = next(seed for seed, (c, _) in codes.items() if c == 0)
        loser_err = codes[3 - winner][1].strip().splitlines()
        assert len(loser_err) == 1 and ("in use" in loser_err[0] or "exists" in loser_err[0]), loser_err
        assert_same_run(references[winner], out)


def test_a_second_ppo_run_on_a_file_in_use_is_refused(tmp_path):
    out = tmp_path / "p.h5"
    first = start_cli("ppo", *PPO, "--epochs", "6", "--out", out)
    try:
        wait_for_line(first, "epoch    1")
        os.killpg(first.pid, signal.SIGSTOP)
        before = snapshot(tmp_path)
        for cmd in (["ppo", *PPO, "--epochs", "6", "--out", out, "--force"], ["ppo", "--resume", out, "--epochs", "8"]):
            proc = run_cli(*cmd, timeout=120)
            assert_one_line_error(proc, "in use by another synapto run")
            assert snapshot(tmp_path) == before, cmd
    finally:
        os.killpg(first.pid, signal.SIGCONT)
    _stdout, stderr = first.communicate(timeout=300)
    assert first.returncode == 0, stderr
    reference = tmp_path / "reference.h5"
    assert run_cli("ppo", *PPO, "--epochs", "6", "--out", reference).returncode == 0
    assert_same_run(reference, out)


# ------------------------------------------------------------------ 2. a checkpoint belongs to its run
def first_chunk_offset(path, name: str) -> tuple[int, int]:
    """File offset and size of the first stored block of dataset ``name``."""
    with h5py.File(path, "r") as f:
        ds = f[name]
        if ds.chunks:
            info = ds.id.get_chunk_info(0)
            return info.byte_offset, info.size
        return ds.id.get_offset(), ds.id.get_storage_size()


def damage(path, name: str, n: int = 200, skip: int = 8) -> None:
    """Flip every bit of ``n`` bytes of dataset ``name``'s first stored block (from byte ``skip``;
    never its last 4 bytes, where a checksum would be)."""
    offset, size = first_chunk_offset(path, name)
    n = min(n, size - skip - 4)
    assert n > 0
    with open(path, "r+b") as fh:
        fh.seek(offset + skip)
        data = fh.read(n)
        fh.seek(offset + skip)
        fh.write(bytes(b ^ 0xFF for b in data))


def largest_array(ckpt) -> str:
    with h5py.File(ckpt, "r") as f:
        return max((n for n in f if isinstance(f[n], h5py.Dataset)), key=lambda n: f[n].size)


def crashed_run(out, seed: int, fault: str) -> None:
    proc = start_cli("evolve", *evolve_args(seed), "--out", out, extra_env={"SYNAPTO_FAULT": fault})
    wait_for_line(proc, "FAULT-POINT")
    kill_group(proc)
    proc.wait(timeout=30)


def test_another_runs_checkpoint_is_refused(tmp_path):
    """Same env, agent and sizes, another seed: its checkpoint beside our run file is refused by
    --resume and replay, and nothing is changed."""
    ours, theirs = tmp_path / "ours.h5", tmp_path / "theirs.h5"
    crashed_run(ours, 1, "runfile:3")
    crashed_run(theirs, 2, "runfile:2")
    shutil.copy(str(theirs) + ".ckpt", str(ours) + ".ckpt")
    before = snapshot(tmp_path)
    assert_one_line_error(run_cli("evolve", "--resume", ours, timeout=120), "belongs to another run")
    assert_one_line_error(
        run_cli("replay", ours, "--generation", "3", "--individual", "0", timeout=120), "belongs to another run"
    )
    assert snapshot(tmp_path) == before


def test_damaged_checkpoint_is_refused(tmp_path):
    """200 bytes of garbage inside the checkpoint's largest array: --resume refuses in one line
    and leaves both files as they were."""
    out = tmp_path / "r.h5"
    crashed_run(out, 1, "runfile:3")
    ckpt = tmp_path / "r.h5.ckpt"
    damage(ckpt, largest_array(ckpt))
    before = snapshot(tmp_path)
    assert_one_line_error(run_cli("evolve", "--resume", out, timeout=120), "corrupted")
    assert snapshot(tmp_path) == before


def test_the_run_id_is_random_and_survives_resumes(tmp_path):
    """Two runs of one config get different ids (drawn from the OS, not the seeded streams, which
    stay bit-identical); a resume keeps its run's id in the file and the checkpoint."""
    a, b = tmp_path / "a.h5", tmp_path / "b.h5"
    assert run_cli("evolve", *evolve_args(1, 3), "--out", a).returncode == 0
    crashed_run(b, 1, "runfile:1")
    assert run_cli("evolve", "--resume", b, "--generations", "3").returncode == 0
    ids = {}
    for path in (a, b):
        with h5py.File(path, "r") as f, h5py.File(str(path) + ".ckpt", "r") as c:
            ids[path] = f.attrs["run_id"]
            assert len(ids[path]) == 32 and c.attrs["run_id"] == ids[path]
    assert ids[a] != ids[b]
    assert_same_run(a, b)


# ------------------------------------------------------------------ 3. plainly readable after kill -9
@pytest.mark.parametrize("fault", ["rows:1", "runfile:2", "checkpoint:3", "generation:4"])
def test_killed_run_file_opens_with_plain_h5py(tmp_path, fault):
    """kill -9 in the middle of a generation's rows, between rows and counter, in the middle of
    a checkpoint, in the middle of an evaluation: the README's plain reader opens the file and
    reads every completed row; the run then resumes bit-identically."""
    out = tmp_path / "r.h5"
    crashed_run(out, 5, fault)
    assert read_all_completed(out) == int(fault.split(":")[1])
    assert run_cli("evolve", "--resume", out).returncode == 0
    reference = tmp_path / "reference.h5"
    assert run_cli("evolve", *evolve_args(5), "--out", reference).returncode == 0
    assert_same_run(reference, out)


def test_killed_at_random_moments_opens_with_plain_h5py(tmp_path):
    """SIGKILL at spread-out moments of a run (creation, generations, checkpoints, the final test):
    every time, h5py.File(path, "r") opens the file."""
    out = tmp_path / "r.h5"
    rng = np.random.default_rng(0)
    for trial, delay in enumerate(rng.uniform(0.5, 3.0, size=5)):
        proc = start_cli("evolve", *evolve_args(trial, 30), "--out", out, "--force")
        time.sleep(delay)
        kill_group(proc)
        proc.wait(timeout=30)
        if out.exists():
            read_all_completed(out)


# ------------------------------------------------------------------ 4. truncated and damaged files
def evolve_readers(path, tmp):
    return [
        ["evolve", "--resume", path],
        ["replay", path, "--sample", "1"],
        ["plot", path, "--out", tmp / "plot.png"],
        ["render", path, "--out", tmp / "a.gif", "--max-steps", "3"],
        ["draw", path, "--out", tmp / "net.png"],
        ["export", path, "--csv", tmp / "csv"],
    ]


def ppo_readers(path, tmp):
    return [
        ["ppo", "--resume", path, "--epochs", "6"],
        ["ppo-eval", path, "--episodes", "1"],
        ["plot", path, "--out", tmp / "plot.png"],
        ["render", path, "--out", tmp / "a.gif", "--max-steps", "3"],
        ["export", path, "--csv", tmp / "csv"],
    ]


def run_all(cmds, timeout: float = 120) -> list[subprocess.CompletedProcess]:
    """Run every command at once, each in its own process group; one still running at the
    deadline is killed and counts as a failure (returncode None)."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "synapto", *map(str, c)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
            cwd=ROOT,
            start_new_session=True,
        )
        for c in cmds
    ]
    deadline = time.monotonic() + timeout
    results = []
    for cmd, p in zip(cmds, procs):
        try:
            out, err = p.communicate(timeout=max(deadline - time.monotonic(), 1))
            results.append(subprocess.CompletedProcess(cmd, p.returncode, out, err))
        except subprocess.TimeoutExpired:
            kill_group(p)
            out, err = p.communicate()
            results.append(subprocess.CompletedProcess(cmd, None, out, err))
    return results


@pytest.fixture(scope="module")
def good_runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("good")
    evolve, ppo = d / "evolve.h5", d / "ppo.h5"
    procs = run_all([["evolve", *evolve_args(1, 3), "--out", evolve], ["ppo", *PPO, "--epochs", "3", "--out", ppo]])
    assert [p.returncode for p in procs] == [0, 0], [p.stderr for p in procs]
    return evolve, ppo


def damaged_copies(good, folder, kind: str) -> list:
    """Copies of ``good`` cut at several sizes, and one with data damaged in place."""
    data = good.read_bytes()
    out = []
    for cut in (100, 512, 20000, len(data) // 2, len(data) - 1):
        p = folder / f"{kind}_cut{cut}.h5"
        p.write_bytes(data[:cut])
        out.append(p)
    p = folder / f"{kind}_damaged.h5"
    p.write_bytes(data)
    names = (
        ["fitness", "population", "stats/best_fitness", "champion/genome", "returns", "seeds"]
        if kind == "evolve"
        else [
            "stats/AverageEpRet",
            "params/final/pi",
            "checkpoint/slot1/pi",
            "checkpoint/slot0/pi",
            "params/epoch_0/pi",
        ]
    )
    for name in names:
        damage(p, name, n=16, skip=0)
    out.append(p)
    return out


@pytest.mark.long
@pytest.mark.parametrize("kind", ["evolve", "ppo"])
def test_truncated_or_damaged_run_files_are_refused_at_once(good_runs, tmp_path, kind):
    """Every command that reads a run file refuses one cut at 100, 512, 20000 bytes, half its
    size or one byte short, or with damaged data: exit 2, one line, within the deadline (a
    hang is killed and fails), the file untouched and no output written."""
    good = good_runs[0] if kind == "evolve" else good_runs[1]
    files = damaged_copies(good, tmp_path, kind)
    readers = evolve_readers if kind == "evolve" else ppo_readers
    cmds, outs = [], []
    for i, path in enumerate(files):
        out = tmp_path / f"out{i}"
        out.mkdir()
        cmds += readers(path, out)
        outs += [out] * len(readers(path, out))
    before = {p: p.read_bytes() for p in files}
    for proc, out in zip(run_all(cmds, timeout=240), outs):
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), (
            proc.args,
            proc.returncode,
            proc.stderr[-3000:],
        )
        assert not any(out.iterdir()), (proc.args, list(out.iterdir()))
    assert {p: p.read_bytes() for p in files} == before
    assert not list(tmp_path.glob("*.tmp")) and not list(tmp_path.glob("*.lock"))
