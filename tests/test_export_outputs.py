"""``export``'s outputs: all checked before any is written, each written beside its path
and renamed over it (a full disk keeps the previous file), and never the run file itself."""

from __future__ import annotations

import hashlib
import os
import shutil

import pytest
from private_fs import on_tmpfs

import synapto
from synapto.cli import main


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = tmp_path_factory.mktemp("export_outputs") / "r.h5"
    cfg = synapto.EvolveConfig(
        env="CartPole-v1",
        agent="pruned-mlp",
        hidden=(64, 64),  # an npz of 36 KB: more than the free pages of a full disk
        population=4,
        generations=1,
        episodes=1,
        validate_episodes=0,
        test_episodes=1,
        strategy="openai-es",
    )
    synapto.evolve(cfg, path, log=lambda m: None)
    return path


def digest(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def call(capsys, *args):
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    return exc.value.code, capsys.readouterr().err


def outputs(with_onnx: bool) -> list[str]:
    if with_onnx and _has_onnx():
        return ["--npz", "p.npz", "--onnx", "p.onnx"]
    return ["--npz", "p.npz"]


def _has_onnx() -> bool:
    try:
        import onnx  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.parametrize("csv", ["afile", "afile/sub"])
def test_a_bad_csv_folder_is_refused_before_the_policy_is_written(run, tmp_path, capsys, csv):
    (tmp_path / "afile").write_text("a file\n")
    args = [a if not a.startswith("p.") else tmp_path / a for a in outputs(with_onnx=True)]
    code, err = call(capsys, "export", run, *args, "--csv", tmp_path / csv)
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("error: --csv "), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_an_output_that_is_the_run_file_is_refused_and_the_run_file_kept(run, tmp_path, capsys):
    same = tmp_path / "same.npz"
    shutil.copyfile(run, same)
    (tmp_path / "link.npz").symlink_to(same)
    (tmp_path / "csv").mkdir()
    shutil.copyfile(run, tmp_path / "csv" / "r.csv")  # a run file that is named like its CSV
    before = digest(same)
    for args, says in [
        ([same, "--npz", same], f"error: --npz {str(same)!r} is the run file {str(same)!r} itself"),
        ([same, "--npz", tmp_path / "link.npz"], "error: --npz "),
        ([same, "--npz", tmp_path / "sub" / ".." / "same.npz"], "error: --npz "),
        ([tmp_path / "csv" / "r.csv", "--csv", tmp_path / "csv"], "error: --csv "),
    ]:
        code, err = call(capsys, "export", *args)
        assert code == 2 and len(err.splitlines()) == 1 and err.startswith(says) and "itself" in err, err
    assert digest(same) == before and digest(tmp_path / "csv" / "r.csv") == digest(run)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["csv", "link.npz", "same.npz"]


def test_a_second_export_replaces_the_first_whole(run, tmp_path, capsys):
    out = tmp_path / "p.npz"
    out.write_bytes(b"an old export")
    code, err = call(capsys, "export", run, "--npz", out, "--csv", tmp_path / "c")
    assert code == 0, err
    assert out.read_bytes()[:2] == b"PK" and sorted(os.listdir(tmp_path)) == ["c", "p.npz"]
    assert sorted(os.listdir(tmp_path / "c")) == ["r.csv", "r_champion.csv"]


def test_a_full_disk_keeps_the_previous_export(run, tmp_path):
    """A previous export of one page, then the run's (36 KB) on a full disk: the new file
    fails beside the target, and the previous one is as it was, with no partial file left."""
    import numpy as np

    np.savez(tmp_path / "small.npz", layer0_weight=np.ones((1, 1)))
    steps = [
        ["copy", str(tmp_path / "small.npz"), "{mnt}/keep.npz"],
        ["snapshot", "before"],
        ["leave_free", "{mnt}/filler", 0],
        ["run", ["export", str(run), "--npz", "{mnt}/keep.npz"], 120],
        ["snapshot", "after"],
    ]
    _, results = on_tmpfs(tmp_path, 256 * 1024, steps)
    failed = results[3]
    assert failed["returncode"] == 1 and "no space left on device" in failed["stderr"].lower(), failed
    assert "Traceback" not in failed["stderr"]
    before, after = results[1]["files"], results[4]["files"]
    assert {k: v for k, v in after.items() if k != "filler"} == before == {"keep.npz": digest(tmp_path / "small.npz")}
