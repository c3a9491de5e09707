"""Tracking rows across crashes: a resumed run writes the live-log and TensorBoard rows that
a kill -9 (between a generation's checkpoint and its tracking rows) or a failed write left
out, from the run file; a row cut short by a failed write is dropped, never glued to the
next; a full TensorBoard disk is one line and the resume line, nothing more."""

from __future__ import annotations

import csv
import errno
import json

import h5py
import pytest
from conftest import finish, kill_group, start_cli, wait_for_line
from private_fs import on_tmpfs

from synapto.cli import main

RUN = [
    "--env",
    "CartPole-v1",
    "--agent",
    "pruned-mlp",
    "--hidden",
    "2",
    "--population",
    "4",
    "--strategy",
    "openai-es",
    "--episodes",
    "1",
    "--validate-episodes",
    "0",
    "--validate-top",
    "0",
    "--select-episodes",
    "0",
    "--max-env-steps",
    "0",
    "--test-episodes",
    "0",
    "--seed",
    "3",
]


def call(capsys, *args):
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def live_rows(path):
    if path.suffix == ".csv":
        with open(path, newline="") as fh:
            return list(csv.DictReader(fh))
    return [json.loads(line) for line in path.read_text().splitlines()]


def tensorboard_generations(folder) -> list[int]:
    """Every generation the folder's event files hold (the ``run/generation`` scalar; the
    steps are env steps), as TensorBoard reads them."""
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder))
    acc.Reload()
    return sorted(int(e.value) for e in acc.Scalars("run/generation"))


def best_fitness(out) -> list[float]:
    with h5py.File(out, "r") as f:
        return [float(x) for x in f["stats/best_fitness"][: int(f["completed"][0])]]


@pytest.mark.long  # kill -9 and resume, twice: make test-long
@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_a_kill_before_the_tracking_rows_loses_no_row(tmp_path, suffix):
    """kill -9 after generation 3's checkpoint, before its tracking rows: the resumed run
    writes generation 3 from the run file, then goes on; every generation once."""
    pytest.importorskip("tensorboardX")
    out, log, tb = tmp_path / "r.h5", tmp_path / f"live{suffix}", tmp_path / "tb"
    args = ["evolve", *RUN, "--generations", "6", "--out", out, "--live-log", log, "--tensorboard", tb]
    proc = start_cli(*args, extra_env={"SYNAPTO_FAULT": "tracking:3"})
    wait_for_line(proc, "FAULT-POINT tracking 3", timeout=120)
    kill_group(proc)
    proc.wait(timeout=30)
    assert [int(r["generation"]) for r in live_rows(log)] == [0, 1, 2]
    proc = start_cli("evolve", "--resume", out, "--live-log", log, "--tensorboard", tb)
    _, err = finish(proc, timeout=120)
    assert proc.returncode == 0, err
    rows = live_rows(log)
    assert [int(r["generation"]) for r in rows] == [0, 1, 2, 3, 4, 5]
    assert [float(r["best_fitness"]) for r in rows] == best_fitness(out)
    assert tensorboard_generations(tb) == [0, 1, 2, 3, 4, 5]


def test_a_ppo_kill_before_the_tracking_rows_loses_no_row(tmp_path):
    out, log = tmp_path / "p.h5", tmp_path / "live.csv"
    ppo = ["ppo", "--env", "CartPole-v1", "--hid", "4", "--steps-per-epoch", "200", "--test-episodes", "0"]
    proc = start_cli(*ppo, "--epochs", "4", "--out", out, "--live-log", log, extra_env={"SYNAPTO_FAULT": "tracking:2"})
    wait_for_line(proc, "FAULT-POINT tracking 2", timeout=120)
    kill_group(proc)
    proc.wait(timeout=30)
    proc = start_cli("ppo", "--resume", out, "--live-log", log)
    _, err = finish(proc, timeout=120)
    assert proc.returncode == 0, err
    rows = live_rows(log)
    assert [int(r["generation"]) for r in rows] == [0, 1, 2, 3]
    with h5py.File(out, "r") as f:
        assert [float(r["AverageEpRet"]) for r in rows] == [float(x) for x in f["stats/AverageEpRet"][:4]]


def test_a_cut_row_is_dropped_and_written_again_on_resume(tmp_path, capsys, monkeypatch):
    """A write that fails part-way (a full disk) leaves half a row; the resumed run ends the
    file on a whole row first, then writes that generation again: no row glued to another."""
    from synapto.tracking.writers import LiveLog

    write = LiveLog._write

    def full_in_generation_2(self, row):
        if row["generation"] == 2:
            self.file.write("0,2,7500,12")  # the start of a row, then the disk is full
            self.file.flush()
            raise OSError(errno.ENOSPC, "No space left on device")
        write(self, row)

    monkeypatch.setattr(LiveLog, "_write", full_in_generation_2)
    log, out = tmp_path / "live.csv", tmp_path / "r.h5"
    code, _, err = call(capsys, "evolve", *RUN, "-q", "--generations", "4", "--out", out, "--live-log", log)
    assert code == 2 and err.startswith(f"error: --live-log {str(log)!r} cannot be written"), err
    assert log.read_text().endswith("0,2,7500,12")
    monkeypatch.setattr(LiveLog, "_write", write)
    assert call(capsys, "evolve", "--resume", out, "--live-log", log, "-q")[0] == 0
    text = log.read_text()
    header = text.splitlines()[0].split(",")
    assert all(len(line.split(",")) == len(header) for line in text.splitlines()), text
    rows = live_rows(log)
    assert [int(r["generation"]) for r in rows] == [0, 1, 2, 3]
    assert [float(r["best_fitness"]) for r in rows] == best_fitness(out)


def test_a_full_tensorboard_disk_is_one_line_and_the_resume_line(tmp_path):
    """The event files fill a small disk mid-run: the run stops with its one-line error and
    the resume command, and no traceback from a writer thread or an exit hook follows."""
    pytest.importorskip("tensorboardX")
    out = tmp_path / "r.h5"
    steps = [
        ["leave_free", "{mnt}/filler", 8192],
        ["run", ["evolve", *RUN, "--generations", "60", "--out", str(out), "--tensorboard", "{mnt}/tb", "-q"], 300],
    ]
    _, results = on_tmpfs(tmp_path, 256 * 1024, steps)
    run = results[1]
    lines = run["stderr"].strip().splitlines()
    assert run["returncode"] == 2 and len(lines) == 2, run["stderr"]
    assert lines[0].startswith("error: --tensorboard ") and "No space left on device" in lines[0], lines
    assert lines[1].startswith("the run file keeps its last checkpoint; resume with: "), lines
