"""What --resume and the Python API promise about a run's end: --test-episodes cannot
change on --resume (refused in one line by the CLI and the API), evolve(resume=True) on a
finished run does nothing (as the CLI says), RunSummary.env_steps is the "done" line's
total; and `bench compare` counts one run once."""

from __future__ import annotations

import re
import shutil

import pytest

import synapto
from synapto.cli import main
from synapto.common.errors import UsageError

CFG = dict(
    env="CartPole-v1",
    agent="pruned-mlp",
    hidden=(2,),
    population=4,
    generations=2,
    episodes=1,
    validate_episodes=2,
    test_episodes=3,
    select_episodes=2,
    strategy="openai-es",
)


def call(capsys, *args):
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def copy_run(src, dst):
    shutil.copy(src, dst)
    shutil.copy(f"{src}.ckpt", f"{dst}.ckpt")
    return dst


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "r.h5"
    lines = []
    summary = synapto.evolve(synapto.EvolveConfig(**CFG), out, log=lines.append)
    return out, summary, lines


def test_summary_env_steps_is_the_printed_total(finished):
    out, summary, lines = finished
    done = next(ln for ln in lines if ln.startswith("done in "))
    total = int(re.search(r": ([\d,]+) env steps", done).group(1).replace(",", ""))
    assert summary.env_steps == total
    assert synapto.api.summary_of(out, 0.0).env_steps == total


def test_test_episodes_cannot_change_on_resume(finished, tmp_path, capsys):
    out = copy_run(finished[0], tmp_path / "r.h5")
    before = out.read_bytes()
    code, _, err = call(capsys, "evolve", "--resume", out, "--generations", "3", "--test-episodes", "7")
    assert code == 2 and err.startswith("error: ") and "test_episodes: 3 (run file) vs 7" in err
    assert len(err.splitlines()) == 1
    with pytest.raises(UsageError, match="test_episodes"):
        synapto.evolve(synapto.EvolveConfig(**{**CFG, "generations": 3, "test_episodes": 7}), out, resume=True)
    assert out.read_bytes() == before


def test_api_resume_of_a_finished_run_does_nothing(finished, tmp_path):
    out = copy_run(finished[0], tmp_path / "r.h5")
    before = out.read_bytes()
    lines = []
    summary = synapto.evolve(synapto.EvolveConfig(**CFG), out, resume=True, log=lines.append)
    assert len(lines) == 1 and lines[0].startswith(f"{out} is finished (2 generations") and "nothing to do" in lines[0]
    assert out.read_bytes() == before and summary.env_steps == finished[1].env_steps


def test_bench_compare_refuses_one_run_given_twice(finished, tmp_path, capsys):
    out = finished[0]
    link = tmp_path / "link.h5"
    link.symlink_to(out)
    copy = tmp_path / "copy.h5"
    shutil.copy(out, copy)
    for second in (out, link, copy):
        code, _, err = call(capsys, "bench", "compare", out, second, "--out-dir", tmp_path / "o")
        assert code == 2 and "is the same run as" in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "o").exists()
