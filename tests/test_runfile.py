"""Run-file layout of an evolution run (in-process, serial farm)."""

import json

import h5py
import numpy as np
import pytest

from synapto.common import seeding
from synapto.evolution.config import EvolveConfig
from synapto.evolution.loop import run_evolution
from synapto.parallel.farm import SerialFarm
from synapto.store import FORMAT, FORMAT_VERSION, STATS, TIMING, RunData


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    cfg = EvolveConfig(
        env="CartPole-v1",
        agent="hebbian-dag",
        population=10,
        generations=3,
        hidden=(4,),
        episodes=2,
        seed=3,
        test_episodes=4,
        crn=False,
        validate_episodes=0,
        strategy="ga",  # the layout of a GA's run file (its populations stored whole)
        select_episodes=0,
    )
    out = tmp_path_factory.mktemp("rf") / "run.h5"
    run_evolution(cfg, out, SerialFarm(), log=lambda m: None)
    return cfg, out


def test_layout_and_shapes(run):
    cfg, out = run
    with h5py.File(out, "r") as f:
        assert f.attrs["format"] == FORMAT and f.attrs["format_version"] == FORMAT_VERSION
        assert f.attrs["kind"] == "evolve"
        assert EvolveConfig.from_json(f.attrs["config"]) == cfg
        assert {"numpy", "gymnasium", "h5py", "python"} <= set(json.loads(f.attrs["versions"]))
        n = int(f.attrs["n_params"])
        G, P, E = 3, 10, 2
        assert f["completed"][0] == G
        assert f["fitness"].shape == (G, P)
        assert f["returns"].shape == (G, P, E)
        assert f["seeds"].shape == (G, P, E)
        # the GA's generations are stored as lineages (synapto/lineage.py), not populations
        assert "population" not in f and f.attrs["samples"] == "lineage"
        assert f["samples/keys"].shape[:2] == (G, P) and f["samples/origin"].shape[:2] == (G, P)
        assert f["samples/pruned"].shape[:2] == (G, P)
        assert f["steps"].shape == (G, P) and f["connections"].shape == (G, P)
        for name in STATS:
            assert f[f"stats/{name}"].shape == (G,)
        for name in TIMING:
            assert f[f"timing/{name}"].shape == (G,)
        assert f["champion/test_returns"].shape == (4,) and f["champion/tested"][0] == 1
    with RunData(out) as data:
        assert data.compact and data.population().shape == (G, P, n)


def test_contents_are_consistent(run):
    cfg, out = run
    with RunData(out) as data:
        pop = data.population()  # rebuilt from the lineages
    with h5py.File(out, "r") as f:
        fit, ret = f["fitness"][()], f["returns"][()]
        np.testing.assert_array_equal(f["seeds"][1], seeding.train_seeds(cfg.seed, 1, 10, 2, common=cfg.crn))
        np.testing.assert_allclose(fit, ret.mean(axis=2))  # hebbian-dag has no penalty
        np.testing.assert_array_equal(f["stats/best_fitness"][()], fit.max(axis=1))
        np.testing.assert_allclose(f["stats/pop_mean"][()], fit.mean(axis=1))
        np.testing.assert_array_equal(f["connections"][()], np.count_nonzero(pop, axis=2))
        assert np.all(np.diff(f["stats/env_steps"][()]) > 0)
        np.testing.assert_array_equal(f["stats/env_steps"][()], np.cumsum(f["steps"][()].sum(axis=1)))
        champ = f["champion/genome"][()]
        g = int(f["champion/generation"][0])
        assert f["champion/fitness"][0] == fit.max()
        assert any(np.array_equal(champ, p) for p in pop[g])
        np.testing.assert_array_equal(f["champion/test_seeds"][()], seeding.test_seeds(cfg.seed, 4))


def test_a_generations_row_is_built_from_the_row_table():
    """synapto.store.evolve_rows.record: one generation's row in the order of ROWS, the strategy's
    own figures and arrays under /strategy, missing timing as NaN; a misspelt or missing
    dataset is refused."""
    from synapto.store.evolve_rows import PER_GENERATION, ROWS, record

    values = {
        name: np.zeros(1)
        for name in PER_GENERATION
        if not name.startswith(("stats/", "timing/", "obs_norm/", "population"))
    }
    stats = {**dict.fromkeys(STATS, 1.0), "sigma_mean": 0.5}
    row = record(
        values,
        stats,
        {"wall": 2.0},
        samples={"keys": np.zeros((2, 6))},
        arrays={"centre": np.ones(3)},
        norm=(np.zeros(2), np.ones(2)),
    )
    order = [r.name for r in ROWS]
    assert [order.index(n if n in order else n.split("/")[0] + "/*") for n in row] == sorted(
        order.index(n if n in order else n.split("/")[0] + "/*") for n in row
    )
    assert row["strategy/sigma_mean"] == 0.5 and row["strategy/centre"].tolist() == [1.0, 1.0, 1.0]
    assert "samples/keys" in row and "population" not in row and row["obs_norm/std"].tolist() == [1.0, 1.0]
    assert row["timing/wall"] == 2.0 and np.isnan(row["timing/update"]) and row["stats/prune_rate"] == 1.0
    with pytest.raises(RuntimeError, match="lacks population"):
        record(values, stats, {})
    with pytest.raises(RuntimeError, match="no dataset"):
        record({**values, "fitnes": np.zeros(1)}, stats, {}, samples={})


def test_a_row_is_written_as_h5py_writes_it(tmp_path):
    """put_row's one hyperslab write (a row of the dataset's own dtype) and its fallback to
    h5py (another dtype, which HDF5 converts; an empty row) store exactly what writing the
    row through h5py's indexing stores; a row past the end is refused."""
    from synapto.store.files import LIBVER, put_row, rows_dataset

    cases = {
        "scalar": ((), "f8", np.float64(-0.0)),
        "ints": ((5,), "i8", np.arange(5)),
        "bools": ((2, 3), "?", np.eye(2, 3, dtype=bool)),
        "broadcast": ((4,), "f8", np.float64(np.nan)),
        "empty": ((0,), "f8", np.zeros(0)),
        "converted": ((3,), "i8", np.array([1.7, 2.2, -3.9])),
        "python int": ((), "i8", 7),
        "keys": ((2, 6), "u8", np.full((2, 6), 2**64 - 1, np.uint64)),
    }
    opened: dict = {}
    with h5py.File(tmp_path / "rows.h5", "w", libver=LIBVER) as f:
        for name, (tail, dtype, value) in cases.items():
            rows_dataset(f, name, 3, tail, dtype)
            rows_dataset(f, f"{name}_h5py", 3, tail, dtype)
            put_row(f, name, 1, value, opened)
            f[f"{name}_h5py"][1] = value
        assert all(f[name][()].tobytes() == f[f"{name}_h5py"][()].tobytes() for name in cases)
        assert sorted(opened) == sorted(cases)
        with pytest.raises(RuntimeError, match="row 3 is outside /ints, which has 3 rows"):
            put_row(f, "ints", 3, np.arange(5), opened)
