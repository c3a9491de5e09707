"""A full disk: one line naming the path and "no space left", exit 1, the resume command, no
temporary files left; ``--resume`` while still full fails the same way and changes nothing; once
space is freed the run resumes bit-identically to an uninterrupted one.

The disk is a real tmpfs of 600 KB in a private mount namespace (:mod:`private_fs`), filled to
levels measured from a reference run: the run file does not fit (refused before the run, exit 2:
its size is estimated first), its first checkpoint does not,
its second one does not (1 and 3 ranks), the final selection's rewrite does not.
"""

from __future__ import annotations

import pytest
from conftest import assert_same_run, run_cli
from private_fs import on_tmpfs

RUN = [
    "--env",
    "CartPole-v1",
    "--agent",
    "hebbian-dag",
    "--population",
    "8",
    "--generations",
    "4",
    "--episodes",
    "2",
    "--hidden",
    "4",
    "--seed",
    "4",
    "--test-episodes",
    "4",
]
SIZE = 600 * 1024
PAGE = 4096


def pages(n: int) -> int:
    return -(-n // PAGE) * PAGE


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """Uninterrupted runs, with the sizes the levels are set from (tmpfs counts whole pages):
    R the run file, C the checkpoint, E the space reserved while the run file is created."""
    import h5py

    from synapto.evolution.config import EvolveConfig
    from synapto.store import EvolveRunWriter

    d = tmp_path_factory.mktemp("reference")
    out = {}
    for name, extra in (("plain", []), ("select", ["--select-episodes", "2"])):
        path = d / f"{name}.h5"
        proc = run_cli("evolve", *RUN, *extra, "--out", path)
        assert proc.returncode == 0, proc.stderr
        with h5py.File(path, "r") as f:
            E = EvolveRunWriter.estimated_size(EvolveConfig.from_json(f.attrs["config"]), int(f.attrs["n_params"]))
        out[name] = (path, pages(path.stat().st_size), pages((d / f"{name}.h5.ckpt").stat().st_size), pages(E), extra)
    return out


def check_full(result, run_file: str, resume: bool) -> None:
    """Exit 1 and, on stderr, one error line naming the file and "no space left" (then the
    resume command, when there is a run to resume) -- no HDF5 error stack, no traceback."""
    err = result["stderr"].strip().splitlines()
    assert result["returncode"] == 1, (result["step"], result["returncode"], result["stderr"][-4000:])
    assert err and err[0].startswith("error: ") and run_file in err[0] and "no space left" in err[0], err
    if resume:
        assert (
            len(err) == 2
            and err[1].startswith("resume with: ")
            and err[1].endswith(
                f" evolve --resume {run_file}" + (" --workers 2" if result["step"][0] == "mpirun" else "")
            )
        ), err
    else:
        assert len(err) == 1, err


def no_leftovers(files: dict) -> None:
    assert not [f for f in files if f.endswith((".tmp", ".lock"))], files


@pytest.mark.parametrize(
    "level, ranks",
    [("run file", None), ("second checkpoint", None), ("second checkpoint", 3), ("final selection", None)],
)
def test_disk_full(tmp_path, reference, level, ranks):
    name = "select" if level == "final selection" else "plain"
    ref, R, C, E, extra = reference[name]
    if level == "run file":  # the space reserved for the new run file cannot be had
        free = E - 2 * PAGE
    elif level == "second checkpoint":  # room for the run file and one checkpoint, not for two
        free = R + C + C // 2
        assert free >= E, (E, R, C)
    else:  # room for every checkpoint (two at a time), not for the copy the final selection is written in
        free = max(E, R + 2 * C + 2 * PAGE)
        assert free < 2 * R + 2 * C
    run_file = "{mnt}/r.h5"
    evolve = ["evolve", *RUN, *extra, "--out", run_file]
    resume = ["evolve", "--resume", run_file]
    start = ["run", evolve, 300] if ranks is None else ["mpirun", ranks, evolve, 300]
    again = ["run", resume, 300] if ranks is None else ["mpirun", ranks, resume, 300]
    steps = [["leave_free", "{mnt}/filler", free], start, ["ls"]]
    if level != "run file":
        steps += [
            ["snapshot", "before"],
            again,
            ["snapshot", "after"],
            ["rm", "{mnt}/filler"],
            again,
            ["copy", run_file, str(tmp_path / "resumed.h5")],
            ["ls"],
        ]
    mnt, results = on_tmpfs(tmp_path, SIZE, steps)
    path = str(mnt / "r.h5")
    first, files = results[1], results[2]["files"]
    if level == "run file":  # refused before anything is written: the run file's size is estimated first
        err = first["stderr"].strip().splitlines()
        assert first["returncode"] == 2 and len(err) == 1, first
        assert err[0].startswith(f"error: --out {path!r}: the run file of ") and "free" in err[0], err
        assert set(files) == {"filler"}, files  # nothing of the run was kept
        return
    check_full(first, path, resume=True)
    no_leftovers(files)
    assert "r.h5" in files
    # --resume while the disk is still full: the same one line, and nothing changed
    check_full(results[4], path, resume=True)
    assert results[3]["files"] == results[5]["files"]
    # space freed: the run resumes and ends as an uninterrupted run
    last = results[7]
    assert last["returncode"] == 0, last["stderr"][-4000:]
    no_leftovers(results[9]["files"])
    assert_same_run(ref, tmp_path / "resumed.h5")
