"""A run file has rows for its first generations and doubles them when the run goes past
(a rewrite beside it, renamed over it): its size follows the generations run, not
``--generations``, and what it holds does not depend on when it grew."""

import h5py
import numpy as np
import pytest

from synapto.cli import main
from synapto.common.shell import synapto_command
from synapto.store import compare

RUN = [
    "evolve",
    "--env",
    "CartPole-v1",
    "--population",
    "6",
    "--generations",
    "9",
    "--episodes",
    "1",
    "--hidden",
    "4",
    "--seed",
    "3",
    "--test-episodes",
    "2",
    "--validate-episodes",
    "2",
    "--strategy",
    "openai-es",
    "--obs-norm",
    "--select-episodes",
    "2",
]


def run(out, *extra):
    with pytest.raises(SystemExit) as exc:
        main([*RUN, *extra, "--out", str(out)])
    assert exc.value.code in (0, None)


def completed_rows(path):
    """Every dataset outside /timing, per-generation ones cut to /completed."""
    data = compare.datasets(path)
    with h5py.File(path, "r") as f:
        done, capacity = int(f["completed"][0]), f["fitness"].shape[0]
    return {
        k: (v[:done] if v.ndim and v.shape[0] == capacity and k != "completed" else v) for k, v in data.items()
    }, capacity


def test_a_run_that_grows_equals_one_that_did_not(tmp_path, monkeypatch, capsys):
    import synapto.store.evolve as store_evolve

    run(tmp_path / "whole.h5")
    last = capsys.readouterr().out.strip().splitlines()[-2:]  # a finished run says how to look at it
    whole = tmp_path / "whole.h5"
    assert last == [
        f"learning curves:  {synapto_command('plot', whole, '--out', tmp_path / 'whole_curves.png')}",
        f"the champion:     {synapto_command('render', whole, '--out', tmp_path / 'whole_champion.gif')}",
    ]
    monkeypatch.setattr(store_evolve, "FIRST_ROWS", 2)
    run(tmp_path / "grown.h5")
    whole, whole_rows = completed_rows(tmp_path / "whole.h5")
    grown, grown_rows = completed_rows(tmp_path / "grown.h5")
    assert whole_rows == 9 and grown_rows == 9  # 2 -> 4 -> 8 -> 9 (never past --generations)
    assert sorted(whole) == sorted(grown)
    differ = [k for k in whole if whole[k].tobytes() != grown[k].tobytes() or whole[k].shape != grown[k].shape]
    assert not differ, differ
    assert not list(tmp_path.glob("*.tmp"))


def test_a_long_run_starts_with_a_small_file(tmp_path, monkeypatch):
    import synapto.store.evolve as store_evolve

    monkeypatch.setattr(store_evolve, "FIRST_ROWS", 4)
    out = tmp_path / "long.h5"
    run(out, "--generations", "1000000", "--max-env-steps", "300")
    with h5py.File(out, "r") as f:
        done = int(f["completed"][0])
        assert f["fitness"].shape[0] == 4 * 2 ** int(np.ceil(np.log2(max(done, 4) / 4)))
        assert np.all(np.isfinite(f["fitness"][:done]))
