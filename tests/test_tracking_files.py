"""Tracking files keep what they hold: --live-log appends on resume and across seeds (every
row names its seed), --tensorboard leaves one event file per run, and a tracking file that
cannot be written is refused before the run (--check too) or stops it in one line, exit 2,
with the run file resumable and the resume command printed."""

from __future__ import annotations

import csv
import errno
import json

import h5py
import pytest

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
    "--episodes",
    "1",
    "--validate-episodes",
    "0",
    "--test-episodes",
    "0",
    "-q",
]


def call(capsys, *args):
    """``python -m synapto <args>`` in this process: ``(exit code, stdout, stderr)``."""
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_live_log_appends_on_resume_and_across_seeds(tmp_path, capsys):
    log, out = tmp_path / "live.csv", tmp_path / "r.h5"
    assert call(capsys, "evolve", *RUN, "--generations", "2", "--out", out, "--live-log", log)[0] == 0
    assert call(capsys, "evolve", "--resume", out, "--generations", "4", "--live-log", log, "-q")[0] == 0
    assert [(r["seed"], r["generation"]) for r in rows(log)] == [("0", "0"), ("0", "1"), ("0", "2"), ("0", "3")]
    with h5py.File(out, "r") as f:
        assert [float(r["best_fitness"]) for r in rows(log)] == list(f["stats/best_fitness"][:4])
    jsonl = tmp_path / "seeds.jsonl"
    assert (
        call(
            capsys,
            "evolve",
            *RUN,
            "--generations",
            "2",
            "--seed",
            "1",
            "2",
            "--out",
            tmp_path / "s.h5",
            "--live-log",
            jsonl,
        )[0]
        == 0
    )
    seen = [(r["seed"], r["generation"]) for r in map(json.loads, jsonl.read_text().splitlines())]
    assert seen == [(1, 0), (1, 1), (2, 0), (2, 1)]


def test_tensorboard_keeps_one_event_file_per_run(tmp_path, capsys):
    pytest.importorskip("tensorboardX")
    tb, out = tmp_path / "tb", tmp_path / "r.h5"
    for extra in ([], ["--force"]):
        assert call(capsys, "evolve", *RUN, "--generations", "2", "--out", out, "--tensorboard", tb, *extra)[0] == 0
        assert len(list(tb.glob("events.out.tfevents.*"))) == 1
    assert (
        call(
            capsys,
            "evolve",
            *RUN,
            "--generations",
            "1",
            "--seed",
            "3",
            "4",
            "--out",
            tmp_path / "s.h5",
            "--tensorboard",
            tmp_path / "tb2",
        )[0]
        == 0
    )
    assert sorted(p.parent.name for p in (tmp_path / "tb2").glob("*/events.out.tfevents.*")) == ["s_s3", "s_s4"]


@pytest.mark.parametrize(
    "option, path, needle",
    [
        ("--live-log", "full.csv", "is not a regular file"),
        ("--tensorboard", "/sys/synapto-x", "nothing can be made in"),
        ("--tensorboard", "/proc/synapto-x", "nothing can be made in"),
    ],
)
def test_tracking_paths_that_cannot_be_written_are_refused_before_the_run(tmp_path, capsys, option, path, needle):
    if option == "--tensorboard":
        pytest.importorskip("tensorboardX")
    (tmp_path / "full.csv").symlink_to("/dev/full")
    target = tmp_path / path if not path.startswith("/") else path
    for check in (["--check"], []):
        code, _, err = call(
            capsys, "evolve", *RUN, "--generations", "2", "--out", tmp_path / "sub" / "r.h5", option, target, *check
        )
        assert code == 2 and err.startswith(f"error: {option}") and needle in err and len(err.splitlines()) == 1
        assert not (tmp_path / "sub").exists()


def test_a_tracking_write_that_fails_mid_run_stops_it_resumably(tmp_path, capsys, monkeypatch):
    from synapto.tracking.writers import LiveLog

    write = LiveLog._write

    def full_at_generation_1(self, row):
        if row["generation"] == 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        write(self, row)

    monkeypatch.setattr(LiveLog, "_write", full_at_generation_1)
    log, out = tmp_path / "live.csv", tmp_path / "r.h5"
    code, _, err = call(capsys, "evolve", *RUN, "--generations", "3", "--out", out, "--live-log", log)
    assert code == 2 and "Traceback" not in err, err
    first, resume = err.strip().splitlines()
    assert first == f"error: --live-log {str(log)!r} cannot be written (No space left on device)"
    assert resume.endswith(f"evolve --resume {out}") and "resume with: " in resume
    monkeypatch.setattr(LiveLog, "_write", write)
    assert call(capsys, "evolve", "--resume", out, "--live-log", log, "-q")[0] == 0
    # generation 1's row could not be written; the run file holds it: the resumed run writes it, then goes on
    assert [r["generation"] for r in rows(log)] == ["0", "1", "2"]
    with h5py.File(out, "r") as f:
        assert len(f["stats/best_fitness"]) >= 3 and f.attrs.get("completed", 3) == 3
